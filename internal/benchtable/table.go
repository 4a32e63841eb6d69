package main

import (
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"time"
)

// Table is a raw file summarised: per row (a named figure) and side (a
// server or tool), every round's value. Ratios are always the medians of
// the same run: "ours" median divided by the peer's median.
type Table struct {
	Machine *Record
	Ours    string
	Sides   []string // Ours first, then the peers in the order they first appear
	Rows    []string // in the order they first appear
	Cells   map[[2]string][]float64
	Rounds  int
	// 1-minute load average over every before/after reading.
	LoadMin, LoadMax float64
	First, Last      time.Time
}

// build groups the round records. ours names the side the ratios are
// taken from; empty means the machine record's, else the first side seen.
func build(machine *Record, rounds []Record, ours string) (*Table, error) {
	t := &Table{Machine: machine, Cells: map[[2]string][]float64{}, LoadMin: math.Inf(1), LoadMax: math.Inf(-1)}
	if ours == "" {
		ours = machine.Ours
	}
	if ours == "" {
		ours = rounds[0].Side
	}
	t.Ours = ours
	t.Sides = []string{ours}
	for _, r := range rounds {
		if !slices.Contains(t.Sides, r.Side) {
			t.Sides = append(t.Sides, r.Side)
		}
		t.Rounds = max(t.Rounds, r.Round)
		for _, v := range r.Values {
			if !slices.Contains(t.Rows, v.Name) {
				t.Rows = append(t.Rows, v.Name)
			}
			k := [2]string{v.Name, r.Side}
			t.Cells[k] = append(t.Cells[k], v.Value)
		}
		for _, l := range [][]float64{r.LoadBefore, r.LoadAfter} {
			if len(l) > 0 {
				t.LoadMin, t.LoadMax = min(t.LoadMin, l[0]), max(t.LoadMax, l[0])
			}
		}
		if ts, err := time.Parse(time.RFC3339, r.Time); err == nil {
			if t.First.IsZero() || ts.Before(t.First) {
				t.First = ts
			}
			if ts.After(t.Last) {
				t.Last = ts
			}
		}
	}
	if !slices.ContainsFunc(rounds, func(r Record) bool { return r.Side == ours }) {
		return nil, fmt.Errorf("no rounds for side %q (sides: %s)", ours, strings.Join(t.Sides[1:], ", "))
	}
	return t, nil
}

// median of a non-empty slice (mean of the middle two for an even count).
func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// num prints a figure with about three significant digits, thousands
// separated, so tables stay readable without claiming false precision.
func num(v float64) string {
	a := math.Abs(v)
	switch {
	case a >= 100:
		s := fmt.Sprintf("%.0f", v)
		neg := strings.HasPrefix(s, "-")
		s = strings.TrimPrefix(s, "-")
		var b strings.Builder
		for i, c := range s {
			if i > 0 && (len(s)-i)%3 == 0 {
				b.WriteByte(',')
			}
			b.WriteRune(c)
		}
		if neg {
			return "-" + b.String()
		}
		return b.String()
	case a >= 10:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.2f", v)
	}
}

// cell is "min / median / max" (or the one value), with the count when
// that side has fewer rounds than the run.
func (t *Table) cell(row, side string) string {
	v := t.Cells[[2]string{row, side}]
	if len(v) == 0 {
		return "—"
	}
	var s string
	if len(v) == 1 {
		s = num(v[0])
	} else {
		s = fmt.Sprintf("%s / **%s** / %s", num(slices.Min(v)), num(median(v)), num(slices.Max(v)))
	}
	if len(v) < t.Rounds {
		s += fmt.Sprintf(" (n=%d)", len(v))
	}
	return s
}

// ratio is ours' median over the peer's median.
func (t *Table) ratio(row, peer string) string {
	o, p := t.Cells[[2]string{row, t.Ours}], t.Cells[[2]string{row, peer}]
	if len(o) == 0 || len(p) == 0 || median(p) == 0 {
		return "—"
	}
	return fmt.Sprintf("%.2f×", median(o)/median(p))
}

// Markdown writes a caption (raw file, run, machine, load) and the table.
func (t *Table) Markdown(w io.Writer, rawName string) {
	m := t.Machine
	fmt.Fprintf(w, "Raw rounds: `%s` (%s); %d interleaved round(s)", rawName, m.Bench, t.Rounds)
	if !t.First.IsZero() {
		fmt.Fprintf(w, ", %s–%s UTC", t.First.Format("2006-01-02 15:04"), t.Last.Format("15:04"))
	}
	fmt.Fprintf(w, ", commit %s.  \n", m.Commit)
	fmt.Fprintf(w, "Command: `%s`.  \n", m.Command)
	if mm := m.Machine; mm != nil {
		fmt.Fprintf(w, "Machine: %d × %s, %.1f GiB RAM, Linux %s, %s.", mm.NProc, mm.CPUModel,
			float64(mm.MemBytes)/(1<<30), mm.Kernel, mm.GoVersion)
	}
	if !math.IsInf(t.LoadMin, 0) {
		fmt.Fprintf(w, " 1-minute load average before/after each measurement: %.1f–%.1f.", t.LoadMin, t.LoadMax)
	}
	fmt.Fprintln(w)
	if len(m.Peers) > 0 {
		// Sides in table order, then tools that are not a side (iperf3).
		names := slices.Clone(t.Sides)
		var rest []string
		for k := range m.Peers {
			if !slices.Contains(names, k) {
				rest = append(rest, k)
			}
		}
		slices.Sort(rest)
		var ps []string
		for _, s := range append(names, rest...) {
			if v, ok := m.Peers[s]; ok {
				ps = append(ps, s+" "+v)
			}
		}
		fmt.Fprintf(w, "Versions: %s.\n", strings.Join(ps, ", "))
	}
	for _, n := range m.Notes {
		fmt.Fprintf(w, "%s\n", n)
	}
	fmt.Fprintln(w)

	hdr := []string{"figure"}
	for _, s := range t.Sides {
		hdr = append(hdr, s+": min / **median** / max")
	}
	for _, s := range t.Sides[1:] {
		hdr = append(hdr, t.Ours+" / "+s+" (medians)")
	}
	fmt.Fprintf(w, "| %s |\n", strings.Join(hdr, " | "))
	fmt.Fprintf(w, "|---%s|\n", strings.Repeat("|--:", len(hdr)-1))
	for _, row := range t.Rows {
		cols := []string{row}
		for _, s := range t.Sides {
			cols = append(cols, t.cell(row, s))
		}
		for _, s := range t.Sides[1:] {
			cols = append(cols, t.ratio(row, s))
		}
		fmt.Fprintf(w, "| %s |\n", strings.Join(cols, " | "))
	}
}
