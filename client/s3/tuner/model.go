// Package tuner chooses an S3 transfer's chunk size and parallelism by
// seed 001 §5's sampling and inference: measure a few (chunk size,
// parallelism) combinations against the real endpoint over the real
// network, fit the bandwidth and latency surfaces to them, and pick the
// combination that serves a goal (most bandwidth, or most bandwidth under a
// latency bound). It also weighs seed 001 §4.1.3's choice between bundling
// small files into large requests and sending them in parallel, by the CPU
// time each measured combination cost. Profiles are kept per endpoint and
// network and re-sampled when the bandwidth they promised drifts.
//
// The package only measures through client/s3's engine and imports no
// tristore front end.
package tuner

import (
	"math"
	"sort"
)

// Point is one combination: ChunkSize bytes per request, Parallel requests
// in flight.
type Point struct {
	ChunkSize int64 `json:"chunk_size"`
	Parallel  int   `json:"parallel"`
}

// Grid is the space searched: every chunk size × every parallelism whose
// product fits MaxMemory (the engine enforces that bound, so a point over it
// cannot be run at all).
type Grid struct {
	ChunkSizes []int64 `json:"chunk_sizes"`
	Parallel   []int   `json:"parallel"`
	MaxMemory  int64   `json:"max_memory"`
}

// DefaultGrid is the range: 16 KiB … 64 MiB in powers of 4 and
// 1 … 64 in powers of 2, under the engine's default 1 GiB memory bound:
// 47 points (64 MiB × 32 and × 64 exceed the bound).
func DefaultGrid() Grid {
	return Grid{
		ChunkSizes: []int64{16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20, 16 << 20, 64 << 20},
		Parallel:   []int{1, 2, 4, 8, 16, 32, 64},
		MaxMemory:  1 << 30,
	}
}

// Points lists the grid's feasible points, chunk size major.
func (g Grid) Points() []Point {
	var ps []Point
	for _, c := range g.ChunkSizes {
		for _, p := range g.Parallel {
			if g.MaxMemory > 0 && c*int64(p) > g.MaxMemory {
				continue
			}
			ps = append(ps, Point{c, p})
		}
	}
	return ps
}

// Model is the fitted surface. Seed 001 infers between sampled points by
// the shape of the curves (large requests want less parallelism, latency
// grows with parallelism); this is that shape written as a formula, so a
// handful of samples pins it down and it extrapolates sanely:
//
//	latency(c, p)   = A0 + A1·(p−1) + A2·c·p + c / min(Bs, B/p)
//	bandwidth(c, p) = p · c / latency(c, p)
//
// A0 is a request's fixed cost (round trip, server work), A1 how much each
// further request in flight adds to it (queueing in the client, server and
// CPU: the over-parallelisation seed 001 §4.1.2 sees), A2 the cost of bytes
// in flight beyond what the path holds (an overfull bottleneck queue drops
// packets and every connection backs off: 4 MiB × 32 over `realistic`
// moves half of what 4 MiB × 16 does), Bs the most one request stream gets
// (TCP window, loss: one connection on a lossy WAN cannot fill the link)
// and B the most all streams get together (the link, or the endpoint). Why
// not a free-form interpolation: with 5–7 of 47 points sampled an
// interpolant has nothing to say about the corners, while each of these
// numbers is what one kind of sample measures.
type Model struct {
	A0 float64 `json:"a0_s"`          // seconds
	A1 float64 `json:"a1_s"`          // seconds per extra request in flight
	A2 float64 `json:"a2_s_per_B"`    // seconds per byte in flight
	Bs float64 `json:"stream_Bps"`    // bytes/s of one stream
	B  float64 `json:"aggregate_Bps"` // bytes/s of all streams
	// Loss is the fit's mean squared log error over the samples.
	Loss float64 `json:"fit_loss"`
}

// Latency predicts the mean seconds of one request at pt.
func (m Model) Latency(pt Point) float64 {
	p, c := float64(pt.Parallel), float64(pt.ChunkSize)
	r := math.Min(m.Bs, m.B/p)
	return m.A0 + m.A1*(p-1) + m.A2*c*p + c/r
}

// Bandwidth predicts bytes/s at pt.
func (m Model) Bandwidth(pt Point) float64 {
	return float64(pt.Parallel) * float64(pt.ChunkSize) / m.Latency(pt)
}

