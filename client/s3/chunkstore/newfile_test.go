package chunkstore

import (
	"bytes"
	"context"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/tristore/tristore/internal/testutil"
)

// TestWriteMakesNoFile: the first write into a chunk the cache does not
// hold names two files (the dirty file and its partial record) but
// allocates no inode: both are unnamed files the store made beforehand
// (newfile.go; an inode allocation on this project's journal-less ext4
// walks past every inode freed in the last 30 s). A gateway killed right
// after recovers base + write from them.
func TestWriteMakesNoFile(t *testing.T) {
	v := newEnv(t)
	want := seed(t, v, "a")["a"]
	cache := t.TempDir()
	s, g := gated(t, v, cache)
	defer g.release() // before the cleanup's Close, which uploads
	ino := lookup(t, s, "a")
	pooled := map[uint64]string{}
	for _, d := range []string{"dirty", "partial"} {
		for i, p := range testutil.UnnamedFiles(t, filepath.Join(s.dir, d)) {
			pooled[i] = p
		}
	}
	if len(pooled) == 0 {
		t.Fatal("the store keeps no unnamed files ready")
	}
	p := randBytes(7, 3000)
	writeSoon(t, s, ino, p, cs+777)
	copy(want[cs+777:], p)
	for _, path := range []string{s.dirtyPath(ino, 1), s.partialPath(ino, 1)} {
		var st syscall.Stat_t
		if err := syscall.Stat(path, &st); err != nil {
			t.Fatal(err)
		}
		if _, ok := pooled[st.Ino]; !ok {
			t.Fatalf("%s is inode %d, made by the write (not one of the %d unnamed files ready before it)", path, st.Ino, len(pooled))
		}
	}
	s.Abandon()
	g.release()
	time.Sleep(5 * time.Second) // the dead gateway's lease expires
	s2 := v.open(v.cfg(cache))
	if st := s2.Stats(); st.Recovered != 1 || st.Uploads != 1 {
		t.Fatalf("recovery: %+v, want 1 dirty chunk found and uploaded", st)
	}
	if err := s2.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	s3 := v.open(v.cfg(t.TempDir()))
	if got := readAll(t, s3, lookup(t, s3, "a")); !bytes.Equal(got, want) {
		t.Fatal("recovered data differs from base + write")
	}
}
