# Sync bucket argv[1] to a new bucket argv[2] with boto3: list_objects_v2
# in pages of 5, copy_object per key, then compare the two listings and
# every object's bytes key by key. Prints OK on success.
import os
import sys

import boto3
from botocore.config import Config

src, dst = sys.argv[1], sys.argv[2]
s3 = boto3.client("s3", endpoint_url=os.environ["ENDPOINT"], region_name="us-east-1",
                  config=Config(s3={"addressing_style": "path"}, retries={"max_attempts": 1}))
s3.create_bucket(Bucket=dst)


def keys(bucket):
    out = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, PaginationConfig={"PageSize": 5}):
        out += [(o["Key"], o["ETag"]) for o in page.get("Contents", [])]
    return out


src_keys = keys(src)
for k, _ in src_keys:
    s3.copy_object(Bucket=dst, Key=k, CopySource={"Bucket": src, "Key": k})
dst_keys = keys(dst)
if src_keys != dst_keys:
    sys.exit("listings differ:\n%r\n%r" % (src_keys, dst_keys))
if [k for k, _ in src_keys] != sorted([k for k, _ in src_keys], key=lambda k: k.encode()):
    sys.exit("source listing not in byte order")
for k, _ in src_keys:
    a = s3.get_object(Bucket=src, Key=k)["Body"].read()
    b = s3.get_object(Bucket=dst, Key=k)["Body"].read()
    if a != b:
        sys.exit("%r differs" % k)
print("OK", len(src_keys))
