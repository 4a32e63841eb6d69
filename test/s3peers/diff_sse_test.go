package s3peers

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/base64"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/tristore/tristore/frontend/s3"
	"github.com/tristore/tristore/internal/testutil"
)

// sseSequence drives encryption at rest with aws-sdk-go-v2: SSE-S3 PUT,
// GET (whole and ranged), HEAD, SSE-KMS, SSE-C with the right, no, another
// and a malformed key, a copy from SSE-C to SSE-S3, the bucket default,
// and GET/HEAD carrying x-amz-server-side-encryption. One line per step,
// as featureSequence.
func sseSequence(ctx context.Context, c *awss3.Client, prefix string) []string {
	var out steps
	step := out.step
	read := func(o *awss3.GetObjectOutput, err error) (*awss3.GetObjectOutput, string, error) {
		if err != nil {
			return nil, "", err
		}
		defer o.Body.Close()
		b, err := io.ReadAll(o.Body)
		return o, string(b), err
	}
	b := aws.String(prefix + "-sse")
	_, err := c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: b})
	step("CreateBucket", err, "")
	plain := "encrypted at rest, read back in plaintext"
	p, err := c.PutObject(ctx, &awss3.PutObjectInput{Bucket: b, Key: aws.String("s3"), Body: strings.NewReader(plain), ServerSideEncryption: types.ServerSideEncryptionAes256})
	if err == nil {
		step("PutObject SSE-S3", err, string(p.ServerSideEncryption))
	} else {
		step("PutObject SSE-S3", err, "")
	}
	g, s, err := read(c.GetObject(ctx, &awss3.GetObjectInput{Bucket: b, Key: aws.String("s3")}))
	if err == nil {
		step("GetObject SSE-S3", err, fmt.Sprint(s == plain, " ", g.ServerSideEncryption))
	} else {
		step("GetObject SSE-S3", err, "")
	}
	g, s, err = read(c.GetObject(ctx, &awss3.GetObjectInput{Bucket: b, Key: aws.String("s3"), Range: aws.String("bytes=3-11")}))
	if err == nil {
		step("GetObject SSE-S3 range", err, fmt.Sprint(s == plain[3:12], " ", aws.ToString(g.ContentRange)))
	} else {
		step("GetObject SSE-S3 range", err, "")
	}
	h, err := c.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: b, Key: aws.String("s3")})
	if err == nil {
		step("HeadObject SSE-S3", err, fmt.Sprint(aws.ToInt64(h.ContentLength), " ", h.ServerSideEncryption))
	} else {
		step("HeadObject SSE-S3", err, "")
	}
	withSSEHeader := func(o *awss3.Options) {
		o.APIOptions = append(o.APIOptions, smithyhttp.AddHeaderValue("X-Amz-Server-Side-Encryption", "AES256"))
	}
	_, err = c.GetObject(ctx, &awss3.GetObjectInput{Bucket: b, Key: aws.String("s3")}, withSSEHeader)
	step("GetObject with x-amz-server-side-encryption", err, "")
	_, err = c.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: b, Key: aws.String("s3")}, withSSEHeader)
	step("HeadObject with x-amz-server-side-encryption", err, "")

	_, err = c.PutObject(ctx, &awss3.PutObjectInput{Bucket: b, Key: aws.String("kms"), Body: strings.NewReader("k"), ServerSideEncryption: types.ServerSideEncryptionAwsKms})
	step("PutObject SSE-KMS", err, "")

	key := func(seed byte) (string, string) {
		k := bytes.Repeat([]byte{seed}, 32)
		m := md5.Sum(k)
		return base64.StdEncoding.EncodeToString(k), base64.StdEncoding.EncodeToString(m[:])
	}
	k1, m1 := key(1)
	k2, m2 := key(2)
	pc, err := c.PutObject(ctx, &awss3.PutObjectInput{Bucket: b, Key: aws.String("c"), Body: strings.NewReader(plain),
		SSECustomerAlgorithm: aws.String("AES256"), SSECustomerKey: aws.String(k1), SSECustomerKeyMD5: aws.String(m1)})
	if err == nil {
		step("PutObject SSE-C", err, fmt.Sprint(aws.ToString(pc.SSECustomerAlgorithm), " ", aws.ToString(pc.SSECustomerKeyMD5) == m1))
	} else {
		step("PutObject SSE-C", err, "")
	}
	_, _, err = read(c.GetObject(ctx, &awss3.GetObjectInput{Bucket: b, Key: aws.String("c")}))
	step("GetObject SSE-C without key", err, "")
	_, _, err = read(c.GetObject(ctx, &awss3.GetObjectInput{Bucket: b, Key: aws.String("c"),
		SSECustomerAlgorithm: aws.String("AES256"), SSECustomerKey: aws.String(k2), SSECustomerKeyMD5: aws.String(m2)}))
	step("GetObject SSE-C other key", err, "")
	_, s, err = read(c.GetObject(ctx, &awss3.GetObjectInput{Bucket: b, Key: aws.String("c"),
		SSECustomerAlgorithm: aws.String("AES256"), SSECustomerKey: aws.String(k1), SSECustomerKeyMD5: aws.String(m1)}))
	step("GetObject SSE-C", err, fmt.Sprint(s == plain))
	_, err = c.PutObject(ctx, &awss3.PutObjectInput{Bucket: b, Key: aws.String("bad"), Body: strings.NewReader("x"),
		SSECustomerAlgorithm: aws.String("AES256"), SSECustomerKey: aws.String(k1), SSECustomerKeyMD5: aws.String(m2)})
	step("PutObject SSE-C wrong MD5", err, "")
	_, err = c.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: b, Key: aws.String("bad")})
	step("HeadObject after refused SSE-C PUT", err, "")
	_, err = c.CopyObject(ctx, &awss3.CopyObjectInput{Bucket: b, Key: aws.String("copied"), CopySource: aws.String(*b + "/c"),
		CopySourceSSECustomerAlgorithm: aws.String("AES256"), CopySourceSSECustomerKey: aws.String(k1), CopySourceSSECustomerKeyMD5: aws.String(m1),
		ServerSideEncryption: types.ServerSideEncryptionAes256})
	step("CopyObject SSE-C to SSE-S3", err, "")
	g, s, err = read(c.GetObject(ctx, &awss3.GetObjectInput{Bucket: b, Key: aws.String("copied")}))
	if err == nil {
		step("GetObject copy", err, fmt.Sprint(s == plain, " ", g.ServerSideEncryption))
	} else {
		step("GetObject copy", err, "")
	}

	_, err = c.GetBucketEncryption(ctx, &awss3.GetBucketEncryptionInput{Bucket: b})
	step("GetBucketEncryption(never)", err, "")
	_, err = c.PutBucketEncryption(ctx, &awss3.PutBucketEncryptionInput{Bucket: b, ServerSideEncryptionConfiguration: &types.ServerSideEncryptionConfiguration{
		Rules: []types.ServerSideEncryptionRule{{ApplyServerSideEncryptionByDefault: &types.ServerSideEncryptionByDefault{SSEAlgorithm: types.ServerSideEncryptionAes256}}}}})
	step("PutBucketEncryption AES256", err, "")
	ge, err := c.GetBucketEncryption(ctx, &awss3.GetBucketEncryptionInput{Bucket: b})
	if err == nil && ge.ServerSideEncryptionConfiguration != nil && len(ge.ServerSideEncryptionConfiguration.Rules) == 1 &&
		ge.ServerSideEncryptionConfiguration.Rules[0].ApplyServerSideEncryptionByDefault != nil {
		step("GetBucketEncryption", err, string(ge.ServerSideEncryptionConfiguration.Rules[0].ApplyServerSideEncryptionByDefault.SSEAlgorithm))
	} else {
		step("GetBucketEncryption", err, "")
	}
	_, err = c.PutObject(ctx, &awss3.PutObjectInput{Bucket: b, Key: aws.String("default"), Body: strings.NewReader(plain)})
	step("PutObject under bucket default", err, "")
	h, err = c.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: b, Key: aws.String("default")})
	if err == nil {
		step("HeadObject under bucket default", err, string(h.ServerSideEncryption))
	} else {
		step("HeadObject under bucket default", err, "")
	}
	_, err = c.DeleteBucketEncryption(ctx, &awss3.DeleteBucketEncryptionInput{Bucket: b})
	step("DeleteBucketEncryption", err, "")
	return out
}

