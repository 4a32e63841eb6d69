package s3peers

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/tristore/tristore/internal/testutil"
)

// versioningSequence drives one sequence of versioning and Object Lock
// requests with aws-sdk-go-v2 and returns one line per step: "ok" plus
// what S3 defines about the answer (contents, flags, counts), or the
// HTTP status and S3 error code. Version IDs themselves differ between
// servers and are not in the lines.
func versioningSequence(ctx context.Context, c *awss3.Client, prefix string) []string {
	var out steps
	step := out.step
	body := getBody
	vb, lb := aws.String(prefix+"-ver"), aws.String(prefix+"-lock")
	k := aws.String("dir/k")
	_, err := c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: vb})
	step("CreateBucket", err, "")
	gv, err := c.GetBucketVersioning(ctx, &awss3.GetBucketVersioningInput{Bucket: vb})
	step("GetBucketVersioning(never)", err, string(gv.Status))
	_, err = c.PutObject(ctx, &awss3.PutObjectInput{Bucket: vb, Key: k, Body: strings.NewReader("v0")})
	step("PutObject(unversioned)", err, "")
	_, err = c.PutBucketVersioning(ctx, &awss3.PutBucketVersioningInput{Bucket: vb,
		VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled}})
	step("PutBucketVersioning(Enabled)", err, "")
	gv, err = c.GetBucketVersioning(ctx, &awss3.GetBucketVersioningInput{Bucket: vb})
	step("GetBucketVersioning", err, string(gv.Status))
	p1, err := c.PutObject(ctx, &awss3.PutObjectInput{Bucket: vb, Key: k, Body: strings.NewReader("v1")})
	step("PutObject v1", err, fmt.Sprint(err == nil && aws.ToString(p1.VersionId) != ""))
	p2, err := c.PutObject(ctx, &awss3.PutObjectInput{Bucket: vb, Key: k, Body: strings.NewReader("v2")})
	step("PutObject v2", err, fmt.Sprint(err == nil && aws.ToString(p2.VersionId) != aws.ToString(p1.VersionId)))
	var v1, v2 *string
	if p1 != nil && p2 != nil {
		v1, v2 = p1.VersionId, p2.VersionId
	}
	s, err := body(c.GetObject(ctx, &awss3.GetObjectInput{Bucket: vb, Key: k, VersionId: v1}))
	step("GetObject v1", err, s)
	s, err = body(c.GetObject(ctx, &awss3.GetObjectInput{Bucket: vb, Key: k, VersionId: aws.String("null")}))
	step("GetObject null", err, s)
	_, err = c.GetObject(ctx, &awss3.GetObjectInput{Bucket: vb, Key: k, VersionId: aws.String("bogus")})
	step("GetObject bogus version", err, "")
	d, err := c.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: vb, Key: k})
	dm := aws.String("")
	if err == nil {
		dm = d.VersionId
		step("DeleteObject", err, fmt.Sprint(aws.ToBool(d.DeleteMarker), aws.ToString(d.VersionId) != ""))
	} else {
		step("DeleteObject", err, "")
	}
	_, err = c.GetObject(ctx, &awss3.GetObjectInput{Bucket: vb, Key: k})
	step("GetObject deleted", err, "")
	_, err = c.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: vb, Key: k, VersionId: dm})
	step("HeadObject marker", err, "")
	lv, err := c.ListObjectVersions(ctx, &awss3.ListObjectVersionsInput{Bucket: vb})
	if err == nil {
		latest := ""
		for _, m := range lv.DeleteMarkers {
			if aws.ToBool(m.IsLatest) {
				latest = "marker"
			}
		}
		step("ListObjectVersions", err, fmt.Sprintf("versions=%d markers=%d latest=%s", len(lv.Versions), len(lv.DeleteMarkers), latest))
	} else {
		step("ListObjectVersions", err, "")
	}
	n, pages := 0, 0
	pg := awss3.NewListObjectVersionsPaginator(c, &awss3.ListObjectVersionsInput{Bucket: vb, MaxKeys: aws.Int32(1)})
	for pg.HasMorePages() && pages < 20 {
		page, err := pg.NextPage(ctx)
		if err != nil {
			step("ListObjectVersions pages", err, "")
			break
		}
		pages++
		n += len(page.Versions) + len(page.DeleteMarkers)
	}
	out = append(out, fmt.Sprintf("ListObjectVersions pages: entries=%d", n))
	_, err = c.ListObjectVersions(ctx, &awss3.ListObjectVersionsInput{Bucket: vb, VersionIdMarker: v1})
	step("ListObjectVersions version-id-marker alone", err, "")
	cp, err := c.CopyObject(ctx, &awss3.CopyObjectInput{Bucket: vb, Key: aws.String("copy"),
		CopySource: aws.String(*vb + "/" + *k + "?versionId=" + aws.ToString(v1))})
	step("CopyObject from v1", err, fmt.Sprint(err == nil && aws.ToString(cp.CopySourceVersionId) == aws.ToString(v1)))
	s, err = body(c.GetObject(ctx, &awss3.GetObjectInput{Bucket: vb, Key: aws.String("copy")}))
	step("GetObject copy", err, s)
	d, err = c.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: vb, Key: k, VersionId: dm})
	step("DeleteObject marker by id", err, fmt.Sprint(err == nil && aws.ToBool(d.DeleteMarker)))
	s, err = body(c.GetObject(ctx, &awss3.GetObjectInput{Bucket: vb, Key: k}))
	step("GetObject after marker removed", err, s)
	_, err = c.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: vb, Key: k, VersionId: v2})
	step("DeleteObject v2 by id", err, "")
	s, err = body(c.GetObject(ctx, &awss3.GetObjectInput{Bucket: vb, Key: k}))
	step("GetObject after v2 removed", err, s)
	_, err = c.GetObject(ctx, &awss3.GetObjectInput{Bucket: vb, Key: k, VersionId: v2})
	step("GetObject removed v2", err, "")
	_, err = c.PutBucketVersioning(ctx, &awss3.PutBucketVersioningInput{Bucket: vb,
		VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusSuspended}})
	step("PutBucketVersioning(Suspended)", err, "")
	_, err = c.PutObject(ctx, &awss3.PutObjectInput{Bucket: vb, Key: k, Body: strings.NewReader("s")})
	step("PutObject suspended", err, "")
	s, err = body(c.GetObject(ctx, &awss3.GetObjectInput{Bucket: vb, Key: k, VersionId: aws.String("null")}))
	step("GetObject null after suspended PUT", err, s)
	_, err = c.DeleteBucket(ctx, &awss3.DeleteBucketInput{Bucket: vb})
	step("DeleteBucket with versions", err, "")
	_, err = c.PutObjectLockConfiguration(ctx, &awss3.PutObjectLockConfigurationInput{Bucket: vb,
		ObjectLockConfiguration: &types.ObjectLockConfiguration{ObjectLockEnabled: types.ObjectLockEnabledEnabled}})
	step("PutObjectLockConfiguration(no lock bucket)", err, "")

	// Object Lock.
	_, err = c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: lb, ObjectLockEnabledForBucket: aws.Bool(true)})
	step("CreateBucket(lock)", err, "")
	gv, err = c.GetBucketVersioning(ctx, &awss3.GetBucketVersioningInput{Bucket: lb})
	step("GetBucketVersioning(lock)", err, string(gv.Status))
	_, err = c.PutObjectLockConfiguration(ctx, &awss3.PutObjectLockConfigurationInput{Bucket: lb,
		ObjectLockConfiguration: &types.ObjectLockConfiguration{ObjectLockEnabled: types.ObjectLockEnabledEnabled,
			Rule: &types.ObjectLockRule{DefaultRetention: &types.DefaultRetention{Mode: types.ObjectLockRetentionModeGovernance, Days: aws.Int32(1)}}}})
	step("PutObjectLockConfiguration", err, "")
	lc, err := c.GetObjectLockConfiguration(ctx, &awss3.GetObjectLockConfigurationInput{Bucket: lb})
	if err == nil && lc.ObjectLockConfiguration != nil && lc.ObjectLockConfiguration.Rule != nil {
		r := lc.ObjectLockConfiguration.Rule.DefaultRetention
		step("GetObjectLockConfiguration", err, fmt.Sprint(r.Mode, aws.ToInt32(r.Days)))
	} else {
		step("GetObjectLockConfiguration", err, "")
	}
	o := aws.String("o")
	po, err := c.PutObject(ctx, &awss3.PutObjectInput{Bucket: lb, Key: o, Body: strings.NewReader("locked")})
	var ov *string
	if err == nil {
		ov = po.VersionId
	}
	step("PutObject(lock bucket)", err, "")
	gr, err := c.GetObjectRetention(ctx, &awss3.GetObjectRetentionInput{Bucket: lb, Key: o})
	if err == nil && gr.Retention != nil {
		step("GetObjectRetention(default)", err, string(gr.Retention.Mode))
	} else {
		step("GetObjectRetention(default)", err, "")
	}
	_, err = c.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: lb, Key: o, VersionId: ov})
	step("DeleteObject GOVERNANCE version", err, "")
	_, err = c.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: lb, Key: o, VersionId: ov, BypassGovernanceRetention: aws.Bool(true)})
	step("DeleteObject GOVERNANCE version with bypass", err, "")
	until := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	pc, err := c.PutObject(ctx, &awss3.PutObjectInput{Bucket: lb, Key: aws.String("c"), Body: strings.NewReader("c"),
		ObjectLockMode: types.ObjectLockModeCompliance, ObjectLockRetainUntilDate: &until})
	step("PutObject COMPLIANCE", err, "")
	var cv *string
	if err == nil {
		cv = pc.VersionId
	}
	_, err = c.PutObjectRetention(ctx, &awss3.PutObjectRetentionInput{Bucket: lb, Key: aws.String("c"), BypassGovernanceRetention: aws.Bool(true),
		Retention: &types.ObjectLockRetention{Mode: types.ObjectLockRetentionModeCompliance, RetainUntilDate: aws.Time(until.Add(-time.Minute))}})
	step("PutObjectRetention shorten COMPLIANCE", err, "")
	_, err = c.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: lb, Key: aws.String("c"), VersionId: cv, BypassGovernanceRetention: aws.Bool(true)})
	step("DeleteObject COMPLIANCE version", err, "")
	_, err = c.PutObjectRetention(ctx, &awss3.PutObjectRetentionInput{Bucket: lb, Key: aws.String("c"),
		Retention: &types.ObjectLockRetention{Mode: types.ObjectLockRetentionModeCompliance, RetainUntilDate: aws.Time(time.Now().Add(-time.Hour))}})
	step("PutObjectRetention past date", err, "")
	_, err = c.PutObjectLegalHold(ctx, &awss3.PutObjectLegalHoldInput{Bucket: lb, Key: aws.String("c"),
		LegalHold: &types.ObjectLockLegalHold{Status: types.ObjectLockLegalHoldStatusOn}})
	step("PutObjectLegalHold", err, "")
	lh, err := c.GetObjectLegalHold(ctx, &awss3.GetObjectLegalHoldInput{Bucket: lb, Key: aws.String("c")})
	if err == nil && lh.LegalHold != nil {
		step("GetObjectLegalHold", err, string(lh.LegalHold.Status))
	} else {
		step("GetObjectLegalHold", err, "")
	}
	_, err = c.PutBucketVersioning(ctx, &awss3.PutBucketVersioningInput{Bucket: lb,
		VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusSuspended}})
	step("PutBucketVersioning(Suspended, lock)", err, "")
	return out
}

