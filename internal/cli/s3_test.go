package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	s3client "github.com/tristore/tristore/client/s3"
)

// TestS3Cp copies a multipart-sized file up and back through `tristore s3
// cp` against `tristore serve`, with credentials from the AWS variables,
// and checks the JSON summary, the content, and the failures.
func TestS3Cp(t *testing.T) {
	const ak, sk = "TRISTORES3CPCLI00001", "tristore-s3cp-cli-secret-001"
	ep := serveS3(t, "", ak, sk)
	t.Setenv("AWS_ACCESS_KEY_ID", ak)
	t.Setenv("AWS_SECRET_ACCESS_KEY", sk)
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	eng, err := s3client.New(s3client.Config{Endpoint: ep, AccessKey: ak, SecretKey: sk, PathStyle: true})
	if err != nil {
		t.Fatal(err)
	}
	bucket := "cpbucket"
	if _, err := eng.API().CreateBucket(context.Background(), &awss3.CreateBucketInput{Bucket: &bucket}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "src.bin")
	data := make([]byte, 3*(5<<20)+5)
	r := rand.New(rand.NewPCG(1, 2))
	for i := range data {
		data[i] = byte(r.Uint32())
	}
	if err := os.WriteFile(src, data, 0o644); err != nil {
		t.Fatal(err)
	}
	out, errOut, err := runCLI3(t, "s3", "cp", src, "s3://cpbucket/dir/", "--endpoint", ep,
		"--chunk-size", "5MiB", "--parallel", "3", "--json")
	if err != nil {
		t.Fatalf("upload: %v\n%s", err, errOut)
	}
	var res s3client.Result
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("json summary %q: %v", out, err)
	}
	// ListMultipartUploads (is there an upload to resume?), Create, 4
	// parts, Complete.
	if res.Bytes != int64(len(data)) || res.Requests != 1+2+4 || res.BandwidthBps <= 0 {
		t.Errorf("upload summary %+v", res)
	}
	down := t.TempDir()
	out, errOut, err = runCLI3(t, "s3", "cp", "s3://cpbucket/dir/src.bin", down, "--endpoint", ep, "--chunk-size", "1MiB", "--parallel", "4", "--tail-split=false")
	if err != nil {
		t.Fatalf("download: %v\n%s", err, errOut)
	}
	if !strings.Contains(out, "17 requests") {
		t.Errorf("summary line %q (want 1 HEAD + 16 ranged GETs: no tail split)", out)
	}
	got, err := os.ReadFile(filepath.Join(down, "src.bin"))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("downloaded file differs (%v)", err)
	}

	// Failures: clear errors, non-zero exit, no partial file left.
	_, _, err = runCLI3(t, "s3", "cp", "s3://cpbucket/nope", filepath.Join(down, "nope"), "--endpoint", ep)
	if err == nil || !strings.Contains(err.Error(), "s3://cpbucket/nope") {
		t.Errorf("missing key: %v", err)
	}
	if ents, _ := os.ReadDir(down); len(ents) != 1 {
		t.Errorf("download dir holds %d entries, want only src.bin", len(ents))
	}
	_, _, err = runCLI3(t, "s3", "cp", src, "s3://nobucket/x", "--endpoint", ep)
	if err == nil || !strings.Contains(err.Error(), "NoSuchBucket") {
		t.Errorf("missing bucket: %v", err)
	}
	_, _, err = runCLI3(t, "s3", "cp", src, "s3://cpbucket/x", "--endpoint", ep, "--chunk-size", "64MiB", "--parallel", "32", "--max-memory", "1GiB")
	if err == nil || !strings.Contains(err.Error(), "max memory") {
		t.Errorf("memory bound: %v", err)
	}
	_, _, err = runCLI3(t, "s3", "cp", src, filepath.Join(dir, "other"))
	if err == nil || !strings.Contains(err.Error(), "s3://") {
		t.Errorf("two local paths: %v", err)
	}
}
