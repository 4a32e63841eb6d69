package s3peers

import (
	"context"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/tristore/tristore/frontend/s3"
	"github.com/tristore/tristore/internal/testutil"
)

func lifecycleDay(d time.Duration) func(*s3.Options) {
	return func(o *s3.Options) { o.LifecycleDay = d }
}

// TestSDKCORS: aws-sdk-go-v2 sets and reads CORS rules; a browser-shaped
// preflight (raw HTTP, unsigned) is answered from them, and an actual
// request from an allowed origin carries Access-Control-* headers even
// when it is refused (unsigned, so 403).
func TestSDKCORS(t *testing.T) {
	srv := startServer(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := sdkClient(srv.endpoint, rootAK, rootSK)
	bkt := aws.String("sdk-cors")
	if _, err := c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: bkt}); err != nil {
		t.Fatal(err)
	}
	rule := types.CORSRule{AllowedOrigins: []string{"http://127.0.0.1:*"}, AllowedMethods: []string{"GET", "HEAD"},
		AllowedHeaders: []string{"range"}, ExposeHeaders: []string{"Content-Range"}, MaxAgeSeconds: aws.Int32(30)}
	if _, err := c.PutBucketCors(ctx, &awss3.PutBucketCorsInput{Bucket: bkt, CORSConfiguration: &types.CORSConfiguration{CORSRules: []types.CORSRule{rule}}}); err != nil {
		t.Fatal(err)
	}
	got, err := c.GetBucketCors(ctx, &awss3.GetBucketCorsInput{Bucket: bkt})
	if err != nil || len(got.CORSRules) != 1 || got.CORSRules[0].AllowedOrigins[0] != "http://127.0.0.1:*" || aws.ToInt32(got.CORSRules[0].MaxAgeSeconds) != 30 {
		t.Fatalf("GetBucketCors: %+v %v", got, err)
	}
	_, err = c.PutBucketCors(ctx, &awss3.PutBucketCorsInput{Bucket: bkt, CORSConfiguration: &types.CORSConfiguration{CORSRules: []types.CORSRule{
		{AllowedOrigins: []string{"*"}, AllowedMethods: []string{"GET"}, AllowedHeaders: []string{"**"}}}}})
	if errCode(err) != "InvalidRequest" {
		t.Fatalf("two wildcards: %v", err)
	}
	do := func(method, origin string, hdr map[string]string) *http.Response {
		req, _ := http.NewRequestWithContext(ctx, method, srv.endpoint+"/sdk-cors/page.html", nil)
		req.Header.Set("Origin", origin)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res
	}
	res := do("OPTIONS", "http://127.0.0.1:8080", map[string]string{"Access-Control-Request-Method": "GET", "Access-Control-Request-Headers": "Range"})
	if res.StatusCode != 200 || res.Header.Get("Access-Control-Allow-Origin") != "http://127.0.0.1:8080" || res.Header.Get("Access-Control-Allow-Headers") != "range" {
		t.Fatalf("preflight: %d %v", res.StatusCode, res.Header)
	}
	if res := do("OPTIONS", "http://localhost:8080", map[string]string{"Access-Control-Request-Method": "GET"}); res.StatusCode != 403 {
		t.Fatalf("preflight from another origin: %d", res.StatusCode)
	}
	if res := do("OPTIONS", "http://127.0.0.1:8080", map[string]string{"Access-Control-Request-Method": "PUT"}); res.StatusCode != 403 {
		t.Fatalf("preflight for PUT: %d", res.StatusCode)
	}
	if res := do("GET", "http://127.0.0.1:8080", nil); res.StatusCode != 403 || res.Header.Get("Access-Control-Expose-Headers") != "Content-Range" {
		t.Fatalf("unsigned GET from an allowed origin: %d %v", res.StatusCode, res.Header)
	}
}

