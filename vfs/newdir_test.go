package vfs

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tristore/tristore/internal/powerloss"
	"github.com/tristore/tristore/internal/testutil"
	"github.com/tristore/tristore/store"
	"github.com/tristore/tristore/store/posix"
)

// TestNewDirDurableAcrossViews: a directory one view has just made is not
// durable until its maker fsyncs the parent; a write by the other view
// into it must not be acknowledged before that (store/newdir). On the
// power-loss file system the maker's parent fsync is held, the other
// view's write is acknowledged, the power is cut at once, and after the
// reboot the acknowledged write must be there:
//
//   - s3-then-nfs: an S3 PUT makes prefix x/; an NFS CREATE (sync export)
//     puts a file in x/;
//   - nfs-then-s3: an NFS MKDIR makes x/; an S3 PUT puts an object in it.
//
// Before store/newdir both lost the second, acknowledged write.
func TestNewDirDurableAcrossViews(t *testing.T) {
	testutil.NeedRoot(t, "mounts the power-loss FUSE file system")
	testutil.NeedFUSE(t)
	for _, s3First := range []bool{true, false} {
		name := "nfs-then-s3"
		if s3First {
			name = "s3-then-nfs"
		}
		t.Run(name, func(t *testing.T) { crossViewCut(t, s3First) })
	}
}

func crossViewCut(t *testing.T, s3First bool) {
	ctx := context.Background()
	pfs := powerloss.New()
	mnt := t.TempDir()
	if err := pfs.Mount(mnt); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := pfs.Unmount(); err != nil {
			t.Errorf("unmount: %v", err)
		}
	})
	b, err := posix.Open(mnt, posix.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := b.CreateBucket(ctx, "bkt", ""); err != nil {
		t.Fatal(err)
	}
	bdir := filepath.Join(b.Root(), "bkt")
	fs, err := Open(bdir, Options{IndexDir: filepath.Join(t.TempDir(), "index"), ForceIndex: true})
	if err != nil {
		t.Fatal(err)
	}

	// The maker's fsync of bdir (the new directory's parent) is held: for
	// S3 in the file system (the first fsync of bdir waits), for NFS just
	// before vfs's fsync (in the file system it would also hold bdir's
	// inode lock, which the S3 PUT's lookups in bdir wait for, so the PUT
	// would wait with or without the fix).
	var blocked <-chan struct{}
	var free func()
	if s3First {
		if blocked, free, err = pfs.HoldFsync("bkt"); err != nil {
			t.Fatal(err)
		}
	} else {
		b := make(chan struct{})
		release := make(chan struct{})
		var once, rel sync.Once
		blocked, free = b, func() { rel.Do(func() { close(release) }) }
		hookDirFsync = func(dir string) {
			if dir != bdir {
				return
			}
			once.Do(func() {
				close(b)
				select {
				case <-release:
				case <-time.After(30 * time.Second):
				}
			})
		}
		defer func() { hookDirFsync = nil }()
	}
	defer free()

	makerDone := make(chan error, 1)
	go func() {
		if s3First {
			_, err := b.Put(ctx, "bkt", "x/a", strings.NewReader("made by S3"), 10, store.ObjectMeta{})
			makerDone <- err
			return
		}
		_, _, _, err := fs.Mkdir(root, fs.Root(), "x", SetAttr{})
		makerDone <- err
	}()
	select {
	case <-blocked:
	case err := <-makerDone:
		t.Fatalf("the maker returned (%v) without an fsync of %s: the test no longer holds the new directory's parent", err, bdir)
	case <-time.After(20 * time.Second):
		t.Fatal("the maker never reached the fsync of the new directory's parent")
	}

	const body = "acknowledged by the other view"
	var wantPath string
	other := make(chan error, 1)
	if s3First {
		wantPath = filepath.Join(bdir, "x", "f")
		go func() {
			x, _, _, err := fs.Lookup(root, fs.Root(), "x")
			if err != nil {
				other <- err
				return
			}
			h, _, _, err := fs.Create(root, x, "f", CreateGuarded, SetAttr{}, [8]byte{})
			if err != nil {
				other <- err
				return
			}
			_, _, _, err = fs.Write(root, h, 0, []byte(body), FileSync)
			other <- err
		}()
	} else {
		wantPath = filepath.Join(bdir, "x", "b")
		go func() {
			_, err := b.Put(ctx, "bkt", "x/b", strings.NewReader(body), int64(len(body)), store.ObjectMeta{})
			other <- err
		}()
	}
	// The power goes right after the other view's reply, with the maker's
	// fsync held if the reply came while it was; if the other view waits
	// instead, the maker is let go first.
	select {
	case err := <-other:
		if err != nil {
			t.Fatalf("the other view's write: %v", err)
		}
		pfs.Cut()
		free()
	case <-time.After(2 * time.Second):
		free()
		select {
		case err := <-other:
			if err != nil {
				t.Fatalf("the other view's write: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("the other view's write did not return after the maker was let go")
		}
		pfs.Cut()
	}
	<-makerDone
	fs.Close()
	b.Close()
	if err := pfs.Remount(); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(wantPath)
	if err != nil {
		t.Fatalf("acknowledged write lost in the power cut: %v\ndurable: %v", err, pfs.DurablePaths())
	}
	got, err := io.ReadAll(f)
	f.Close()
	if err != nil || string(got) != body {
		t.Fatalf("after the cut %s holds %q (%v), want %q", wantPath, got, err, body)
	}
}
