package bench_test

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"sync"
	"testing"

	"github.com/tristore/tristore/bench"
	"github.com/tristore/tristore/blockdev"
)

// TestSuiteIozone runs iozone on every loopback target with a 256 KiB
// data set and the default request sizes (4 … 64 KiB): the four tests per
// form and size, each moving the whole data set once, S3's write passes
// skipped and marked, a four-way average per (form, size) from the rows,
// nothing left behind.
func TestSuiteIozone(t *testing.T) {
	for proto, target := range targets(t) {
		t.Run(proto, func(t *testing.T) {
			const file = 256 << 10
			out := filepath.Join(t.TempDir(), "res")
			run, ops := execute(t, bench.Config{Suite: "iozone", Target: target, FileSize: file, Scale: 0.01, Out: out})
			if !slices.Equal(run.Params.Sizes, []int64{4 << 10, 8 << 10, 16 << 10, 32 << 10, 64 << 10}) || run.Params.FileSize != file {
				t.Fatalf("params %+v", run.Params)
			}
			moved := map[string]int64{}
			for _, o := range ops {
				moved[fmt.Sprintf("%s %s %d", o.Form, o.Phase, o.Unit)] += o.Size
			}
			tests := bench.IozonePhases
			if proto == "s3" {
				tests = []string{"read", "randread"}
				if run.Params.Extra["skipped_write"] == "" || run.Params.Extra["skipped_randwrite"] == "" {
					t.Fatalf("S3 write passes not marked skipped: %+v", run.Params.Extra)
				}
			}
			for _, form := range run.Forms {
				for _, u := range run.Params.Sizes {
					for _, ph := range tests {
						if got := moved[fmt.Sprintf("%s %s %d", form, ph, u)]; got != file {
							t.Fatalf("%s %s %d moved %d bytes, want %d (%v)", form, ph, u, got, file, moved)
						}
					}
				}
			}
			rows, err := bench.Summarize(out)
			if err != nil {
				t.Fatal(err)
			}
			avg := bench.IozoneAverages(rows)
			if len(avg) != len(run.Forms)*len(run.Params.Sizes) {
				t.Fatalf("%d averages for %d forms x %d sizes: %+v", len(avg), len(run.Forms), len(run.Params.Sizes), avg)
			}
			for _, a := range avg {
				sum := a.Write + a.Read + a.RandWrite + a.RandRead
				if a.Tests != len(tests) || a.Average <= 0 || a.Average != sum/float64(len(tests)) {
					t.Fatalf("average %+v", a)
				}
			}
			checkClean(t, proto, target, run)
		})
	}
}

// memDev is a blockdev.Device in memory that logs every request's offset.
type memDev struct {
	mu   sync.Mutex
	data []byte
	log  []string
}

func (m *memDev) rw(p []byte, off int64, write bool) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if off%512 != 0 || len(p)%512 != 0 || off+int64(len(p)) > int64(len(m.data)) {
		return 0, blockdev.ErrMisaligned
	}
	op := "r"
	if write {
		op = "w"
		copy(m.data[off:], p)
	} else {
		copy(p, m.data[off:])
	}
	m.log = append(m.log, fmt.Sprintf("%s %d %d", op, off, len(p)))
	return len(p), nil
}
func (m *memDev) ReadAt(_ context.Context, p []byte, off int64) (int, error) {
	return m.rw(p, off, false)
}
func (m *memDev) WriteAt(_ context.Context, p []byte, off int64) (int, error) {
	return m.rw(p, off, true)
}
func (m *memDev) Flush(context.Context) error { return nil }
func (m *memDev) Size() int64                 { return int64(len(m.data)) }
func (m *memDev) BlockSize() int              { return 512 }
func (m *memDev) Close() error                { return nil }

// TestIozoneOverBlockDevice runs iozone through OpenBlock over a plain
// blockdev.Device (what a RAID volume is) and checks the requests the
// device saw: per request size, a sequential write and read of the data
// set, then a random write and read that touch every block exactly once,
// in the same shuffled order, not the sequential one.
func TestIozoneOverBlockDevice(t *testing.T) {
	const file, u = 64 << 10, 8 << 10
	dev := &memDev{data: make([]byte, 1<<20)}
	d := bench.OpenBlock(dev, "mem://test", "mem")
	out := filepath.Join(t.TempDir(), "res")
	run, err := bench.Execute(context.Background(), bench.Config{Suite: "iozone", Target: d.Target(), Driver: d, FileSize: file,
		Sizes: []int64{u}, Forms: []string{bench.FormDefault}, Out: out})
	if err != nil {
		t.Fatal(err)
	}
	if run.Protocol != "mem" || run.Target != "mem://test" || run.Partial {
		t.Fatalf("run %+v", run)
	}
	const n = file / u
	// The first n+? requests fill the data set (OpenFile); the passes are
	// the last 4n.
	if len(dev.log) < 4*n {
		t.Fatalf("%d requests: %v", len(dev.log), dev.log)
	}
	passes := dev.log[len(dev.log)-4*n:]
	offsets := func(p []string, op string) []int64 {
		var out []int64
		for _, s := range p {
			var o string
			var off, l int64
			fmt.Sscanf(s, "%s %d %d", &o, &off, &l)
			if o != op || l != u {
				t.Fatalf("request %q, want %s of %d bytes in %v", s, op, u, p)
			}
			out = append(out, off)
		}
		return out
	}
	seqW, seqR := offsets(passes[:n], "w"), offsets(passes[n:2*n], "r")
	rndW, rndR := offsets(passes[2*n:3*n], "w"), offsets(passes[3*n:], "r")
	base := seqW[0]
	for i := range n {
		if seqW[i] != base+int64(i)*u || seqR[i] != seqW[i] {
			t.Fatalf("sequential passes %v %v", seqW, seqR)
		}
	}
	if !slices.Equal(rndW, rndR) || slices.Equal(rndW, seqW) {
		t.Fatalf("random passes write %v read %v (sequential %v)", rndW, rndR, seqW)
	}
	sorted := slices.Clone(rndW)
	slices.Sort(sorted)
	if !slices.Equal(sorted, seqW) {
		t.Fatalf("random pass %v does not touch every block once", rndW)
	}
}
