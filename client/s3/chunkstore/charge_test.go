package chunkstore

import (
	"bytes"
	"context"
	"net/http"
	"syscall"
	"testing"
	"time"

	s3client "github.com/tristore/tristore/client/s3"
)

// TestSmallWritesInACacheOfTwoChunks: dirty chunks count against the
// cache limit by the bytes written into them, not by the chunk size. A
// cache of two chunks takes 4 KiB writes into eight chunks that are not
// cached while every chunk GET and PUT is held: none waits. Before, each
// new dirty chunk reserved a whole chunk, so the third write passed the
// limit and waited for the upload of every dirty chunk, each first
// fetching its base (at the paper's scale on the realistic link: 1.0 s
// per write on average with 4 MiB chunks in a 16 MiB cache, 5.9 s with
// 16 MiB chunks; the block profile put all of it in WriteAt's
// writeBack). The file then reads back base + writes.
func TestSmallWritesInACacheOfTwoChunks(t *testing.T) {
	v := newEnv(t)
	s0 := v.open(v.cfg(t.TempDir()))
	want := randBytes(3, 8*cs)
	write(t, s0, mkfile(t, s0, "f"), want, 0)
	if err := s0.Close(context.Background()); err != nil {
		t.Fatal(err)
	}

	g := &gate{next: http.DefaultTransport, open: make(chan struct{})}
	g.closed.Store(true)
	h := &holdPuts{next: g, open: make(chan struct{})}
	e, err := s3client.New(s3client.Config{Endpoint: v.e.Config().Endpoint, AccessKey: testAK, SecretKey: testSK, PathStyle: true,
		Retries: s3client.NoRetries, HTTPClient: &http.Client{Transport: h}})
	if err != nil {
		t.Fatal(err)
	}
	c := v.cfg(t.TempDir())
	c.Engine, c.CacheSize, c.PrefetchMax = e, 2*cs, -1
	s := v.open(c)
	// Cleanups run last first: the requests go through before Close.
	t.Cleanup(func() {
		g.release()
		select {
		case <-h.open:
		default:
			close(h.open)
		}
	})
	ino := lookup(t, s, "f")
	t0 := time.Now()
	for i := int64(0); i < 8; i++ {
		p := randBytes(uint64(50+i), 4096)
		off := i*cs + 8192
		writeSoon(t, s, ino, p, off)
		copy(want[off:], p)
	}
	t.Logf("writes in %v", time.Since(t0))
	if _, dirty := s.cache.usage(); dirty != 8*4096 {
		t.Fatalf("dirty data counts %d bytes against the cache limit, want %d (the bytes written)", dirty, 8*4096)
	}
	g.release()
	close(h.open)
	t0 = time.Now()
	if got := readAll(t, s, ino); !bytes.Equal(got, want) {
		t.Fatal("the file reads different bytes than base + writes")
	}
	t.Logf("read in %v", time.Since(t0))
	closeReadFresh(t, v, s, "f", want)
}

// TestWriteIntoCachedChunk: a write into a chunk the cache holds copies
// nothing: the chunk becomes partial on its cached object, counts the
// bytes written (one 4 KiB block for 100 bytes), and a read across
// written and unwritten bytes takes the rest from the cached object
// without a GET and without completing the chunk (so it still counts one
// block). Before, the write copied the whole chunk into a dirty file
// counted as a whole chunk.
func TestWriteIntoCachedChunk(t *testing.T) {
	v := newEnv(t)
	want := seed(t, v, "a")["a"]
	s, g := gated(t, v, t.TempDir())
	ctx := context.Background()
	ino := lookup(t, s, "a")
	g.release()
	if got := readAll(t, s, ino); !bytes.Equal(got, want) {
		t.Fatal("first read differs")
	}
	gets := g.gets.Load()
	p := randBytes(9, 100)
	start := time.Now()
	write(t, s, ino, p, cs+10)
	copy(want[cs+10:], p)
	if _, dirty := s.cache.usage(); dirty != 4096 {
		t.Fatalf("a 100-byte write into a cached chunk counts %d dirty bytes, want 4096", dirty)
	}
	got := make([]byte, cs)
	if _, err := s.ReadAt(ctx, ino, got, cs); err != nil || !bytes.Equal(got, want[cs:2*cs]) {
		t.Fatalf("read of the written chunk: %v, same %v", err, bytes.Equal(got, want[cs:2*cs]))
	}
	if n := g.gets.Load() - gets; n != 0 {
		t.Fatalf("%d chunk GETs for writing and reading a cached chunk", n)
	}
	if _, dirty := s.cache.usage(); dirty != 4096 {
		t.Fatalf("after a read the chunk counts %d dirty bytes, want 4096 (still partial)", dirty)
	}
	if err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	if n := g.gets.Load() - gets; n != 0 {
		t.Fatalf("%d chunk GETs to upload a chunk whose base is cached", n)
	}
	if _, dirty := s.cache.usage(); dirty != 0 {
		t.Fatalf("%d dirty bytes after Sync", dirty)
	}
	t.Logf("write, read, sync in %v", time.Since(start))
	closeReadFresh(t, v, s, "a", want)
}

