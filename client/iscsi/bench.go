package iscsi

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"math/bits"
	mrand "math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tristore/tristore/blockdev"
)

// BenchConfig describes one fio-like run against any blockdev.Device. It
// lives here because the initiator is the Device `tristore iscsi bench`
// measures; nothing in it is iSCSI-specific, so it also measures a file
// LUN or a RAID volume for comparison.
type BenchConfig struct {
	Pattern    string        // randread, randwrite, read (sequential), write (sequential)
	BlockSize  int           // bytes per I/O, a multiple of the device block size
	QueueDepth int           // I/Os in flight
	Duration   time.Duration // how long to run
	Span       int64         // bytes of the device to use from offset 0 (0 = all)
	MaxOps     int64         // stop after this many I/Os (0 = no limit)
}

// BenchResult holds the figures of one run.
type BenchResult struct {
	Pattern    string  `json:"pattern"`
	BlockSize  int     `json:"block_size"`
	QueueDepth int     `json:"queue_depth"`
	Ops        int64   `json:"ops"`
	Bytes      int64   `json:"bytes"`
	Seconds    float64 `json:"seconds"`
	IOPS       float64 `json:"iops"`
	MBps       float64 `json:"mb_per_s"` // 10^6 bytes per second
	P50us      float64 `json:"lat_p50_us"`
	P99us      float64 `json:"lat_p99_us"`
	MaxUs      float64 `json:"lat_max_us"`
}

// Bench runs cfg against dev. Progress lines go to progress (may be nil)
// once a second. The first I/O error ends the run and is returned.
func Bench(ctx context.Context, dev blockdev.Device, cfg BenchConfig, progress io.Writer) (*BenchResult, error) {
	bs := dev.BlockSize()
	if cfg.BlockSize <= 0 || cfg.BlockSize%bs != 0 {
		return nil, fmt.Errorf("bench: block size %d is not a positive multiple of the device block size %d", cfg.BlockSize, bs)
	}
	if cfg.QueueDepth <= 0 || cfg.QueueDepth > 1024 {
		return nil, fmt.Errorf("bench: queue depth %d out of 1..1024", cfg.QueueDepth)
	}
	if cfg.Duration <= 0 && cfg.MaxOps <= 0 {
		return nil, errors.New("bench: need a duration or an op count")
	}
	span := cfg.Span
	if span <= 0 || span > dev.Size() {
		span = dev.Size()
	}
	nblk := span / int64(cfg.BlockSize)
	if nblk < 1 {
		return nil, fmt.Errorf("bench: device (%d bytes) smaller than one %d-byte I/O", span, cfg.BlockSize)
	}
	var write, random bool
	switch cfg.Pattern {
	case "randread":
		random = true
	case "randwrite":
		random, write = true, true
	case "read":
	case "write":
		write = true
	default:
		return nil, fmt.Errorf("bench: pattern %q: want randread, randwrite, read or write", cfg.Pattern)
	}
	if cfg.Duration > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.Duration)
		defer cancel()
	}

	var (
		seq, ops, byteCount atomic.Int64
		mu                  sync.Mutex
		firstErr            error
		hist                latHist
		wg                  sync.WaitGroup
	)
	stop := make(chan struct{})
	start := time.Now()
	runCtx, cancelRun := context.WithCancel(ctx)
	defer cancelRun()
	for w := 0; w < cfg.QueueDepth; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			buf := make([]byte, cfg.BlockSize)
			if write {
				_, _ = rand.Read(buf)
			}
			rng := mrand.New(mrand.NewPCG(uint64(w), uint64(start.UnixNano())))
			var local latHist
			defer func() { mu.Lock(); hist.merge(&local); mu.Unlock() }()
			for runCtx.Err() == nil {
				n := seq.Add(1)
				if cfg.MaxOps > 0 && n > cfg.MaxOps {
					return
				}
				blk := (n - 1) % nblk
				if random {
					blk = rng.Int64N(nblk)
				}
				off := blk * int64(cfg.BlockSize)
				t0 := time.Now()
				var err error
				if write {
					_, err = dev.WriteAt(runCtx, buf, off)
				} else {
					_, err = dev.ReadAt(runCtx, buf, off)
				}
				if err != nil {
					if runCtx.Err() != nil {
						return // the run's time is up; this I/O does not count
					}
					mu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("bench: %s at offset %d: %w", cfg.Pattern, off, err)
					}
					mu.Unlock()
					cancelRun()
					return
				}
				local.add(time.Since(t0))
				ops.Add(1)
				byteCount.Add(int64(cfg.BlockSize))
			}
		}(w)
	}
	go func() {
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		var lastOps int64
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				if progress != nil {
					o := ops.Load()
					fmt.Fprintf(progress, "\r%s %5.0fs  %9d IOPS  %8.1f MB/s   ", cfg.Pattern,
						time.Since(start).Seconds(), o-lastOps, float64(o-lastOps)*float64(cfg.BlockSize)/1e6)
					lastOps = o
				}
			}
		}
	}()
	wg.Wait()
	close(stop)
	if progress != nil {
		fmt.Fprintln(progress)
	}
	if firstErr != nil {
		return nil, firstErr
	}
	if err := ctx.Err(); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return nil, err
	}
	el := time.Since(start).Seconds()
	r := &BenchResult{
		Pattern: cfg.Pattern, BlockSize: cfg.BlockSize, QueueDepth: cfg.QueueDepth,
		Ops: ops.Load(), Bytes: byteCount.Load(), Seconds: el,
	}
	r.IOPS = float64(r.Ops) / el
	r.MBps = float64(r.Bytes) / el / 1e6
	r.P50us, r.P99us, r.MaxUs = hist.quantile(0.50), hist.quantile(0.99), float64(hist.max)/1e3
	return r, nil
}

// latHist is a log-linear latency histogram (16 sub-buckets per power of
// two, under 7% error), so a long run at high IOPS needs constant memory.
type latHist struct {
	counts [64 * 16]int64
	n      int64
	max    int64
}

func bucketOf(ns int64) int {
	if ns < 16 {
		return int(max(ns, 0))
	}
	e := 63 - bits.LeadingZeros64(uint64(ns)) // ns in [2^e, 2^(e+1))
	sub := int((ns >> (e - 4)) & 15)
	return (e-3)*16 + sub
}

func bucketLow(b int) int64 {
	if b < 16 {
		return int64(b)
	}
	e := b/16 + 3
	sub := int64(b % 16)
	return (1 << e) + sub<<(e-4)
}

func (h *latHist) add(d time.Duration) {
	ns := d.Nanoseconds()
	h.counts[bucketOf(ns)]++
	h.n++
	h.max = max(h.max, ns)
}

func (h *latHist) merge(o *latHist) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.n += o.n
	h.max = max(h.max, o.max)
}

// quantile returns the q-quantile in microseconds.
func (h *latHist) quantile(q float64) float64 {
	if h.n == 0 {
		return 0
	}
	want := int64(q*float64(h.n-1)) + 1
	var acc int64
	for i, c := range h.counts {
		acc += c
		if acc >= want {
			lo := bucketLow(i)
			hi := bucketLow(i + 1)
			return float64(lo+hi) / 2 / 1e3
		}
	}
	return float64(h.max) / 1e3
}
