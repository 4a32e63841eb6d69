package cloudfs

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
)

// TestPlain: an existing bucket of ordinary objects mounts as a tree:
// listing, ranged reads, a new file and a whole rewrite PUT at close,
// mv by copy (EXDEV), rm, mkdir/rmdir; and the refusals.
func TestPlain(t *testing.T) {
	r := newRig(t)
	api := r.e.API()
	put := func(key string, b []byte) {
		t.Helper()
		if _, err := api.PutObject(context.Background(), &awss3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(b)}); err != nil {
			t.Fatal(err)
		}
	}
	get := func(key string) []byte {
		t.Helper()
		out, err := api.GetObject(context.Background(), &awss3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
		if err != nil {
			t.Fatalf("get %s: %v", key, err)
		}
		defer out.Body.Close()
		b, _ := io.ReadAll(out.Body)
		return b
	}
	big := make([]byte, 3<<20+17)
	for i := range big {
		big[i] = byte(i * 7)
	}
	put("data/top.txt", []byte("top\n"))
	put("data/a/b/c.txt", []byte("deep\n"))
	put("data/big.bin", big)
	put("other/x", []byte("not under the prefix"))

	p, err := NewPlain(api, PlainOptions{Bucket: bucket, Prefix: "data", Spool: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	srv, err := p.Mount(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if srv.Unmount() != nil {
			syscall.Unmount(dir, syscall.MNT_DETACH)
		}
	})
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	if strings.Join(names, ",") != "a,big.bin,top.txt" {
		t.Fatalf("root lists %v", names)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "a/b/c.txt")); err != nil || string(b) != "deep\n" {
		t.Fatalf("deep file: %q %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "big.bin")); err != nil || !bytes.Equal(b, big) {
		t.Fatalf("big file: %d bytes, %v", len(b), err)
	}
	// A new file is PUT at close.
	if err := os.WriteFile(filepath.Join(dir, "new.txt"), []byte("hello"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b := get("data/new.txt"); string(b) != "hello" {
		t.Fatalf("new object holds %q", b)
	}
	// A write into the middle of an existing object rewrites it whole.
	f, err := os.OpenFile(filepath.Join(dir, "big.bin"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteAt([]byte("PATCH"), 1<<20)
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	copy(big[1<<20:], "PATCH")
	if b := get("data/big.bin"); !bytes.Equal(b, big) {
		t.Fatal("patched object differs")
	}
	// O_TRUNC replaces.
	if err := os.WriteFile(filepath.Join(dir, "top.txt"), []byte("new top"), 0o644); err != nil {
		t.Fatal(err)
	}
	if b := get("data/top.txt"); string(b) != "new top" {
		t.Fatalf("truncated rewrite: %q", b)
	}
	// rename is EXDEV (mv copies), links and chmod are refused.
	if err := os.Rename(filepath.Join(dir, "new.txt"), filepath.Join(dir, "renamed")); !errors.Is(err, syscall.EXDEV) {
		t.Fatalf("rename: %v", err)
	}
	run(t, dir, "mv", "new.txt", "a/moved.txt")
	if b := get("data/a/moved.txt"); string(b) != "hello" {
		t.Fatalf("mv result %q", b)
	}
	if err := os.Symlink("x", filepath.Join(dir, "l")); !errors.Is(err, syscall.EPERM) {
		t.Fatalf("symlink: %v", err)
	}
	if err := os.Chmod(filepath.Join(dir, "top.txt"), 0o600); !errors.Is(err, syscall.EPERM) {
		t.Fatalf("chmod: %v", err)
	}
	// Directories.
	if err := os.Mkdir(filepath.Join(dir, "nd"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Rmdir(filepath.Join(dir, "a")); !errors.Is(err, syscall.ENOTEMPTY) {
		t.Fatalf("rmdir non-empty: %v", err)
	}
	if err := os.Remove(filepath.Join(dir, "nd")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "a/moved.txt")); err != nil {
		t.Fatal(err)
	}
	if _, err := api.HeadObject(context.Background(), &awss3.HeadObjectInput{Bucket: aws.String(bucket), Key: aws.String("data/a/moved.txt")}); err == nil {
		t.Fatal("removed object still there")
	}
	// An object replaced behind an open reader is ESTALE, not a mix.
	rf, err := os.Open(filepath.Join(dir, "big.bin"))
	if err != nil {
		t.Fatal(err)
	}
	defer rf.Close()
	rf.ReadAt(make([]byte, 10), 0)
	time.Sleep(10 * time.Millisecond)
	put("data/big.bin", bytes.Repeat([]byte{1}, len(big)))
	if _, err := rf.ReadAt(make([]byte, 10), 2<<20+5); !errors.Is(err, syscall.ESTALE) {
		t.Fatalf("read of a replaced object: %v", err)
	}
}