// Fit fits the model to samples by least squares on log latency (relative
// error: a 16 KiB point and a 64 MiB point weigh alike). The latency fitted
// is the effective one, p·c / bandwidth, which exists even for points
// whose requests did not finish inside the measurement window. Bs and B
// are searched on a log grid, refined twice; for each pair A0, A1, A2 are
// the non-negative weighted linear least squares solution (every subset of
// them tried, the best non-negative one kept). With fewer samples than
// parameters the search prefers the largest rates that fit (optimism, so
// the next sample goes where the model is unsure).
func Fit(samples []Sample) Model {
	var os []obs
	for _, s := range samples {
		if s.BandwidthBps <= 0 {
			continue
		}
		c, p := float64(s.ChunkSize), float64(s.Parallel)
		os = append(os, obs{c, p, p * c / s.BandwidthBps})
	}
	if len(os) == 0 {
		return Model{A0: 0.05, Bs: 1e6, B: 1e7, Loss: math.Inf(1)}
	}
	fit := func(masks int) Model {
		eval := func(bs, b float64) Model {
			best := Model{Loss: math.Inf(1)}
			for mask := 0; mask < 8; mask++ {
				if mask&^masks != 0 {
					continue
				}
				a, ok := nnlsSubset(os, bs, b, mask)
				if !ok {
					continue
				}
				m := Model{A0: a[0], A1: a[1], A2: a[2], Bs: bs, B: b}
				m.Loss = loss(m, os)
				if m.Loss < best.Loss {
					best = m
				}
			}
			return best
		}
		best := Model{Loss: math.Inf(1)}
		search := func(lo, hi float64, steps int) {
			f := math.Pow(hi/lo, 1/float64(steps))
			for bs := lo; bs <= hi*1.0001; bs *= f {
				for b := bs; b <= hi*1.0001; b *= f {
					m := eval(bs, b)
					// Ties (within noise of a perfect fit) go to larger rates.
					if m.Loss < best.Loss-1e-9 || (math.Abs(m.Loss-best.Loss) <= 1e-9 && m.B+m.Bs > best.B+best.Bs) {
						best = m
					}
				}
			}
		}
		search(1e3, 1e11, 48)
		for _, span := range []float64{2, 1.25} {
			c := best
			lo := math.Min(c.Bs, c.B) / span
			hi := math.Max(c.Bs, c.B) * span
			search(lo, hi, 32)
		}
		return best
	}
	best := fit(7)
	// A1 (queueing per request in flight) only where the samples need it:
	// a fit without it that is within the samples' noise of the best wins.
	// With requests in flight sampled only where the link is full (4 MiB
	// × 4 and × 16 on `ideal`), A1 fitted the noise and then promised small
	// requests nothing from parallelism: 1,000 files of 60 KB went one at
	// a time at 3.5 MiB/s, where 32 in flight made 10.4.
	if best.A1 > 0 {
		if m := fit(5); m.Loss <= best.Loss+a1Noise {
			best = m
		}
	}
	return best
}

type obs struct{ c, p, l float64 }

// a1Noise is the loss (mean squared log error) a fit without A1 may add
// and still be preferred: the samples' noise, ±5 % each ((ln 1.05)² ≈ 0.0024).
const a1Noise = 0.0024

// nnlsSubset solves the weighted least squares for the coefficients in
// mask (bit i: A_i free, else 0) of y = A0 + A1·(p−1) + A2·c·p with
// y = l − c/r and weights 1/l²; ok is false if the solution has a negative
// coefficient or the system is singular.
func nnlsSubset(os []obs, bs, b float64, mask int) ([3]float64, bool) {
	var idx []int
	for i := 0; i < 3; i++ {
		if mask&(1<<i) != 0 {
			idx = append(idx, i)
		}
	}
	var out [3]float64
	if len(idx) == 0 {
		return out, true
	}
	n := len(idx)
	var ata [3][3]float64
	var aty [3]float64
	for _, o := range os {
		r := math.Min(bs, b/o.p)
		y := o.l - o.c/r
		x := [3]float64{1, o.p - 1, o.c * o.p}
		w := 1 / (o.l * o.l)
		for i := 0; i < n; i++ {
			aty[i] += w * x[idx[i]] * y
			for j := 0; j < n; j++ {
				ata[i][j] += w * x[idx[i]] * x[idx[j]]
			}
		}
	}
	// Gaussian elimination with partial pivoting on the n×n system.
	for col := 0; col < n; col++ {
		piv := col
		for r := col + 1; r < n; r++ {
			if math.Abs(ata[r][col]) > math.Abs(ata[piv][col]) {
				piv = r
			}
		}
		if math.Abs(ata[piv][col]) < 1e-300 {
			return out, false
		}
		ata[col], ata[piv] = ata[piv], ata[col]
		aty[col], aty[piv] = aty[piv], aty[col]
		for r := col + 1; r < n; r++ {
			f := ata[r][col] / ata[col][col]
			for k := col; k < n; k++ {
				ata[r][k] -= f * ata[col][k]
			}
			aty[r] -= f * aty[col]
		}
	}
	var sol [3]float64
	for i := n - 1; i >= 0; i-- {
		v := aty[i]
		for k := i + 1; k < n; k++ {
			v -= ata[i][k] * sol[k]
		}
		sol[i] = v / ata[i][i]
	}
	for i := 0; i < n; i++ {
		if !(sol[i] >= 0) || math.IsInf(sol[i], 0) {
			return out, false
		}
		out[idx[i]] = sol[i]
	}
	return out, true
}

