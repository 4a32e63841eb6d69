"""boto3 against tristore: put/get/list/multipart/copy/delete.

Run by boto3_test.go with ENDPOINT, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY
and WORKDIR set; prints OK on success, raises on any mismatch.
"""
import hashlib
import os

import boto3
from boto3.s3.transfer import TransferConfig
from botocore.config import Config
from botocore.exceptions import ClientError

s3 = boto3.client(
    "s3",
    endpoint_url=os.environ["ENDPOINT"],
    region_name="us-east-1",
    config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 2}),
)
b = "boto-bucket"
s3.create_bucket(Bucket=b)
s3.put_object(Bucket=b, Key="dir/hello.txt", Body=b"hello boto3", ContentType="text/plain",
              Metadata={"who": "boto3"})
o = s3.get_object(Bucket=b, Key="dir/hello.txt")
assert o["Body"].read() == b"hello boto3"
assert o["Metadata"]["who"] == "boto3", o["Metadata"]
assert o["ContentType"] == "text/plain"

for i in range(12):
    s3.put_object(Bucket=b, Key="many/%02d" % i, Body=b"x" * i)
keys = []
for page in s3.get_paginator("list_objects_v2").paginate(Bucket=b, Prefix="many/", PaginationConfig={"PageSize": 5}):
    keys += [c["Key"] for c in page.get("Contents", [])]
assert keys == ["many/%02d" % i for i in range(12)], keys
top = s3.list_objects_v2(Bucket=b, Delimiter="/")
assert [p["Prefix"] for p in top["CommonPrefixes"]] == ["dir/", "many/"], top

path = os.path.join(os.environ["WORKDIR"], "big.bin")
with open(path, "wb") as f:
    f.write(os.urandom(12 * 1024 * 1024))
cfg = TransferConfig(multipart_threshold=5 * 1024 * 1024, multipart_chunksize=5 * 1024 * 1024)
s3.upload_file(path, b, "big.bin", Config=cfg)
head = s3.head_object(Bucket=b, Key="big.bin")
assert head["ETag"].endswith('-3"'), head["ETag"]
out = path + ".down"
s3.download_file(b, "big.bin", out, Config=cfg)
digest = lambda p: hashlib.sha256(open(p, "rb").read()).hexdigest()
assert digest(path) == digest(out)

s3.copy_object(Bucket=b, Key="copy.txt", CopySource={"Bucket": b, "Key": "dir/hello.txt"})
assert s3.get_object(Bucket=b, Key="copy.txt")["Body"].read() == b"hello boto3"

try:
    s3.get_object(Bucket=b, Key="missing")
    raise AssertionError("missing key returned")
except ClientError as e:
    assert e.response["Error"]["Code"] == "NoSuchKey", e.response

allkeys = [c["Key"] for c in s3.list_objects_v2(Bucket=b)["Contents"]]
r = s3.delete_objects(Bucket=b, Delete={"Objects": [{"Key": k} for k in allkeys], "Quiet": True})
assert not r.get("Errors"), r
s3.delete_bucket(Bucket=b)
print("OK")
