package tuner

import (
	"context"
	"fmt"
	"math"
	"time"
)

// Options shape one tuning run.
type Options struct {
	Grid Grid // default DefaultGrid()
	// Initial are the first points measured, snapped to the grid. The
	// default pins the model's four numbers with three cheap-to-read
	// points: 64 KiB × 1 (fixed cost A0), 4 MiB × 1 (one stream, Bs),
	// 4 MiB × 16 (all streams together, B); the over-parallelisation term
	// A1 is learnt from where the search goes next.
	Initial []Point
	// MaxSamples bounds the points measured (default 5: 11 % of the
	// default grid's 47 points, which leaves room under the 15 %
	// of the grid's time for points that cost more than the average: on
	// `realistic` 6 samples cost 15.7 % of the full grid's time).
	MaxSamples int
	// Budget bounds the wall time spent measuring (0: none); the initial
	// points are always measured.
	Budget time.Duration
	Goal   Goal
	// Log, if set, is told of every sample as it is taken.
	Log func(format string, args ...any)
}

// Report is what a run found.
type Report struct {
	Direction Direction `json:"direction,omitempty"`
	Grid      Grid      `json:"grid"`
	Goal      Goal      `json:"goal"`
	Samples   []Sample  `json:"samples"`
	Model     Model     `json:"model"`
	CPU       CPUModel  `json:"cpu"`
	Choice    Choice    `json:"choice"`
	// Rows is the best parallelism for each chunk size: what a batch of
	// files of that size should use (the request size is then the file
	// size, only the parallelism is free — seed 001 §5.3's 256 KB case).
	Rows       []Choice        `json:"rows"`
	SmallFiles SmallFileAdvice `json:"small_files"`
	Cost       Cost            `json:"cost"`
}

// Choice is a chosen point with its predicted and (if it was sampled)
// measured bandwidth and latency.
type Choice struct {
	Point
	PredictedBps      float64 `json:"predicted_Bps"`
	PredictedLatencyS float64 `json:"predicted_latency_s"`
	MeasuredBps       float64 `json:"measured_Bps,omitempty"`
	MeasuredLatencyS  float64 `json:"measured_latency_s,omitempty"`
	Sampled           bool    `json:"sampled"`
}

// Cost is what the sampling cost.
type Cost struct {
	Samples int     `json:"samples"`
	Seconds float64 `json:"seconds"`
	Bytes   int64   `json:"bytes"`
}

// Run samples adaptively with m and returns the report. The search: measure
// the initial points; then, up to MaxSamples, fit the model, choose on the
// surface (measured points believed, the model elsewhere) and measure the
// choice if it was not measured yet; when it was, measure the unmeasured
// point the model rates best if that promises more than the slack above
// the choice; otherwise stop.
func Run(ctx context.Context, m Measurer, o Options) (*Report, error) {
	if len(o.Grid.ChunkSizes) == 0 {
		o.Grid = DefaultGrid()
	}
	if o.MaxSamples <= 0 {
		o.MaxSamples = 5
	}
	init := o.Initial
	if len(init) == 0 {
		init = []Point{{64 << 10, 1}, {4 << 20, 1}, {4 << 20, 16}}
	}
	r := &Report{Grid: o.Grid, Goal: o.Goal}
	measured := map[Point]Sample{}
	start := time.Now()
	measure := func(pt Point) error {
		s, err := m.Measure(ctx, pt)
		if err != nil {
			return err
		}
		measured[pt] = s
		r.Samples = append(r.Samples, s)
		r.Cost.Samples++
		r.Cost.Seconds += s.Seconds
		r.Cost.Bytes += s.CostBytes
		if o.Log != nil {
			o.Log("sample %s × %d: %.2f MiB/s, latency %.1f ms, %d requests, %.2fs", fmtSize(pt.ChunkSize), pt.Parallel,
				s.BandwidthBps/(1<<20), s.LatencyMeanS*1e3, s.Requests, s.Seconds)
		}
		return nil
	}
	for _, pt := range init {
		pt = o.Grid.snap(pt)
		if _, ok := measured[pt]; ok {
			continue
		}
		if err := measure(pt); err != nil {
			return nil, err
		}
	}
	slack := o.Goal.Slack
	if slack <= 0 {
		slack = 0.05
	}
	for len(r.Samples) < o.MaxSamples && (o.Budget <= 0 || time.Since(start) < o.Budget) {
		surf := Surface{Model: Fit(r.Samples), Measured: measured}
		pt, ok := surf.Choose(o.Grid, o.Goal, Constraints{})
		if ok {
			if _, done := measured[pt]; !done {
				if err := measure(pt); err != nil {
					return nil, err
				}
				continue
			}
		}
		var next Point
		bestPred := 0.0
		for _, q := range o.Grid.Points() {
			if _, done := measured[q]; done {
				continue
			}
			if o.Goal.MaxLatency > 0 && surf.Model.Latency(q) > o.Goal.MaxLatency {
				continue
			}
			if bw := surf.Model.Bandwidth(q); bw > bestPred {
				next, bestPred = q, bw
			}
		}
		if bestPred == 0 || (ok && bestPred <= surf.Bandwidth(pt)*(1+slack)) {
			break
		}
		if err := measure(next); err != nil {
			return nil, err
		}
	}
	r.finish(measured)
	return r, nil
}

