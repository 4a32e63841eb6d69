package blockfile

import (
	"bytes"
	"context"
	"syscall"
	"testing"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/tristore/tristore/blockdev"
)

// thinDev is a memDev that can deallocate: it records Unmap ranges and
// zeros them (the Unmapper contract).
type thinDev struct {
	*memDev
	unmapped [][2]int64
	refuse   bool
}

func (d *thinDev) Unmap(ctx context.Context, off, n int64) error {
	if d.refuse {
		return blockdev.ErrNotSupported
	}
	if off%int64(d.bs) != 0 || n%int64(d.bs) != 0 {
		return blockdev.ErrMisaligned
	}
	d.unmapped = append(d.unmapped, [2]int64{off, n})
	_, err := d.WriteAt(ctx, make([]byte, n), off)
	return err
}

// TestAllocate: PUNCH_HOLE|KEEP_SIZE unmaps the whole blocks and zeros the
// edges; ZERO_RANGE zeros; other modes, devices that cannot unmap and
// read-only files are refused; statfs has a block size for the loop driver.
func TestAllocate(t *testing.T) {
	ctx := context.Background()
	const size = 64 << 10
	fill := func(d *memDev) {
		for i := range d.data {
			d.data[i] = 0xee
		}
	}
	d := &thinDev{memDev: newMemDev(size, 512)}
	fill(d.memDev)
	n := NewNode(d, false)
	if e := n.Allocate(ctx, nil, 1000, 5000, fallocPunchHole|fallocKeepSize); e != 0 {
		t.Fatalf("punch hole: %v", e)
	}
	if len(d.unmapped) != 1 || d.unmapped[0] != [2]int64{1024, 5632 - 1024} {
		t.Fatalf("unmapped %v, want the whole blocks [1024,5632)", d.unmapped)
	}
	if !bytes.Equal(d.data[1000:6000], make([]byte, 5000)) || d.data[999] != 0xee || d.data[6000] != 0xee {
		t.Fatal("punched range does not read as zeros, or bytes outside it changed")
	}
	// Past the end with KEEP_SIZE: clipped; without: EFBIG.
	if e := n.Allocate(ctx, nil, size-512, 4096, fallocPunchHole|fallocKeepSize); e != 0 {
		t.Fatalf("punch past the end: %v", e)
	}
	if e := n.Allocate(ctx, nil, size-512, 4096, fallocZeroRange); e != syscall.EFBIG {
		t.Fatalf("zero range past the end without KEEP_SIZE: %v", e)
	}
	fill(d.memDev)
	if e := n.Allocate(ctx, nil, 100, 200, fallocZeroRange|fallocKeepSize); e != 0 {
		t.Fatalf("zero range inside a block: %v", e)
	}
	if !bytes.Equal(d.data[100:300], make([]byte, 200)) || d.data[99] != 0xee || d.data[300] != 0xee {
		t.Fatal("zero range wrong")
	}
	for _, mode := range []uint32{0, fallocKeepSize, fallocPunchHole} {
		if e := n.Allocate(ctx, nil, 0, 4096, mode); e != syscall.EOPNOTSUPP {
			t.Fatalf("mode %#x: %v, want EOPNOTSUPP", mode, e)
		}
	}
	d.refuse = true
	if e := n.Allocate(ctx, nil, 0, 4096, fallocPunchHole|fallocKeepSize); e != syscall.EOPNOTSUPP {
		t.Fatalf("device refusing unmap: %v", e)
	}
	plain := NewNode(newMemDev(size, 512), false)
	if e := plain.Allocate(ctx, nil, 0, 4096, fallocPunchHole|fallocKeepSize); e != syscall.EOPNOTSUPP {
		t.Fatalf("device without Unmap: %v", e)
	}
	if e := NewNode(d, true).Allocate(ctx, nil, 0, 4096, fallocZeroRange); e != syscall.EROFS {
		t.Fatalf("read-only: %v", e)
	}
	var out fuse.StatfsOut
	if e := n.Statfs(ctx, &out); e != 0 || out.Bsize == 0 || out.Blocks*uint64(out.Bsize) != size {
		t.Fatalf("statfs %+v %v", out, e)
	}
}
