package iscsi

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/tristore/tristore/blockdev"
)

type memDev struct {
	mu   sync.Mutex
	data []byte
}

func (d *memDev) ReadAt(_ context.Context, p []byte, off int64) (int, error) {
	if off%512 != 0 || len(p)%512 != 0 {
		return 0, blockdev.ErrMisaligned
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return copy(p, d.data[off:]), nil
}
func (d *memDev) WriteAt(_ context.Context, p []byte, off int64) (int, error) {
	if off+int64(len(p)) > int64(len(d.data)) {
		return 0, blockdev.ErrOutOfRange
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return copy(d.data[off:], p), nil
}
func (d *memDev) Flush(context.Context) error { return nil }
func (d *memDev) Size() int64                 { return int64(len(d.data)) }
func (d *memDev) BlockSize() int              { return 512 }
func (d *memDev) Close() error                { return nil }

var errBroken = errors.New("broken disk")

type failDev struct{ *memDev }

func (failDev) ReadAt(context.Context, []byte, int64) (int, error) { return 0, errBroken }

func TestBench(t *testing.T) {
	dev := &memDev{data: make([]byte, 1<<20)}
	for _, pat := range []string{"randread", "randwrite", "read", "write"} {
		r, err := Bench(context.Background(), dev, BenchConfig{Pattern: pat, BlockSize: 4096, QueueDepth: 4, MaxOps: 1000, Duration: time.Minute}, nil)
		if err != nil {
			t.Fatal(err)
		}
		if r.Ops != 1000 || r.Bytes != 1000*4096 || r.IOPS <= 0 || r.P99us < r.P50us || r.MaxUs < r.P99us*0.9 {
			t.Fatalf("%s: %+v", pat, r)
		}
	}
	for _, bad := range []BenchConfig{
		{Pattern: "randread", BlockSize: 1000, QueueDepth: 1, MaxOps: 1},
		{Pattern: "randread", BlockSize: 4096, QueueDepth: 0, MaxOps: 1},
		{Pattern: "trim", BlockSize: 4096, QueueDepth: 1, MaxOps: 1},
		{Pattern: "read", BlockSize: 2 << 20, QueueDepth: 1, MaxOps: 1},
		{Pattern: "read", BlockSize: 4096, QueueDepth: 1},
	} {
		if _, err := Bench(context.Background(), dev, bad, nil); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
	// an I/O error ends the run with that error
	if _, err := Bench(context.Background(), failDev{&memDev{data: make([]byte, 1<<20)}}, BenchConfig{Pattern: "randread", BlockSize: 4096, QueueDepth: 4, Duration: time.Minute}, nil); !errors.Is(err, errBroken) {
		t.Errorf("device error did not end the run: %v", err)
	}
}

func TestLatHist(t *testing.T) {
	var h latHist
	for i := 1; i <= 1000; i++ {
		h.add(time.Duration(i) * time.Microsecond)
	}
	p50, p99 := h.quantile(0.5), h.quantile(0.99)
	if p50 < 470 || p50 > 530 || p99 < 920 || p99 > 1060 {
		t.Fatalf("p50 %.0f p99 %.0f (want ~500, ~990)", p50, p99)
	}
	for ns := int64(0); ns < 1<<40; ns = ns*3 + 1 {
		b := bucketOf(ns)
		if lo, hi := bucketLow(b), bucketLow(b+1); ns < lo || ns >= hi {
			t.Fatalf("ns %d in bucket %d [%d,%d)", ns, b, lo, hi)
		}
	}
}

func TestSerial(t *testing.T) {
	if !snLT(0xfffffff0, 5) || snLT(5, 0xfffffff0) || !snLE(7, 7) || snLE(8, 7) {
		t.Fatal("serial number arithmetic wrong across the wrap")
	}
}
