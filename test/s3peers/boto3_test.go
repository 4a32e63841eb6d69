package s3peers

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/tristore/tristore/internal/testutil"
)

// TestBoto3 runs testdata/boto3_check.py (put/get/list/multipart/copy/delete).
func TestBoto3(t *testing.T) {
	py := testutil.NeedPython(t, "boto3")
	srv := startServer(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, "testdata/boto3_check.py")
	cmd.Env = append(os.Environ(), "ENDPOINT="+srv.endpoint, "AWS_ACCESS_KEY_ID="+rootAK,
		"AWS_SECRET_ACCESS_KEY="+rootSK, "WORKDIR="+t.TempDir(), "AWS_CONFIG_FILE=/dev/null",
		"AWS_SHARED_CREDENTIALS_FILE=/dev/null")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "OK") {
		t.Fatalf("boto3 script failed: %v\n%s", err, out)
	}
}

// TestBoto3Tagging runs testdata/boto3_tagging.py: S3's error codes for
// settings never set, object and bucket tagging, a '-' delimiter (V1 pages).
func TestBoto3Tagging(t *testing.T) {
	py := testutil.NeedPython(t, "boto3")
	srv := startServer(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, "testdata/boto3_tagging.py")
	cmd.Env = append(os.Environ(), "ENDPOINT="+srv.endpoint, "AWS_ACCESS_KEY_ID="+rootAK,
		"AWS_SECRET_ACCESS_KEY="+rootSK, "AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "OK") {
		t.Fatalf("boto3 tagging script failed: %v\n%s", err, out)
	}
}
