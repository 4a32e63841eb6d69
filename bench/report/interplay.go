package report

import (
	"fmt"
	"slices"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"

	"github.com/tristore/tristore/bench"
	"github.com/tristore/tristore/internal/units"
)

// Figures of the amplification, mixed and clients suites.

// amplificationFigures is seed 000 Figure 7: per phase (write, read) and
// thread count, wire bytes ÷ payload per file size, a bar per run
// (protocol) and access form.
func amplificationFigures(rs []*Run) ([]Figure, string, error) {
	var threads []int
	for _, r := range rs {
		for _, row := range r.Rows {
			if row.Wire() > 0 && row.Payload > 0 {
				threads = append(threads, row.Threads)
			}
		}
	}
	if len(threads) == 0 {
		return nil, "no wire bytes were counted (a directory target has no link): amplification is not measured", nil
	}
	var figs []Figure
	for _, t := range distinct(threads) {
		for _, ph := range []string{"write", "read"} {
			f, err := amplificationBars(rs, ph, t)
			if err != nil {
				return nil, "", err
			}
			if f != nil {
				figs = append(figs, *f)
			}
		}
	}
	return figs, "", nil
}

func amplificationBars(rs []*Run, phase string, threads int) (*Figure, error) {
	type sk struct {
		r    *Run
		form string
	}
	var sizes []int64
	var series []sk
	for _, r := range rs {
		for _, row := range r.Rows {
			if row.Phase != phase || row.Threads != threads || row.Wire() == 0 || row.Payload == 0 {
				continue
			}
			sizes = append(sizes, row.Unit)
			if k := (sk{r, row.Form}); !slices.Contains(series, k) {
				series = append(series, k)
			}
		}
	}
	if len(series) == 0 {
		return nil, nil
	}
	sizes = distinct(sizes)
	var cats, names []string
	for _, s := range sizes {
		cats = append(cats, bench.FormatSize(s))
	}
	for _, s := range series {
		form := s.form
		if form == "" {
			form = bench.FormDefault
		}
		// Always name the protocol: the figure is about protocol × form.
		name := strings.TrimSpace(s.r.Label + " " + form)
		if s.r.Partial() {
			name += " (partial)"
		}
		names = append(names, name)
	}
	what := "1 thread"
	if threads > 1 {
		what = fmt.Sprintf("%d threads", threads)
	}
	return bars(fmt.Sprintf("amplification: %s, %s", phase, what), "wire bytes ÷ payload",
		"bytes crossing the link both ways per byte of file "+phase+" (netns link: IP packets, headers included; proxy link: TCP payload); 1 = no overhead",
		cats, names, func(s, c int) float64 {
			k := series[s]
			for _, row := range k.r.Rows {
				if row.Phase == phase && row.Form == k.form && row.Unit == sizes[c] && row.Threads == threads {
					return row.Amplification
				}
			}
			return 0
		})
}

// mixedFigures is seed 001 §4.4 (Figures 13–15): per pair of workloads,
// bandwidth and mean latency vs parallelism of each workload alone and
// with its co-runner, a line each.
func mixedFigures(rs []*Run) ([]Figure, error) {
	var pairs []string
	for _, r := range rs {
		for _, row := range r.Rows {
			if p, _, ok := mixedPair(row.Phase); ok && !slices.Contains(pairs, p) {
				pairs = append(pairs, p)
			}
		}
	}
	var figs []Figure
	for _, pair := range pairs {
		for _, lat := range []bool{false, true} {
			f, err := mixedPlot(rs, pair, lat)
			if err != nil {
				return nil, err
			}
			if f != nil {
				figs = append(figs, *f)
			}
		}
	}
	return figs, nil
}

// mixedPair splits a together phase, "put 4KiB with get 4KiB", into its
// pair's name (the two workloads in a fixed order) and its own workload.
func mixedPair(phase string) (pair, self string, ok bool) {
	a, b, ok := strings.Cut(phase, " with ")
	if !ok {
		return "", "", false
	}
	if workloadLess(b, a) {
		return b + " + " + a, a, true
	}
	return a + " + " + b, a, true
}

// workloadLess orders workloads as the seed names its pairs: uploads
// before downloads, then the smaller size first.
func workloadLess(a, b string) bool {
	opA, sa, _ := strings.Cut(a, " ")
	opB, sb, _ := strings.Cut(b, " ")
	if opA != opB {
		return opA == "put"
	}
	na, errA := units.ParseSize(sa)
	nb, errB := units.ParseSize(sb)
	if errA != nil || errB != nil {
		return a < b
	}
	return na < nb
}

// mixedWorkload is the workload ("put 4KiB") of an alone phase
// ("put 4KiB alone").
func mixedWorkload(phase string) (string, bool) { return strings.CutSuffix(phase, " alone") }

