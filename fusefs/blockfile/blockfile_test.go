package blockfile

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/tristore/tristore/blockdev"
	"github.com/tristore/tristore/internal/testutil"
)

// memDev is an in-memory Device that enforces alignment like a real LUN
// and counts flushes.
type memDev struct {
	mu      sync.Mutex
	data    []byte
	bs      int
	flushes atomic.Int64
}

func newMemDev(size, bs int) *memDev { return &memDev{data: make([]byte, size), bs: bs} }

func (d *memDev) check(p []byte, off int64) error {
	if off%int64(d.bs) != 0 || len(p)%d.bs != 0 {
		return blockdev.ErrMisaligned
	}
	if off < 0 || off+int64(len(p)) > int64(len(d.data)) {
		return blockdev.ErrOutOfRange
	}
	return nil
}
func (d *memDev) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	if err := d.check(p, off); err != nil {
		return 0, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return copy(p, d.data[off:]), nil
}
func (d *memDev) WriteAt(ctx context.Context, p []byte, off int64) (int, error) {
	if err := d.check(p, off); err != nil {
		return 0, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return copy(d.data[off:], p), nil
}
func (d *memDev) Flush(ctx context.Context) error { d.flushes.Add(1); return nil }
func (d *memDev) Size() int64                     { return int64(len(d.data)) }
func (d *memDev) BlockSize() int                  { return d.bs }
func (d *memDev) Close() error                    { return nil }

func TestNodeUnalignedReadWrite(t *testing.T) {
	ctx := context.Background()
	const size = 64 << 10
	dev := newMemDev(size, 512)
	n := NewNode(dev, false)
	shadow := make([]byte, size)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 500; i++ {
		off := rng.Int64N(size - 1)
		ln := 1 + rng.IntN(min(5000, int(size-off)))
		p := make([]byte, ln)
		for j := range p {
			p[j] = byte(rng.Uint32())
		}
		w, errno := n.Write(ctx, nil, p, off)
		if errno != 0 || int(w) != ln {
			t.Fatalf("write off=%d len=%d: n=%d errno=%v", off, ln, w, errno)
		}
		copy(shadow[off:], p)
		roff := rng.Int64N(size)
		rl := 1 + rng.IntN(6000)
		dest := make([]byte, rl)
		res, errno := n.Read(ctx, nil, dest, roff)
		if errno != 0 {
			t.Fatalf("read: %v", errno)
		}
		got, _ := res.Bytes(nil)
		want := shadow[roff:min(size, roff+int64(rl))]
		if !bytes.Equal(got, want) {
			t.Fatalf("read off=%d len=%d mismatch (got %d bytes, want %d)", roff, rl, len(got), len(want))
		}
	}
	if !bytes.Equal(dev.data, shadow) {
		t.Fatal("device content differs from shadow")
	}
}

func TestNodeBounds(t *testing.T) {
	ctx := context.Background()
	dev := newMemDev(4096, 512)
	n := NewNode(dev, false)
	if _, errno := n.Write(ctx, nil, make([]byte, 10), 4090); errno != syscall.EFBIG {
		t.Fatalf("write past end: errno %v, want EFBIG", errno)
	}
	res, errno := n.Read(ctx, nil, make([]byte, 100), 4096)
	if errno != 0 {
		t.Fatal(errno)
	}
	if b, _ := res.Bytes(nil); len(b) != 0 {
		t.Fatalf("read at EOF returned %d bytes", len(b))
	}
	ro := NewNode(dev, true)
	if _, errno := ro.Write(ctx, nil, make([]byte, 512), 0); errno != syscall.EROFS {
		t.Fatalf("read-only write: %v", errno)
	}
	if errno := n.Fsync(ctx, nil, 0); errno != 0 || dev.flushes.Load() != 1 {
		t.Fatalf("fsync: errno %v flushes %d", errno, dev.flushes.Load())
	}
}

// TestMount mounts the adapter and uses it through the kernel: buffered
// writes, an O_DIRECT open, fsync reaching Flush, and truncate refusal.
func TestMount(t *testing.T) {
	testutil.NeedRoot(t, "mounting FUSE directly")
	testutil.NeedFUSE(t)
	dev := newMemDev(8<<20, 512)
	dir := t.TempDir()
	srv, err := Mount(dir, dev, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = srv.Unmount() })
	p := filepath.Join(dir, "lun")
	st, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if st.Size() != 8<<20 {
		t.Fatalf("size %d", st.Size())
	}
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	msg := []byte("hello, unaligned world")
	if _, err := f.WriteAt(msg, 1000); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if dev.flushes.Load() == 0 {
		t.Fatal("fsync did not reach the device")
	}
	if !bytes.Equal(dev.data[1000:1000+len(msg)], msg) {
		t.Fatal("buffered write not on device after fsync")
	}
	if err := f.Truncate(100); err == nil {
		t.Fatal("truncate to another size succeeded")
	}
	f.Close()

	// O_DIRECT: bypasses the page cache, so a change made on the device
	// underneath is visible at once.
	fd, err := syscall.Open(p, syscall.O_RDWR|syscall.O_DIRECT, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer syscall.Close(fd)
	dev.mu.Lock()
	copy(dev.data[4096:], bytes.Repeat([]byte{0xAB}, 4096))
	dev.mu.Unlock()
	buf := alignedBuf(4096)
	if _, err := syscall.Pread(fd, buf, 4096); err != nil {
		t.Fatal(err)
	}
	if buf[0] != 0xAB || buf[4095] != 0xAB {
		t.Fatal("O_DIRECT read did not see device content")
	}
	for i := range buf {
		buf[i] = 0x5C
	}
	if _, err := syscall.Pwrite(fd, buf, 8192); err != nil {
		t.Fatal(err)
	}
	dev.mu.Lock()
	ok := dev.data[8192] == 0x5C && dev.data[8192+4095] == 0x5C
	dev.mu.Unlock()
	if !ok {
		t.Fatal("O_DIRECT write not on device when pwrite returned")
	}
}

func alignedBuf(n int) []byte {
	b := make([]byte, n+4096)
	off := 0
	if r := int(uintptrOf(b) % 4096); r != 0 {
		off = 4096 - r
	}
	return b[off : off+n]
}