// wantVersioning is what tristore answers, step by step (the AWS
// documented behaviour; see docs/s3.md for where peers differ).
var wantVersioning = []string{
	"CreateBucket: ok ",
	"GetBucketVersioning(never): ok ",
	"PutObject(unversioned): ok ",
	"PutBucketVersioning(Enabled): ok ",
	"GetBucketVersioning: ok Enabled",
	"PutObject v1: ok true",
	"PutObject v2: ok true",
	"GetObject v1: ok v1",
	"GetObject null: ok v0",
	"GetObject bogus version: 400 InvalidArgument",
	"DeleteObject: ok true true",
	"GetObject deleted: 404 NoSuchKey",
	"HeadObject marker: 405 MethodNotAllowed",
	"ListObjectVersions: ok versions=3 markers=1 latest=marker",
	"ListObjectVersions pages: entries=4",
	"ListObjectVersions version-id-marker alone: 400 InvalidArgument",
	"CopyObject from v1: ok true",
	"GetObject copy: ok v1",
	"DeleteObject marker by id: ok true",
	"GetObject after marker removed: ok v2",
	"DeleteObject v2 by id: ok ",
	"GetObject after v2 removed: ok v1",
	"GetObject removed v2: 404 NoSuchVersion",
	"PutBucketVersioning(Suspended): ok ",
	"PutObject suspended: ok ",
	"GetObject null after suspended PUT: ok s",
	"DeleteBucket with versions: 409 BucketNotEmpty",
	"PutObjectLockConfiguration(no lock bucket): 409 InvalidBucketState",
	"CreateBucket(lock): ok ",
	"GetBucketVersioning(lock): ok Enabled",
	"PutObjectLockConfiguration: ok ",
	"GetObjectLockConfiguration: ok GOVERNANCE1",
	"PutObject(lock bucket): ok ",
	"GetObjectRetention(default): ok GOVERNANCE",
	"DeleteObject GOVERNANCE version: 403 AccessDenied",
	"DeleteObject GOVERNANCE version with bypass: ok ",
	"PutObject COMPLIANCE: ok ",
	"PutObjectRetention shorten COMPLIANCE: 403 AccessDenied",
	"DeleteObject COMPLIANCE version: 403 AccessDenied",
	"PutObjectRetention past date: 400 InvalidArgument",
	"PutObjectLegalHold: ok ",
	"GetObjectLegalHold: ok ON",
	"PutBucketVersioning(Suspended, lock): 409 InvalidBucketState",
}