// TestSDKLifecycleRestart: a lifecycle configuration set with
// aws-sdk-go-v2 survives a restart and is enforced by the restarted
// server (with a 300 ms day): the expired object goes, the others stay.
func TestSDKLifecycleRestart(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	bkt := aws.String("sdk-lc")
	t.Run("configure", func(t *testing.T) {
		srv := startServerIn(t, dir, false, lifecycleDay(time.Hour))
		c := sdkClient(srv.endpoint, rootAK, rootSK)
		if _, err := c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: bkt}); err != nil {
			t.Fatal(err)
		}
		for _, k := range []string{"cache/1", "cache/2", "data/1"} {
			if _, err := c.PutObject(ctx, &awss3.PutObjectInput{Bucket: bkt, Key: aws.String(k), Body: strings.NewReader(k)}); err != nil {
				t.Fatal(err)
			}
		}
		_, err := c.PutBucketLifecycleConfiguration(ctx, &awss3.PutBucketLifecycleConfigurationInput{Bucket: bkt,
			LifecycleConfiguration: &types.BucketLifecycleConfiguration{Rules: []types.LifecycleRule{{
				ID: aws.String("cache"), Status: types.ExpirationStatusEnabled,
				Filter:     &types.LifecycleRuleFilter{Prefix: aws.String("cache/")},
				Expiration: &types.LifecycleExpiration{Days: aws.Int32(1)},
			}}}})
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.PutBucketLifecycleConfiguration(ctx, &awss3.PutBucketLifecycleConfigurationInput{Bucket: bkt,
			LifecycleConfiguration: &types.BucketLifecycleConfiguration{Rules: []types.LifecycleRule{{
				ID: aws.String("bad"), Status: types.ExpirationStatusEnabled,
				Filter:     &types.LifecycleRuleFilter{Prefix: aws.String("data/")},
				Expiration: &types.LifecycleExpiration{Date: aws.Time(time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC))},
			}}}})
		if errCode(err) != "InvalidArgument" {
			t.Fatalf("Date not at midnight: %v", err)
		}
	})
	srv := startServerIn(t, dir, false, lifecycleDay(300*time.Millisecond))
	c := sdkClient(srv.endpoint, rootAK, rootSK)
	lc, err := c.GetBucketLifecycleConfiguration(ctx, &awss3.GetBucketLifecycleConfigurationInput{Bucket: bkt})
	if err != nil || len(lc.Rules) != 1 || aws.ToString(lc.Rules[0].ID) != "cache" {
		t.Fatalf("after restart: %+v %v", lc, err)
	}
	exists := func(k string) bool {
		_, err := c.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: bkt, Key: aws.String(k)})
		return err == nil
	}
	for deadline := time.Now().Add(15 * time.Second); exists("cache/1") || exists("cache/2"); {
		if time.Now().After(deadline) {
			t.Fatal("cache/ objects not expired by the restarted server")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if !exists("data/1") {
		t.Fatal("data/1 expired: no rule selects it")
	}
}

// TestBoto3CORSLifecycle runs testdata/boto3_cors_lifecycle.py.
func TestBoto3CORSLifecycle(t *testing.T) {
	py := testutil.NeedPython(t, "boto3")
	srv := startServer(t, false, lifecycleDay(300*time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, "testdata/boto3_cors_lifecycle.py")
	cmd.Env = append(os.Environ(), "ENDPOINT="+srv.endpoint, "AWS_ACCESS_KEY_ID="+rootAK, "LIFECYCLE_DAY_S=0.3",
		"AWS_SECRET_ACCESS_KEY="+rootSK, "AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "OK") {
		t.Fatalf("boto3 CORS/lifecycle script failed: %v\n%s", err, out)
	}
}

// TestServeLifecycleDayAWSCLI: the documented way to speed the lifecycle
// clock up, through the real binary: `TRISTORE_LIFECYCLE_DAY=300ms
// tristore serve`, a rule set with aws-cli, an object copied in with
// aws-cli expires about a day later; the server logs it at INFO.
func TestServeLifecycleDayAWSCLI(t *testing.T) {
	awsCLI := testutil.NeedCmd(t, "aws")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin := testutil.TristoreBin(ctx, t)
	s := startServe(t, bin, t.TempDir(), []string{"TRISTORE_ACCESS_KEY=" + rootAK, "TRISTORE_SECRET_KEY=" + rootSK, "TRISTORE_LIFECYCLE_DAY=300ms"})
	defer s.stop(t)
	endpoint := "http://" + s.addrs["s3"]
	env := append(os.Environ(), "AWS_ACCESS_KEY_ID="+rootAK, "AWS_SECRET_ACCESS_KEY="+rootSK, "AWS_DEFAULT_REGION=us-east-1",
		"AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null")
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.CommandContext(ctx, awsCLI, append([]string{"--endpoint-url", endpoint}, args...)...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("aws %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	run("s3", "mb", "s3://cli-lc")
	src := t.TempDir() + "/f.txt"
	if err := os.WriteFile(src, []byte("short-lived"), 0o644); err != nil {
		t.Fatal(err)
	}
	run("s3api", "put-bucket-lifecycle-configuration", "--bucket", "cli-lc", "--lifecycle-configuration",
		`{"Rules":[{"ID":"tmp","Status":"Enabled","Filter":{"Prefix":"tmp/"},"Expiration":{"Days":1}}]}`)
	if out := run("s3api", "get-bucket-lifecycle-configuration", "--bucket", "cli-lc"); !strings.Contains(out, `"Days": 1`) {
		t.Fatalf("get-bucket-lifecycle-configuration: %s", out)
	}
	run("s3", "cp", "--no-progress", src, "s3://cli-lc/tmp/f.txt")
	run("s3", "cp", "--no-progress", src, "s3://cli-lc/keep/f.txt")
	c := sdkClient(endpoint, rootAK, rootSK)
	for deadline := time.Now().Add(30 * time.Second); ; {
		_, err := c.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: aws.String("cli-lc"), Key: aws.String("tmp/f.txt")})
		if err != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("tmp/f.txt not expired with TRISTORE_LIFECYCLE_DAY=300ms\n%s", s.Log())
		}
		time.Sleep(50 * time.Millisecond)
	}
	if out := run("s3", "ls", "--recursive", "s3://cli-lc"); !strings.Contains(out, "keep/f.txt") || strings.Contains(out, "tmp/f.txt") {
		t.Fatalf("after expiry: %s", out)
	}
	if !strings.Contains(s.Log(), "lifecycle: expired object") {
		t.Errorf("no INFO line for the expiry in the log:\n%s", s.Log())
	}
}