// knownSSEDiffs explains each step where SeaweedFS answers differently
// (docs/s3.md "Compared with SeaweedFS").
var knownSSEDiffs = map[string]string{
	"GetObject with x-amz-server-side-encryption":  "AWS answers 400 InvalidArgument (GetObject reference: the header must not be sent on GET); SeaweedFS 4.48 ignores it",
	"HeadObject with x-amz-server-side-encryption": "as for GET (a HEAD error has no body: the SDK sees 400 BadRequest)",
	"PutObject SSE-KMS":                            "tristore has no KMS and answers 501 NotImplemented, documented; SeaweedFS without a KMS configured answers 500 InternalError",
	"GetObject SSE-C without key":                  "AWS answers 400 InvalidRequest (\"The object was stored using a form of Server Side Encryption...\"); SeaweedFS 400 InvalidArgument",
}

// startSeaweedFS runs `weed server -s3` (SeaweedFS, from the .venv) on
// loopback ports until the test ends and returns its S3 endpoint once a
// bucket can be made and an object stored there.
func startSeaweedFS(t *testing.T, ctx context.Context) string {
	t.Helper()
	var c *awss3.Client
	return testutil.StartWeed(t, testutil.WeedOptions{AccessKey: rootAK, SecretKey: rootSK,
		// SSE-S3 in SeaweedFS needs a key-encryption key (s3.sse.kek).
		Env: []string{"WEED_S3_SSE_KEK=000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"},
		Ready: func(ep string) error {
			if c == nil {
				c = sdkClient(ep, rootAK, rootSK)
			}
			pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			defer cancel()
			_, err := c.CreateBucket(pctx, &awss3.CreateBucketInput{Bucket: aws.String("probe")})
			if err == nil || errCode(err) == "BucketAlreadyOwnedByYou" || errCode(err) == "BucketAlreadyExists" {
				_, err = c.PutObject(pctx, &awss3.PutObjectInput{Bucket: aws.String("probe"), Key: aws.String("probe"), Body: strings.NewReader("p")})
			}
			return err
		}})
}

