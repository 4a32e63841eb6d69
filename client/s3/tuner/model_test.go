package tuner

import (
	"context"
	"math"
	"math/rand/v2"
	"testing"
)

// simLink is a deterministic stand-in for an endpoint behind a link, written
// in a different form from Model (so the test is not the model fitting
// itself): a per-connection cap from loss (Mathis), a shared link rate, a
// round trip plus server time per request, CPU per request and per byte
// shared by a few cores, and a queueing penalty for many requests in
// flight; each measurement is off by a seeded ±noise.
type simLink struct {
	rate, stream float64 // bytes/s: link, one connection
	rtt, server  float64 // seconds per request
	cpuReq       float64 // CPU seconds per request
	cpuByte      float64 // CPU seconds per byte
	cores        float64
	window, warm float64 // the measurer's window and warm-up bound (seconds)
	noise        float64
	rng          *rand.Rand
}

func (l *simLink) truth(pt Point) (bw, lat float64) {
	c, p := float64(pt.ChunkSize), float64(pt.Parallel)
	per := math.Min(l.stream, l.rate/p)
	lat = l.rtt + l.server + c/per + 0.0004*p*p/64 // a little queueing per request in flight
	bw = p * c / lat
	// CPU: p streams cannot use more than the cores.
	cpuBW := l.cores / (l.cpuReq/c + l.cpuByte)
	if bw > cpuBW {
		bw = cpuBW
		lat = p * c / bw
	}
	return bw, lat
}

func (l *simLink) Measure(_ context.Context, pt Point) (Sample, error) {
	bw, lat := l.truth(pt)
	n := 1 + l.noise*(2*l.rng.Float64()-1)
	bw *= n
	first := math.Min(l.warm, lat+l.rtt)
	s := Sample{Point: pt, BandwidthBps: bw, WindowS: l.window, Seconds: first + l.window + l.rtt,
		WindowBytes: int64(bw * l.window)}
	s.CostBytes = int64(bw*(first+l.window)) + 1
	if lat < l.window {
		s.Requests = int(float64(pt.Parallel) * l.window / lat)
		s.LatencyMeanS = lat * n
	}
	reqs := float64(s.WindowBytes) / float64(pt.ChunkSize)
	s.CPUSeconds = reqs*l.cpuReq + float64(s.WindowBytes)*l.cpuByte
	return s, nil
}

func realisticSim(seed uint64) *simLink {
	return &simLink{rate: 12.5 * (1 << 20), stream: 1.1e6, rtt: 0.05, server: 0.002,
		cpuReq: 300e-6, cpuByte: 2e-9, cores: 2, window: 2, warm: 1.5, noise: 0.05, rng: rand.New(rand.NewPCG(seed, 1))}
}

func lanSim(seed uint64) *simLink {
	return &simLink{rate: 110 * (1 << 20), stream: 60 * (1 << 20), rtt: 0.0002, server: 0.001,
		cpuReq: 300e-6, cpuByte: 4e-9, cores: 2, window: 2, warm: 1.5, noise: 0.05, rng: rand.New(rand.NewPCG(seed, 2))}
}

// TestSimulatedSurfaces is the criterion on simulated links shaped
// like `realistic` and `lan`, over many noise seeds: the tuner's choice
// reaches 90 % of the best true bandwidth on the full default grid while
// its samples cost at most 15 % of what measuring the whole grid costs.
func TestSimulatedSurfaces(t *testing.T) {
	g := DefaultGrid()
	for _, tc := range []struct {
		name string
		mk   func(uint64) *simLink
	}{{"realistic", realisticSim}, {"lan", lanSim}} {
		t.Run(tc.name, func(t *testing.T) {
			worstFrac, worstCost := 1.0, 0.0
			for seed := uint64(1); seed <= 20; seed++ {
				sim := tc.mk(seed)
				r, err := Run(context.Background(), sim, Options{Grid: g})
				if err != nil {
					t.Fatal(err)
				}
				// The full grid, measured the same way.
				full := tc.mk(seed + 1000)
				var best, fullCost float64
				for _, pt := range g.Points() {
					s, _ := full.Measure(context.Background(), pt)
					fullCost += s.Seconds
					bw, _ := full.truth(pt)
					best = math.Max(best, bw)
				}
				got, _ := sim.truth(r.Choice.Point)
				frac, cost := got/best, r.Cost.Seconds/fullCost
				worstFrac, worstCost = math.Min(worstFrac, frac), math.Max(worstCost, cost)
				if frac < 0.9 || cost > 0.15 {
					t.Errorf("seed %d: chose %s×%d = %.2f MiB/s, %.0f%% of the best %.2f MiB/s; cost %.1fs = %.0f%% of the grid's %.1fs (samples %d)",
						seed, fmtSize(r.Choice.ChunkSize), r.Choice.Parallel, got/(1<<20), 100*frac, best/(1<<20), r.Cost.Seconds, 100*cost, fullCost, len(r.Samples))
				}
			}
			t.Logf("worst over 20 seeds: %.1f%% of the best bandwidth, %.1f%% of the grid's time", 100*worstFrac, 100*worstCost)
		})
	}
}

