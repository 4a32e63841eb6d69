"""Drives the sigv4 test server with boto3: PutObject (plain and with a
CRC32C checksum), GetObject and a presigned GET, for keys that stress
SigV4 canonicalisation. argv: endpoint access secret verify(0/1) keys..."""
import sys
import urllib.request
import ssl

import boto3
from botocore.config import Config

endpoint, ak, sk, verify = sys.argv[1:5]
keys = sys.argv[5:]
s3 = boto3.client(
    "s3", endpoint_url=endpoint, aws_access_key_id=ak, aws_secret_access_key=sk,
    region_name="us-east-1", verify=(verify == "1"),
    config=Config(s3={"addressing_style": "path"}, signature_version="s3v4", retries={"max_attempts": 1}),
)
ctx = ssl.create_default_context()
ctx.check_hostname = False
ctx.verify_mode = ssl.CERT_NONE
for i, key in enumerate(keys):
    body = ("boto3 body %d %s" % (i, key)).encode() * 50
    s3.put_object(Bucket="bucket", Key=key, Body=body)
    got = s3.get_object(Bucket="bucket", Key=key)["Body"].read()
    assert got == body, "get %r" % key
    s3.put_object(Bucket="bucket", Key=key, Body=body + b"!", ChecksumAlgorithm="CRC32")
    url = s3.generate_presigned_url("get_object", Params={"Bucket": "bucket", "Key": key}, ExpiresIn=300)
    with urllib.request.urlopen(url, context=ctx) as r:
        assert r.read() == body + b"!", "presigned %r" % key
bad = boto3.client(
    "s3", endpoint_url=endpoint, aws_access_key_id=ak, aws_secret_access_key="wrong" + sk,
    region_name="us-east-1", verify=(verify == "1"),
    config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
)
try:
    bad.put_object(Bucket="bucket", Key="x", Body=b"x")
    raise SystemExit("wrong secret accepted")
except bad.exceptions.ClientError as e:
    assert e.response["Error"]["Code"] == "SignatureDoesNotMatch", e.response
print("ok")
