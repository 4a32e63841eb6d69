package s3peers

import (
	"bytes"
	"context"
	"io"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/tristore/tristore/internal/testutil"
)

// TestFullDisk serves a 16 MiB tmpfs: a PUT that does not fit gets 507
// InsufficientStorage, leaves no temp file, the acknowledged objects are
// unchanged and the server keeps serving (reads, and writes once space is freed).
func TestFullDisk(t *testing.T) {
	testutil.NeedRoot(t, "mounts a small tmpfs to fill")
	mnt := t.TempDir()
	testutil.MountTmpfs(t, mnt, "16m", "tristore-s3-fulldisk")
	// Registered after startServer's cleanups would be too late: cleanups run
	// last-in first-out, so register the unmount first (it then runs last).
	t.Cleanup(func() {
		if out, err := testutil.TryRun(time.Minute, "umount", mnt); err != nil {
			t.Errorf("%v %s", err, out)
		}
	})
	srv := startServerAt(t, mnt)
	c := sdkClient(srv.endpoint, rootAK, rootSK)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	bkt := aws.String("full")
	if _, err := c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: bkt}); err != nil {
		t.Fatal(err)
	}
	keep := bytes.Repeat([]byte("k"), 6<<20)
	if _, err := c.PutObject(ctx, &awss3.PutObjectInput{Bucket: bkt, Key: aws.String("keep"), Body: bytes.NewReader(keep)}); err != nil {
		t.Fatal(err)
	}
	_, err := c.PutObject(ctx, &awss3.PutObjectInput{Bucket: bkt, Key: aws.String("too-big"), Body: bytes.NewReader(make([]byte, 12<<20))})
	if errCode(err) != "InsufficientStorage" || httpStatus(err) != 507 {
		t.Fatalf("PUT on a full disk: %v", err)
	}
	// Replacing the kept object with something that does not fit keeps the old one.
	_, err = c.PutObject(ctx, &awss3.PutObjectInput{Bucket: bkt, Key: aws.String("keep"), Body: bytes.NewReader(make([]byte, 12<<20))})
	if errCode(err) != "InsufficientStorage" {
		t.Fatalf("overwrite on a full disk: %v", err)
	}
	o, err := c.GetObject(ctx, &awss3.GetObjectInput{Bucket: bkt, Key: aws.String("keep")})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(o.Body)
	o.Body.Close()
	if !bytes.Equal(got, keep) {
		t.Fatal("acknowledged object changed by a failed PUT")
	}
	filepath.WalkDir(mnt, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), ".tristore-tmp") {
			t.Errorf("temp file left after ENOSPC: %s", p)
		}
		return nil
	})
	if _, err := c.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: bkt, Key: aws.String("keep")}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutObject(ctx, &awss3.PutObjectInput{Bucket: bkt, Key: aws.String("fits-now"), Body: bytes.NewReader(make([]byte, 8<<20))}); err != nil {
		t.Fatalf("PUT after freeing space: %v", err)
	}
}
