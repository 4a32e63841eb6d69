package bench

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// mixed (seed 001 §4.4, Figures 13–15, Table VI): the interference of two
// workloads running at once, each as its own "daemon" with its own
// workers. A workload is PUTs (upload) or GETs (download) of one size; the
// pairs are seed 001's: small upload with small download, large upload
// with large download, small with large upload, and small with large
// download. At each parallelism p (both workloads run p workers, "equal
// parallelism"), every workload runs alone, then each pair runs together;
// both sides of a pair are recorded, so each is the foreground of the
// other's background. Bandwidth and latency of a workload alone and mixed
// come from the records.
//
// A workload's quota is Count requests (fewer for large sizes: at most
// Bytes of payload; at least two per worker); alone, its step does its
// quota. Together, a side that has done its quota keeps going, as the
// seed's background daemon does, until its co-runner has done its own, so
// both run over the same window and the slower one is measured under load
// throughout (at most one request per worker starts after that; a side
// stops for good at 1000 × its quota, an upload side also at 4 × Bytes of
// payload). Downloads read a set of objects uploaded before the steps (not
// measured), cycling through it; uploads write new names and are removed
// after each step.
//
// Records: phase "W alone" (W = "put 4KiB", "get 4MiB", ...) and "W with
// V" for W running together with V; op put or get; unit = W's size;
// threads = p.
func init() {
	register(&Suite{
		Name: "mixed",
		Seed: "seed 001 §4.4 (Figures 13-15, Table VI)",
		Doc:  "two workloads at equal parallelism 1 … 64, alone and together: 4 KiB up/down, 4 MiB up/down, 4 KiB with 4 MiB up, and down",
		Defaults: func(scale float64) Params {
			// The large size shrinks with √scale (a power of two, at least
			// 64 KiB), so that it stays larger than the small one.
			large := int64(4 << 20)
			for large > 64<<10 && float64(large) > float64(4<<20)*math.Sqrt(scale)*1.0001 {
				large /= 2
			}
			return Params{Sizes: []int64{4 << 10, large}, Threads: ScaleThreads([]int{1, 2, 4, 8, 16, 32, 64}, scale),
				Count: ScaleCount(2000, scale, 1), Bytes: int64(ScaleCount(256<<20, scale, 1<<20))}
		},
		Run: runMixed,
	})
}

// workload is one daemon of the mixed suite.
type workload struct {
	op   string // put or get
	size int64
}

func (w workload) String() string { return w.op + " " + FormatSize(w.size) }

// mixedPairs are seed 001's pairs for sizes small and large.
func mixedPairs(small, large int64) [][2]workload {
	up, down := func(s int64) workload { return workload{"put", s} }, func(s int64) workload { return workload{"get", s} }
	if small == large {
		return [][2]workload{{up(small), down(small)}}
	}
	return [][2]workload{{up(small), down(small)}, {up(large), down(large)}, {up(small), up(large)}, {down(small), down(large)}}
}

func runMixed(ctx context.Context, r *Runner) error {
	if len(r.P.Sizes) == 0 || len(r.P.Threads) == 0 {
		return errors.New("mixed: no sizes or thread counts")
	}
	small, large := slices.Min(r.P.Sizes), slices.Max(r.P.Sizes)
	pairs := mixedPairs(small, large)
	var all []workload
	for _, p := range pairs {
		for _, w := range p {
			if !slices.Contains(all, w) {
				all = append(all, w)
			}
		}
	}
	m := &mixed{r: r, data: map[int64][]byte{}, objects: map[int64]int{}}
	// The objects downloads read: enough that the workers of a step read
	// different ones.
	pmax := slices.Max(r.P.Threads)
	for _, w := range all {
		if _, ok := m.data[w.size]; ok {
			continue
		}
		data := AlignedBuffer(int(w.size))
		Fill(data, uint64(w.size))
		m.data[w.size] = data
		if w.op != "get" && !slices.Contains(all, workload{"get", w.size}) {
			continue
		}
		k := min(m.count(w, pmax), max(16, 2*pmax))
		dir := r.Path("mixed-objects-" + FormatSize(w.size))
		if err := r.Setup("mkdir "+dir, r.D.Mkdir(ctx, dir)); err != nil {
			return err
		}
		for i := range k {
			if err := r.Setup("upload the objects downloads read", r.D.Put(ctx, m.object(w.size, i), data)); err != nil {
				return err
			}
		}
		m.objects[w.size] = k
	}
	for _, p := range r.P.Threads {
		for _, w := range all {
			if err := m.run(ctx, p, []workload{w}); err != nil {
				return err
			}
		}
		for _, pair := range pairs {
			if err := m.run(ctx, p, pair[:]); err != nil {
				return err
			}
		}
	}
	return nil
}

