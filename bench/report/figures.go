package report

import (
	"fmt"
	"slices"

	"github.com/tristore/tristore/bench"
)

// Section is one suite's part of the page: its figures and the runs whose
// tables follow them.
type Section struct {
	Suite   string
	Seed    string
	Note    string
	Figures []Figure
	// Tables are the seed's own figures as numbers (postmark, iozone).
	Tables []Table
	Runs   []*Run
}

// sections builds a section per suite found, with the figures shaped like
// the seed's for that suite.
func sections(runs []*Run) ([]Section, error) {
	var out []Section
	for _, s := range suites(runs) {
		rs := runsOf(runs, s)
		sec := Section{Suite: s, Runs: rs}
		if su, ok := bench.LookupSuite(s); ok {
			sec.Seed = su.Seed
		}
		figs, note, err := suiteFigures(s, rs)
		if err == nil {
			switch s {
			case "postmark":
				var f []Figure
				f, sec.Tables, err = postmarkFigures(rs)
				figs = append(f, figs...)
			case "iozone":
				var f []Figure
				f, sec.Tables, err = iozoneFigures(rs)
				figs = append(f, figs...)
			}
		}
		if err != nil {
			return nil, fmt.Errorf("report: %s plots: %w", s, err)
		}
		sec.Figures, sec.Note = figs, note
		out = append(out, sec)
	}
	return out, nil
}

func all(Row) bool { return true }

func noSplit(Row) string { return "" }

func minThreads(r *Run) int {
	t := 0
	for _, row := range r.Rows {
		if t == 0 || row.Threads < t {
			t = row.Threads
		}
	}
	return t
}

// suiteFigures picks the figures for one suite.
func suiteFigures(suite string, rs []*Run) ([]Figure, string, error) {
	var figs []Figure
	add := func(f *Figure, err error) error {
		if err == nil && f != nil {
			figs = append(figs, *f)
		}
		return err
	}
	var note string
	var err error
	switch suite {
	case "units":
		// Seed 000 Figure 2: throughput vs access unit, a line per form.
		form := func(r Row) string { return r.Form }
		for _, ph := range []string{"write", "read"} {
			if err = add(throughputVs(rs, "units: "+ph+" throughput vs access unit", "one file read/written sequentially in units; a line per access form", ph, false, all, form)); err != nil {
				break
			}
		}
	case "single":
		// Seed 000 Figure 3: throughput vs file size; latency CDFs.
		for _, ph := range []string{"write", "read"} {
			if err = add(throughputVs(rs, "single: "+ph+" throughput vs file size", "whole files one at a time", ph, false, all, noSplit)); err != nil {
				break
			}
		}
		for _, ph := range []string{"write", "read"} {
			if err == nil {
				err = add(latencyCDF(rs, "single: "+ph+" latency CDF", "per-request latency, a line per file size", ph, minThreads))
			}
		}
	case "batch":
		// Seed 000 Figures 4–6: throughput vs threads, per file size.
		var sizes []int64
		for _, r := range rs {
			for _, row := range r.Rows {
				sizes = append(sizes, row.Unit)
			}
		}
		for _, size := range distinct(sizes) {
			match := func(r Row) bool { return r.Unit == size }
			for _, ph := range []string{"write", "read"} {
				if err == nil {
					err = add(throughputVs(rs, fmt.Sprintf("batch: %s of %s files vs threads", ph, bench.FormatSize(size)),
						"steady-state throughput of a set of same-size files", ph, true, match, noSplit))
				}
			}
		}
	case "objects":
		// Seed 001: latency CDFs at the lowest parallelism, bandwidth heat
		// maps of size × parallelism, peak bandwidth per size.
		for _, ph := range []string{"put", "get"} {
			if err == nil {
				err = add(latencyCDF(rs, "objects: "+ph+" latency CDF", "per-request latency at the lowest parallelism, a line per object size", ph, minThreads))
			}
		}
		for _, r := range rs {
			for _, ph := range []string{"put", "get"} {
				if err == nil {
					err = add(heatMap(r, ph))
				}
			}
		}
		for _, ph := range []string{"put", "get"} {
			if err == nil {
				err = add(peakBandwidth(rs, ph))
			}
		}
	case "efficiency":
		err = add(wireBars(rs, true))
		if len(figs) == 0 {
			note = "no wire bytes were counted (a directory target has no link): efficiency is not measured"
		}
	case "amplification":
		// Seed 000 Figure 7: per phase and thread count, a bar per
		// protocol (run) and access form.
		figs, note, err = amplificationFigures(rs)
	case "mixed":
		figs, err = mixedFigures(rs)
	case "clients":
		figs, err = clientsFigures(rs)
	case "postmark", "iozone":
		// Drawn by postmarkFigures and iozoneFigures (sections).
	case "metadata":
		err = add(phaseBars(rs, "metadata: file operations per second", "fops", func(r Row) float64 { return r.OpsPerSec }, func(Row) bool { return false }))
	default:
		err = add(phaseBars(rs, suite+": throughput per phase", "MB/s", func(r Row) float64 { return r.MBps }, func(r Row) bool { return r.Bytes == 0 }))
	}
	if err == nil && suite != "efficiency" && suite != "amplification" {
		// Any other run through a counting link shows its amplification.
		err = add(wireBars(rs, false))
	}
	return figs, note, err
}

// peakBandwidth is seed 001's peak bandwidth per object size: the best
// parallelism's MB/s.
func peakBandwidth(rs []*Run, phase string) (*Figure, error) {
	peak := make([]*Run, 0, len(rs))
	for _, r := range rs {
		best := map[int64]Row{}
		for _, row := range r.Rows {
			if row.Phase == phase && row.MBps >= best[row.Unit].MBps {
				best[row.Unit] = row
			}
		}
		units := make([]int64, 0, len(best))
		for u := range best {
			units = append(units, u)
		}
		slices.Sort(units)
		pr := &Run{Label: r.Label, Meta: r.Meta}
		for _, u := range units {
			pr.Rows = append(pr.Rows, best[u])
		}
		peak = append(peak, pr)
	}
	return throughputVs(peak, "objects: peak "+phase+" bandwidth vs object size", "the best parallelism's aggregate bandwidth per size", phase, false, all, noSplit)
}
