package posix_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/tristore/tristore/internal/reqmemo"
	"github.com/tristore/tristore/store/posix"
)

func getCfg(t *testing.T, ctx context.Context, b *posix.Backend, bucket, name string) string {
	t.Helper()
	v, err := b.GetBucketConfig(ctx, bucket, name)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestBucketStateCache pins the bucket state cache (bucketcache.go): a
// settled bucket is read from disk once for any number of lookups; a
// change through the store is seen by the next lookup (the same request's
// included); a change by another process, as an xattr or as a fallback
// file, is seen by the next request; and one request sees one state.
func TestBucketStateCache(t *testing.T) {
	for _, noXattr := range []bool{false, true} {
		name := "xattr"
		if noXattr {
			name = "sidecar"
		}
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			dir := t.TempDir()
			b, err := posix.Open(dir, posix.Options{NoXattr: noXattr})
			if err != nil {
				t.Fatal(err)
			}
			defer b.Close()
			if err := b.CreateBucket(ctx, "bkt", "alice"); err != nil {
				t.Fatal(err)
			}
			if err := b.SetBucketConfig(ctx, "bkt", "versioning", "Enabled"); err != nil {
				t.Fatal(err)
			}
			settle()
			// Read once, then served from memory: 20 lookups of 4
			// documents and the record, one read from disk.
			r0 := b.BucketStateReads()
			for range 20 {
				if v := getCfg(t, ctx, b, "bkt", "versioning"); v != "Enabled" {
					t.Fatalf("versioning = %q", v)
				}
				for _, n := range []string{"policy", "ownershipControls", "object-lock"} {
					if v := getCfg(t, ctx, b, "bkt", n); v != "" {
						t.Fatalf("%s = %q", n, v)
					}
				}
				if bi, err := b.StatBucket(ctx, "bkt"); err != nil || bi.Owner != "alice" {
					t.Fatalf("StatBucket: %+v %v", bi, err)
				}
			}
			if n := b.BucketStateReads() - r0; n != 1 {
				t.Fatalf("100 lookups of a settled bucket read it %d times, want 1", n)
			}

			// A change through the store: seen at once, also by the
			// request that made it.
			req := reqmemo.With(ctx)
			if v := getCfg(t, req, b, "bkt", "policy"); v != "" {
				t.Fatalf("policy = %q", v)
			}
			if err := b.SetBucketConfig(req, "bkt", "policy", `{"v":1}`); err != nil {
				t.Fatal(err)
			}
			if v := getCfg(t, req, b, "bkt", "policy"); v != `{"v":1}` {
				t.Fatalf("same request after its own change: policy = %q", v)
			}
			if v := getCfg(t, ctx, b, "bkt", "policy"); v != `{"v":1}` {
				t.Fatalf("after the change: policy = %q", v)
			}

			// Another process on the same tree (a second Backend, as
			// `tristore volume create` next to a running server) changes
			// a document; a big one goes to a fallback file even with
			// xattrs. The next request sees each change; a request that
			// already looked keeps the state it saw.
			other, err := posix.Open(dir, posix.Options{NoXattr: noXattr})
			if err != nil {
				t.Fatal(err)
			}
			defer other.Close()
			settle()
			getCfg(t, ctx, b, "bkt", "policy") // cached again, settled
			req = reqmemo.With(ctx)
			getCfg(t, req, b, "bkt", "policy")
			big := strings.Repeat("p", 256<<10)
			for _, doc := range []string{`{"v":2}`, big, ""} {
				if err := other.SetBucketConfig(ctx, "bkt", "policy", doc); err != nil {
					t.Fatal(err)
				}
				if v := getCfg(t, ctx, b, "bkt", "policy"); v != doc {
					t.Fatalf("after another process set it to %.40q (%d bytes): policy is %.40q (%d bytes)", doc, len(doc), v, len(v))
				}
				settle()
			}
			if v := getCfg(t, req, b, "bkt", "policy"); v != `{"v":1}` {
				t.Fatalf("a request sees the state it first saw: policy = %q", v)
			}

			// By hand (setfattr): an xattr change moves the directory's ctime.
			if !noXattr {
				getCfg(t, ctx, b, "bkt", "cors")
				p := filepath.Join(dir, "bkt")
				if err := unix.Setxattr(p, "user.tristore.cfg.cors", []byte("<CORS/>"), 0); err != nil {
					t.Fatal(err)
				}
				if v := getCfg(t, ctx, b, "bkt", "cors"); v != "<CORS/>" {
					t.Fatalf("after setfattr: cors = %q", v)
				}
			}

			// Deleted by another process: the next lookup says so.
			if err := other.SetBucketConfig(ctx, "bkt", "versioning", ""); err != nil {
				t.Fatal(err)
			}
			if err := other.DeleteBucket(ctx, "bkt"); err != nil {
				t.Fatal(err)
			}
			if _, err := b.GetBucketConfig(ctx, "bkt", "policy"); err == nil {
				t.Fatal("lookup in a bucket deleted by another process succeeded")
			}
		})
	}
}

// TestMayBeServed pins which PUT targets take the in-use lock: only files
// directly under a bucket whose name can be a volume's.
func TestMayBeServed(t *testing.T) {
	b, err := posix.Open(t.TempDir(), posix.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	root := b.Root()
	for rel, want := range map[string]bool{
		"bkt/disk":     true,
		"bkt/vol-1":    true,
		"bkt/a/disk":   false, // nested key
		"bkt/Disk":     false, // no volume name
		"bkt/disk.img": false,
		"bkt/-x":       false,
		"bkt/.tristore-hidden/keys/" + strings.Repeat("0", 64): false,
		"bkt/4KiB-p1/w00/o000007":                              false,
	} {
		if got := posix.MayBeServed(b, filepath.Join(root, rel)); got != want {
			t.Errorf("mayBeServed(%s) = %v, want %v", rel, got, want)
		}
	}
	if !posix.MayBeServed(b, "/elsewhere/x") {
		t.Error("a path outside the root must be locked (cannot tell)")
	}
}