func diffLines(got, want []string) string {
	var b strings.Builder
	for i := 0; i < len(got) || i < len(want); i++ {
		var g, w string
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if g != w {
			fmt.Fprintf(&b, "  got  %q\n  want %q\n", g, w)
		}
	}
	return b.String()
}

// TestVersioningSDK runs the sequence against tristore with aws-sdk-go-v2.
func TestVersioningSDK(t *testing.T) {
	srv := startServer(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	got := versioningSequence(ctx, sdkClient(srv.endpoint, rootAK, rootSK), "sdk")
	if d := diffLines(got, wantVersioning); d != "" {
		t.Fatalf("versioning sequence differs:\n%s", d)
	}
}

// knownVersioningDiffs are the steps where versitygw (v1.8.0, posix
// backend with --versioning-dir) answers differently from tristore, with
// the reason; docs/s3.md lists them. Any other difference fails.
var knownVersioningDiffs = map[string]string{
	"ListObjectVersions pages":                   "versitygw repeats entries when paging with max-keys=1 (the paginator is cut at 20 pages); S3 pages through each version once",
	"ListObjectVersions version-id-marker alone": "S3 documents InvalidArgument (a version-id-marker needs a key-marker); versitygw ignores it",
	"GetObject after marker removed":             "S3 makes the newest remaining version current (v2); versitygw serves the null version written before versioning was enabled",
	"GetObject after v2 removed":                 "as above: S3 promotes v1, versitygw keeps serving the null version",
	"GetObjectRetention(default)":                "S3 applies the bucket's default retention to new versions; versitygw stores none (and answers 400, not S3's 404)",
	"PutBucketVersioning(Suspended, lock)":       "S3's InvalidBucketState is 409 Conflict; versitygw sends 400",
}

// TestVersioningVersitygw runs the same sequence against versitygw and
// compares status codes, error codes and contents step by step.
func TestVersioningVersitygw(t *testing.T) {
	bin := testutil.NeedCmd(t, "versitygw")
	srv := startServer(t, false)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	data, vdir := t.TempDir(), t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--access", rootAK, "--secret", rootSK, "--port", "127.0.0.1:"+strconv.Itoa(port),
		"--quiet", "posix", "--versioning-dir", vdir, data)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	up := false
	for range 100 {
		if c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), time.Second); err == nil {
			c.Close()
			up = true
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if !up {
		t.Fatal("versitygw did not start listening")
	}
	ours := versioningSequence(ctx, sdkClient(srv.endpoint, rootAK, rootSK), "diff")
	peer := versioningSequence(ctx, sdkClient("http://127.0.0.1:"+strconv.Itoa(port), rootAK, rootSK), "diff")
	var unexplained []string
	for i := range ours {
		if i >= len(peer) || ours[i] == peer[i] {
			continue
		}
		name, _, _ := strings.Cut(ours[i], ":")
		if why, ok := knownVersioningDiffs[name]; ok {
			t.Logf("known difference %q: tristore %q, versitygw %q (%s)", name, ours[i], peer[i], why)
			continue
		}
		unexplained = append(unexplained, fmt.Sprintf("%s\n    versitygw: %s", ours[i], peer[i]))
	}
	if len(unexplained) > 0 {
		t.Fatalf("unexplained differences from versitygw:\n%s", strings.Join(unexplained, "\n"))
	}
}

