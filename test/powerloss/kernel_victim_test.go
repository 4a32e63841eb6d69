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

	"github.com/tristore/tristore/client/nfs"
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

// TestKernelNFSRenameInFlight is TestKernelOverwriteInFlight for NFS
// RENAME over an existing file (the faultsync build skips the directory
// fsyncs of the commit, nfs-dir, holding the window open; the replaced
// inode's retire and other files' fsyncs write its inode table block).
// After the cut each target name must hold its old file or the one
// renamed over it. vfs gives the replaced file a second name until the
// rename is durable (keepReplaced); without it the names came back absent.
func TestKernelNFSRenameInFlight(t *testing.T) {
	bin := faultsyncBin(t)
	d := newKDisk(t, "^has_journal")
	r := kernelRig(t, d, bin)
	r.env = []string{"TRISTORE_FAULT_SKIP=nfs-dir"}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	srv := r.start(ctx)
	c, err := nfsDial(ctx, srv.addrs["nfs"])
	if err != nil {
		t.Fatalf("nfs mount: %v", err)
	}
	defer c.Close()
	mode := uint32(0o644)
	mkdir := func(name string) nfs.FH {
		fh, _, err := c.Mkdir(ctx, c.Root(), name, nfs.SetAttr{})
		if err != nil {
			t.Fatalf("MKDIR %s: %v", name, err)
		}
		return fh
	}
	create := func(dir nfs.FH, name string, body []byte) {
		fh, _, err := c.Create(ctx, dir, name, nfs.Guarded, nfs.SetAttr{Mode: &mode}, nfs.Verifier{})
		if err != nil {
			t.Fatalf("CREATE %s: %v", name, err)
		}
		if _, err := c.Write(ctx, fh, 0, body, nfs.FileSync); err != nil {
			t.Fatalf("WRITE %s: %v", name, err)
		}
	}
	const files = 8
	rd := mkdir("r")
	olds, news := map[string][]byte{}, map[string][]byte{}
	for i := range files {
		a := fmt.Sprintf("a%d", i)
		olds[a], news[a] = payload(uint64(10+i), 3000+i*1000), payload(uint64(50+i), 5000+i*1000)
		create(rd, a, olds[a])
		create(rd, fmt.Sprintf("b%d", i), news[a])
	}
	syncfs(t, d.mnt) // all of it durable
	for i := range files {
		if err := c.Rename(ctx, rd, fmt.Sprintf("b%d", i), rd, fmt.Sprintf("a%d", i)); err != nil {
			t.Fatalf("RENAME b%d a%d: %v", i, i, err)
		}
	}
	nd := mkdir("n")
	for i := range 32 {
		create(nd, fmt.Sprintf("x%d", i), payload(uint64(100+i), 700))
	}
	c.Close()
	r.crash()
	srv = r.start(ctx)
	if c, err = nfsDial(ctx, srv.addrs["nfs"]); err != nil {
		t.Fatalf("nfs mount after the cut: %v", err)
	}
	bad := 0
	for a := range olds {
		fh, _, err := c.LookupPath(ctx, "r/"+a)
		var got []byte
		if err == nil {
			got, err = c.ReadFile(ctx, fh)
		}
		if err != nil || !bytes.Equal(got, olds[a]) && !bytes.Equal(got, news[a]) {
			bad++
			t.Errorf("r/%s after the cut of a RENAME over it in flight: %d bytes sum %s (%v); old %s, new %s", a, len(got), sum(got), err, sum(olds[a]), sum(news[a]))
		}
	}
	t.Logf("%d of %d names wrong", bad, files)
}