// TestFitRecovers: on noiseless samples of the model itself, the fit finds
// its parameters again (within the search's resolution).
func TestFitRecovers(t *testing.T) {
	want := Model{A0: 0.03, A1: 0.001, A2: 1e-9, Bs: 2e6, B: 20e6}
	var ss []Sample
	for _, pt := range []Point{{64 << 10, 1}, {4 << 20, 1}, {4 << 20, 16}, {64 << 10, 32}, {1 << 20, 4}, {4 << 20, 32}} {
		ss = append(ss, Sample{Point: pt, BandwidthBps: want.Bandwidth(pt)})
	}
	got := Fit(ss)
	for _, pt := range DefaultGrid().Points() {
		if w, g := want.Bandwidth(pt), got.Bandwidth(pt); math.Abs(g/w-1) > 0.05 {
			t.Errorf("%s×%d: predicted %.3g B/s, true %.3g (model %+v)", fmtSize(pt.ChunkSize), pt.Parallel, g, w, got)
		}
	}
}

// TestLatencyGoal: under a latency bound the choice is the most bandwidth
// among points predicted under it, and no point qualifies below the
// smallest possible latency.
func TestLatencyGoal(t *testing.T) {
	m := Model{A0: 0.078, A1: 0.001, Bs: 20e6, B: 60e6}
	s := Surface{Model: m}
	g := DefaultGrid()
	pt, ok := s.Choose(g, Goal{MaxLatency: 0.1}, Constraints{MinChunk: 256 << 10, MaxChunk: 256 << 10})
	if !ok {
		t.Fatal("no choice under 100 ms")
	}
	if l := m.Latency(pt); l > 0.1 {
		t.Errorf("chose %v with latency %.3f > 0.1", pt, l)
	}
	for _, q := range g.Points() {
		if q.ChunkSize == 256<<10 && m.Latency(q) <= 0.1 && m.Bandwidth(q) > m.Bandwidth(pt)*1.03 {
			t.Errorf("%v has more bandwidth (%.3g > %.3g) under the bound", q, m.Bandwidth(q), m.Bandwidth(pt))
		}
	}
	if _, ok := s.Choose(g, Goal{MaxLatency: 0.01}, Constraints{}); ok {
		t.Error("a bound under A0 was met")
	}
}

// TestChooseBelievesMeasurements: after sampling, an unmeasured point wins
// only if the model promises more than the slack above the best measured
// one (TestS3Tune's loopback profile chose an unmeasured 64 MiB × 16 that
// then measured nothing in its check).
func TestChooseBelievesMeasurements(t *testing.T) {
	m := Model{A0: 0.01, Bs: 50e6, B: 100e6}
	g := DefaultGrid()
	top := Point{64 << 20, 16}
	meas := Point{4 << 20, 16}
	mk := func(measuredBW float64) *Report {
		return &Report{Grid: g, Model: m, Samples: []Sample{{Point: meas, BandwidthBps: measuredBW}}}
	}
	// The model's best is ~100 MB/s; a measured 97 MB/s is within 5 %.
	if c, ok := mk(97e6).Choose(Goal{}, Constraints{}); !ok || c.Point != meas || !c.Sampled {
		t.Errorf("within the slack: chose %+v, want the measured %v", c, meas)
	}
	// Measured 50 MB/s: the model's ~100 MB/s elsewhere is worth trying.
	if c, ok := mk(50e6).Choose(Goal{}, Constraints{}); !ok || c.Sampled || m.Bandwidth(c.Point) < 0.95*m.Bandwidth(top) {
		t.Errorf("far above: chose %+v, want an unmeasured point near %v", c, top)
	}
}