// TestPartialUploadKeepsItsCharge: a partial chunk is uploaded without
// being completed on disk, so while its PUT is held it still counts only
// its written bytes (before, the upload merged the base into the dirty
// file first, and the chunk counted a whole chunk until the upload ended:
// at the paper's scale with 16 MiB chunks a write then passed the limit
// and waited 35 s behind the write-back). A write that comes in during
// the upload leaves the chunk dirty and partial, now on the uploaded
// object (the old base is deleted by the publish): it is completed and
// uploaded later from there, and a fresh gateway reads base + both
// writes.
func TestPartialUploadKeepsItsCharge(t *testing.T) {
	v := newEnv(t)
	want := seed(t, v, "a")["a"]
	h := &holdPuts{next: http.DefaultTransport, open: make(chan struct{})}
	e, err := s3client.New(s3client.Config{Endpoint: v.e.Config().Endpoint, AccessKey: testAK, SecretKey: testSK, PathStyle: true,
		Retries: s3client.NoRetries, HTTPClient: &http.Client{Transport: h}})
	if err != nil {
		t.Fatal(err)
	}
	c := v.cfg(t.TempDir())
	c.Engine, c.PrefetchMax = e, -1
	s := v.open(c)
	t.Cleanup(func() {
		select {
		case <-h.open:
		default:
			close(h.open)
		}
	})
	ctx := context.Background()
	ino := lookup(t, s, "a")
	p1 := randBytes(11, 4096)
	write(t, s, ino, p1, 4096)
	copy(want[4096:], p1)
	synced := make(chan error, 1)
	go func() { synced <- s.Sync(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for h.held.Load() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no chunk PUT within 10 s of Sync")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if _, dirty := s.cache.usage(); dirty != 4096 {
		t.Fatalf("while its PUT is held the chunk counts %d dirty bytes, want 4096", dirty)
	}
	p2 := randBytes(12, 4096)
	write(t, s, ino, p2, 3*4096)
	copy(want[3*4096:], p2)
	close(h.open)
	if err := <-synced; err != nil {
		t.Fatal(err)
	}
	if _, dirty := s.cache.usage(); dirty != 2*4096 {
		t.Fatalf("after the upload and a write during it: %d dirty bytes, want %d (still partial)", dirty, 2*4096)
	}
	got := make([]byte, cs)
	if _, err := s.ReadAt(ctx, ino, got, 0); err != nil || !bytes.Equal(got, want[:cs]) {
		t.Fatalf("read of the chunk after its base was replaced: %v, same %v", err, bytes.Equal(got, want[:cs]))
	}
	closeReadFresh(t, v, s, "a", want)
}

// TestPartialRecordInPlace: writes into a partial chunk rewrite its
// record in place (the same file: on this machine's ext4 a new file and
// rename cost about 1 ms, so each 64 KiB write into a 1 MiB chunk took
// over 1 ms in the store alone; the in-place pwrite takes tens of
// microseconds), shorter records padded; a gateway killed after them
// recovers base + writes.
func TestPartialRecordInPlace(t *testing.T) {
	v := newEnv(t)
	want := seed(t, v, "a")["a"]
	cache := t.TempDir()
	s, g := gated(t, v, cache)
	ino := lookup(t, s, "a")
	rec := s.partialPath(ino, 1)
	var first uint64
	for i, w := range [][2]int64{{cs + 100, 50}, {cs + 5000, 3000}, {cs + 300, 4000}, {cs + 40000, 10}} {
		p := randBytes(uint64(20+i), int(w[1]))
		writeSoon(t, s, ino, p, w[0])
		copy(want[w[0]:], p)
		var st syscall.Stat_t
		if err := syscall.Stat(rec, &st); err != nil {
			t.Fatalf("record after write %d: %v", i, err)
		}
		if i == 0 {
			first = st.Ino
		} else if st.Ino != first {
			t.Fatalf("write %d replaced the record file (inode %d, was %d): not rewritten in place", i, st.Ino, first)
		}
	}
	s.Abandon()
	g.release()
	time.Sleep(5 * time.Second) // the dead gateway's lease expires
	s2 := v.open(v.cfg(cache))
	if st := s2.Stats(); st.Recovered != 1 {
		t.Fatalf("recovery: %+v, want 1 dirty chunk", st)
	}
	s2.Close(context.Background())
	s3 := v.open(v.cfg(t.TempDir()))
	if got := readAll(t, s3, lookup(t, s3, "a")); !bytes.Equal(got, want) {
		t.Fatal("recovered data differs from base + writes")
	}
}

// closeReadFresh closes s (its Close uploads what is dirty) and checks that
// a fresh gateway with an empty cache reads file name as want.
func closeReadFresh(t *testing.T, v *env, s *Store, name string, want []byte) {
	t.Helper()
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	s2 := v.open(v.cfg(t.TempDir()))
	if got := readAll(t, s2, lookup(t, s2, name)); !bytes.Equal(got, want) {
		t.Fatalf("a fresh gateway reads different bytes of %s than base + writes", name)
	}
}
