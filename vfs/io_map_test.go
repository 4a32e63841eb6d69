package vfs

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tristore/tristore/internal/testutil"
)

// MapCached maps a cached range (the bytes are the file's, eof and sizes
// right, empty past the end), declines a range not in the page cache,
// and a mapping whose file is truncated under it fails the system call
// it is handed to (EFAULT) instead of crashing the process.
func TestMapCached(t *testing.T) {
	modes(t, func(t *testing.T, dir string, open func() *FS) {
		fs := open()
		data := make([]byte, 3<<20+5)
		for i := range data {
			data[i] = byte(i*11 + i>>13)
		}
		p := filepath.Join(dir, "f")
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		h, _, _, err := fs.Lookup(root, fs.Root(), "f")
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			off uint64
			n   int
			eof bool
		}{{0, 1 << 20, false}, {4097, 2 << 20, false}, {3 << 20, 1 << 20, true}, {3<<20 + 5, 10, true}, {4 << 20, 10, true}} {
			m, unmap, eof, a, err := fs.MapCached(root, h, tc.off, tc.n)
			if err != nil {
				t.Fatalf("MapCached(%d, %d): %v", tc.off, tc.n, err)
			}
			want := data[min(tc.off, uint64(len(data))):min(tc.off+uint64(tc.n), uint64(len(data)))]
			// Reading the mapping from Go is safe here: nothing truncates it.
			if !bytes.Equal(m, want) || eof != tc.eof || a.Size != uint64(len(data)) {
				t.Fatalf("MapCached(%d, %d): %d bytes (want %d), eof %v, size %d", tc.off, tc.n, len(m), len(want), eof, a.Size)
			}
			unmap()
		}

		// Truncated under the mapping: the write that copies from it fails.
		m, unmap, _, _, err := fs.MapCached(root, h, 0, 2<<20)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(p, 0); err != nil {
			t.Fatal(err)
		}
		out, err := os.CreateTemp(t.TempDir(), "out")
		if err != nil {
			t.Fatal(err)
		}
		defer out.Close()
		n, err := unix.Write(int(out.Fd()), m)
		if n == len(m) {
			t.Fatalf("write from a truncated mapping: %d bytes, %v; want EFAULT or a short write", n, err)
		}
		if err != nil && !errors.Is(err, unix.EFAULT) {
			t.Fatalf("write from a truncated mapping: %v, want EFAULT", err)
		}
		unmap()

		// Not in the page cache: declined, nothing mapped.
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		f, err := os.Open(p)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		f.Sync()
		for try := 0; testutil.ResidentPages(t, p, len(data)) != 0; try++ {
			if try == 50 {
				t.Fatal("file still cached after FADV_DONTNEED")
			}
			unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
			time.Sleep(20 * time.Millisecond)
		}
		if _, _, _, _, err := fs.MapCached(root, h, 0, 1<<20); !errors.Is(err, ErrNotCached) {
			t.Fatalf("MapCached of an uncached range: %v, want ErrNotCached", err)
		}
	})
}
