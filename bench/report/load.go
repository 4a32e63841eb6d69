// Package report turns saved workbench results (bench's run.json +
// ops.jsonl.gz) into one self-contained HTML page with the seeds' figures
// drawn as inline SVG (gonum.org/v1/plot), plus CSV and JSON exports of the
// summary tables. It reads saved records only, so any past run can be
// redrawn and set beside another (tristore vs a peer, s3 vs nfs vs iscsi).
//
// It imports bench and nothing above it: the cli wires it to a command.
package report

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/tristore/tristore/bench"
)

// Run is one results directory as the report sees it: the metadata, the
// summary rows (bench.Summarize's, plus the link bytes of the matching
// phases), and the latencies the CDF plots need.
type Run struct {
	// Label names the run in legends and tables: "LABEL=DIR" on the command
	// line, else protocol, target and network.
	Label string     `json:"label"`
	Dir   string     `json:"dir"`
	Meta  *bench.Run `json:"run"`
	Rows  []Row      `json:"rows"`
	// ReadError says why the records could not all be read (a run killed
	// mid-write leaves a truncated ops file); the rows hold what was read.
	ReadError string `json:"read_error,omitempty"`

	lat map[key][]time.Duration // successful requests' latencies, sorted
}

// Row is a bench.Row with what crossed the emulated link during the
// phases of the same (phase, form, unit, threads): payload and wire bytes
// from run.json, and their ratios.
type Row struct {
	bench.Row
	Payload  int64 `json:"payload_bytes,omitempty"`
	WireUp   int64 `json:"wire_up_bytes,omitempty"`
	WireDown int64 `json:"wire_down_bytes,omitempty"`
	// Efficiency is payload ÷ wire bytes (seed 004); Amplification is its
	// inverse (seed 000). Both 0 when no link counted the phase.
	Efficiency    float64 `json:"efficiency,omitempty"`
	Amplification float64 `json:"amplification,omitempty"`
}

// Wire is the bytes both ways across the link.
func (r Row) Wire() int64 { return r.WireUp + r.WireDown }

type key struct {
	phase, form string
	unit        int64
	threads     int
}

func rowKey(r bench.Row) key { return key{r.Phase, r.Form, r.Unit, r.Threads} }

// Partial reports whether the run did not finish.
func (r *Run) Partial() bool { return r.Meta.Partial }

// Latencies returns the sorted latencies of the successful requests of one
// group (nil if none).
func (r *Run) Latencies(phase, form string, unit int64, threads int) []time.Duration {
	return r.lat[key{phase, form, unit, threads}]
}

// Load reads the results named by args. An argument is a results directory,
// a directory whose subdirectories are results directories (all of them are
// read, in name order), or LABEL=DIR to name the run in the report. Runs
// keep the order given; labels that come out equal get the directory name
// added.
func Load(args []string) ([]*Run, error) {
	var runs []*Run
	for _, a := range args {
		label, dir := "", a
		if i := strings.IndexByte(a, '='); i > 0 {
			if _, err := os.Stat(a); err != nil {
				label, dir = a[:i], a[i+1:]
			}
		}
		dirs, err := expand(dir)
		if err != nil {
			return nil, err
		}
		for _, d := range dirs {
			r, err := LoadRun(d)
			if err != nil {
				return nil, err
			}
			if label != "" {
				r.Label = label
				if len(dirs) > 1 {
					r.Label += " " + filepath.Base(d)
				}
			}
			runs = append(runs, r)
		}
	}
	if len(runs) == 0 {
		return nil, errors.New("report: no results given")
	}
	// Runs of one suite share plots, so their labels must differ.
	seen := map[[2]string]int{}
	for _, r := range runs {
		seen[[2]string{r.Meta.Suite, r.Label}]++
	}
	for _, r := range runs {
		if seen[[2]string{r.Meta.Suite, r.Label}] > 1 {
			r.Label += " (" + filepath.Base(r.Dir) + ")"
		}
	}
	return runs, nil
}

// expand returns dir if it is a results directory, else its subdirectories
// that are.
func expand(dir string) ([]string, error) {
	if _, err := os.Stat(filepath.Join(dir, bench.RunFile)); err == nil {
		return []string{dir}, nil
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("report: %s: %w", dir, err)
	}
	var out []string
	for _, e := range ents {
		if e.IsDir() {
			if _, err := os.Stat(filepath.Join(dir, e.Name(), bench.RunFile)); err == nil {
				out = append(out, filepath.Join(dir, e.Name()))
			}
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("report: %s holds no results (no %s in it or its subdirectories)", dir, bench.RunFile)
	}
	return out, nil
}

// LoadRun reads one results directory. Damaged records (a truncated ops
// file) are not an error: the run keeps what was read and says why the
// rest is missing, as the page does.
func LoadRun(dir string) (*Run, error) {
	meta, err := bench.ReadRunMeta(dir)
	if err != nil {
		return nil, err
	}
	r := &Run{Dir: dir, Meta: meta, Label: defaultLabel(meta), lat: map[key][]time.Duration{}}
	rows, sumErr := bench.Summarize(dir)
	if sumErr != nil {
		r.ReadError = sumErr.Error()
	}
	err = bench.EachOp(dir, func(o bench.Operation) error {
		if !o.Failed() {
			k := key{o.Phase, o.Form, o.Unit, o.Threads}
			r.lat[k] = append(r.lat[k], o.Latency())
		}
		return nil
	})
	if err != nil && r.ReadError == "" {
		r.ReadError = err.Error()
	}
	for _, l := range r.lat {
		slices.Sort(l)
	}
	wire := map[key]bench.Phase{}
	for _, p := range meta.Phases {
		k := key{p.Name, p.Form, p.Unit, p.Threads}
		w := wire[k]
		w.Payload += p.Payload
		w.WireUp += p.WireUp
		w.WireDn += p.WireDn
		wire[k] = w
	}
	for _, br := range rows {
		row := Row{Row: br}
		if p, ok := wire[rowKey(br)]; ok {
			row.Payload, row.WireUp, row.WireDown = p.Payload, p.WireUp, p.WireDn
			if w := row.Wire(); w > 0 && p.Payload > 0 {
				row.Efficiency = float64(p.Payload) / float64(w)
				row.Amplification = float64(w) / float64(p.Payload)
			}
		}
		r.Rows = append(r.Rows, row)
	}
	return r, nil
}

// defaultLabel is "protocol host/path [network]": enough to tell tristore
// from a peer on another port, or the same target across presets.
func defaultLabel(m *bench.Run) string {
	t := m.Target
	if u, err := url.Parse(t); err == nil && u.Host != "" {
		t = u.Host + u.Path
	}
	l := m.Protocol + " " + strings.TrimSuffix(t, "/")
	if m.Network != "" {
		l += " [" + m.Network + "]"
	}
	return l
}

// suites returns the suites present, in the order the seeds present them.
func suites(runs []*Run) []string {
	order := []string{"units", "single", "batch", "amplification", "objects", "mixed", "metadata", "datasize", "efficiency", "clients", "postmark", "iozone"}
	seen := map[string]bool{}
	for _, r := range runs {
		seen[r.Meta.Suite] = true
	}
	var out []string
	for _, s := range order {
		if seen[s] {
			out = append(out, s)
			delete(seen, s)
		}
	}
	var rest []string
	for s := range seen {
		rest = append(rest, s)
	}
	sort.Strings(rest)
	return append(out, rest...)
}

func runsOf(runs []*Run, suite string) []*Run {
	var out []*Run
	for _, r := range runs {
		if r.Meta.Suite == suite {
			out = append(out, r)
		}
	}
	return out
}
