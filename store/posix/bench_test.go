package posix_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/tristore/tristore/store"
	"github.com/tristore/tristore/store/posix"
)

// Benchmarks of the store itself (no network): durable Put and Get of
// 4 KiB and 4 MiB objects, serial and 16-way parallel, next to a baseline
// doing only the irreducible durable steps on the same disk (write a temp
// file, fsync, rename, fsync the directory; read a file). Run:
//
//	go test -run '^$' -bench . -benchtime 2s ./store/posix/

var benchSizes = []int{4 << 10, 4 << 20}

// cpuMeter reports the process CPU time (user+system, all threads) per
// operation as "cpu-ns/op": on a shared, loaded machine wall time swings
// several-fold between runs, CPU cost per operation much less.
func cpuMeter(b *testing.B) func() {
	start := cpuNow()
	return func() {
		if b.N > 0 {
			b.ReportMetric(float64(cpuNow()-start)/float64(b.N), "cpu-ns/op")
		}
	}
}

func cpuNow() int64 {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}

func benchStore(b *testing.B, nox bool) (*posix.Backend, context.Context) {
	st, err := posix.Open(b.TempDir(), posix.Options{NoXattr: nox})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	ctx := context.Background()
	if err := st.CreateBucket(ctx, "bench", ""); err != nil {
		b.Fatal(err)
	}
	return st, ctx
}

func sizeName(n int) string {
	if n >= 1<<20 {
		return fmt.Sprintf("%dMiB", n>>20)
	}
	return fmt.Sprintf("%dKiB", n>>10)
}

func BenchmarkPut(b *testing.B) {
	for _, size := range benchSizes {
		data := bytes.Repeat([]byte("tristore"), size/8)
		for _, par := range []int{1, 16} {
			b.Run(fmt.Sprintf("%s/p%d", sizeName(size), par), func(b *testing.B) {
				st, ctx := benchStore(b, false)
				var n atomic.Int64
				b.SetBytes(int64(size))
				defer cpuMeter(b)()

				if par == 1 {
					for i := 0; b.Loop(); i++ {
						if _, err := st.Put(ctx, "bench", fmt.Sprintf("k/%d", i%64), bytes.NewReader(data), int64(size), store.ObjectMeta{ContentType: "x/y"}); err != nil {
							b.Fatal(err)
						}
					}
					return
				}
				b.SetParallelism(max(1, par/runtime.GOMAXPROCS(0))) // par goroutines in all
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						i := n.Add(1)
						if _, err := st.Put(ctx, "bench", fmt.Sprintf("k/%d", i%64), bytes.NewReader(data), int64(size), store.ObjectMeta{ContentType: "x/y"}); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		}
	}
}

func BenchmarkGet(b *testing.B) {
	for _, size := range benchSizes {
		data := bytes.Repeat([]byte("tristore"), size/8)
		for _, par := range []int{1, 16} {
			b.Run(fmt.Sprintf("%s/p%d", sizeName(size), par), func(b *testing.B) {
				st, ctx := benchStore(b, false)
				for i := range 16 {
					if _, err := st.Put(ctx, "bench", fmt.Sprintf("k/%d", i), bytes.NewReader(data), int64(size), store.ObjectMeta{}); err != nil {
						b.Fatal(err)
					}
				}
				b.SetBytes(int64(size))
				defer cpuMeter(b)()
				get := func(i int64) error {
					rc, _, err := st.Get(ctx, "bench", fmt.Sprintf("k/%d", i%16), 0, -1)
					if err != nil {
						return err
					}
					_, err = io.Copy(io.Discard, rc)
					rc.Close()
					return err
				}
				if par == 1 {
					for i := int64(0); b.Loop(); i++ {
						if err := get(i); err != nil {
							b.Fatal(err)
						}
					}
					return
				}
				var n atomic.Int64
				b.SetParallelism(max(1, par/runtime.GOMAXPROCS(0)))
				b.RunParallel(func(pb *testing.PB) {
					for pb.Next() {
						if err := get(n.Add(1)); err != nil {
							b.Error(err)
							return
						}
					}
				})
			})
		}
	}
}

// BenchmarkRawDurableWrite is the floor for Put: temp file, write, fsync,
// rename, fsync dir — nothing else.
func BenchmarkRawDurableWrite(b *testing.B) {
	for _, size := range benchSizes {
		data := bytes.Repeat([]byte("tristore"), size/8)
		b.Run(sizeName(size)+"/p1", func(b *testing.B) {
			dir := b.TempDir()
			b.SetBytes(int64(size))
			defer cpuMeter(b)()
			for i := 0; b.Loop(); i++ {
				tmp := filepath.Join(dir, fmt.Sprintf(".tmp-%d", i))
				f, err := os.OpenFile(tmp, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
				if err != nil {
					b.Fatal(err)
				}
				f.Write(data)
				f.Sync()
				f.Close()
				if err := os.Rename(tmp, filepath.Join(dir, fmt.Sprintf("k%d", i%64))); err != nil {
					b.Fatal(err)
				}
				d, _ := os.Open(dir)
				d.Sync()
				d.Close()
			}
		})
	}
}

// BenchmarkRawRead is the floor for Get: open, read all, close.
func BenchmarkRawRead(b *testing.B) {
	for _, size := range benchSizes {
		data := bytes.Repeat([]byte("tristore"), size/8)
		b.Run(sizeName(size)+"/p1", func(b *testing.B) {
			dir := b.TempDir()
			for i := range 16 { // the same working set as BenchmarkGet
				os.WriteFile(filepath.Join(dir, fmt.Sprintf("k%d", i)), data, 0o644)
			}
			b.SetBytes(int64(size))
			defer cpuMeter(b)()
			for i := 0; b.Loop(); i++ {
				f, err := os.Open(filepath.Join(dir, fmt.Sprintf("k%d", i%16)))
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, f)
				f.Close()
			}
		})
	}
}