// TestSSESeaweedFS sends sseSequence to tristore (with an SSE-S3 key) and
// to SeaweedFS 4.48, which implements SSE-S3 and SSE-C (versitygw 1.8.0
// has no encryption), in one run and compares them step by step; every
// difference must be a known one (knownSSEDiffs, docs/s3.md).
func TestSSESeaweedFS(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	key := filepath.Join(t.TempDir(), "sse", "server.key")
	srv := startServer(t, false, func(o *s3.Options) { o.SSEKeyFile = key })
	peer := startSeaweedFS(t, ctx)
	ours := sseSequence(ctx, sdkClient(srv.endpoint, rootAK, rootSK), "diff")
	theirs := sseSequence(ctx, sdkClient(peer, rootAK, rootSK), "diff")
	compareSequences(t, ours, theirs, knownSSEDiffs)
}

// knownAuthDiffs explains the steps of testdata/boto3_diff_auth.py where
// SeaweedFS answers differently (docs/s3.md).
var knownAuthDiffs = map[string]string{
	"sigv2 list_objects": "botocore signs a path-style bucket request (/bkt) with the resource /bkt/; tristore accepts it (aws-cli 1.x's `s3 ls` works), SeaweedFS 4.48 answers 403 SignatureDoesNotMatch",
}

// TestAuthSeaweedFS runs testdata/boto3_diff_auth.py (boto3: SigV2 header
// and presigned requests, presigned POST Object with its policy
// conditions) against tristore and SeaweedFS 4.48 in one run and compares
// the lines; every difference must be a known one (knownAuthDiffs).
func TestAuthSeaweedFS(t *testing.T) {
	py := testutil.NeedPython(t, "boto3", "urllib3")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	srv := startServer(t, false)
	peer := startSeaweedFS(t, ctx)
	run := func(endpoint string) []string {
		t.Helper()
		cmd := exec.CommandContext(ctx, py, "testdata/boto3_diff_auth.py", "diff")
		cmd.Env = append(cliEnv(srv), "ENDPOINT="+endpoint)
		out, err := cmd.Output()
		if err != nil {
			var stderr []byte
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = ee.Stderr
			}
			t.Fatalf("boto3_diff_auth.py against %s: %v\n%s%s", endpoint, err, out, stderr)
		}
		return strings.Split(strings.TrimSpace(string(out)), "\n")
	}
	compareSequences(t, run(srv.endpoint), run(peer), knownAuthDiffs)
}
