"""boto3 half of the differential test of SigV2 and POST Object (TestAuthSeaweedFS).

Sends one sequence to the server at ENDPOINT and prints one line per step:
"<step>: ok <detail>" or "<step>: <HTTP status> <S3 error code>". The Go test
runs it against tristore and SeaweedFS and compares the lines.
"""
import os
import re
import sys
import time

import boto3
import urllib3
from botocore.config import Config
from botocore.exceptions import ClientError

ep = os.environ["ENDPOINT"]
b = sys.argv[1] + "-auth"


def client(sig, secret=None):
    return boto3.client(
        "s3", endpoint_url=ep, region_name="us-east-1",
        aws_access_key_id=os.environ["AWS_ACCESS_KEY_ID"],
        aws_secret_access_key=secret or os.environ["AWS_SECRET_ACCESS_KEY"],
        config=Config(signature_version=sig, s3={"addressing_style": "path"}, retries={"max_attempts": 1}))


v4, v2 = client("s3v4"), client("s3")
http = urllib3.PoolManager(retries=False)
out = []


def step(name, fn, detail=lambda r: ""):
    try:
        r = fn()
    except ClientError as e:
        out.append("%s: %d %s" % (name, e.response["ResponseMetadata"]["HTTPStatusCode"], e.response["Error"]["Code"]))
        return None
    out.append("%s: ok %s" % (name, detail(r)))
    return r


def raw(name, resp, detail=""):
    code = ""
    m = re.search(rb"<Code>([^<]*)</Code>", resp.data or b"")
    if m:
        code = m.group(1).decode()
    if resp.status >= 300 and resp.status not in (303,):
        out.append("%s: %d %s" % (name, resp.status, code))
    else:
        out.append("%s: ok %d %s" % (name, resp.status, detail))


step("create_bucket", lambda: v4.create_bucket(Bucket=b))

# SigV2, header-signed.
step("sigv2 put_object", lambda: v2.put_object(Bucket=b, Key="v2/a b+c.txt", Body=b"signed with v2"))
step("sigv2 get_object", lambda: v2.get_object(Bucket=b, Key="v2/a b+c.txt"), lambda r: r["Body"].read().decode())
step("sigv2 list_objects", lambda: v2.list_objects(Bucket=b, Prefix="v2/"), lambda r: ",".join(o["Key"] for o in r.get("Contents", [])))
step("sigv2 wrong secret", lambda: client("s3", "not-the-secret").get_object(Bucket=b, Key="v2/a b+c.txt"))
# SigV2, presigned.
url = v2.generate_presigned_url("get_object", Params={"Bucket": b, "Key": "v2/a b+c.txt"}, ExpiresIn=300)
r = http.request("GET", url)
raw("sigv2 presigned get", r, r.data.decode() if r.status == 200 else "")
bad = re.sub(r"Signature=[^&]", "Signature=0", url) if "Signature=0" not in url else re.sub(r"Signature=0", "Signature=1", url)
raw("sigv2 presigned get, changed signature", http.request("GET", bad))
past = v2.generate_presigned_url("get_object", Params={"Bucket": b, "Key": "v2/a b+c.txt"}, ExpiresIn=-60)
raw("sigv2 presigned get, expired", http.request("GET", past))


# POST Object (boto3 presigned POST, SigV4 policy).
def post(name, key, body, fields=None, conditions=None, tamper=False, detail_key=None):
    p = v4.generate_presigned_post(b, key, Fields=fields, Conditions=conditions, ExpiresIn=300)
    f = dict(p["fields"])
    if tamper:
        f["policy"] = f["policy"][:-4] + ("AAAA" if not f["policy"].endswith("AAAA") else "BBBB")
    f["file"] = ("upload.txt", body, "text/plain")
    r = http.request("POST", p["url"], fields=f, redirect=False)
    detail = ""
    if r.status == 201:
        detail = "PostResponse" if b"<PostResponse>" in r.data else "no PostResponse"
    raw(name, r, detail)
    if detail_key:
        step(name + ", object", lambda: v4.get_object(Bucket=b, Key=detail_key), lambda r: r["Body"].read().decode())


post("post", "form/one.txt", b"posted", detail_key="form/one.txt")
post("post success_action_status 201", "form/two.txt", b"posted 201",
     fields={"success_action_status": "201"}, conditions=[{"success_action_status": "201"}])
post("post content-length-range exceeded", "form/big.txt", b"x" * 50, conditions=[["content-length-range", 1, 10]])
step("post content-length-range exceeded, object", lambda: v4.head_object(Bucket=b, Key="form/big.txt"))
post("post tampered policy", "form/tampered.txt", b"t", tamper=True)
step("post tampered policy, object", lambda: v4.head_object(Bucket=b, Key="form/tampered.txt"))
post("post field outside the policy", "form/extra.txt", b"e", fields={"x-amz-meta-extra": "1"}, conditions=[])

print("\n".join(out))
