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
