package report

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"html/template"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/tristore/tristore/bench"
)

// Files written by Write into the output directory.
const (
	HTMLFile        = "index.html"
	CSVFile         = "summary.csv"
	JSONFile        = "summary.json"
	CompareCSVFile  = "compare.csv"
	CompareJSONFile = "compare.json"
)

// Options of a report.
type Options struct {
	// Compare sets the first two runs side by side (ratios B ÷ A).
	Compare bool
	// Now stamps the page (default time.Now).
	Now time.Time
}

// Report is what the page is drawn from.
type Report struct {
	Runs       []*Run
	Sections   []Section
	Comparison *Comparison
	Generated  time.Time
}

// Build draws the figures of runs.
func Build(runs []*Run, opt Options) (*Report, error) {
	rep := &Report{Runs: runs, Generated: opt.Now}
	if rep.Generated.IsZero() {
		rep.Generated = time.Now()
	}
	if opt.Compare {
		if len(runs) != 2 {
			return nil, fmt.Errorf("report: --compare takes two runs, got %d", len(runs))
		}
		rep.Comparison = Compare(runs[0], runs[1])
	}
	secs, err := sections(runs)
	if err != nil {
		return nil, err
	}
	rep.Sections = secs
	return rep, nil
}

// Write builds the report of runs into dir: index.html, summary.csv and
// summary.json (and compare.csv/json with Options.Compare). It returns the
// paths written.
func Write(dir string, runs []*Run, opt Options) ([]string, error) {
	rep, err := Build(runs, opt)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	var html bytes.Buffer
	if err := page.Execute(&html, rep); err != nil {
		return nil, fmt.Errorf("report: rendering HTML: %w", err)
	}
	files := map[string][]byte{HTMLFile: html.Bytes()}
	files[CSVFile], err = summaryCSV(runs)
	if err != nil {
		return nil, err
	}
	if files[JSONFile], err = summaryJSON(runs); err != nil {
		return nil, err
	}
	if c := rep.Comparison; c != nil {
		if files[CompareCSVFile], err = compareCSV(c); err != nil {
			return nil, err
		}
		if files[CompareJSONFile], err = json.MarshalIndent(struct {
			A    string        `json:"a"`
			B    string        `json:"b"`
			Rows []compareJSON `json:"rows"`
		}{c.A.Label, c.B.Label, c.exportRows()}, "", "  "); err != nil {
			return nil, err
		}
	}
	var out []string
	for _, name := range []string{HTMLFile, CSVFile, JSONFile, CompareCSVFile, CompareJSONFile} {
		b, ok := files[name]
		if !ok {
			continue
		}
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return nil, fmt.Errorf("report: %w", err)
		}
		out = append(out, p)
	}
	return out, nil
}

// CSVHeader is the header of summary.csv: a row per (run, phase, form,
// unit, threads); latencies in milliseconds, sizes in bytes.
var CSVHeader = []string{"run", "dir", "suite", "target", "protocol", "network", "partial", "phase", "form", "unit", "threads",
	"ops", "errors", "bytes", "wall_s", "mb_per_s", "ops_per_s", "p50_ms", "p99_ms", "first_byte_p50_ms",
	"payload_bytes", "wire_up_bytes", "wire_down_bytes", "efficiency", "amplification"}

func ms(d time.Duration) string { return strconv.FormatFloat(float64(d)/1e6, 'f', -1, 64) }

func fl(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }

func summaryCSV(runs []*Run) ([]byte, error) {
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	w.Write(CSVHeader)
	for _, r := range runs {
		m := r.Meta
		for _, x := range r.Rows {
			w.Write([]string{r.Label, r.Dir, m.Suite, m.Target, m.Protocol, m.Network, strconv.FormatBool(m.Partial),
				x.Phase, x.Form, strconv.FormatInt(x.Unit, 10), strconv.Itoa(x.Threads),
				strconv.Itoa(x.Ops), strconv.Itoa(x.Errors), strconv.FormatInt(x.Bytes, 10), fl(x.Wall.Seconds()),
				fl(x.MBps), fl(x.OpsPerSec), ms(x.P50), ms(x.P99), ms(x.FirstByteP50),
				strconv.FormatInt(x.Payload, 10), strconv.FormatInt(x.WireUp, 10), strconv.FormatInt(x.WireDown, 10),
				fl(x.Efficiency), fl(x.Amplification)})
		}
	}
	w.Flush()
	return b.Bytes(), w.Error()
}

// summaryJSON is {"runs": [Run...]}: label, dir, the full run.json and the
// rows (bench.Row's fields plus the link's).
func summaryJSON(runs []*Run) ([]byte, error) {
	return json.MarshalIndent(struct {
		Runs []*Run `json:"runs"`
	}{runs}, "", "  ")
}

func compareCSV(c *Comparison) ([]byte, error) {
	var b bytes.Buffer
	w := csv.NewWriter(&b)
	w.Write([]string{"phase", "form", "unit", "threads", "ops_a", "ops_b", "errors_a", "errors_b",
		"mb_per_s_a", "mb_per_s_b", "mb_per_s_ratio", "p50_a_ms", "p50_b_ms", "p50_ratio"})
	for _, r := range c.Rows {
		w.Write([]string{r.Phase, r.Form, strconv.FormatInt(r.Unit, 10), strconv.Itoa(r.Threads),
			strconv.Itoa(r.OpsA), strconv.Itoa(r.OpsB), strconv.Itoa(r.ErrorsA), strconv.Itoa(r.ErrorsB),
			fl(r.MBpsA), fl(r.MBpsB), fl(r.MBpsRatio), ms(r.P50A), ms(r.P50B), fl(r.P50Ratio)})
	}
	w.Flush()
	return b.Bytes(), w.Error()
}

// fmtDur is a latency for a table cell.
func fmtDur(d time.Duration) string {
	switch {
	case d == 0:
		return "–"
	case d < time.Millisecond:
		return fmt.Sprintf("%.0f µs", float64(d)/1e3)
	case d < time.Second:
		return fmt.Sprintf("%.2f ms", float64(d)/1e6)
	}
	return fmt.Sprintf("%.2f s", d.Seconds())
}

func fmtRatio(v float64) string {
	if v == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f×", v)
}

var page = template.Must(template.New("page").Funcs(template.FuncMap{
	"size":  bench.FormatSize,
	"dur":   fmtDur,
	"ratio": fmtRatio,
	"f2":    func(v float64) string { return fmt.Sprintf("%.2f", v) },
	"f1":    func(v float64) string { return fmt.Sprintf("%.1f", v) },
	"f3":    func(v float64) string { return fmt.Sprintf("%.3f", v) },
	"svg":   func(s string) template.HTML { return template.HTML(s) },
	"ts":    func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") },
	"start": func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05") },
	"took": func(r *Run) string {
		if r.Meta.End.IsZero() {
			return "–"
		}
		return r.Meta.End.Sub(r.Meta.Start).Round(time.Millisecond).String()
	},
	"form": func(s string) string {
		if s == "" {
			return "–"
		}
		return s
	},
	"hasWire": func(r *Run) bool {
		for _, x := range r.Rows {
			if x.Wire() > 0 {
				return true
			}
		}
		return false
	},
}).Parse(pageHTML))
