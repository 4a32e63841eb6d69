"""boto3 half of the differential test (diff_features_test.go, TestFeaturesVersitygwBoto3).

Sends one sequence of issue 13's features to the server at ENDPOINT and prints
one line per step: "<step>: ok <what S3 defines about the answer>" or
"<step>: <HTTP status> <S3 error code>". The Go test runs it against tristore
and versitygw and compares the lines.
"""
import os
import sys
import zlib
import base64

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

s3 = boto3.client(
    "s3",
    endpoint_url=os.environ["ENDPOINT"],
    region_name="us-east-1",
    config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
)
b = sys.argv[1] + "-boto"
out = []


def step(name, fn, detail=lambda r: ""):
    try:
        r = fn()
    except ClientError as e:
        out.append("%s: %d %s" % (name, e.response["ResponseMetadata"]["HTTPStatusCode"], e.response["Error"]["Code"]))
        return None
    out.append("%s: ok %s" % (name, detail(r)))
    return r


def crc32(data):
    return base64.b64encode(zlib.crc32(data).to_bytes(4, "big")).decode()


step("create_bucket", lambda: s3.create_bucket(Bucket=b))

# Keys of odd shapes and listings.
for label, k in [("a//b", "a//b"), ("/lead", "/lead"), ("x", "x"), ("x/child", "x/child"), ("q/plain", "q/plain"), ("é/ü", "é/ü")]:
    step("put_object " + label, lambda: s3.put_object(Bucket=b, Key=k, Body=b"body of " + k.encode()))
    step("get_object " + label, lambda: s3.get_object(Bucket=b, Key=k),
         lambda r: str(r["Body"].read() == b"body of " + k.encode()))
for d in ["", "/"]:
    kw = {"Delimiter": d} if d else {}
    step("list_objects_v2 delimiter %r" % d, lambda: s3.list_objects_v2(Bucket=b, **kw),
         lambda r: " | ".join([o["Key"] for o in r.get("Contents", [])] + ["P:" + p["Prefix"] for p in r.get("CommonPrefixes", [])]))
step("list_objects v1 delimiter '/'", lambda: s3.list_objects(Bucket=b, Delimiter="/"),
     lambda r: " | ".join([o["Key"] for o in r.get("Contents", [])] + ["P:" + p["Prefix"] for p in r.get("CommonPrefixes", [])]))

# Settings never set.
step("get_object_tagging(untagged)", lambda: s3.get_object_tagging(Bucket=b, Key="q/plain"), lambda r: str(len(r["TagSet"])))
step("get_bucket_tagging(never)", lambda: s3.get_bucket_tagging(Bucket=b))
step("get_bucket_cors(never)", lambda: s3.get_bucket_cors(Bucket=b))
step("get_bucket_encryption(never)", lambda: s3.get_bucket_encryption(Bucket=b))
step("get_bucket_versioning(never)", lambda: s3.get_bucket_versioning(Bucket=b), lambda r: str(r.get("Status")))

# Tagging.
step("put_object with tagging", lambda: s3.put_object(Bucket=b, Key="tagged", Body=b"t", Tagging="a=1&b=two%20words"))
step("get_object tag count", lambda: s3.get_object(Bucket=b, Key="tagged"), lambda r: str(r.get("TagCount")))
step("get_object_tagging", lambda: s3.get_object_tagging(Bucket=b, Key="tagged"),
     lambda r: ",".join(sorted(t["Key"] + "=" + t["Value"] for t in r["TagSet"])))
step("put_object_tagging(11 tags)", lambda: s3.put_object_tagging(Bucket=b, Key="tagged",
     Tagging={"TagSet": [{"Key": "k%d" % i, "Value": "v"} for i in range(11)]}))
step("put_object_tagging(value too long)", lambda: s3.put_object_tagging(Bucket=b, Key="tagged",
     Tagging={"TagSet": [{"Key": "k", "Value": "v" * 257}]}))

