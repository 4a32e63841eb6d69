package posix_test

import (
	"context"
	"fmt"
	"io"
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

// TestNewDirDurableForConcurrentPut: a directory that exists is not yet a
// durable one. PUT A makes a new directory and, before A has fsynced the
// directory's parent, PUT B writes into that directory and is
// acknowledged. B's acknowledgement must not depend on A finishing: after a
// power cut right after B's reply, B's object must be there.
//
// The power-loss file system (internal/powerloss) keeps only what was
// fsynced. A's fsync of the new directory's parent is held (through the
// group commit's hook); B runs meanwhile. Before the fix B found the
// directory, fsynced only its own file and the directory, and replied: the
// cut then lost the directory with B's object in it (CI saw this once as
// TestS3PowerLossSidecar's "acknowledged ... holds <absent>").
//
// Three places make directories for a PUT: the object's parents, the
// hidden area for keys without a plain path, and the sidecar tree when the
// file system has no xattrs.
func TestNewDirDurableForConcurrentPut(t *testing.T) {
	testutil.NeedRoot(t, "mounts the power-loss FUSE file system")
	testutil.NeedFUSE(t)
	for _, tc := range []struct {
		name    string
		noXattr bool
		keyA    string
		keyB    string
		hold    func(root string) string // the directory whose fsync is held
	}{
		{"object-dir", false, "x/a", "x/b", func(root string) string { return filepath.Join(root, "bkt") }},
		{"hidden-area", false, "h//odd/../a", "h//odd/../b", func(root string) string { return filepath.Join(root, "bkt") }},
		{"sidecar-dir", true, "x/a", "x/b", func(root string) string { return filepath.Join(root, ".tristore", "meta", "bkt") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			newDirCut(t, tc.noXattr, tc.keyA, tc.keyB, tc.hold)
		})
	}
}

func newDirCut(t *testing.T, noXattr bool, keyA, keyB string, hold func(string) string) {
	ctx := context.Background()
	pfs := powerloss.New()
	if noXattr {
		pfs.DisableXattrs()
	}
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
	held := hold(b.Root())

	var once sync.Once
	blocked := make(chan struct{})
	release := make(chan struct{})
	var releaseOnce sync.Once
	free := func() { releaseOnce.Do(func() { close(release) }) }
	defer free()
	posix.SetDirSyncHooks(nil, func(dir string) func() {
		if dir != held {
			return nil
		}
		first := false
		once.Do(func() { first = true })
		if first {
			close(blocked)
			select {
			case <-release:
			case <-time.After(30 * time.Second):
			}
		}
		return nil
	})
	defer posix.SetDirSyncHooks(nil, nil)

	aDone := make(chan error, 1)
	go func() {
		_, err := b.Put(ctx, "bkt", keyA, strings.NewReader("object A"), 8, store.ObjectMeta{})
		aDone <- err
	}()
	select {
	case <-blocked:
	case err := <-aDone:
		t.Fatalf("PUT A returned (%v) without an fsync of %s: the test no longer holds the new directory's parent", err, held)
	case <-time.After(20 * time.Second):
		t.Fatal("PUT A never reached the fsync of the new directory's parent")
	}
	bodyB := "object B, acknowledged"
	bDone := make(chan error, 1)
	go func() {
		_, err := b.Put(ctx, "bkt", keyB, strings.NewReader(bodyB), int64(len(bodyB)), store.ObjectMeta{})
		bDone <- err
	}()
	// Either B replies while A still waits (then the power goes at once,
	// with A's fsync still held), or B waits for a durable parent: then A
	// is let go and the power goes right after B's reply.
	select {
	case err := <-bDone:
		if err != nil {
			t.Fatalf("PUT B: %v", err)
		}
		pfs.Cut()
		free()
	case <-time.After(2 * time.Second):
		free()
		select {
		case err := <-bDone:
			if err != nil {
				t.Fatalf("PUT B: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Fatal("PUT B did not return after A's fsync was let go")
		}
		pfs.Cut()
	}
	<-aDone // A's outcome does not matter: it may have been cut
	b.Close()
	if err := pfs.Remount(); err != nil {
		t.Fatal(err)
	}
	b2, err := posix.Open(mnt, posix.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()
	rc, _, err := b2.Get(ctx, "bkt", keyB, 0, -1)
	if err != nil {
		t.Fatalf("acknowledged PUT %q lost in the power cut: %v\ndurable: %v", keyB, err, pfs.DurablePaths())
	}
	got, err := io.ReadAll(rc)
	rc.Close()
	if err != nil || string(got) != bodyB {
		t.Fatalf("acknowledged PUT %q after the cut: %q, %v", keyB, got, err)
	}
}

// TestNewPrefixFsyncsOnce: a PUT that makes new prefixes fsyncs each
// directory on its path once: the new directory it wrote into, and the
// parent of each directory it made. (fsyncDir's check for unsettled
// directories on the path already covers the parents the PUT made; the
// PUT's own list of them must not fsync them a second time.)
func TestNewPrefixFsyncsOnce(t *testing.T) {
	ctx := context.Background()
	b := open(t, posix.Options{})
	if err := b.CreateBucket(ctx, "bkt", ""); err != nil {
		t.Fatal(err)
	}
	bdir := filepath.Join(b.Root(), "bkt")
	var mu sync.Mutex
	count := map[string]int{}
	posix.SetDirSyncHooks(nil, func(dir string) func() {
		if strings.HasPrefix(dir, bdir) {
			mu.Lock()
			count[strings.TrimPrefix(dir, b.Root()+"/")]++
			mu.Unlock()
		}
		return nil
	})
	defer posix.SetDirSyncHooks(nil, nil)
	if _, err := b.Put(ctx, "bkt", "n1/n2/k", strings.NewReader("x"), 1, store.ObjectMeta{}); err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"bkt": 1, "bkt/n1": 1, "bkt/n1/n2": 1}
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(count) != fmt.Sprint(want) {
		t.Fatalf("directory fsyncs of one PUT making two prefixes: %v, want %v", count, want)
	}
}