// finish fits the final model and fills the choices and advice.
func (r *Report) finish(measured map[Point]Sample) {
	r.Model = Fit(r.Samples)
	r.CPU = FitCPU(r.Samples)
	surf := r.Surface()
	if ch, ok := r.Choose(r.Goal, Constraints{}); ok {
		r.Choice = ch
	}
	r.Rows = nil
	for _, c := range r.Grid.ChunkSizes {
		if pt, ok := surf.Choose(r.Grid, r.Goal, Constraints{MinChunk: c, MaxChunk: c}); ok {
			r.Rows = append(r.Rows, r.choice(surf, pt))
		}
	}
	r.SmallFiles = r.smallFileAdvice(surf)
}

// Surface is the report's model with its samples laid over it.
func (r *Report) Surface() Surface {
	ms := map[Point]Sample{}
	for _, s := range r.Samples {
		ms[s.Point] = s
	}
	return Surface{Model: r.Model, Measured: ms}
}

// Choose chooses on the report's surface for a goal and constraints (what
// --auto does for a particular transfer, without measuring again). Once
// sampling is over, a measurement is believed over a prediction: a point
// that was never measured is chosen only if the model promises more than
// the slack above the best measured point that qualifies (the search, by
// contrast, goes where the model is optimistic, to measure it).
func (r *Report) Choose(goal Goal, k Constraints) (Choice, bool) {
	surf := r.Surface()
	pt, ok := surf.Choose(r.Grid, goal, k)
	if !ok {
		return Choice{}, false
	}
	if _, measured := surf.Measured[pt]; !measured {
		slack := goal.Slack
		if slack <= 0 {
			slack = 0.05
		}
		var best Point
		bestBW := 0.0
		for _, q := range r.Grid.Points() {
			s, ok := surf.Measured[q]
			if !ok || !k.allows(q) || (goal.MaxLatency > 0 && surf.Latency(q) > goal.MaxLatency) {
				continue
			}
			if s.BandwidthBps > bestBW {
				best, bestBW = q, s.BandwidthBps
			}
		}
		if bestBW > 0 && surf.Bandwidth(pt) <= (1+slack)*bestBW {
			pt = best
		}
	}
	return r.choice(surf, pt), true
}

func (r *Report) choice(surf Surface, pt Point) Choice {
	c := Choice{Point: pt, PredictedBps: r.Model.Bandwidth(pt), PredictedLatencyS: r.Model.Latency(pt)}
	if s, ok := surf.Measured[pt]; ok {
		c.Sampled = true
		c.MeasuredBps = s.BandwidthBps
		c.MeasuredLatencyS = s.LatencyMeanS
	}
	return c
}

// snap returns the grid point nearest pt (log distance), within the
// memory bound.
func (g Grid) snap(pt Point) Point {
	best, bd := Point{}, math.Inf(1)
	for _, q := range g.Points() {
		d := math.Abs(math.Log(float64(q.ChunkSize)/float64(pt.ChunkSize))) + math.Abs(math.Log(float64(q.Parallel)/float64(pt.Parallel)))
		if d < bd {
			best, bd = q, d
		}
	}
	return best
}

// CPUModel is the client's CPU cost: PerRequest seconds per request plus
// PerByte seconds per byte, fitted to the samples' CPU time (non-negative
// least squares). Measured in this process, so when the server runs in the
// same process (tests) it includes the server's share.
type CPUModel struct {
	PerRequestS float64 `json:"per_request_s"`
	PerByteS    float64 `json:"per_byte_s"`
}

