package posix_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tristore/tristore/store"
	"github.com/tristore/tristore/store/posix"
)

// The steps a file system without a journal needs (retire.go, victim.go),
// forced on whatever the test directory's file system is.

// retiredSet records the inodes retired (stat taken at the retire).
type retiredSet struct {
	mu   sync.Mutex
	inos map[uint64]unix.Stat_t
}

func recordRetires(t *testing.T) *retiredSet {
	r := &retiredSet{inos: map[uint64]unix.Stat_t{}}
	posix.SetHookRetire(func(fd int) {
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			t.Errorf("fstat of a retired descriptor: %v", err)
		}
		r.mu.Lock()
		r.inos[st.Ino] = st
		r.mu.Unlock()
	})
	t.Cleanup(func() { posix.SetHookRetire(nil) })
	return r
}

func (r *retiredSet) has(ino uint64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	st, ok := r.inos[ino]
	return ok && st.Nlink == 0
}

func inoOf(t *testing.T, p string) uint64 {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil {
		t.Fatal(err)
	}
	return st.Ino
}

// TestDeleteBucketRetires: without a journal, DeleteBucket holds what it
// removes (the bucket directory, a reserved file left in it, the bucket's
// records under .tristore) until the removal is durable and retires it
// (written as deleted, no name left) before letting it go.
func TestDeleteBucketRetires(t *testing.T) {
	ctx := context.Background()
	b := open(t, posix.Options{})
	b.SetNoJournal(true)
	if err := b.CreateBucket(ctx, "bkt", "alice"); err != nil {
		t.Fatal(err)
	}
	bdir := filepath.Join(b.Root(), "bkt")
	stray := filepath.Join(bdir, store.ReservedPrefix+"-stray")
	if err := os.WriteFile(stray, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	strayDir := filepath.Join(bdir, store.ReservedPrefix+"-straydir")
	if err := os.MkdirAll(filepath.Join(strayDir, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	// A config too big for an xattr lives in the bucket's record directory.
	if err := b.SetBucketConfig(ctx, "bkt", "big", strings.Repeat("v", 70000)); err != nil {
		t.Fatal(err)
	}
	sys := filepath.Join(b.Root(), store.ReservedPrefix, "buckets", "bkt")
	want := map[string]uint64{
		"bucket dir": inoOf(t, bdir), "reserved file": inoOf(t, stray),
		"reserved dir": inoOf(t, strayDir), "its subdir": inoOf(t, filepath.Join(strayDir, "sub")),
		"bucket record dir": inoOf(t, sys), "config file": inoOf(t, filepath.Join(sys, "cfg-big")),
	}
	r := recordRetires(t)
	if err := b.DeleteBucket(ctx, "bkt"); err != nil {
		t.Fatal(err)
	}
	for what, ino := range want {
		if !r.has(ino) {
			t.Errorf("%s (inode %d) was not retired", what, ino)
		}
	}
	if _, err := os.Lstat(bdir); !os.IsNotExist(err) {
		t.Errorf("bucket directory still there: %v", err)
	}
	// A bucket holding an object is still refused, nothing retired.
	if err := b.CreateBucket(ctx, "bkt2", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Put(ctx, "bkt2", "k", strings.NewReader("v"), 1, store.ObjectMeta{}); err != nil {
		t.Fatal(err)
	}
	if err := b.DeleteBucket(ctx, "bkt2"); err == nil {
		t.Fatal("DeleteBucket of a bucket with an object succeeded")
	}
}

// TestFailedAtomicWriteRetiresTemp: writeFileAtomic's temp file, when the
// rename fails, is removed durably and retired without a journal.
func TestFailedAtomicWriteRetiresTemp(t *testing.T) {
	b := open(t, posix.Options{})
	b.SetNoJournal(true)
	target := filepath.Join(b.Root(), store.ReservedPrefix, "x")
	if err := os.MkdirAll(filepath.Join(target, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	r := recordRetires(t)
	if err := b.WriteFileAtomic(target, []byte("1234567")); err == nil {
		t.Fatal("a rename over a non-empty directory succeeded")
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, st := range r.inos {
		if st.Mode&unix.S_IFMT == unix.S_IFREG && st.Size == 7 && st.Nlink == 0 {
			return
		}
	}
	t.Errorf("the failed write's temp file was not retired: %+v", r.inos)
}

// raceResult is what raceAtRename saw at the first writer's rename.
type raceResult struct {
	st     unix.Stat_t
	err    error
	second chan error
}

// raceAtRename makes the first writer of target, at its rename (the hook
// setHook installs), start the second writer and wait up to a second for
// it, then stat target: the file the first writer is about to replace
// must be the one it gave a second name (2 links). Without writers of a
// path taking turns from the hold to the rename, the second writer's
// rename (or unlink) lands in between and the first replaces a file with
// one name (or none).
func raceAtRename(t *testing.T, target string, second func() error, setHook func(func(string))) *raceResult {
	r := &raceResult{second: make(chan error, 1)}
	var first atomic.Bool
	setHook(func(p string) {
		if p != target || !first.CompareAndSwap(false, true) {
			return
		}
		done := make(chan error, 1)
		go func() { done <- second() }()
		select {
		case err := <-done:
			r.second <- err
		case <-time.After(time.Second): // blocked behind the first: right
			go func() { r.second <- <-done }()
		}
		r.err = unix.Lstat(target, &r.st)
	})
	t.Cleanup(func() { setHook(nil) })
	return r
}

func (r *raceResult) check(t *testing.T, what string) {
	t.Helper()
	select {
	case err := <-r.second:
		if err != nil {
			t.Fatalf("second writer: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the second writer did not finish")
	}
	if r.err != nil || r.st.Nlink != 2 {
		t.Errorf("%s: at the first writer's rename the file there has %d names (err %v), want 2 (the held file with its second name)", what, r.st.Nlink, r.err)
	}
}

// TestConcurrentPutsReplaceSecondNamed: two PUTs of one key without a
// journal; the file the first replaces is the one it gave a second name
// although the second PUT runs while the first is at its rename.
func TestConcurrentPutsReplaceSecondNamed(t *testing.T) {
	ctx := context.Background()
	b := open(t, posix.Options{})
	b.SetNoJournal(true)
	if err := b.CreateBucket(ctx, "bkt", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Put(ctx, "bkt", "k", strings.NewReader("v0"), 2, store.ObjectMeta{}); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(b.Root(), "bkt", "k")
	r := raceAtRename(t, target, func() error {
		_, err := b.Put(ctx, "bkt", "k", strings.NewReader("B"), 1, store.ObjectMeta{})
		return err
	}, posix.SetHookVictimHeld)
	if _, err := b.Put(ctx, "bkt", "k", strings.NewReader("AA"), 2, store.ObjectMeta{}); err != nil {
		t.Fatal(err)
	}
	r.check(t, "PUT vs PUT")
}

// TestConcurrentPutDeleteReplaceSecondNamed: as above with a DELETE of the
// key as the second writer (it must not unlink the file the PUT is about
// to replace, nor one the PUT put there, between hold and rename).
func TestConcurrentPutDeleteReplaceSecondNamed(t *testing.T) {
	ctx := context.Background()
	b := open(t, posix.Options{})
	b.SetNoJournal(true)
	if err := b.CreateBucket(ctx, "bkt", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Put(ctx, "bkt", "k", strings.NewReader("v0"), 2, store.ObjectMeta{}); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(b.Root(), "bkt", "k")
	r := raceAtRename(t, target, func() error { return b.Delete(ctx, "bkt", "k") }, posix.SetHookVictimHeld)
	if _, err := b.Put(ctx, "bkt", "k", strings.NewReader("AA"), 2, store.ObjectMeta{}); err != nil {
		t.Fatal(err)
	}
	r.check(t, "PUT vs DELETE")
}

// TestConcurrentAtomicWritesReplaceSecondNamed: the same for
// writeFileAtomic (bucket and upload records, settings).
func TestConcurrentAtomicWritesReplaceSecondNamed(t *testing.T) {
	b := open(t, posix.Options{})
	b.SetNoJournal(true)
	target := filepath.Join(b.Root(), store.ReservedPrefix, "rec.json")
	if err := b.WriteFileAtomic(target, []byte("0")); err != nil {
		t.Fatal(err)
	}
	r := raceAtRename(t, target, func() error { return b.WriteFileAtomic(target, []byte("B")) }, posix.SetHookBeforeAtomicRename)
	if err := b.WriteFileAtomic(target, []byte("AA")); err != nil {
		t.Fatal(err)
	}
	r.check(t, "writeFileAtomic vs writeFileAtomic")
}

// TestBucketConfigRemovalRetires: a bucket config file removed (the config
// deleted) is removed durably and retired without a journal.
func TestBucketConfigRemovalRetires(t *testing.T) {
	ctx := context.Background()
	b := open(t, posix.Options{})
	b.SetNoJournal(true)
	if err := b.CreateBucket(ctx, "bkt", ""); err != nil {
		t.Fatal(err)
	}
	if err := b.SetBucketConfig(ctx, "bkt", "big", strings.Repeat("v", 70000)); err != nil {
		t.Fatal(err)
	}
	ino := inoOf(t, filepath.Join(b.Root(), store.ReservedPrefix, "buckets", "bkt", "cfg-big"))
	r := recordRetires(t)
	if err := b.SetBucketConfig(ctx, "bkt", "big", ""); err != nil {
		t.Fatal(err)
	}
	if !r.has(ino) {
		t.Errorf("the removed config file (inode %d) was not retired", ino)
	}
	if v, err := b.GetBucketConfig(ctx, "bkt", "big"); err != nil || v != "" {
		t.Errorf("config after its removal: %d bytes, %v", len(v), err)
	}
}