type mixed struct {
	r       *Runner
	data    map[int64][]byte // payload per size
	objects map[int64]int    // objects uploaded for downloads, per size
	seq     atomic.Int64
}

// count is the requests of w's step at parallelism p.
func (m *mixed) count(w workload, p int) int {
	n := m.r.P.Count
	if m.r.P.Bytes > 0 {
		n = min(n, int(m.r.P.Bytes/w.size))
	}
	return max(n, 2*p, 1)
}

func (m *mixed) object(size int64, i int) string {
	return m.r.Path("mixed-objects-"+FormatSize(size), fmt.Sprintf("o%05d", i))
}

// run runs ws (one workload alone, or a pair together) at parallelism p.
func (m *mixed) run(ctx context.Context, p int, ws []workload) error {
	// Prepare both sides before either starts.
	dirs := make([]string, len(ws))
	var uploads []string
	for k, w := range ws {
		if w.op == "put" {
			dirs[k] = m.r.Path(fmt.Sprintf("mixed-up-%d", m.seq.Add(1)))
			if err := m.r.Setup("mkdir "+dirs[k], m.r.D.Mkdir(ctx, dirs[k])); err != nil {
				return err
			}
			uploads = append(uploads, dirs[k])
		} else if cd, ok := m.r.D.(CacheDropper); ok {
			for i := range m.objects[w.size] {
				cd.DropCache(ctx, m.object(w.size, i))
			}
		}
	}
	done := make([]atomic.Bool, len(ws)) // quota done (or the step ended)
	errs := make([]error, len(ws))
	var wg sync.WaitGroup
	for k, w := range ws {
		phase := w.String() + " alone"
		n := m.count(w, p) // the quota
		limit := n
		var until func() bool
		if len(ws) == 2 {
			phase = w.String() + " with " + ws[1-k].String()
			until = func() bool { return done[0].Load() && done[1].Load() }
			limit = 1000 * n
			if m.r.P.Bytes > 0 && w.op == "put" { // bounds the disk used
				limit = min(limit, max(n, int(4*m.r.P.Bytes/w.size)))
			}
		}
		data, dir := m.data[w.size], dirs[k]
		bufs := make([][]byte, p)
		var finished atomic.Int64
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer done[k].Store(true) // also when the step failed
			errs[k] = m.r.Step(ctx, Step{Phase: phase, Op: w.op, Unit: w.size, Threads: p, Count: limit, Until: until},
				func(ctx context.Context, wk, i int) (int64, time.Time, error) {
					// Done as the quota's last request returns, not when
					// the step has wrapped up, so both stop at once.
					defer func() {
						if finished.Add(1) >= int64(n) {
							done[k].Store(true)
						}
					}()
					if w.op == "put" {
						if err := m.r.D.Put(ctx, fmt.Sprintf("%s/f%06d", dir, i), data); err != nil {
							return 0, time.Time{}, err
						}
						return w.size, time.Time{}, nil
					}
					if bufs[wk] == nil {
						bufs[wk] = AlignedBuffer(int(w.size))
					}
					n, first, err := m.r.D.Get(ctx, m.object(w.size, i%m.objects[w.size]), bufs[wk])
					if err == nil && int64(n) != w.size {
						err = fmt.Errorf("short read: %d of %d bytes", n, w.size)
					}
					return int64(n), first, err
				})
		}()
	}
	wg.Wait()
	for _, dir := range uploads {
		errs = append(errs, m.r.Setup("remove "+dir, m.r.D.RemoveAll(context.WithoutCancel(ctx), dir)))
	}
	return errors.Join(errs...)
}
