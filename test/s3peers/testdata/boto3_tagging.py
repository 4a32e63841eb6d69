"""boto3 against tristore: settings never set, tagging, any delimiter (issue 13).

Run by boto3_test.go (TestBoto3Tagging) with ENDPOINT and credentials set;
prints OK on success, raises on any mismatch.
"""
import os

import boto3
from botocore.config import Config
from botocore.exceptions import ClientError

s3 = boto3.client(
    "s3",
    endpoint_url=os.environ["ENDPOINT"],
    region_name="us-east-1",
    config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}),
)
b = "boto-tags"
s3.create_bucket(Bucket=b)


def code(call, **kw):
    try:
        call(Bucket=b, **kw)
    except ClientError as e:
        return e.response["Error"]["Code"], e.response["ResponseMetadata"]["HTTPStatusCode"]
    return None, 200


for call, want in [
    (s3.get_bucket_tagging, "NoSuchTagSet"),
    (s3.get_bucket_cors, "NoSuchCORSConfiguration"),
    (s3.get_bucket_lifecycle_configuration, "NoSuchLifecycleConfiguration"),
    (s3.get_bucket_encryption, "ServerSideEncryptionConfigurationNotFoundError"),
    (s3.get_object_lock_configuration, "ObjectLockConfigurationNotFoundError"),
    (s3.get_bucket_website, "NoSuchWebsiteConfiguration"),
    (s3.get_bucket_replication, "ReplicationConfigurationNotFoundError"),
]:
    got = code(call)
    assert got == (want, 404), (call.__name__, got)
assert s3.get_bucket_request_payment(Bucket=b)["Payer"] == "BucketOwner"
assert "Status" not in s3.get_bucket_versioning(Bucket=b)
got = code(s3.put_bucket_lifecycle_configuration, LifecycleConfiguration={
    "Rules": [{"ID": "x", "Status": "Enabled", "Filter": {"Prefix": ""}, "Expiration": {"Days": 1}}]})
assert got == (None, 200), got  # implemented since (boto3_cors_lifecycle.py has the details)
s3.delete_bucket_lifecycle(Bucket=b)

s3.put_object(Bucket=b, Key="o", Body=b"data", Tagging="a=1&b=two%20words")
assert s3.get_object(Bucket=b, Key="o")["TagCount"] == 2
tags = {t["Key"]: t["Value"] for t in s3.get_object_tagging(Bucket=b, Key="o")["TagSet"]}
assert tags == {"a": "1", "b": "two words"}, tags
s3.put_object_tagging(Bucket=b, Key="o", Tagging={"TagSet": [{"Key": "k", "Value": "v"}]})
tags = {t["Key"]: t["Value"] for t in s3.get_object_tagging(Bucket=b, Key="o")["TagSet"]}
assert tags == {"k": "v"}, tags
got = code(s3.put_object_tagging, Key="o", Tagging={"TagSet": [{"Key": "k", "Value": "x" * 257}]})
assert got == ("InvalidTag", 400), got
s3.delete_object_tagging(Bucket=b, Key="o")
assert s3.get_object_tagging(Bucket=b, Key="o")["TagSet"] == []

s3.put_bucket_tagging(Bucket=b, Tagging={"TagSet": [{"Key": "env", "Value": "prod"}]})
assert s3.get_bucket_tagging(Bucket=b)["TagSet"] == [{"Key": "env", "Value": "prod"}]
s3.delete_bucket_tagging(Bucket=b)
assert code(s3.get_bucket_tagging) == ("NoSuchTagSet", 404)

for k in ["d/a-1", "d/a-2", "d/b", "d/b-x-y", "d/c-"]:
    s3.put_object(Bucket=b, Key=k, Body=b"")
keys, cps = [], []
for page in s3.get_paginator("list_objects").paginate(Bucket=b, Prefix="d/", Delimiter="-", PaginationConfig={"PageSize": 1}):
    keys += [o["Key"] for o in page.get("Contents", [])]
    cps += [p["Prefix"] for p in page.get("CommonPrefixes", [])]
assert keys == ["d/b"] and cps == ["d/a-", "d/b-", "d/c-"], (keys, cps)
print("OK")