func mixedPlot(rs []*Run, pair string, latency bool) (*Figure, error) {
	wa, wb, _ := strings.Cut(pair, " + ")
	ylabel, title := "MB/s", "mixed: bandwidth of "+pair
	if latency {
		ylabel, title = "mean latency (ms)", "mixed: latency of "+pair
	}
	var lines []line
	var threads []int
	for _, r := range rs {
		idx := map[string]int{}
		for _, row := range r.Rows {
			var name string
			if w, ok := mixedWorkload(row.Phase); ok && (w == wa || w == wb) {
				name = w + " alone"
			} else if p, self, ok := mixedPair(row.Phase); ok && p == pair {
				name = self + " mixed"
			} else {
				continue
			}
			if row.Ops == row.Errors {
				continue
			}
			name = seriesName(rs, r, name)
			i, ok := idx[name]
			if !ok {
				i = len(lines)
				idx[name] = i
				lines = append(lines, line{name: name})
			}
			y := row.MBps
			if latency {
				y = meanMs(r, row)
			}
			lines[i].xys = append(lines[i].xys, plotter.XY{X: float64(row.Threads), Y: y})
			threads = append(threads, row.Threads)
		}
	}
	if len(threads) == 0 {
		return nil, nil
	}
	for _, l := range lines {
		slices.SortFunc(l.xys, func(a, b plotter.XY) int { return cmpF(a.X, b.X) })
	}
	p := newPlot(title, "parallelism (each workload)", ylabel)
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = intTicks(distinct(threads))
	names, err := addLines(p, lines)
	if err != nil {
		return nil, err
	}
	headroom(p, len(names))
	p.X.Min, p.X.Max = p.X.Min/1.8, p.X.Max*1.8
	f, err := figure(p, "each workload alone and running at the same parallelism as its co-runner (seed 001 §4.4)", names)
	return &f, err
}

// meanMs is the mean latency of a group's successful requests.
func meanMs(r *Run, row Row) float64 {
	lat := r.Latencies(row.Phase, row.Form, row.Unit, row.Threads)
	if len(lat) == 0 {
		return 0
	}
	var sum float64
	for _, d := range lat {
		sum += float64(d)
	}
	return sum / float64(len(lat)) / 1e6
}

// clientsFigures is seed 004 Figures 3–4 and Tables 4–5: the server's
// aggregate throughput (large files) and fops (small files) vs the number
// of concurrent client processes, a line per run and phase.
func clientsFigures(rs []*Run) ([]Figure, error) {
	var small int64
	for _, r := range rs {
		for _, row := range r.Rows {
			if small == 0 || row.Unit < small {
				small = row.Unit
			}
		}
	}
	var figs []Figure
	for _, large := range []bool{true, false} {
		f, err := clientsPlot(rs, small, large)
		if err != nil {
			return nil, err
		}
		if f != nil {
			figs = append(figs, *f)
		}
	}
	return figs, nil
}

func clientsPlot(rs []*Run, small int64, large bool) (*Figure, error) {
	title, ylabel := "clients: server throughput (large files)", "MB/s (all clients)"
	if !large {
		title, ylabel = "clients: server file operations per second (small files)", "fops (all clients)"
	}
	var lines []line
	var clients []int
	for _, r := range rs {
		idx := map[string]int{}
		for _, row := range r.Rows {
			if (row.Unit == small) == large || row.Ops == row.Errors {
				continue
			}
			if large && row.Bytes == 0 {
				continue
			}
			what := fmt.Sprintf("%s %s", row.Phase, bench.FormatSize(row.Unit))
			name := seriesName(rs, r, what)
			i, ok := idx[name]
			if !ok {
				i = len(lines)
				idx[name] = i
				lines = append(lines, line{name: name})
			}
			y := row.MBps
			if !large {
				y = row.OpsPerSec
			}
			lines[i].xys = append(lines[i].xys, plotter.XY{X: float64(row.Threads), Y: y})
			clients = append(clients, row.Threads)
		}
	}
	if len(clients) == 0 {
		return nil, nil
	}
	for _, l := range lines {
		slices.SortFunc(l.xys, func(a, b plotter.XY) int { return cmpF(a.X, b.X) })
	}
	p := newPlot(title, "concurrent client processes", ylabel)
	p.X.Tick.Marker = intTicks(distinct(clients))
	names, err := addLines(p, lines)
	if err != nil {
		return nil, err
	}
	headroom(p, len(names))
	p.X.Min, p.X.Max = p.X.Min-0.5, p.X.Max+0.5
	f, err := figure(p, "aggregate over all clients, first request start to last end of the step (seed 004 §4.1 2)", names)
	return &f, err
}
