package bench

import (
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// Row is one line of a run's final table: the requests of one (phase,
// form, unit, threads) group.
type Row struct {
	Phase   string `json:"phase"`
	Form    string `json:"form,omitempty"`
	Unit    int64  `json:"unit"`
	Threads int    `json:"threads"`
	Ops     int    `json:"ops"`
	Errors  int    `json:"errors"`
	// Bytes is the payload of the successful requests.
	Bytes int64 `json:"bytes"`
	// Wall is from the group's first request start to its last end; MBps
	// (10^6 bytes/s) and OpsPerSec are over it.
	Wall      time.Duration `json:"wall_ns"`
	MBps      float64       `json:"mb_per_s"`
	OpsPerSec float64       `json:"ops_per_s"`
	// Latency percentiles of the successful requests.
	P50 time.Duration `json:"p50_ns"`
	P99 time.Duration `json:"p99_ns"`
	// FirstByteP50 is the median time to first byte (reads that measured it).
	FirstByteP50 time.Duration `json:"first_byte_p50_ns,omitempty"`
	// FirstError is one error text of the group, to show what failed.
	FirstError string `json:"first_error,omitempty"`
}

type rowKey struct {
	phase, form string
	unit        int64
	threads     int
}

type rowAcc struct {
	Row
	start, end time.Duration
	lat, fb    []time.Duration
	order      int
}

// Summarize groups the records of a results directory into Rows, in the
// order the groups first appeared. It streams the records; only latencies
// are kept (8 bytes a request).
func Summarize(dir string) ([]Row, error) {
	acc := map[rowKey]*rowAcc{}
	err := EachOp(dir, func(o Operation) error {
		k := rowKey{o.Phase, o.Form, o.Unit, o.Threads}
		a := acc[k]
		if a == nil {
			a = &rowAcc{Row: Row{Phase: o.Phase, Form: o.Form, Unit: o.Unit, Threads: o.Threads}, start: o.Start, end: o.End, order: len(acc)}
			acc[k] = a
		}
		a.Ops++
		a.start, a.end = min(a.start, o.Start), max(a.end, o.End)
		if o.Failed() {
			a.Errors++
			if a.FirstError == "" {
				a.FirstError = o.Err
			}
			return nil
		}
		a.Bytes += o.Size
		a.lat = append(a.lat, o.Latency())
		if o.FirstByte > 0 {
			a.fb = append(a.fb, o.FirstByte-o.Start)
		}
		return nil
	})
	rows := make([]*rowAcc, 0, len(acc))
	for _, a := range acc {
		a.Wall = a.end - a.start
		if a.Wall > 0 {
			a.MBps = float64(a.Bytes) / a.Wall.Seconds() / 1e6
			a.OpsPerSec = float64(a.Ops-a.Errors) / a.Wall.Seconds()
		}
		a.P50, a.P99 = percentile(a.lat, 0.50), percentile(a.lat, 0.99)
		a.FirstByteP50 = percentile(a.fb, 0.50)
		rows = append(rows, a)
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].order < rows[j].order })
	out := make([]Row, len(rows))
	for i, a := range rows {
		out[i] = a.Row
	}
	return out, err
}

// percentile is the nearest-rank percentile (0 for no samples).
func percentile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	i := int(q*float64(len(d))+0.999999) - 1
	return d[max(0, min(i, len(d)-1))]
}

// WriteTable prints rows as an aligned text table. Errors are a column of
// their own and a group with errors shows one of them below the table.
func WriteTable(w io.Writer, rows []Row) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "phase\tform\tunit\tthreads\tops\terrors\tMB/s\tops/s\tp50\tp99\t")
	var failed []Row
	for _, r := range rows {
		form := r.Form
		if form == "" {
			form = "-"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%d\t%.2f\t%.1f\t%s\t%s\t\n", r.Phase, form, FormatSize(r.Unit), r.Threads, r.Ops, r.Errors,
			r.MBps, r.OpsPerSec, fmtDur(r.P50), fmtDur(r.P99))
		if r.Errors > 0 {
			failed = append(failed, r)
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, r := range failed {
		fmt.Fprintf(w, "errors in %s %s %s x%d: %d of %d failed, e.g. %s\n", r.Phase, r.Form, FormatSize(r.Unit), r.Threads, r.Errors, r.Ops,
			strings.TrimSpace(r.FirstError))
	}
	return nil
}

func fmtDur(d time.Duration) string {
	switch {
	case d == 0:
		return "-"
	case d < time.Millisecond:
		return fmt.Sprintf("%.0fµs", float64(d)/1e3)
	case d < time.Second:
		return fmt.Sprintf("%.2fms", float64(d)/1e6)
	}
	return fmt.Sprintf("%.2fs", d.Seconds())
}
