package filelun

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tristore/tristore/internal/testutil"
	"github.com/tristore/tristore/store"
)

// TestLUNCacheShape: a LUN over a local file drops the file's cached pages
// when it is first opened (so folios made before, here by 1 MiB writes,
// are not kept), and its reads bring in only the pages asked for (no
// readahead, which would make large folios): see cache.go.
func TestLUNCacheShape(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	const size = 16 << 20
	if _, err := Create(ctx, st, "vols", "shape", size); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(st.(store.LocalPather).Root(), "vols", "shape")
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(i)
	}
	for off := int64(0); off < size; off += int64(len(buf)) {
		if _, err := f.WriteAt(buf, off); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	pages := size / os.Getpagesize()
	if n := testutil.ResidentPages(t, p, size); n < pages/2 {
		t.Fatalf("precondition: only %d of %d pages cached right after writing", n, pages)
	}

	l, _, err := Open(ctx, st, "vols", "shape")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if l.dropDone == nil {
		t.Fatal("no open-time cache drop for a local file")
	}
	select {
	case <-l.dropDone:
	case <-time.After(30 * time.Second):
		t.Fatal("cache drop did not finish in 30 s")
	}
	if n := testutil.ResidentPages(t, p, size); n > pages/16 {
		t.Fatalf("%d of %d pages still cached after the LUN's open (want the clean cache dropped)", n, pages)
	}

	// Sequential reads, 64 KiB at a time, of the first 512 KiB: with
	// readahead the kernel would bring in far more (read_ahead_kb of the
	// disk; the pages around the read, too).
	unix.Fadvise(int(l.mapf.Fd()), 0, 0, unix.FADV_DONTNEED)
	got := make([]byte, 64<<10)
	const readBytes = 512 << 10
	for off := int64(0); off < readBytes; off += int64(len(got)) {
		if _, err := l.ReadAt(ctx, got, off); err != nil {
			t.Fatal(err)
		}
		for i := range got {
			if got[i] != byte(int(off)+i) {
				t.Fatalf("byte %d: %d, want %d", off+int64(i), got[i], byte(int(off)+i))
			}
		}
	}
	want := readBytes / os.Getpagesize()
	if n := testutil.ResidentPages(t, p, size); n > want {
		t.Fatalf("%d pages cached after reading %d through the LUN (readahead is on)", n, want)
	}
	// Reopening the same file in this process keeps its cache.
	l.Close()
	l2, _, err := Open(ctx, st, "vols", "shape")
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	<-l2.dropDone
	if n := testutil.ResidentPages(t, p, size); n < want {
		t.Fatalf("%d pages cached after the second open, want the %d read before kept", n, want)
	}
}

// TestLUNDropBeforeWrite: a write into a part of the file the open-time
// drop is working on waits for that part's drop. Otherwise a 4 KiB write
// made between the drop's write-back and its DONTNEED lands in a large
// folio (here made by 1 MiB writes before the open), makes it dirty, the
// DONTNEED skips it, and the whole folio stays cached as one, with every
// later 4 KiB write into it paying the folio's price (cache.go). The test
// holds the drop of the first chunk in that gap while it writes (for at
// most 500 ms: with the fix the writes cannot finish meanwhile).
func TestLUNDropBeforeWrite(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	const size = 2 * dropChunk
	if _, err := Create(ctx, st, "vols", "early", size); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(st.(store.LocalPather).Root(), "vols", "early")
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	for off := int64(0); off < size; off += int64(len(buf)) {
		if _, err := f.WriteAt(buf, off); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	pages := size / os.Getpagesize()
	if n := testutil.ResidentPages(t, p, size); n < pages/2 {
		t.Fatalf("precondition: only %d of %d pages cached right after writing", n, pages)
	}

	inGap := make(chan struct{})
	written := make(chan error, 1)
	dropHook = func(k int) {
		if k != 0 {
			return
		}
		close(inGap)
		select {
		case err := <-written:
			written <- err // for the test below
		case <-time.After(500 * time.Millisecond):
		}
	}
	defer func() { dropHook = nil }()
	l, _, err := Open(ctx, st, "vols", "early")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	// One 4 KiB write in each MiB of the first chunk, at 256 KiB into it.
	const writes = dropChunk >> 20
	w := make([]byte, 4096)
	for i := range w {
		w[i] = 0xa5
	}
	select {
	case <-inGap:
	case <-time.After(30 * time.Second):
		t.Fatal("the drop did not reach its first chunk in 30 s")
	}
	go func() {
		var err error
		for i := int64(0); i < writes && err == nil; i++ {
			_, err = l.WriteAt(ctx, w, i<<20+256<<10)
		}
		written <- err
	}()
	select {
	case <-l.dropDone:
	case <-time.After(30 * time.Second):
		t.Fatal("cache drop did not finish in 30 s")
	}
	select {
	case err := <-written:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("writes did not finish in 30 s")
	}
	// Only the written pages are left (dirty, so never dropped); a write
	// into a large folio would have kept the whole folio.
	if n := testutil.ResidentPages(t, p, size); n > 2*writes {
		t.Fatalf("%d pages cached after %d 4 KiB writes and the drop (want about %d: writes went into large folios made before the open)", n, writes, writes)
	}
	got := make([]byte, 4096)
	for i := int64(0); i < writes; i++ {
		if _, err := l.ReadAt(ctx, got, i<<20+256<<10); err != nil {
			t.Fatal(err)
		}
		if got[0] != 0xa5 || got[4095] != 0xa5 {
			t.Fatalf("write %d not read back", i)
		}
	}
}

// TestLUNDropStoppedByClose: a LUN closed before its open-time drop is
// through stops the drop, and the next open of the file drops again (the
// part left over would otherwise keep its large folios for the life of
// the process).
func TestLUNDropStoppedByClose(t *testing.T) {
	ctx := context.Background()
	st := newStore(t)
	const size = 4 * dropChunk
	if _, err := Create(ctx, st, "vols", "stopped", size); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(st.(store.LocalPather).Root(), "vols", "stopped")
	fill := func() {
		f, err := os.OpenFile(p, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		buf := make([]byte, 1<<20)
		for off := int64(0); off < size; off += int64(len(buf)) {
			if _, err := f.WriteAt(buf, off); err != nil {
				t.Fatal(err)
			}
		}
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
	}
	fill()
	inHook := make(chan struct{})
	release := make(chan struct{})
	dropHook = func(k int) {
		if k == 0 {
			close(inHook)
			<-release
		}
	}
	defer func() { dropHook = nil }()
	l, _, err := Open(ctx, st, "vols", "stopped")
	if err != nil {
		t.Fatal(err)
	}
	<-inHook
	closed := make(chan error, 1)
	go func() { closed <- l.Close() }()
	for i := 0; !l.closed.Load(); i++ {
		if i == 3000 {
			t.Fatal("Close did not start in 30 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	close(release)
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Close did not finish in 30 s")
	}
	dropHook = nil

	fill() // large folios again, everywhere
	pages := size / os.Getpagesize()
	l2, _, err := Open(ctx, st, "vols", "stopped")
	if err != nil {
		t.Fatal(err)
	}
	defer l2.Close()
	if l2.drop == nil {
		t.Fatal("the second open does not drop the cache, though the first open's drop was stopped")
	}
	select {
	case <-l2.dropDone:
	case <-time.After(30 * time.Second):
		t.Fatal("cache drop did not finish in 30 s")
	}
	if n := testutil.ResidentPages(t, p, size); n > pages/16 {
		t.Fatalf("%d of %d pages still cached after the second open's drop", n, pages)
	}
}
