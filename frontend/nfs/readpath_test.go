package nfs

import (
	"bytes"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tristore/tristore/internal/testutil"
	"github.com/tristore/tristore/proto/nfs3"
)

// READs from a client on this machine (here over 127.0.0.1) are copied,
// not sent with sendfile, and answered on the connection's reading
// goroutine while the data is in the page cache; a READ of data that is
// not cached is declined there and answered by a goroutine that may wait
// for the disk. Every answer carries the right bytes.
func TestReadSameHostPaths(t *testing.T) {
	dir := t.TempDir()
	_, addr := testServer(t, dir)
	c := dial(t, addr)
	root := c.mount("/")
	fh := create(t, c, root, "f")
	data := make([]byte, 3<<19) // 1.5 MiB
	for i := range data {
		data[i] = byte(i*7) ^ byte(i>>11)
	}
	for off := 0; off < len(data); off += 1 << 20 {
		write(t, c, fh, uint64(off), data[off:min(off+1<<20, len(data))], nfs3.FileSync)
	}
	sf, inl, dec, mp := readPaths.sendfile.Load(), readPaths.inline.Load(), readPaths.declined.Load(), readPaths.mapped.Load()
	check := func(off uint64, n uint32) {
		t.Helper()
		got, eof := read(t, c, fh, off, n)
		want := data[off:min(int(off)+int(n), len(data))]
		if !bytes.Equal(got, want) || eof != (int(off)+len(got) == len(data)) {
			t.Fatalf("READ %d+%d: %d bytes, eof %v; want %d bytes", off, n, len(got), eof, len(want))
		}
	}
	check(0, 1<<20)
	check(1<<20, 1<<20) // short: to the end of the file
	check(100, 64<<10)
	if d := readPaths.sendfile.Load() - sf; d != 0 {
		t.Errorf("%d READs from 127.0.0.1 went out with sendfile, want 0", d)
	}
	if d := readPaths.inline.Load() - inl; d != 3 {
		t.Errorf("%d of 3 cached READs answered on the reading goroutine", d)
	}
	if d := readPaths.mapped.Load() - mp; d != 3 {
		t.Errorf("%d of 3 cached READs written from a mapping of the file", d)
	}

	// Drop the file's page cache: the next READ cannot be answered
	// without the disk, so it is declined inline and answered anyway.
	var p string
	filepath.WalkDir(dir, func(q string, d fs.DirEntry, err error) error {
		if err == nil && d.Name() == "f" && d.Type().IsRegular() {
			p = q
		}
		return nil
	})
	if p == "" {
		t.Fatal("the file is not under the data directory")
	}
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	drop := func() {
		t.Helper()
		// Pages still referenced (e.g. by a socket buffer) are kept, and
		// so are pages mapped by the server: it keeps a file it READ
		// mapped until it has not been read for ~2 s (vfs/filecache.go).
		// Retry for up to 5 s.
		for try := 0; ; try++ {
			if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
				t.Fatal(err)
			}
			n := testutil.ResidentPages(t, p, len(data))
			if n == 0 {
				return
			}
			if try == 250 {
				t.Fatalf("%d pages still cached after FADV_DONTNEED", n)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// RWF_NOWAIT starts the read-ahead of what it finds missing before it
	// gives up, and on this VM's host-cached disk that I/O can end before
	// the kernel looks again (a preempted reader under load), so an
	// uncached READ may rightly be answered inline. Each try must be one
	// or the other, and at least one of five must be declined.
	declinedOnce := false
	for try := 0; try < 5 && !declinedOnce; try++ {
		drop()
		inl, dec = readPaths.inline.Load(), readPaths.declined.Load()
		check(0, 1<<20)
		di, dd := readPaths.inline.Load()-inl, readPaths.declined.Load()-dec
		switch {
		case dd == 1 && di == 0:
			declinedOnce = true
		case dd == 0 && di == 1:
			t.Logf("try %d: the read-ahead RWF_NOWAIT started had ended; answered inline", try)
		default:
			t.Fatalf("an uncached READ was declined %d times and answered inline %d times, want one of them once", dd, di)
		}
	}
	if !declinedOnce {
		t.Error("no uncached READ of 5 was declined on the reading goroutine")
	}
	if d := readPaths.sendfile.Load() - sf; d != 0 {
		t.Errorf("%d READs went out with sendfile", d)
	}
}

func TestSameHost(t *testing.T) {
	a := netip.MustParseAddr
	for _, tc := range []struct {
		local, remote string
		want          bool
	}{
		{"127.0.0.1", "127.0.0.1", true},
		{"127.0.0.1", "127.0.0.2", true},
		{"::1", "::1", true},
		{"10.0.0.5", "10.0.0.5", true},
		{"10.0.0.5", "10.0.0.6", false},
		{"fd00::1", "fd00::2", false},
	} {
		if got := sameHost(a(tc.local), a(tc.remote)); got != tc.want {
			t.Errorf("sameHost(%s, %s) = %v", tc.local, tc.remote, got)
		}
	}
	if sameHost(a("10.0.0.5"), netip.Addr{}) {
		t.Error("an unknown peer counted as this machine")
	}
}
