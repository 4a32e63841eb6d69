package s3peers

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/tristore/tristore/internal/testutil"
)

// featureSequence drives issue 13's features other than versioning and
// Object Lock (versioningSequence has those) with aws-sdk-go-v2: keys of
// odd shapes, listings with delimiters, settings never set, tagging, CORS,
// lifecycle, checksums (single PUT, COMPOSITE and FULL_OBJECT multipart,
// mismatches), the null version of a Suspended bucket and bad input. One
// line per step: "ok" plus what S3 defines about the answer, or the HTTP
// status and S3 error code.
func featureSequence(ctx context.Context, c *awss3.Client, prefix string) []string {
	var out steps
	step := out.step
	body := getBody
	b := aws.String(prefix + "-feat")
	_, err := c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: b})
	step("CreateBucket", err, "")

	// Keys of odd shapes, and listings.
	long := strings.Repeat("L", 256)
	label := func(k string) string { return strings.ReplaceAll(k, long, "L*256") }
	for _, k := range []string{"a//b", "/lead", "x", "x/child", "dot/./seg", long, "q/plain", "q-dash", "é/ü"} {
		_, err = c.PutObject(ctx, &awss3.PutObjectInput{Bucket: b, Key: aws.String(k), Body: strings.NewReader("body of " + k)})
		step("PutObject "+label(k), err, "")
		s, err := body(c.GetObject(ctx, &awss3.GetObjectInput{Bucket: b, Key: aws.String(k)}))
		step("GetObject "+label(k), err, fmt.Sprint(s == "body of "+k))
	}
	for _, d := range []string{"", "/", "-"} {
		in := &awss3.ListObjectsV2Input{Bucket: b}
		if d != "" {
			in.Delimiter = aws.String(d)
		}
		l, err := c.ListObjectsV2(ctx, in)
		var keys []string
		if err == nil {
			for _, o := range l.Contents {
				keys = append(keys, label(aws.ToString(o.Key)))
			}
			for _, p := range l.CommonPrefixes {
				keys = append(keys, "P:"+aws.ToString(p.Prefix))
			}
		}
		step("ListObjectsV2 delimiter "+strconv.Quote(d), err, strings.Join(keys, " | "))
	}
	_, err = c.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: b, Key: aws.String("a//b")})
	step("DeleteObject a//b", err, "")
	_, err = c.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: b, Key: aws.String("never/was")})
	step("DeleteObject missing", err, "")

	// Settings never set.
	gt, err := c.GetObjectTagging(ctx, &awss3.GetObjectTaggingInput{Bucket: b, Key: aws.String("q/plain")})
	if err == nil {
		step("GetObjectTagging(untagged)", err, fmt.Sprint(len(gt.TagSet)))
	} else {
		step("GetObjectTagging(untagged)", err, "")
	}
	_, err = c.GetBucketTagging(ctx, &awss3.GetBucketTaggingInput{Bucket: b})
	step("GetBucketTagging(never)", err, "")
	_, err = c.GetBucketCors(ctx, &awss3.GetBucketCorsInput{Bucket: b})
	step("GetBucketCors(never)", err, "")
	_, err = c.GetBucketLifecycleConfiguration(ctx, &awss3.GetBucketLifecycleConfigurationInput{Bucket: b})
	step("GetBucketLifecycleConfiguration(never)", err, "")
	_, err = c.GetBucketPolicy(ctx, &awss3.GetBucketPolicyInput{Bucket: b})
	step("GetBucketPolicy(never)", err, "")
	_, err = c.GetObjectLockConfiguration(ctx, &awss3.GetObjectLockConfigurationInput{Bucket: b})
	step("GetObjectLockConfiguration(never)", err, "")

	// Tagging.
	_, err = c.PutObject(ctx, &awss3.PutObjectInput{Bucket: b, Key: aws.String("tagged"), Body: strings.NewReader("t"), Tagging: aws.String("k1=v1&k2=v2")})
	step("PutObject with tagging", err, "")
	go1, err := c.GetObject(ctx, &awss3.GetObjectInput{Bucket: b, Key: aws.String("tagged")})
	if err == nil {
		go1.Body.Close()
		step("GetObject tag count", err, fmt.Sprint(aws.ToInt32(go1.TagCount)))
	} else {
		step("GetObject tag count", err, "")
	}
	gt, err = c.GetObjectTagging(ctx, &awss3.GetObjectTaggingInput{Bucket: b, Key: aws.String("tagged")})
	if err == nil {
		var kv []string
		for _, t := range gt.TagSet {
			kv = append(kv, aws.ToString(t.Key)+"="+aws.ToString(t.Value))
		}
		sort.Strings(kv)
		step("GetObjectTagging", err, strings.Join(kv, ","))
	} else {
		step("GetObjectTagging", err, "")
	}
	var many []types.Tag
	for i := range 11 {
		many = append(many, types.Tag{Key: aws.String(fmt.Sprint("k", i)), Value: aws.String("v")})
	}
	_, err = c.PutObjectTagging(ctx, &awss3.PutObjectTaggingInput{Bucket: b, Key: aws.String("tagged"), Tagging: &types.Tagging{TagSet: many}})
	step("PutObjectTagging(11 tags)", err, "")
	_, err = c.PutObjectTagging(ctx, &awss3.PutObjectTaggingInput{Bucket: b, Key: aws.String("tagged"),
		Tagging: &types.Tagging{TagSet: []types.Tag{{Key: aws.String("aws:reserved"), Value: aws.String("v")}}}})
	step("PutObjectTagging(aws-prefixed key)", err, "")
	_, err = c.PutBucketTagging(ctx, &awss3.PutBucketTaggingInput{Bucket: b, Tagging: &types.Tagging{TagSet: []types.Tag{{Key: aws.String("team"), Value: aws.String("s3")}}}})
	step("PutBucketTagging", err, "")
	gbt, err := c.GetBucketTagging(ctx, &awss3.GetBucketTaggingInput{Bucket: b})
	if err == nil {
		step("GetBucketTagging", err, fmt.Sprint(len(gbt.TagSet)))
	} else {
		step("GetBucketTagging", err, "")
	}
	_, err = c.DeleteObjectTagging(ctx, &awss3.DeleteObjectTaggingInput{Bucket: b, Key: aws.String("tagged")})
	step("DeleteObjectTagging", err, "")

	// CORS.
	_, err = c.PutBucketCors(ctx, &awss3.PutBucketCorsInput{Bucket: b, CORSConfiguration: &types.CORSConfiguration{CORSRules: []types.CORSRule{{
		AllowedMethods: []string{"GET", "PUT"}, AllowedOrigins: []string{"https://*.example.com"}, AllowedHeaders: []string{"*"}, MaxAgeSeconds: aws.Int32(60)}}}})
	step("PutBucketCors", err, "")
	gc, err := c.GetBucketCors(ctx, &awss3.GetBucketCorsInput{Bucket: b})
	if err == nil {
		step("GetBucketCors", err, fmt.Sprint(len(gc.CORSRules)))
	} else {
		step("GetBucketCors", err, "")
	}
	_, err = c.PutBucketCors(ctx, &awss3.PutBucketCorsInput{Bucket: b, CORSConfiguration: &types.CORSConfiguration{CORSRules: []types.CORSRule{{
		AllowedMethods: []string{"FETCH"}, AllowedOrigins: []string{"*"}}}}})
	step("PutBucketCors(bad method)", err, "")

	// Lifecycle.
	_, err = c.PutBucketLifecycleConfiguration(ctx, &awss3.PutBucketLifecycleConfigurationInput{Bucket: b, LifecycleConfiguration: &types.BucketLifecycleConfiguration{
		Rules: []types.LifecycleRule{{ID: aws.String("tmp"), Status: types.ExpirationStatusEnabled, Filter: &types.LifecycleRuleFilter{Prefix: aws.String("tmp/")},
			Expiration: &types.LifecycleExpiration{Days: aws.Int32(30)}}}}})
	step("PutBucketLifecycleConfiguration", err, "")
	gl, err := c.GetBucketLifecycleConfiguration(ctx, &awss3.GetBucketLifecycleConfigurationInput{Bucket: b})
	if err == nil {
		step("GetBucketLifecycleConfiguration", err, fmt.Sprint(len(gl.Rules)))
	} else {
		step("GetBucketLifecycleConfiguration", err, "")
	}
	_, err = c.PutBucketLifecycleConfiguration(ctx, &awss3.PutBucketLifecycleConfigurationInput{Bucket: b, LifecycleConfiguration: &types.BucketLifecycleConfiguration{
		Rules: []types.LifecycleRule{{ID: aws.String("bad"), Status: types.ExpirationStatusEnabled, Filter: &types.LifecycleRuleFilter{Prefix: aws.String("")},
			Expiration: &types.LifecycleExpiration{Days: aws.Int32(0)}}}}})
	step("PutBucketLifecycleConfiguration(Days 0)", err, "")

	// Checksums.
	p, err := c.PutObject(ctx, &awss3.PutObjectInput{Bucket: b, Key: aws.String("ck"), Body: strings.NewReader("checksummed"), ChecksumAlgorithm: types.ChecksumAlgorithmCrc32})
	sum := ""
	if err == nil {
		sum = aws.ToString(p.ChecksumCRC32)
	}
	step("PutObject CRC32", err, fmt.Sprint(sum != ""))
	h, err := c.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: b, Key: aws.String("ck"), ChecksumMode: types.ChecksumModeEnabled})
	if err == nil {
		step("HeadObject checksum mode", err, fmt.Sprint(aws.ToString(h.ChecksumCRC32) == sum, " ", h.ChecksumType))
	} else {
		step("HeadObject checksum mode", err, "")
	}
	part1 := bytes.Repeat([]byte("m"), 5<<20)
	for _, mc := range []struct {
		name  string
		alg   types.ChecksumAlgorithm
		ctype types.ChecksumType
	}{{"composite", types.ChecksumAlgorithmCrc32, ""}, {"full", types.ChecksumAlgorithmCrc32c, types.ChecksumTypeFullObject}} {
		key := aws.String("mp-" + mc.name)
		mp, err := c.CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{Bucket: b, Key: key, ChecksumAlgorithm: mc.alg, ChecksumType: mc.ctype})
		if err != nil {
			step("CreateMultipartUpload "+mc.name, err, "")
			continue
		}
		step("CreateMultipartUpload "+mc.name, err, fmt.Sprint(mp.ChecksumAlgorithm, " ", mp.ChecksumType))
		_, err = c.UploadPart(ctx, &awss3.UploadPartInput{Bucket: b, Key: key, UploadId: mp.UploadId, PartNumber: aws.Int32(1),
			Body: strings.NewReader("wrong algorithm"), ChecksumAlgorithm: types.ChecksumAlgorithmSha256})
		step("UploadPart other algorithm "+mc.name, err, "")
		var done []types.CompletedPart
		for i, data := range [][]byte{part1, []byte("tail")} {
			up, err := c.UploadPart(ctx, &awss3.UploadPartInput{Bucket: b, Key: key, UploadId: mp.UploadId, PartNumber: aws.Int32(int32(i + 1)),
				Body: bytes.NewReader(data), ChecksumAlgorithm: mc.alg})
			if err != nil {
				step(fmt.Sprint("UploadPart ", i+1, " ", mc.name), err, "")
				continue
			}
			done = append(done, types.CompletedPart{PartNumber: aws.Int32(int32(i + 1)), ETag: up.ETag, ChecksumCRC32: up.ChecksumCRC32, ChecksumCRC32C: up.ChecksumCRC32C})
		}
		lp, err := c.ListParts(ctx, &awss3.ListPartsInput{Bucket: b, Key: key, UploadId: mp.UploadId})
		if err == nil {
			n := 0
			for i, pt := range lp.Parts {
				if i < len(done) && aws.ToString(pt.ChecksumCRC32) == aws.ToString(done[i].ChecksumCRC32) && aws.ToString(pt.ChecksumCRC32C) == aws.ToString(done[i].ChecksumCRC32C) &&
					aws.ToString(pt.ChecksumCRC32)+aws.ToString(pt.ChecksumCRC32C) != "" {
					n++
				}
			}
			step("ListParts "+mc.name, err, fmt.Sprint(len(lp.Parts), " parts, ", n, " with their checksum, ", lp.ChecksumAlgorithm, " ", lp.ChecksumType))
		} else {
			step("ListParts "+mc.name, err, "")
		}
		wrongType := types.ChecksumTypeFullObject
		if mc.ctype == types.ChecksumTypeFullObject {
			wrongType = types.ChecksumTypeComposite
		}
		_, err = c.CompleteMultipartUpload(ctx, &awss3.CompleteMultipartUploadInput{Bucket: b, Key: key, UploadId: mp.UploadId,
			MultipartUpload: &types.CompletedMultipartUpload{Parts: done}, ChecksumType: wrongType})
		step("CompleteMultipartUpload other type "+mc.name, err, "")
		missing := append([]types.CompletedPart(nil), done...)
		if len(missing) > 0 {
			missing[0] = types.CompletedPart{PartNumber: done[0].PartNumber, ETag: done[0].ETag}
		}
		_, err = c.CompleteMultipartUpload(ctx, &awss3.CompleteMultipartUploadInput{Bucket: b, Key: key, UploadId: mp.UploadId,
			MultipartUpload: &types.CompletedMultipartUpload{Parts: missing}})
		step("CompleteMultipartUpload part checksum missing "+mc.name, err, "")
		cr, err := c.CompleteMultipartUpload(ctx, &awss3.CompleteMultipartUploadInput{Bucket: b, Key: key, UploadId: mp.UploadId,
			MultipartUpload: &types.CompletedMultipartUpload{Parts: done}, ChecksumType: mc.ctype})
		if err == nil {
			v := aws.ToString(cr.ChecksumCRC32) + aws.ToString(cr.ChecksumCRC32C)
			step("CompleteMultipartUpload "+mc.name, err, fmt.Sprint(v != "", " composite=", strings.HasSuffix(v, "-2"), " ", cr.ChecksumType))
		} else {
			step("CompleteMultipartUpload "+mc.name, err, "")
		}
	}

	// The null version of a Suspended bucket.
	_, err = c.PutBucketVersioning(ctx, &awss3.PutBucketVersioningInput{Bucket: b,
		VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusSuspended}})
	step("PutBucketVersioning(Suspended)", err, "")
	ps, err := c.PutObject(ctx, &awss3.PutObjectInput{Bucket: b, Key: aws.String("susp"), Body: strings.NewReader("s")})
	if err == nil {
		step("PutObject suspended", err, "version="+aws.ToString(ps.VersionId))
	} else {
		step("PutObject suspended", err, "")
	}
	hs, err := c.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: b, Key: aws.String("susp")})
	if err == nil {
		step("HeadObject suspended", err, "version="+aws.ToString(hs.VersionId))
	} else {
		step("HeadObject suspended", err, "")
	}

	// Bad input: nothing changes.
	_, err = c.GetObject(ctx, &awss3.GetObjectInput{Bucket: b, Key: aws.String("q/plain"), VersionId: aws.String("0123456789abcdef0123456789abcdef")})
	step("GetObject unknown version", err, "")
	_, err = c.PutBucketPolicy(ctx, &awss3.PutBucketPolicyInput{Bucket: b, Policy: aws.String(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::` + *b + `/*","Condition":{"StringFrobnicates":{"s3:prefix":"x"}}}]}`)})
	step("PutBucketPolicy(unknown operator)", err, "")
	_, err = c.GetBucketPolicy(ctx, &awss3.GetBucketPolicyInput{Bucket: b})
	step("GetBucketPolicy after refused put", err, "")
	_, err = c.PutObjectRetention(ctx, &awss3.PutObjectRetentionInput{Bucket: b, Key: aws.String("q/plain"), Retention: &types.ObjectLockRetention{
		Mode: types.ObjectLockRetentionModeGovernance, RetainUntilDate: aws.Time(time.Now().Add(24 * time.Hour))}})
	step("PutObjectRetention(bucket without lock)", err, "")
	return out
}

// knownFeatureDiffs explains each step where versitygw answers
// differently; docs/s3.md "Compared with versitygw" lists them.
var knownFeatureDiffs = map[string]string{
	"PutObject x/child":                       "S3 stores x and x/child together; versitygw's posix backend refuses a key below an object (409 ObjectParentIsFile)",
	"GetObject x/child":                       "versitygw did not store it (above)",
	"PutObject L*256":                         "S3 keys are up to 1,024 bytes whatever their segments; versitygw refuses a segment over 255 bytes (400 KeyTooLongError)",
	"GetObject L*256":                         "versitygw did not store it (above)",
	"ListObjectsV2 delimiter \"\"":            "S3 lists keys verbatim in byte order; versitygw lists the cleaned paths (a//b as a/b, /lead as lead, dot/./seg as dot/seg) and lacks the keys it refused",
	"ListObjectsV2 delimiter \"/\"":           "as above: versitygw's cleaned paths (no P:/ for /lead, no x/child)",
	"ListObjectsV2 delimiter \"-\"":           "as above: versitygw's cleaned paths",
	"GetBucketLifecycleConfiguration(never)":  "versitygw 1.8.0 (posix) has no lifecycle: 501; S3 answers 404 NoSuchLifecycleConfiguration",
	"PutBucketLifecycleConfiguration":         "versitygw 1.8.0 (posix) has no lifecycle: 501",
	"GetBucketLifecycleConfiguration":         "versitygw 1.8.0 (posix) has no lifecycle: 501",
	"PutBucketLifecycleConfiguration(Days 0)": "versitygw 1.8.0 (posix) has no lifecycle: 501; S3 refuses Days 0 with 400 InvalidArgument",
	"PutObjectTagging(aws-prefixed key)":      "S3 reserves the aws: prefix for its own tags (400 InvalidTag); versitygw 1.8.0 accepts it",
	"HeadObject suspended":                    "S3 sends x-amz-version-id: null for the null version of a Suspended bucket; versitygw 1.8.0 sends none (its issue #2165, fixed after 1.8.0)",
	"GetObject unknown version":               "version IDs are each server's own format: tristore answers 404 NoSuchVersion for a well-formed ID the key lacks, as S3; versitygw cannot decode tristore's format (400 InvalidArgument)",
}

// startVersitygw runs versitygw (posix, with a versioning directory) on a
// free loopback port and returns its endpoint.
func startVersitygw(t *testing.T, ctx context.Context) string {
	t.Helper()
	bin := testutil.NeedCmd(t, "versitygw")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.CommandContext(ctx, bin, "--access", rootAK, "--secret", rootSK, "--port", addr,
		"--quiet", "posix", "--versioning-dir", t.TempDir(), t.TempDir())
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	for range 100 {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			return "http://" + addr
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Fatal("versitygw did not start listening")
	return ""
}

// TestFeaturesVersitygw sends featureSequence (aws-sdk-go-v2) to tristore
// and to versitygw in one run and compares status codes, error codes and
// the fields S3 defines, step by step; every difference must be a known
// one (knownFeatureDiffs, docs/s3.md).
func TestFeaturesVersitygw(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	srv := startServer(t, false)
	peer := startVersitygw(t, ctx)
	ours := featureSequence(ctx, sdkClient(srv.endpoint, rootAK, rootSK), "diff")
	theirs := featureSequence(ctx, sdkClient(peer, rootAK, rootSK), "diff")
	compareSequences(t, ours, theirs, knownFeatureDiffs)
}

// compareSequences fails on every step that differs and is not in known.
func compareSequences(t *testing.T, ours, theirs []string, known map[string]string) {
	t.Helper()
	if len(ours) != len(theirs) {
		t.Fatalf("sequences of different lengths: %d and %d", len(ours), len(theirs))
	}
	var unexplained []string
	for i := range ours {
		if ours[i] == theirs[i] {
			continue
		}
		name, _, _ := strings.Cut(ours[i], ":")
		if why, ok := known[name]; ok {
			t.Logf("known difference %q: tristore %q, peer %q (%s)", name, ours[i], theirs[i], why)
			continue
		}
		unexplained = append(unexplained, fmt.Sprintf("%s\n    peer: %s", ours[i], theirs[i]))
	}
	if len(unexplained) > 0 {
		t.Fatalf("unexplained differences from the peer:\n%s", strings.Join(unexplained, "\n"))
	}
}

// knownBoto3Diffs explains the steps of testdata/boto3_diff.py where
// versitygw answers differently (docs/s3.md "Compared with versitygw").
var knownBoto3Diffs = map[string]string{
	"put_object x/child":            knownFeatureDiffs["PutObject x/child"],
	"get_object x/child":            knownFeatureDiffs["GetObject x/child"],
	"list_objects_v2 delimiter ''":  knownFeatureDiffs["ListObjectsV2 delimiter \"\""],
	"list_objects_v2 delimiter '/'": knownFeatureDiffs["ListObjectsV2 delimiter \"/\""],
	"list_objects v1 delimiter '/'": knownFeatureDiffs["ListObjectsV2 delimiter \"/\""],
	"get_bucket_encryption(never)":  "versitygw 1.8.0 (posix) has no bucket encryption: 501; S3 answers 404 ServerSideEncryptionConfigurationNotFoundError",
	"head_object suspended":         knownFeatureDiffs["HeadObject suspended"],
}

// TestFeaturesVersitygwBoto3 runs testdata/boto3_diff.py (boto3) against
// tristore and against versitygw in one run and compares its lines step
// by step; every difference must be a known one (knownBoto3Diffs).
func TestFeaturesVersitygwBoto3(t *testing.T) {
	py := testutil.NeedPython(t, "boto3")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	srv := startServer(t, false)
	peer := startVersitygw(t, ctx)
	run := func(endpoint string) []string {
		t.Helper()
		cmd := exec.CommandContext(ctx, py, "testdata/boto3_diff.py", "diff")
		env := cliEnv(srv)
		cmd.Env = append(env, "ENDPOINT="+endpoint) // the last ENDPOINT wins
		out, err := cmd.Output()
		if err != nil {
			var stderr []byte
			if ee, ok := err.(*exec.ExitError); ok {
				stderr = ee.Stderr
			}
			t.Fatalf("boto3_diff.py against %s: %v\n%s%s", endpoint, err, out, stderr)
		}
		return strings.Split(strings.TrimSpace(string(out)), "\n")
	}
	compareSequences(t, run(srv.endpoint), run(peer), knownBoto3Diffs)
}