// TestVersioningCLI lists versions with aws-cli (botocore) and rclone
// --s3-versions: the keys, version IDs and delete markers they show.
func TestVersioningCLI(t *testing.T) {
	awsBin := testutil.NeedCmd(t, "aws")
	rcBin := testutil.NeedCmd(t, "rclone")
	srv := startServer(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := sdkClient(srv.endpoint, rootAK, rootSK)
	b := aws.String("cli-ver")
	if _, err := c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: b}); err != nil {
		t.Fatal(err)
	}
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "AWS_") && !strings.HasPrefix(e, "RCLONE_") {
			env = append(env, e)
		}
	}
	env = append(env, "AWS_ACCESS_KEY_ID="+rootAK, "AWS_SECRET_ACCESS_KEY="+rootSK, "AWS_DEFAULT_REGION=us-east-1",
		"AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null",
		"RCLONE_CONFIG=/dev/null", "RCLONE_CONFIG_TS_TYPE=s3", "RCLONE_CONFIG_TS_PROVIDER=Other",
		"RCLONE_CONFIG_TS_ACCESS_KEY_ID="+rootAK, "RCLONE_CONFIG_TS_SECRET_ACCESS_KEY="+rootSK,
		"RCLONE_CONFIG_TS_ENDPOINT="+srv.endpoint, "RCLONE_CONFIG_TS_REGION=us-east-1", "RCLONE_CONFIG_TS_FORCE_PATH_STYLE=true")
	run := func(bin string, args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, bin, args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", bin, strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	ep := "--endpoint-url=" + srv.endpoint
	// aws-cli takes seconds to start on a loaded machine: one call, the
	// rest of the setup through the SDK.
	if _, err := c.PutBucketVersioning(ctx, &awss3.PutBucketVersioningInput{Bucket: b,
		VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled}}); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, body := range []string{"first", "second"} {
		p, err := c.PutObject(ctx, &awss3.PutObjectInput{Bucket: b, Key: aws.String("f.txt"), Body: strings.NewReader(body)})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, aws.ToString(p.VersionId))
	}
	if _, err := c.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: b, Key: aws.String("f.txt")}); err != nil {
		t.Fatal(err)
	}
	out := run(awsBin, ep, "s3api", "list-object-versions", "--bucket", *b, "--max-items", "10", "--page-size", "1")
	for _, want := range []string{ids[0], ids[1], `"DeleteMarkers"`, `"IsLatest": true`} {
		if !strings.Contains(out, want) {
			t.Fatalf("list-object-versions lacks %s:\n%s", want, out)
		}
	}
	// rclone: the deleted key's old versions appear with --s3-versions.
	if out := run(rcBin, "ls", "ts:"+*b); strings.Contains(out, "f.txt") {
		t.Fatalf("rclone ls shows a deleted key:\n%s", out)
	}
	out = run(rcBin, "ls", "--s3-versions", "ts:"+*b)
	if strings.Count(out, "f-v") != 2 {
		t.Fatalf("rclone --s3-versions ls: want two old versions of f.txt:\n%s", out)
	}
}

