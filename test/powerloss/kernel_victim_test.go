package powerloss_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
)

// TestKernelOverwriteInFlight: on ext4 without a journal, an overwriting
// PUT whose rename is not durable yet (the faultsync build skips the
// directory fsync after it, which holds that window open) must leave the
// key with its old content or its new one after a power cut. A rename
// over a file drops the old inode's link count to 0 in the inode table
// block at once; the file fsyncs of other PUTs write that block (16
// inodes share it), so the disk holds the old name pointing at a deleted
// inode, and e2fsck clears the name: the key is gone. store/posix gives
// the old file a second name first there (victim.go), so the count never
// drops to 0 before the rename is durable. Without that, the keys came
// back absent (or, the old inode number reused by a later PUT, holding
// that PUT's content).
func TestKernelOverwriteInFlight(t *testing.T) {
	bin := faultsyncBin(t)
	d := newKDisk(t, "^has_journal")
	r := kernelRig(t, d, bin)
	r.env = []string{"TRISTORE_FAULT_SKIP=put-dir"}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv := r.start(ctx)
	c := s3Client(srv.addrs["s3"])
	if _, err := c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String(s3Bucket)}); err != nil {
		t.Fatalf("CreateBucket: %v", err)
	}
	put := func(key string, body []byte) {
		t.Helper()
		if _, err := c.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String(s3Bucket), Key: aws.String(key), Body: bytes.NewReader(body)}); err != nil {
			t.Fatalf("PUT %s: %v", key, err)
		}
	}
	const keys = 8
	olds, news := map[string][]byte{}, map[string][]byte{}
	for i := range keys {
		k := fmt.Sprintf("o/k%d", i)
		olds[k], news[k] = payload(uint64(10+i), 3000+i*1000), payload(uint64(50+i), 5000+i*1000)
		put(k, olds[k])
	}
	syncfs(t, d.mnt) // the old objects are durable
	for k, b := range news {
		put(k, b) // renamed over the old file; the rename not made durable
	}
	// Other PUTs' file fsyncs write the inode table blocks around the
	// replaced inodes (new files take the lowest free inode numbers).
	for i := range 48 {
		put(fmt.Sprintf("n/x%d", i), payload(uint64(100+i), 700))
	}
	r.crash()
	srv = r.start(ctx)
	c = s3Client(srv.addrs["s3"])
	bad := 0
	for k := range olds {
		got := []byte(absent)
		out, err := c.GetObject(ctx, &awss3.GetObjectInput{Bucket: aws.String(s3Bucket), Key: aws.String(k)})
		if err == nil {
			got, err = io.ReadAll(out.Body)
			out.Body.Close()
		}
		switch {
		case err == nil && bytes.Equal(got, olds[k]):
		case err == nil && bytes.Equal(got, news[k]):
		default:
			bad++
			t.Errorf("%s after the cut of its overwrite in flight: %d bytes sum %s (%v); old %s, new %s", k, len(got), sum(got), err, sum(olds[k]), sum(news[k]))
		}
	}
	t.Logf("%d of %d keys wrong", bad, keys)
}
