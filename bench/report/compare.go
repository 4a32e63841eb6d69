package report

import (
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/tristore/tristore/bench"
)

// CompareRow sets one group (phase, form, unit, threads) of run A beside
// the same group of run B. Ratios are B ÷ A (0 when a side is missing or
// zero): above 1 means B moved more MB/s, or B's median request took longer.
type CompareRow struct {
	Phase   string `json:"phase"`
	Form    string `json:"form,omitempty"`
	Unit    int64  `json:"unit"`
	Threads int    `json:"threads"`
	// InA and InB say which runs have the group.
	InA bool `json:"in_a"`
	InB bool `json:"in_b"`

	OpsA, OpsB       int           `json:"-"`
	ErrorsA, ErrorsB int           `json:"-"`
	MBpsA, MBpsB     float64       `json:"-"`
	P50A, P50B       time.Duration `json:"-"`
	MBpsRatio        float64       `json:"mb_per_s_ratio"`
	P50Ratio         float64       `json:"p50_ratio"`
}

// Comparison is two runs side by side.
type Comparison struct {
	A, B *Run
	Rows []CompareRow
}

// Compare joins the groups of a and b: a's groups in a's order, then those
// only b has.
func Compare(a, b *Run) *Comparison {
	c := &Comparison{A: a, B: b}
	idx := map[key]int{}
	for _, r := range a.Rows {
		idx[rowKey(r.Row)] = len(c.Rows)
		c.Rows = append(c.Rows, CompareRow{Phase: r.Phase, Form: r.Form, Unit: r.Unit, Threads: r.Threads, InA: true,
			OpsA: r.Ops, ErrorsA: r.Errors, MBpsA: r.MBps, P50A: r.P50})
	}
	for _, r := range b.Rows {
		i, ok := idx[rowKey(r.Row)]
		if !ok {
			i = len(c.Rows)
			c.Rows = append(c.Rows, CompareRow{Phase: r.Phase, Form: r.Form, Unit: r.Unit, Threads: r.Threads})
		}
		cr := &c.Rows[i]
		cr.InB, cr.OpsB, cr.ErrorsB, cr.MBpsB, cr.P50B = true, r.Ops, r.Errors, r.MBps, r.P50
	}
	for i := range c.Rows {
		cr := &c.Rows[i]
		cr.MBpsRatio = ratio(cr.MBpsB, cr.MBpsA)
		cr.P50Ratio = ratio(float64(cr.P50B), float64(cr.P50A))
	}
	return c
}

func ratio(b, a float64) float64 {
	if a == 0 || b == 0 {
		return 0
	}
	return b / a
}

// compareJSON is a CompareRow as exported (durations in ns, like bench.Row).
type compareJSON struct {
	CompareRow
	OpsA    int     `json:"ops_a"`
	OpsB    int     `json:"ops_b"`
	ErrorsA int     `json:"errors_a"`
	ErrorsB int     `json:"errors_b"`
	MBpsA   float64 `json:"mb_per_s_a"`
	MBpsB   float64 `json:"mb_per_s_b"`
	P50A    int64   `json:"p50_a_ns"`
	P50B    int64   `json:"p50_b_ns"`
}

func (c *Comparison) exportRows() []compareJSON {
	out := make([]compareJSON, len(c.Rows))
	for i, r := range c.Rows {
		out[i] = compareJSON{CompareRow: r, OpsA: r.OpsA, OpsB: r.OpsB, ErrorsA: r.ErrorsA, ErrorsB: r.ErrorsB,
			MBpsA: r.MBpsA, MBpsB: r.MBpsB, P50A: int64(r.P50A), P50B: int64(r.P50B)}
	}
	return out
}

// WriteCompareTable prints c as an aligned text table.
func WriteCompareTable(w io.Writer, c *Comparison) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "phase\tform\tunit\tthreads\tops A\tops B\tMB/s A\tMB/s B\tB/A\tp50 A\tp50 B\tB/A\t")
	for _, r := range c.Rows {
		form := r.Form
		if form == "" {
			form = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%.2f\t%.2f\t%s\t%s\t%s\t%s\t\n", r.Phase, form, bench.FormatSize(r.Unit), r.Threads,
			r.OpsA, r.OpsB, r.MBpsA, r.MBpsB, fmtRatio(r.MBpsRatio), fmtDur(r.P50A), fmtDur(r.P50B), fmtRatio(r.P50Ratio))
	}
	return tw.Flush()
}