// FitCPU fits the CPU model. Requests in a window are counted from the
// bytes (window bytes / chunk), which also covers points whose requests
// did not finish inside it.
func FitCPU(samples []Sample) CPUModel {
	var sxx, sxy, syy, sxz, syz float64
	n := 0
	for _, s := range samples {
		if s.WindowBytes <= 0 || s.CPUSeconds <= 0 {
			continue
		}
		x := float64(s.WindowBytes) / float64(s.ChunkSize) // requests
		y := float64(s.WindowBytes)
		z := s.CPUSeconds
		sxx += x * x
		sxy += x * y
		syy += y * y
		sxz += x * z
		syz += y * z
		n++
	}
	if n == 0 {
		return CPUModel{}
	}
	det := sxx*syy - sxy*sxy
	var a, b float64
	if det > 1e-9*sxx*syy {
		a = (sxz*syy - syz*sxy) / det
		b = (syz*sxx - sxz*sxy) / det
	}
	if det <= 1e-9*sxx*syy || a < 0 || b < 0 {
		// Boundary: one of the two alone, whichever fits better.
		a1, b1 := math.Max(0, sxz/sxx), 0.0
		a2, b2 := 0.0, math.Max(0, syz/syy)
		res := func(a, b float64) float64 {
			var s float64
			for _, smp := range samples {
				if smp.WindowBytes <= 0 || smp.CPUSeconds <= 0 {
					continue
				}
				d := a*float64(smp.WindowBytes)/float64(smp.ChunkSize) + b*float64(smp.WindowBytes) - smp.CPUSeconds
				s += d * d
			}
			return s
		}
		if res(a1, b1) <= res(a2, b2) {
			a, b = a1, b1
		} else {
			a, b = a2, b2
		}
	}
	return CPUModel{PerRequestS: a, PerByteS: b}
}

// PerGiB is the CPU seconds to move 1 GiB in requests of chunk bytes.
func (c CPUModel) PerGiB(chunk int64) float64 {
	const gib = 1 << 30
	return c.PerRequestS*gib/float64(chunk) + c.PerByteS*gib
}

// SmallFileAdvice is seed 001 §4.1.3's choice for files of each small size:
// send them in parallel (the request is the file) or bundle them into
// requests of the best chunk size (an archive, or a tar stream). Both can
// reach the same bandwidth; bundling costs fewer requests, so less CPU,
// but a failure resends the whole bundle and one bundle cannot span
// buckets. Parallel wins when it reaches at least 90 % of the bundle's
// bandwidth for at most twice its CPU per GiB.
type SmallFileAdvice struct {
	BundleChunk int64             `json:"bundle_chunk"`
	Sizes       []SmallFileChoice `json:"sizes"`
	// BundleBelow is the largest size for which bundling is advised (0:
	// parallel everywhere).
	BundleBelow int64 `json:"bundle_below"`
}

// SmallFileChoice is the advice for one file size.
type SmallFileChoice struct {
	Size           int64   `json:"size"`
	Parallel       int     `json:"parallel"`
	ParallelBps    float64 `json:"parallel_Bps"`
	ParallelCPUGiB float64 `json:"parallel_cpu_s_per_GiB"`
	BundleBps      float64 `json:"bundle_Bps"`
	BundleCPUGiB   float64 `json:"bundle_cpu_s_per_GiB"`
	Bundle         bool    `json:"bundle"`
}

func (r *Report) smallFileAdvice(surf Surface) SmallFileAdvice {
	var a SmallFileAdvice
	big, ok := surf.Choose(r.Grid, r.Goal, Constraints{MinChunk: 1 << 20})
	if !ok {
		return a
	}
	a.BundleChunk = big.ChunkSize
	bigBW := surf.Bandwidth(big)
	for _, row := range r.Rows {
		if row.ChunkSize >= 1<<20 {
			continue
		}
		c := SmallFileChoice{Size: row.ChunkSize, Parallel: row.Parallel, ParallelBps: surf.Bandwidth(row.Point),
			ParallelCPUGiB: r.CPU.PerGiB(row.ChunkSize), BundleBps: bigBW, BundleCPUGiB: r.CPU.PerGiB(big.ChunkSize)}
		c.Bundle = c.ParallelBps < 0.9*c.BundleBps || (c.BundleCPUGiB > 0 && c.ParallelCPUGiB > 2*c.BundleCPUGiB)
		if c.Bundle {
			a.BundleBelow = max(a.BundleBelow, c.Size)
		}
		a.Sizes = append(a.Sizes, c)
	}
	return a
}

func fmtSize(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}

// FmtSize formats a byte count as the grid's sizes are written (16KiB).
func FmtSize(n int64) string { return fmtSize(n) }