// TestVersionPermissions: a request naming a version needs
// s3:GetObjectVersion / s3:DeleteObjectVersion besides s3:GetObject /
// s3:DeleteObject, as in S3; a policy granting only the latter lets bob
// read and delete the current object but not a version.
func TestVersionPermissions(t *testing.T) {
	srv := startServer(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	alice, aliceSK, err := srv.users.Add("alice", false)
	if err != nil {
		t.Fatal(err)
	}
	bob, bobSK, err := srv.users.Add("bob", false)
	if err != nil {
		t.Fatal(err)
	}
	a, b := sdkClient(srv.endpoint, alice.AccessKey, aliceSK), sdkClient(srv.endpoint, bob.AccessKey, bobSK)
	bkt := aws.String("alice-versions")
	if _, err := a.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: bkt}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.PutBucketVersioning(ctx, &awss3.PutBucketVersioningInput{Bucket: bkt,
		VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled}}); err != nil {
		t.Fatal(err)
	}
	p, err := a.PutObject(ctx, &awss3.PutObjectInput{Bucket: bkt, Key: aws.String("doc"), Body: strings.NewReader("v1")})
	if err != nil {
		t.Fatal(err)
	}
	policy := `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"AWS":["bob"]},` +
		`"Action":["s3:GetObject","s3:DeleteObject"],"Resource":["arn:aws:s3:::alice-versions/*"]}]}`
	if _, err := a.PutBucketPolicy(ctx, &awss3.PutBucketPolicyInput{Bucket: bkt, Policy: aws.String(policy)}); err != nil {
		t.Fatal(err)
	}
	o, err := b.GetObject(ctx, &awss3.GetObjectInput{Bucket: bkt, Key: aws.String("doc")})
	if err != nil {
		t.Fatalf("bob GET current: %v", err)
	}
	o.Body.Close()
	if _, err := b.GetObject(ctx, &awss3.GetObjectInput{Bucket: bkt, Key: aws.String("doc"), VersionId: p.VersionId}); errCode(err) != "AccessDenied" {
		t.Fatalf("bob GET by version without s3:GetObjectVersion: %v", err)
	}
	if _, err := b.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: bkt, Key: aws.String("doc"), VersionId: p.VersionId}); errCode(err) != "AccessDenied" {
		t.Fatalf("bob DELETE by version without s3:DeleteObjectVersion: %v", err)
	}
	if _, err := b.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: bkt, Key: aws.String("doc")}); err != nil {
		t.Fatalf("bob DELETE (a marker): %v", err)
	}
	if o, err := a.GetObject(ctx, &awss3.GetObjectInput{Bucket: bkt, Key: aws.String("doc"), VersionId: p.VersionId}); err != nil {
		t.Fatalf("the version bob could not delete: %v", err)
	} else {
		o.Body.Close()
	}
}