func loss(m Model, os []obs) float64 {
	var s float64
	for _, o := range os {
		pl := m.Latency(Point{int64(o.c), int(o.p)})
		d := math.Log(pl / o.l)
		s += d * d
	}
	return s / float64(len(os))
}

// Goal is what the choice optimises.
type Goal struct {
	// MaxLatency, if > 0, bounds the mean per-request latency (seconds):
	// the most bandwidth among points predicted under it (seed 001 §5.3).
	// 0: the most bandwidth (§5.2).
	MaxLatency float64 `json:"max_latency_s,omitempty"`
	// Slack: points within this fraction of the best bandwidth count as
	// equal, and the one with the least memory (chunk × parallel), then the
	// least parallelism, wins — fewer requests in flight cost less CPU
	// (seed 001 §4.1.3), and a crowded link is the noisiest place to be
	// (one 2 s sample of 4 MiB × 64 over `realistic` read 12.3 MiB/s, the
	// next 6.2). Default 0.05.
	Slack float64 `json:"slack,omitempty"`
}

// Constraints narrow the grid to what a workload can use: an upload of
// files larger than the chunk needs chunks of at least S3's 5 MiB part
// minimum; a chunk larger than the files moves nothing more.
type Constraints struct {
	MinChunk, MaxChunk int64
	MaxParallel        int
	MaxMemory          int64
}

func (k Constraints) allows(pt Point) bool {
	return (k.MinChunk == 0 || pt.ChunkSize >= k.MinChunk) &&
		(k.MaxChunk == 0 || pt.ChunkSize <= k.MaxChunk) &&
		(k.MaxParallel == 0 || pt.Parallel <= k.MaxParallel) &&
		(k.MaxMemory == 0 || pt.ChunkSize*int64(pt.Parallel) <= k.MaxMemory)
}

// Surface is the model with the measured points laid over it: where a point
// was measured the measurement is believed, elsewhere the model.
type Surface struct {
	Model    Model
	Measured map[Point]Sample
}

// Bandwidth is the measured bandwidth at pt, or the model's.
func (s Surface) Bandwidth(pt Point) float64 {
	if m, ok := s.Measured[pt]; ok && m.BandwidthBps > 0 {
		return m.BandwidthBps
	}
	return s.Model.Bandwidth(pt)
}

// Latency is the measured mean latency at pt if any requests completed
// there, else the model's.
func (s Surface) Latency(pt Point) float64 {
	if m, ok := s.Measured[pt]; ok && m.Requests > 0 && m.LatencyMeanS > 0 {
		return m.LatencyMeanS
	}
	return s.Model.Latency(pt)
}

// Choose returns the grid point that best serves goal under k, and false
// when no point qualifies (e.g. a latency bound nothing meets).
func (s Surface) Choose(g Grid, goal Goal, k Constraints) (Point, bool) {
	slack := goal.Slack
	if slack <= 0 {
		slack = 0.05
	}
	var cand []Point
	best := 0.0
	for _, pt := range g.Points() {
		if !k.allows(pt) {
			continue
		}
		if goal.MaxLatency > 0 && s.Latency(pt) > goal.MaxLatency {
			continue
		}
		cand = append(cand, pt)
		best = math.Max(best, s.Bandwidth(pt))
	}
	if len(cand) == 0 {
		return Point{}, false
	}
	var near []Point
	for _, pt := range cand {
		if s.Bandwidth(pt) >= (1-slack)*best {
			near = append(near, pt)
		}
	}
	sort.Slice(near, func(i, j int) bool {
		mi := near[i].ChunkSize * int64(near[i].Parallel)
		mj := near[j].ChunkSize * int64(near[j].Parallel)
		if mi != mj {
			return mi < mj
		}
		return near[i].Parallel < near[j].Parallel
	})
	return near[0], true
}
