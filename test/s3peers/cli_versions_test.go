package s3peers

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/tristore/tristore/internal/testutil"
	"github.com/tristore/tristore/store/storetest"
)

// cliEnv is the environment for aws-cli and boto3 talking to srv as root,
// with no user configuration.
func cliEnv(srv *server) []string {
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "AWS_") {
			env = append(env, e)
		}
	}
	return append(env, "ENDPOINT="+srv.endpoint, "AWS_ACCESS_KEY_ID="+rootAK, "AWS_SECRET_ACCESS_KEY="+rootSK,
		"AWS_DEFAULT_REGION=us-east-1", "AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null")
}

// httpGet fetches url and returns status and body.
func httpGet(t *testing.T, ctx context.Context, url string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, b
}

// tamper changes the first character of the URL's signature parameter
// to another one of the same alphabet (hex digits and base64 share 0, 1).
func tamper(t *testing.T, url, param string) string {
	t.Helper()
	i := strings.Index(url, "?"+param+"=")
	if i < 0 {
		i = strings.Index(url, "&"+param+"=")
	}
	if i < 0 {
		t.Fatalf("no %s in %s", param, url)
	}
	j := i + len(param) + 2
	c := byte('0')
	if url[j] == '0' {
		c = '1'
	}
	return url[:j] + string(c) + url[j+1:]
}

// TestAWSCLIPresign: URLs presigned by aws-cli (`aws s3 presign`) with its
// default signature (aws-cli 1.x: SigV2 query auth, for a custom endpoint
// without a config file) and with `signature_version = s3v4` in its config
// file (SigV4) read an object, an odd key included, from tristore with a
// plain HTTP client; one changed character of the signature is 403.
// (aws-cli 1.46 with `signature_version = s3` in a config file presigns
// with SigV4 too, so the config-less run is the SigV2 one.)
func TestAWSCLIPresign(t *testing.T) {
	awsBin := testutil.NeedCmd(t, "aws")
	srv := startServer(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := sdkClient(srv.endpoint, rootAK, rootSK)
	if _, err := c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String("pre")}); err != nil {
		t.Fatal(err)
	}
	keys := map[string][]byte{"plain.txt": []byte("presigned plain"), "odd//key with space+plus": []byte("presigned odd")}
	for k, b := range keys {
		if _, err := c.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String("pre"), Key: aws.String(k), Body: bytes.NewReader(b)}); err != nil {
			t.Fatal(err)
		}
	}
	dir := t.TempDir()
	seen := map[string]bool{}
	for _, sig := range []string{"", "s3v4"} {
		env := cliEnv(srv)
		if sig != "" {
			cfg := dir + "/config-" + sig
			if err := os.WriteFile(cfg, []byte("[default]\ns3 =\n    signature_version = "+sig+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			env = append(env, "AWS_CONFIG_FILE="+cfg)
		}
		for k, want := range keys {
			cmd := exec.CommandContext(ctx, awsBin, "--endpoint-url", srv.endpoint, "s3", "presign", "s3://pre/"+k, "--expires-in", "300")
			cmd.Env = env
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("aws s3 presign %q (%q): %v", k, sig, err)
			}
			url := strings.TrimSpace(string(out))
			param := "X-Amz-Signature"
			switch {
			case strings.Contains(url, "X-Amz-Signature="):
				seen["v4"] = true
			case strings.Contains(url, "AWSAccessKeyId=") && strings.Contains(url, "Signature="):
				seen["v2"], param = true, "Signature"
			default:
				t.Fatalf("aws s3 presign (%q) gave neither a SigV2 nor a SigV4 URL: %s", sig, url)
			}
			if sig == "s3v4" && param != "X-Amz-Signature" || sig == "" && param != "Signature" {
				t.Fatalf("signature_version %s gave %s", sig, url)
			}
			if st, b := httpGet(t, ctx, url); st != 200 || !bytes.Equal(b, want) {
				t.Fatalf("GET presigned (%q) %q: %d %q", sig, k, st, b)
			}
			if st, _ := httpGet(t, ctx, tamper(t, url, param)); st != 403 {
				t.Fatalf("tampered URL (%q): %d, want 403", sig, st)
			}
		}
	}
	if !seen["v2"] || !seen["v4"] {
		t.Fatalf("signatures seen: %v", seen)
	}
}

// currentObjects lists bucket's current objects: key -> ETag.
func currentObjects(t *testing.T, ctx context.Context, c *awss3.Client, bucket string) map[string]string {
	return listAll(t, ctx, c, bucket, 7)
}