# Checksums: single PUT and a COMPOSITE multipart upload.
step("put_object CRC32", lambda: s3.put_object(Bucket=b, Key="ck", Body=b"checksummed", ChecksumAlgorithm="CRC32"),
     lambda r: str(r.get("ChecksumCRC32") == crc32(b"checksummed")))
step("head_object checksum mode", lambda: s3.head_object(Bucket=b, Key="ck", ChecksumMode="ENABLED"),
     lambda r: "%s %s" % (r.get("ChecksumCRC32") == crc32(b"checksummed"), r.get("ChecksumType")))
mp = step("create_multipart_upload CRC32", lambda: s3.create_multipart_upload(Bucket=b, Key="mp", ChecksumAlgorithm="CRC32"),
          lambda r: "%s %s" % (r.get("ChecksumAlgorithm"), r.get("ChecksumType")))
if mp:
    uid = mp["UploadId"]
    parts = []
    for n, data in [(1, b"p" * (5 << 20)), (2, b"tail")]:
        r = step("upload_part %d" % n, lambda: s3.upload_part(Bucket=b, Key="mp", UploadId=uid, PartNumber=n, Body=data, ChecksumAlgorithm="CRC32"),
                 lambda r: str(r.get("ChecksumCRC32") == crc32(data)))
        if r:
            parts.append({"PartNumber": n, "ETag": r["ETag"], "ChecksumCRC32": r["ChecksumCRC32"]})
    step("list_parts", lambda: s3.list_parts(Bucket=b, Key="mp", UploadId=uid),
         lambda r: "%d parts, checksums %s, %s %s" % (len(r.get("Parts", [])),
                                                       [p.get("ChecksumCRC32") for p in r.get("Parts", [])] == [p["ChecksumCRC32"] for p in parts],
                                                       r.get("ChecksumAlgorithm"), r.get("ChecksumType")))
    step("complete_multipart_upload FULL_OBJECT on a COMPOSITE upload", lambda: s3.complete_multipart_upload(
        Bucket=b, Key="mp", UploadId=uid, MultipartUpload={"Parts": parts}, ChecksumType="FULL_OBJECT"))
    step("complete_multipart_upload SHA256 part checksum", lambda: s3.complete_multipart_upload(
        Bucket=b, Key="mp", UploadId=uid, MultipartUpload={"Parts": [
            {"PartNumber": p["PartNumber"], "ETag": p["ETag"], "ChecksumSHA256": "47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU="} for p in parts]}))
    step("complete_multipart_upload", lambda: s3.complete_multipart_upload(Bucket=b, Key="mp", UploadId=uid, MultipartUpload={"Parts": parts}),
         lambda r: "%s %s" % (r.get("ChecksumCRC32", "").endswith("-2"), r.get("ChecksumType")))
    step("head_object multipart checksum mode", lambda: s3.head_object(Bucket=b, Key="mp", ChecksumMode="ENABLED"),
         lambda r: "%s %s" % (r.get("ChecksumCRC32", "").endswith("-2"), r.get("ChecksumType")))

# The null version of a Suspended bucket, and a version that does not exist.
step("put_bucket_versioning(Suspended)", lambda: s3.put_bucket_versioning(Bucket=b, VersioningConfiguration={"Status": "Suspended"}))
step("put_object suspended", lambda: s3.put_object(Bucket=b, Key="susp", Body=b"s"), lambda r: "version=%s" % r.get("VersionId"))
step("head_object suspended", lambda: s3.head_object(Bucket=b, Key="susp"), lambda r: "version=%s" % r.get("VersionId"))
step("get_object versionId=null", lambda: s3.get_object(Bucket=b, Key="susp", VersionId="null"), lambda r: r["Body"].read().decode())
step("delete_object suspended", lambda: s3.delete_object(Bucket=b, Key="susp"),
     lambda r: "marker=%s version=%s" % (r.get("DeleteMarker"), r.get("VersionId")))

print("\n".join(out))
