package crossview

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/tristore/tristore/client/nfs"
	"github.com/tristore/tristore/internal/testutil"
)

// TestNFSReadCacheAcrossViews: the NFS server keeps files open between
// READs and WRITEs (vfs/filecache.go). A file replaced by an overwriting S3 PUT,
// removed by an S3 DELETE or removed by another NFS client must answer
// READs of its old handle with NFS3ERR_STALE at once, never with the old
// data through a cached descriptor, and a LOOKUP of the name must give the
// new file and its data. Each file is read twice first, so the READs after
// the change would find a cached descriptor.
func TestNFSReadCacheAcrossViews(t *testing.T) {
	testutil.NeedCmd(t, "go")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bin := testutil.TristoreBin(ctx, t)
	sv := testutil.StartServe(t, testutil.ServeOptions{Bin: bin, Data: t.TempDir(), On: []string{"s3", "nfs"},
		Env: []string{"TRISTORE_ACCESS_KEY=" + accessKey, "TRISTORE_SECRET_KEY=" + secretKey}})
	s3c := s3.New(s3.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String("http://" + sv.Addrs["s3"]),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(accessKey, secretKey, ""),
	})
	dial := func() *nfs.Client {
		t.Helper()
		c, err := nfs.Dial(ctx, sv.Addrs["nfs"], nfs.Options{})
		if err != nil {
			t.Fatalf("nfs dial: %v", err)
		}
		t.Cleanup(func() { c.Close() })
		if _, err := c.Mount(ctx, "/"); err != nil {
			t.Fatalf("nfs mount /: %v", err)
		}
		return c
	}
	nc, other := dial(), dial()
	if _, err := s3c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("readcache")}); err != nil {
		t.Fatalf("CreateBucket: %v", err)
	}
	put := func(key string, body []byte) {
		t.Helper()
		if _, err := s3c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("readcache"), Key: aws.String(key), Body: bytes.NewReader(body)}); err != nil {
			t.Fatalf("PutObject %s: %v", key, err)
		}
	}
	// readTwice looks key up, reads it twice (the second READ from the
	// cache) and returns its handle.
	readTwice := func(key string, want []byte) nfs.FH {
		t.Helper()
		fh, _, err := nc.LookupPath(ctx, "readcache/"+key)
		if err != nil {
			t.Fatalf("LOOKUP %s: %v", key, err)
		}
		for i := 0; i < 2; i++ {
			buf := make([]byte, len(want)+10)
			n, _, err := nc.Read(ctx, fh, 0, buf)
			if err != nil || !bytes.Equal(buf[:n], want) {
				t.Fatalf("READ %s (%d): %d bytes, %v; want the %d bytes written", key, i, n, err, len(want))
			}
		}
		return fh
	}
	stale := func(what string, fh nfs.FH, old []byte) {
		t.Helper()
		buf := make([]byte, len(old)+10)
		n, _, err := nc.Read(ctx, fh, 0, buf)
		if !errors.Is(err, nfs.ErrStale) {
			if err == nil && bytes.Equal(buf[:n], old) {
				t.Fatalf("%s: READ of the old handle served the old data (%d bytes) from a cached descriptor; want NFS3ERR_STALE", what, n)
			}
			t.Fatalf("%s: READ of the old handle: %d bytes, %v; want NFS3ERR_STALE", what, n, err)
		}
	}
	oldA := bytes.Repeat([]byte("A, first version\n"), 4096)
	newA := bytes.Repeat([]byte("a, second version\n"), 4096)
	oldB := bytes.Repeat([]byte("B, to be deleted\n"), 4096)
	oldC := bytes.Repeat([]byte("C, removed over NFS\n"), 4096)
	put("a", oldA)
	put("b", oldB)
	put("c", oldC)
	fa, fb, fc := readTwice("a", oldA), readTwice("b", oldB), readTwice("c", oldC)
	for i := 0; i < 2; i++ { // c is also cached open for writing
		if _, err := nc.Write(ctx, fc, 0, oldC[:100], nfs.Unstable); err != nil {
			t.Fatalf("WRITE c (%d): %v", i, err)
		}
	}

	// An overwriting PUT (a rename over the name).
	put("a", newA)
	stale("after an overwriting S3 PUT", fa, oldA)
	readTwice("a", newA)

	// An S3 DELETE.
	if _, err := s3c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("readcache"), Key: aws.String("b")}); err != nil {
		t.Fatalf("DeleteObject: %v", err)
	}
	stale("after an S3 DELETE", fb, oldB)
	if _, _, err := nc.LookupPath(ctx, "readcache/b"); !errors.Is(err, nfs.ErrNoEnt) {
		t.Fatalf("LOOKUP of the deleted object: %v, want NFS3ERR_NOENT", err)
	}

	// Another NFS client's REMOVE.
	dir, _, err := other.LookupPath(ctx, "readcache")
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Remove(ctx, dir, "c"); err != nil {
		t.Fatalf("REMOVE by the other client: %v", err)
	}
	stale("after another client's REMOVE", fc, oldC)
	if _, err := nc.Write(ctx, fc, 0, []byte("late"), nfs.Unstable); !errors.Is(err, nfs.ErrStale) {
		t.Fatalf("WRITE to the removed file's old handle: %v, want NFS3ERR_STALE", err)
	}
}