// versionsOf lists bucket's versions: key -> number of versions, and the
// number of delete markers.
func versionsOf(t *testing.T, ctx context.Context, c *awss3.Client, bucket string) (map[string]int, int) {
	t.Helper()
	n, markers := map[string]int{}, 0
	in := &awss3.ListObjectVersionsInput{Bucket: &bucket, MaxKeys: aws.Int32(9)}
	for page := 0; page < 1000; page++ {
		out, err := c.ListObjectVersions(ctx, in)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range out.Versions {
			n[aws.ToString(v.Key)]++
		}
		markers += len(out.DeleteMarkers)
		if !aws.ToBool(out.IsTruncated) {
			return n, markers
		}
		in.KeyMarker, in.VersionIdMarker = out.NextKeyMarker, out.NextVersionIdMarker
	}
	t.Fatal("ListObjectVersions did not end")
	return nil, 0
}

// TestAWSCLIVersionedSync: `aws s3 sync` between two versioned buckets.
// The source holds every odd key shape, some with older versions, and a
// key whose latest version is a delete marker; the destination gets
// exactly the source's current objects (same bytes, key by key), each as
// one version, and not the deleted key. After one key changes in the
// source, a second sync adds a second version of it in the destination
// and leaves the others alone.
func TestAWSCLIVersionedSync(t *testing.T) {
	awsBin := testutil.NeedCmd(t, "aws")
	srv := startServer(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := sdkClient(srv.endpoint, rootAK, rootSK)
	for _, b := range []string{"vsrc", "vdst"} {
		if _, err := c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String(b)}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.PutBucketVersioning(ctx, &awss3.PutBucketVersioningInput{Bucket: aws.String(b),
			VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled}}); err != nil {
			t.Fatal(err)
		}
	}
	put := func(bucket, key string, body []byte) {
		t.Helper()
		if _, err := c.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(body)}); err != nil {
			t.Fatalf("PutObject %q: %v", key, err)
		}
	}
	for i, k := range storetest.OddKeys {
		if i%3 == 0 {
			put("vsrc", k, []byte("an older version"))
		}
		put("vsrc", k, oddBody(i))
	}
	put("vsrc", "gone/key", []byte("deleted later"))
	if _, err := c.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: aws.String("vsrc"), Key: aws.String("gone/key")}); err != nil {
		t.Fatal(err)
	}
	sync := func() {
		t.Helper()
		cmd := exec.CommandContext(ctx, awsBin, "--endpoint-url", srv.endpoint, "s3", "sync", "--no-progress", "s3://vsrc", "s3://vdst")
		cmd.Env = cliEnv(srv)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("aws s3 sync: %v\n%s", err, out)
		}
	}
	check := func(changed string) {
		t.Helper()
		src, dst := currentObjects(t, ctx, c, "vsrc"), currentObjects(t, ctx, c, "vdst")
		if len(src) != len(storetest.OddKeys) {
			t.Fatalf("source lists %d current objects, want %d", len(src), len(storetest.OddKeys))
		}
		for k, etag := range src {
			if dst[k] != etag {
				t.Errorf("destination %q ETag %q, source %q", k, dst[k], etag)
			}
		}
		for k := range dst {
			if _, ok := src[k]; !ok {
				t.Errorf("destination has extra key %q", k)
			}
		}
		for i, k := range storetest.OddKeys {
			g, err := c.GetObject(ctx, &awss3.GetObjectInput{Bucket: aws.String("vdst"), Key: aws.String(k)})
			if err != nil {
				t.Fatalf("GetObject %q: %v", k, err)
			}
			body, _ := io.ReadAll(g.Body)
			g.Body.Close()
			want := oddBody(i)
			if k == changed {
				want = []byte("changed after the first sync, longer than before")
			}
			if !bytes.Equal(body, want) {
				t.Errorf("destination %q reads %q, want %q", k, body, want)
			}
		}
		n, markers := versionsOf(t, ctx, c, "vdst")
		for k, cnt := range n {
			want := 1
			if k == changed {
				want = 2
			}
			if cnt != want {
				t.Errorf("destination %q has %d versions, want %d", k, cnt, want)
			}
		}
		if markers != 0 {
			t.Errorf("destination has %d delete markers", markers)
		}
	}
	sync()
	check("")
	changed := "a//b"
	put("vsrc", changed, []byte("changed after the first sync, longer than before"))
	sync()
	check(changed)
	if t.Failed() {
		t.Log(fmt.Sprint(versionsOf(t, ctx, c, "vdst")))
	}
}
