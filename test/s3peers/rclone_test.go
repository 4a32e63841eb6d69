package s3peers

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tristore/tristore/internal/testutil"
)

// TestRclone copies and syncs a generated tree (small files plus files
// over the 5 MiB multipart cutoff) with rclone, then has rclone compare
// sizes and hashes (and, with --download, the bytes themselves).
func TestRclone(t *testing.T) {
	rc := testutil.NeedCmd(t, "rclone")
	srv := startServer(t, false)
	src := t.TempDir()
	write := func(rel string, n int) {
		p := filepath.Join(src, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		b := make([]byte, n)
		rand.Read(b)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 24; i++ {
		write(fmt.Sprintf("d%d/sub%d/f%02d.dat", i%3, i%2, i), 1000+i*4099)
	}
	write("big/eleven.bin", 11<<20)
	write("big/seven.bin", 7<<20+13)
	write("empty/zero", 0)

	// AWS_CA_BUNDLE (set on some machines) makes rclone's AWS SDK fail on
	// a plain-HTTP transport, and AWS_* profiles must not leak in.
	var env []string
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "AWS_") && !strings.HasPrefix(e, "RCLONE_") {
			env = append(env, e)
		}
	}
	env = append(env,
		"RCLONE_CONFIG=/dev/null",
		"RCLONE_CONFIG_TS_TYPE=s3",
		"RCLONE_CONFIG_TS_PROVIDER=Other",
		"RCLONE_CONFIG_TS_ACCESS_KEY_ID="+rootAK,
		"RCLONE_CONFIG_TS_SECRET_ACCESS_KEY="+rootSK,
		"RCLONE_CONFIG_TS_ENDPOINT="+srv.endpoint,
		"RCLONE_CONFIG_TS_REGION=us-east-1",
		"RCLONE_CONFIG_TS_FORCE_PATH_STYLE=true",
	)
	run := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
		defer cancel()
		args = append(args, "--s3-upload-cutoff", "5M", "--s3-chunk-size", "5M", "--retries", "1", "--low-level-retries", "2", "--contimeout", "10s", "--timeout", "30s")
		cmd := exec.CommandContext(ctx, rc, args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("rclone %s: %v\n%s", strings.Join(args, " "), err, out)
		}
		return string(out)
	}
	run("mkdir", "ts:rclone-bucket")
	run("copy", src, "ts:rclone-bucket/tree")
	run("check", src, "ts:rclone-bucket/tree")

	// Change the tree: remove, add, modify; sync must mirror it exactly.
	os.Remove(filepath.Join(src, "d0/sub0/f00.dat"))
	write("new/added.dat", 5000)
	write("d1/sub1/f01.dat", 777)
	write("big/seven.bin", 6<<20)
	run("sync", src, "ts:rclone-bucket/tree")
	run("check", "--download", src, "ts:rclone-bucket/tree")
	ls := run("lsf", "-R", "ts:rclone-bucket/tree")
	if strings.Contains(ls, "f00.dat") || !strings.Contains(ls, "new/added.dat") {
		t.Fatalf("sync did not mirror the tree:\n%s", ls)
	}
	md5 := run("md5sum", "ts:rclone-bucket/tree/big")
	if !strings.Contains(md5, "eleven.bin") || !strings.Contains(md5, "seven.bin") {
		t.Fatalf("md5sum of multipart objects: %s", md5)
	}
}
