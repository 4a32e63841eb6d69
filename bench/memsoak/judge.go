package memsoak

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
	"time"
)

// judge computes the quarters, the RSS trend and the checks.
//
// RSS criterion: the first quarter of the load is warm-up (heaps, buffer
// pools and the Go runtime's free lists grow to the load's working set), so
// flatness is judged on the rest, two ways, and both must hold:
//   - the median RSS of the last quarter is at most (1+RSSGrowth) × the
//     median of the second quarter (medians: one GC cycle's peak does not
//     move them);
//   - the least-squares slope of RSS over the second half, projected over
//     that half's length, is at most RSSGrowth × the half's median RSS.
//
// With a load shorter than 5 minutes (RSS is still rising to the working
// set: 40 s runs showed Q4/Q2 of 1.07-1.13) or fewer than 4 samples in a
// quarter the RSS check is not judged; the short test judges only
// goroutines, descriptors and errors.
func (r *runner) judge(res *Result, loadT0, loadEnd float64, clientsStopped bool) {
	cfg := r.cfg
	var load []Sample
	for _, s := range res.Samples {
		if s.Phase == "load" {
			load = append(load, s)
		}
	}
	d := loadEnd - loadT0
	var qs [4][]Sample
	for _, s := range load {
		q := min(int(4*(s.T-loadT0)/d), 3)
		qs[q] = append(qs[q], s)
	}
	prevOps, prevConn, prevT := int64(0), int64(0), loadT0
	for _, s := range res.Samples {
		if s.Phase == "baseline" {
			prevOps, prevConn = sum(s.Ops), sum(s.Opened)
		}
	}
	for i, q := range qs {
		Q := &res.Quarters[i]
		Q.Samples = len(q)
		if len(q) == 0 {
			continue
		}
		var rss, heap []int64
		Q.GorMin, Q.FDMin = q[0].Goroutines, q[0].FDs
		for _, s := range q {
			rss, heap = append(rss, s.RSSKiB), append(heap, s.HeapInuse)
			Q.RSSMaxKiB = max(Q.RSSMaxKiB, s.RSSKiB)
			Q.GorMin, Q.GorMax = min(Q.GorMin, s.Goroutines), max(Q.GorMax, s.Goroutines)
			Q.FDMin, Q.FDMax = min(Q.FDMin, s.FDs), max(Q.FDMax, s.FDs)
		}
		Q.RSSMedianKiB, Q.HeapMedian = median(rss), median(heap)
		last := q[len(q)-1]
		if dt := last.T - prevT; dt > 0 {
			Q.OpsPerSec = float64(sum(last.Ops)-prevOps) / dt
			Q.ConnectsPerSec = float64(sum(last.Opened)-prevConn) / dt
		}
		prevOps, prevConn, prevT = sum(last.Ops), sum(last.Opened), last.T
	}

	add := func(c Check) { res.Checks = append(res.Checks, c) }
	b, e := res.Baseline, res.End
	add(Check{Name: "goroutines back to the baseline", Judged: true,
		Pass:   e.Goroutines <= b.Goroutines+cfg.TolGoroutines,
		Detail: fmt.Sprintf("start %d, baseline %d, end %d (tolerance +%d), %.0f s after the clients stopped", res.Start.Goroutines, b.Goroutines, e.Goroutines, cfg.TolGoroutines, res.SettleSeconds)})
	add(Check{Name: "descriptors back to the baseline", Judged: true,
		Pass:   e.FDs <= b.FDs+cfg.TolFDs,
		Detail: fmt.Sprintf("start %d, baseline %d, end %d (tolerance +%d)", res.Start.FDs, b.FDs, e.FDs, cfg.TolFDs)})
	var errs int64
	for _, s := range res.Samples {
		errs = max(errs, sum(s.Errors))
	}
	errs = max(errs, r.c.totalErrs())
	add(Check{Name: "no client errors", Judged: true, Pass: errs == 0, Detail: fmt.Sprintf("%d failed operations", errs)})
	add(Check{Name: "clients stopped within 2 min", Judged: true, Pass: clientsStopped})

	rc := Check{Name: "RSS flat over the second half"}
	if len(qs[1]) >= 4 && len(qs[3]) >= 4 && cfg.Duration >= 5*time.Minute {
		rc.Judged = true
		q2, q4 := res.Quarters[1].RSSMedianKiB, res.Quarters[3].RSSMedianKiB
		var xs, ys []float64
		var half []int64
		for _, s := range load {
			if s.T-loadT0 >= d/2 {
				xs, ys = append(xs, s.T), append(ys, float64(s.RSSKiB))
				half = append(half, s.RSSKiB)
			}
		}
		slope := slopeOf(xs, ys) // KiB/s
		res.SlopeKiBPerHour = slope * 3600
		proj := slope * d / 2
		hm := float64(median(half))
		ratio := float64(q4) / float64(q2)
		rc.Pass = ratio <= 1+cfg.RSSGrowth && proj <= cfg.RSSGrowth*hm
		rc.Detail = fmt.Sprintf("Q4/Q2 median %.3f (bound %.2f); second-half slope %+.1f MiB/h, %+.1f MiB over the half = %+.1f %% of its median %.1f MiB (bound %.0f %%)",
			ratio, 1+cfg.RSSGrowth, slope*3600/1024, proj/1024, 100*proj/hm, hm/1024, 100*cfg.RSSGrowth)
	} else {
		rc.Pass = true
		rc.Detail = "not judged: load shorter than 5 min or fewer than 4 samples in a quarter"
	}
	add(rc)
	res.Pass = true
	for _, c := range res.Checks {
		res.Pass = res.Pass && c.Pass
	}
}

