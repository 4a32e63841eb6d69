"""boto3 against tristore: CORS and lifecycle configurations (issue 13 item 4).

Run by cors_lifecycle_test.go (TestBoto3CORSLifecycle) with ENDPOINT and
credentials set, against a server whose lifecycle day is short
(LIFECYCLE_DAY_S seconds); prints OK on success, raises on any mismatch.
"""
import os
import time
import urllib.request

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

endpoint = os.environ["ENDPOINT"]
day = float(os.environ["LIFECYCLE_DAY_S"])
s3 = boto3.client(
    "s3",
    endpoint_url=endpoint,
    region_name="us-east-1",
    config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
)
b = "boto-cl"
s3.create_bucket(Bucket=b)


def err(call, **kw):
    try:
        call(Bucket=b, **kw)
    except ClientError as e:
        return e.response["Error"]["Code"], e.response["ResponseMetadata"]["HTTPStatusCode"]
    return None, 200


# CORS: round trip, a refused rule, a real preflight.
rules = [{"ID": "web", "AllowedOrigins": ["https://app.example"], "AllowedMethods": ["GET", "PUT"],
          "AllowedHeaders": ["*"], "ExposeHeaders": ["ETag"], "MaxAgeSeconds": 60}]
s3.put_bucket_cors(Bucket=b, CORSConfiguration={"CORSRules": rules})
got = s3.get_bucket_cors(Bucket=b)["CORSRules"]
assert got == rules, got
assert err(s3.put_bucket_cors, CORSConfiguration={"CORSRules": [
    {"AllowedOrigins": ["*"], "AllowedMethods": ["TRACE"]}]}) == ("InvalidRequest", 400)
assert s3.get_bucket_cors(Bucket=b)["CORSRules"] == rules
req = urllib.request.Request(endpoint + "/" + b + "/any", method="OPTIONS", headers={
    "Origin": "https://app.example", "Access-Control-Request-Method": "PUT",
    "Access-Control-Request-Headers": "content-type,x-amz-date"})
with urllib.request.urlopen(req) as r:
    assert r.status == 200
    assert r.headers["Access-Control-Allow-Origin"] == "https://app.example", dict(r.headers)
    assert r.headers["Access-Control-Allow-Methods"] == "GET, PUT", dict(r.headers)
    assert r.headers["Access-Control-Max-Age"] == "60"
req = urllib.request.Request(endpoint + "/" + b + "/any", method="OPTIONS", headers={
    "Origin": "https://evil.example", "Access-Control-Request-Method": "GET"})
try:
    urllib.request.urlopen(req)
    raise AssertionError("preflight from a foreign origin allowed")
except urllib.error.HTTPError as e:
    assert e.code == 403 and b"CORSResponse" in e.read()
s3.delete_bucket_cors(Bucket=b)
assert err(s3.get_bucket_cors) == ("NoSuchCORSConfiguration", 404)

# Lifecycle: round trip, refused documents, expiry and abort with the short day.
assert err(s3.put_bucket_lifecycle_configuration, LifecycleConfiguration={
    "Rules": [{"ID": "x", "Status": "Enabled", "Filter": {"Prefix": ""}, "Expiration": {"Days": 0}}]}) == ("InvalidArgument", 400)
assert err(s3.put_bucket_lifecycle_configuration, LifecycleConfiguration={
    "Rules": [{"ID": "x", "Status": "Enabled", "Filter": {"Prefix": ""}}]}) == ("InvalidRequest", 400)
assert err(s3.get_bucket_lifecycle_configuration) == ("NoSuchLifecycleConfiguration", 404)
s3.put_object(Bucket=b, Key="tmp/a", Body=b"a", Tagging="class=scratch")
s3.put_object(Bucket=b, Key="tmp/b", Body=b"b")
s3.put_object(Bucket=b, Key="keep/c", Body=b"c")
up = s3.create_multipart_upload(Bucket=b, Key="tmp/upload")["UploadId"]
lc = {"Rules": [
    {"ID": "scratch", "Status": "Enabled",
     "Filter": {"And": {"Prefix": "tmp/", "Tags": [{"Key": "class", "Value": "scratch"}]}},
     "Expiration": {"Days": 1}},
    {"ID": "mpu", "Status": "Enabled", "Filter": {"Prefix": "tmp/"},
     "AbortIncompleteMultipartUpload": {"DaysAfterInitiation": 1}},
]}
s3.put_bucket_lifecycle_configuration(Bucket=b, LifecycleConfiguration=lc)
rules = s3.get_bucket_lifecycle_configuration(Bucket=b)["Rules"]
assert [r["ID"] for r in rules] == ["scratch", "mpu"], rules
assert rules[0]["Expiration"]["Days"] == 1 and rules[0]["Filter"]["And"]["Tags"] == [{"Key": "class", "Value": "scratch"}], rules


def exists(k):
    try:
        s3.head_object(Bucket=b, Key=k)
        return True
    except ClientError as e:
        if e.response["ResponseMetadata"]["HTTPStatusCode"] == 404:
            return False
        raise


deadline = time.time() + 20
while exists("tmp/a") or s3.list_multipart_uploads(Bucket=b).get("Uploads"):
    assert time.time() < deadline, "tmp/a not expired or upload not aborted in time"
    time.sleep(0.05)
time.sleep(3 * day)
assert exists("tmp/b") and exists("keep/c"), "an object outside the rule was expired"
s3.delete_bucket_lifecycle(Bucket=b)
assert err(s3.get_bucket_lifecycle_configuration) == ("NoSuchLifecycleConfiguration", 404)
print("OK")
