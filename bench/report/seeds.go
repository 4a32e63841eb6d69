package report

import (
	"fmt"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"

	"github.com/tristore/tristore/bench"
)

// Table is a small table of figures a suite's seed reports (postmark's
// transactions/s, iozone's four tests and their average), drawn under the
// suite's figures.
type Table struct {
	Title  string
	Header []string
	Rows   [][]string
}

// postmarkFigures is seed 003's PostMark figure: transactions/s against
// the number of instances running at once, a line per run, and a table
// per run with PostMark's own report lines (transactions/s; files/s of the
// creation and deletion phases alone).
func postmarkFigures(rs []*Run) ([]Figure, []Table, error) {
	p := newPlot("postmark: transactions/s vs instances", "instances", "transactions/s")
	var lines []line
	var threads []int
	var tables []Table
	for _, r := range rs {
		l := line{name: seriesName(rs, r, "")}
		t := Table{Title: "postmark: " + r.Label, Header: []string{"instances", "transactions/s", "created/s (creation alone)", "deleted/s (deletion alone)"}}
		for _, n := range r.Meta.Params.Threads {
			tps := bench.PostMarkRate(r.Meta, n)
			if tps <= 0 {
				continue
			}
			l.xys = append(l.xys, plotter.XY{X: float64(n), Y: tps})
			threads = append(threads, n)
			t.Rows = append(t.Rows, []string{strconv.Itoa(n), fmt.Sprintf("%.1f", tps), phaseOps(r, "create", n), phaseOps(r, "delete", n)})
		}
		lines = append(lines, l)
		if len(t.Rows) > 0 {
			tables = append(tables, t)
		}
	}
	if len(threads) == 0 {
		return nil, tables, nil
	}
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = intTicks(distinct(threads))
	names, err := addLines(p, lines)
	if err != nil {
		return nil, nil, err
	}
	headroom(p, len(names))
	p.X.Min, p.X.Max = p.X.Min/1.5, p.X.Max*1.5
	f, err := figure(p, "instances × transactions ÷ the transaction phase's wall time; the instances run at once, each its own PostMark", names)
	if err != nil {
		return nil, nil, err
	}
	return []Figure{f}, tables, nil
}

// phaseOps is the requests/s of a postmark phase at n instances (files
// created or deleted per second), "–" when absent.
func phaseOps(r *Run, phase string, n int) string {
	for _, row := range r.Rows {
		if row.Phase == phase && row.Threads == n {
			return fmt.Sprintf("%.1f", row.OpsPerSec)
		}
	}
	return "–"
}

// iozoneFigures is seed 002's iozone figure: the four-way average MB/s
// against the request size, a line per run and access form, then one
// figure per test; and per run and form the seed's table (a row per test
// and the average, a column per request size).
func iozoneFigures(rs []*Run) ([]Figure, []Table, error) {
	avgRuns := make([]*Run, 0, len(rs))
	var tables []Table
	for _, r := range rs {
		br := make([]bench.Row, len(r.Rows))
		for i, row := range r.Rows {
			br[i] = row.Row
		}
		avg := bench.IozoneAverages(br)
		ar := &Run{Label: r.Label, Meta: r.Meta}
		byForm := map[string][]bench.IozoneAverage{}
		var forms []string
		for _, a := range avg {
			ar.Rows = append(ar.Rows, Row{Row: bench.Row{Phase: "average", Form: a.Form, Unit: a.Unit, Threads: a.Threads, Ops: 1, MBps: a.Average}})
			if _, ok := byForm[a.Form]; !ok {
				forms = append(forms, a.Form)
			}
			byForm[a.Form] = append(byForm[a.Form], a)
		}
		avgRuns = append(avgRuns, ar)
		for _, form := range forms {
			as := byForm[form]
			t := Table{Title: fmt.Sprintf("iozone MB/s: %s, form %s", r.Label, orDashForm(form)), Header: []string{"test"}}
			for _, a := range as {
				h := bench.FormatSize(a.Unit)
				if a.Threads > 1 {
					h += fmt.Sprintf(" ×%d", a.Threads)
				}
				t.Header = append(t.Header, h)
			}
			for _, test := range append(append([]string{}, bench.IozonePhases...), "average") {
				row := []string{test}
				for _, a := range as {
					v := map[string]float64{"write": a.Write, "read": a.Read, "randwrite": a.RandWrite, "randread": a.RandRead, "average": a.Average}[test]
					if v == 0 {
						row = append(row, "–")
					} else {
						row = append(row, fmt.Sprintf("%.2f", v))
					}
				}
				t.Rows = append(t.Rows, row)
			}
			tables = append(tables, t)
		}
	}
	form := func(r Row) string { return r.Form }
	var figs []Figure
	f, err := throughputVs(avgRuns, "iozone: four-way average vs request size", "mean of sequential and random write and read MB/s (the seed's figure); a line per access form", "average", false, all, form)
	if err != nil {
		return nil, nil, err
	}
	if f != nil {
		figs = append(figs, *f)
	}
	for _, ph := range bench.IozonePhases {
		f, err := throughputVs(rs, "iozone: "+ph+" vs request size", "a line per access form", ph, false, all, form)
		if err != nil {
			return nil, nil, err
		}
		if f != nil {
			figs = append(figs, *f)
		}
	}
	return figs, tables, nil
}

func orDashForm(s string) string {
	if s == "" {
		return "–"
	}
	return s
}