func (c *counters) totalErrs() int64 {
	var t int64
	for p := range nProto {
		t += c.errs[p].Load()
	}
	return t
}

func median(v []int64) int64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// slopeOf is the least-squares slope of ys over xs.
func slopeOf(xs, ys []float64) float64 {
	n := float64(len(xs))
	if n < 2 {
		return 0
	}
	var sx, sy float64
	for i := range xs {
		sx, sy = sx+xs[i], sy+ys[i]
	}
	mx, my := sx/n, sy/n
	var num, den float64
	for i := range xs {
		num += (xs[i] - mx) * (ys[i] - my)
		den += (xs[i] - mx) * (xs[i] - mx)
	}
	if den == 0 {
		return 0
	}
	return num / den
}

// Summary is the result as a Markdown table and the checks.
func (res *Result) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "| when | samples | RSS median MiB | RSS max MiB | Go heap in use median MiB | goroutines min–max | fds min–max | client ops/s | connects/s |\n")
	fmt.Fprintf(&b, "|---|--:|--:|--:|--:|--:|--:|--:|--:|\n")
	one := func(name string, s Sample) {
		fmt.Fprintf(&b, "| %s | 1 | %.1f | %.1f | %.1f | %d | %d | | |\n", name, mib(s.RSSKiB), mib(s.RSSKiB), float64(s.HeapInuse)/(1<<20), s.Goroutines, s.FDs)
	}
	one("start (server ready)", res.Start)
	one("baseline (after warm-up, idle, GC)", res.Baseline)
	for i, q := range res.Quarters {
		if q.Samples == 0 {
			continue
		}
		fmt.Fprintf(&b, "| load, quarter %d | %d | %.1f | %.1f | %.1f | %d–%d | %d–%d | %.0f | %.1f |\n", i+1, q.Samples,
			mib(q.RSSMedianKiB), mib(q.RSSMaxKiB), float64(q.HeapMedian)/(1<<20), q.GorMin, q.GorMax, q.FDMin, q.FDMax, q.OpsPerSec, q.ConnectsPerSec)
	}
	one(fmt.Sprintf("end (idle, GC, %.0f s after the clients stopped)", res.SettleSeconds), res.End)
	b.WriteString("\n")
	if n := len(res.Samples); n > 0 {
		last := res.Samples[n-1]
		b.WriteString("Clients, whole run (warm-up included):")
		for _, p := range protoNames {
			fmt.Fprintf(&b, " %s %d ops, %d connections (%d abrupt closes);", p, last.Ops[p], last.Opened[p], last.Abrupt[p])
		}
		b.WriteString("\n")
		lo, hi := math.Inf(1), math.Inf(-1)
		for _, s := range res.Samples {
			var l float64
			if _, err := fmt.Sscan(s.Load, &l); err == nil && s.Phase == "load" {
				lo, hi = math.Min(lo, l), math.Max(hi, l)
			}
		}
		if hi >= lo {
			fmt.Fprintf(&b, "1-minute load average during the load: %.1f–%.1f.\n", lo, hi)
		}
		b.WriteString("\n")
	}
	for _, c := range res.Checks {
		v := "PASS"
		if !c.Pass {
			v = "FAIL"
		}
		if !c.Judged {
			v = "—"
		}
		fmt.Fprintf(&b, "- %s %s: %s\n", v, c.Name, c.Detail)
	}
	return b.String()
}

// ReadRaw reads a raw file written by Run back into its Result (samples
// included), so the table and the plot can be made again from it.
func ReadRaw(path string) (*Result, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var res *Result
	var samples []Sample
	for i, line := range bytes.Split(b, []byte("\n")) {
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var t struct{ Type string }
		if err := json.Unmarshal(line, &t); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, i+1, err)
		}
		switch t.Type {
		case "sample":
			var s Sample
			if err := json.Unmarshal(line, &s); err != nil {
				return nil, fmt.Errorf("%s:%d: %w", path, i+1, err)
			}
			samples = append(samples, s)
		case "result":
			res = &Result{}
			if err := json.Unmarshal(line, res); err != nil {
				return nil, fmt.Errorf("%s:%d: %w", path, i+1, err)
			}
		}
	}
	if res == nil {
		return nil, fmt.Errorf("%s: no result line (the run did not finish)", path)
	}
	res.Samples = samples
	res.Start, res.Baseline, res.End = res.StartSample, res.BaselineSample, res.EndSample
	return res, nil
}
