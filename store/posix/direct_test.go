package posix_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tristore/tristore/internal/testutil"
	"github.com/tristore/tristore/store"
	"github.com/tristore/tristore/store/posix"
)

// oddReader hands out its data in pieces of odd sizes, so fill's chunks
// are assembled from many reads.
type oddReader struct {
	data []byte
	i    int
}

func (r *oddReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, io.EOF
	}
	n := 1 + (r.i*7919)%70001
	r.i++
	n = min(n, len(p), len(r.data))
	copy(p, r.data[:n])
	r.data = r.data[n:]
	return n, nil
}

// TestLargePutSizes: bodies of 1 MiB and more are written partly with
// O_DIRECT (whole chunks) and partly through the page cache (an unaligned
// tail); every size reads back whole with the body's MD5 as ETag.
func TestLargePutSizes(t *testing.T) {
	ctx := context.Background()
	for _, nox := range []bool{false, true} {
		b := open(t, posix.Options{NoXattr: nox})
		if err := b.CreateBucket(ctx, "bkt", ""); err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewSource(1))
		for _, size := range []int{1 << 20, 1<<20 - 1, 1<<20 + 1, 2<<20 + 4095, 4 << 20, 4<<20 + 1, 5<<20 - 512, 9<<20 + 12345} {
			data := make([]byte, size)
			rng.Read(data)
			key := "big/" + hex.EncodeToString([]byte{byte(size), byte(size >> 8), byte(size >> 16)})
			oi, err := b.Put(ctx, "bkt", key, &oddReader{data: data}, int64(size), store.ObjectMeta{})
			if err != nil {
				t.Fatalf("nox=%v size %d: %v", nox, size, err)
			}
			sum := md5.Sum(data)
			if oi.ETag != hex.EncodeToString(sum[:]) {
				t.Errorf("nox=%v size %d: ETag %s, want %x", nox, size, oi.ETag, sum)
			}
			got, gi := readAll(t, b, key)
			if got != string(data) || gi.Size != int64(size) {
				t.Errorf("nox=%v size %d: read back %d bytes (size %d), differs", nox, size, len(got), gi.Size)
			}
		}
	}
}

// TestLargePutLeftInPageCache: a body written with O_DIRECT is read back
// into the page cache (in the background) by the PUT, so a GET right after
// it does not wait for the disk. Checked with mincore on the object's file:
// without the read-back none of a 4 MiB direct-written body is resident.
func TestLargePutLeftInPageCache(t *testing.T) {
	ctx := context.Background()
	b := open(t, posix.Options{})
	if err := b.CreateBucket(ctx, "bkt", ""); err != nil {
		t.Fatal(err)
	}
	const size = 4 << 20
	data := make([]byte, size)
	rand.New(rand.NewSource(2)).Read(data)
	if _, err := b.Put(ctx, "bkt", "big", bytes.NewReader(data), size, store.ObjectMeta{}); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(b.Root(), "bkt", "big")
	if !directWorks(t, filepath.Dir(p)) {
		t.Skip("the test directory's file system refuses O_DIRECT: the body was written through the page cache")
	}
	pages := size / os.Getpagesize()
	resident := 0
	for start := time.Now(); time.Since(start) < 5*time.Second; time.Sleep(20 * time.Millisecond) {
		if resident = testutil.ResidentPages(t, p, size); resident == pages {
			return
		}
	}
	t.Errorf("%d of %d pages of a just-PUT 4 MiB object in the page cache after 5 s, want all", resident, pages)
}

// directWorks reports whether dir's file system accepts O_DIRECT.
func directWorks(t *testing.T, dir string) bool {
	fd, err := unix.Open(filepath.Join(dir, "direct-probe"), unix.O_CREAT|unix.O_RDWR|unix.O_DIRECT, 0o600)
	if err != nil {
		return false
	}
	unix.Close(fd)
	os.Remove(filepath.Join(dir, "direct-probe"))
	return true
}
