// Package lab is `tristore lab`: seed 000's study on one machine. It starts
// tristore's own server (S3, NFS and iSCSI with a volume) behind each
// network preset in turn, runs a quick version of the workbench's suites
// against all three protocols, and draws the report — one command from an
// empty machine to the seeds' figures.
package lab

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/tristore/tristore/bench"
	"github.com/tristore/tristore/bench/report"
	"github.com/tristore/tristore/netem"
)

// DefaultScale runs the whole lab (ideal, lan, realistic) in a few minutes
// on 2 cores.
const DefaultScale = 0.05

// DefaultPresets are seed 000's ideal and realistic networks with a LAN
// between them.
var DefaultPresets = []string{"ideal", "lan", "realistic"}

// Item is one run of the lab: a suite against one kind of target with the
// lab's parameters (nil/0: the suite's own at the lab's scale).
type Item struct {
	// Name names the run's directory and label ("batch-small").
	Name  string
	Suite string
	// Kind is the target: s3, nfs, iscsi (raw LUN) or ext4+iscsi.
	Kind     string
	Sizes    []int64
	Threads  []int
	Count    int
	FileSize int64
	Forms    []string
	// Scale, when set, replaces the lab's scale for this run (a suite
	// whose volume only the scale bounds).
	Scale float64
	// Counting runs the item through a link that only counts bytes (no
	// rate, delay or loss), recorded under the pseudo-preset "counting":
	// on a shaped link the drop-tail queue drops a burst's packets and
	// TCP resends them, so the wire bytes of seed 000's amplification and
	// seed 004's efficiency would count congestion, not the protocol
	// (measured: S3 1 MiB uploads 0.70 payload per wire byte on ideal, 1.00
	// through the counting link).
	Counting bool
	// Once: only on the lab's first preset (the figure does not depend on
	// the link, or is too slow on a slow one for a quick lab).
	Once bool
}

// Plan is the lab's list of runs at scale, for every preset. root says
// whether root-only targets (ext4 on the LUN) can be used.
func Plan(scale float64, root bool) []Item {
	all := []string{"s3", "nfs", "iscsi"}
	files := []string{"nfs", "iscsi"} // targets with OpenFile (units, iozone)
	pm := []string{"nfs"}
	amp := []string{"s3", "nfs", "iscsi"}
	if root {
		pm = append(pm, "ext4+iscsi")
		amp = append(amp, "ext4+iscsi")
	}
	large := pow2Below(16<<20*math.Sqrt(scale), 256<<10)
	var out []Item
	add := func(it Item, kinds []string) {
		for _, k := range kinds {
			it.Kind = k
			out = append(out, it)
		}
	}
	// Per preset: seed 000's small- and large-file batches (§IV-D/E).
	add(Item{Name: "batch-small", Suite: "batch", Sizes: []int64{4 << 10}, Threads: []int{1, 8}, Count: bench.ScaleCount(1024, scale, 16)}, all)
	add(Item{Name: "batch-large", Suite: "batch", Sizes: []int64{large}, Threads: []int{1, 8}, Count: 2}, all)
	// Once: the rest of the suites, small.
	add(Item{Name: "amplification", Suite: "amplification", Sizes: []int64{4 << 10, 64 << 10}, Threads: []int{1},
		Count: bench.ScaleCount(320, scale, 8), Counting: true, Once: true}, amp)
	// efficiency moves 40 MB per file size × scale: a tenth of the lab's.
	add(Item{Name: "efficiency", Suite: "efficiency", Scale: scale / 10, Counting: true, Once: true}, all)
	add(Item{Name: "objects", Suite: "objects", Sizes: []int64{4 << 10, 64 << 10, 1 << 20}, Threads: []int{1, 8},
		Count: bench.ScaleCount(640, scale, 16), Once: true}, []string{"s3"})
	add(Item{Name: "clients", Suite: "clients", Threads: []int{1, 2, 4}, Sizes: []int64{1100, large},
		Count: bench.ScaleCount(1000, scale, 10), Once: true}, all)
	add(Item{Name: "postmark", Suite: "postmark", Threads: []int{1, 2}, Once: true}, pm)
	add(Item{Name: "iozone", Suite: "iozone", FileSize: pow2Below(64<<20*scale, 1<<20), Forms: []string{"default"}, Once: true}, files)
	add(Item{Name: "units", Suite: "units", Once: true}, files)
	add(Item{Name: "single", Suite: "single", Once: true}, all)
	add(Item{Name: "metadata", Suite: "metadata", Count: bench.ScaleCount(2000, scale, 50), Once: true}, all)
	add(Item{Name: "datasize", Suite: "datasize", Once: true}, all)
	add(Item{Name: "mixed", Suite: "mixed", Threads: []int{1, 4}, Once: true}, []string{"s3"})
	return out
}

// pow2Below is the largest power of two <= x, at least lo.
func pow2Below(x float64, lo int64) int64 {
	n := int64(1)
	for float64(n*2) <= x {
		n *= 2
	}
	return max(n, lo)
}

// CountingPreset names, in lab.json and labels, the runs of Counting
// items: through a link that only counts bytes.
const CountingPreset = "counting"

// Config is one lab.
type Config struct {
	// Bin is the tristore binary run as the server (`tristore serve`).
	Bin string
	// Out is the directory the runs (Out/runs/...), lab.json and the
	// report are written to.
	Out     string
	Presets []string
	Scale   float64
	// Suites, when set, keeps only these suites of the plan.
	Suites []string
	// Link is the kind of link: auto (netns when root, else proxy), netns
	// or proxy.
	Link string
	// Timeout is the drivers' connect timeout and longest silence of a
	// request (slow links need minutes: NFS queues a set's WRITEs on one
	// connection).
	Timeout time.Duration
	// Log receives one line per event (server started, run begun/ended).
	Log func(string)
	// Progress is the bench progress of the running item; prefix names the
	// preset, suite and target.
	Progress func(prefix string, p bench.Progress)
	// ClientCommand is the clients suite's client process (the CLI's
	// re-executed binary).
	ClientCommand func(ctx context.Context) *exec.Cmd
	// TempDir is where the server's data directory goes (default: the
	// system's); removed at the end.
	TempDir string
}

// Result is lab.json: what ran, and whether the lab finished.
type Result struct {
	Start   time.Time `json:"start"`
	End     time.Time `json:"end"`
	Scale   float64   `json:"scale"`
	Presets []string  `json:"presets"`
	// Link is the kind of link used; LinkNote says what it emulates.
	Link     string    `json:"link"`
	LinkNote string    `json:"link_note"`
	Partial  bool      `json:"partial"`
	Error    string    `json:"error,omitempty"`
	Skipped  []string  `json:"skipped,omitempty"`
	Runs     []RunInfo `json:"runs"`
	Report   []string  `json:"report,omitempty"`
}

// RunInfo is one run of the lab.
type RunInfo struct {
	Preset  string  `json:"preset"`
	Name    string  `json:"name"`
	Suite   string  `json:"suite"`
	Kind    string  `json:"kind"`
	Dir     string  `json:"dir"` // relative to Out
	Label   string  `json:"label"`
	Partial bool    `json:"partial"`
	Error   string  `json:"error,omitempty"`
	Seconds float64 `json:"seconds"`
}

// ReadResult reads Out/lab.json.
func ReadResult(out string) (*Result, error) {
	b, err := os.ReadFile(filepath.Join(out, "lab.json"))
	if err != nil {
		return nil, err
	}
	var r Result
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s/lab.json: %w", out, err)
	}
	return &r, nil
}

// Run runs the lab. It returns the result (also saved as lab.json, with
// the report, even when the lab stopped early: then Partial is set and the
// error names the preset, suite, target and phase). Whatever it started —
// the server, its data directory, links — is gone when it returns.
func Run(ctx context.Context, c Config) (*Result, error) {
	if c.Scale == 0 {
		c.Scale = DefaultScale
	}
	if c.Scale < 0 || c.Scale > 1 || math.IsNaN(c.Scale) {
		return nil, fmt.Errorf("lab: --scale %v: want 0 < scale <= 1", c.Scale)
	}
	if len(c.Presets) == 0 {
		c.Presets = DefaultPresets
	}
	for _, p := range c.Presets {
		if _, ok := netem.Presets[p]; !ok {
			return nil, fmt.Errorf("lab: no network preset %q (have %s)", p, strings.Join(netem.PresetNames(), ", "))
		}
	}
	for _, s := range c.Suites {
		if _, ok := bench.LookupSuite(s); !ok {
			return nil, fmt.Errorf("lab: no suite %q", s)
		}
	}
	if c.Out == "" {
		return nil, errors.New("lab: no output directory")
	}
	if c.Timeout == 0 {
		c.Timeout = 5 * time.Minute
	}
	log := c.Log
	if log == nil {
		log = func(string) {}
	}
	res := &Result{Start: time.Now().UTC(), Scale: c.Scale, Presets: c.Presets, Partial: true}
	root := os.Geteuid() == 0
	switch c.Link {
	case "", "auto":
		res.Link = "proxy"
		if netem.CheckHost() == nil {
			res.Link = "netns"
		}
	case "netns", "proxy":
		res.Link = c.Link
	default:
		return nil, fmt.Errorf("lab: --link %q: want auto, netns or proxy", c.Link)
	}
	if res.Link == "netns" {
		res.LinkNote = "netns link: two network namespaces, the preset's rate, delay, jitter and loss; wire bytes are IP packets"
	} else {
		res.LinkNote = "proxy link (TCP proxy on 127.0.0.1): rate, delay and jitter but NO packet loss; wire bytes are TCP payload"
		if netem.CheckHost() != nil {
			res.LinkNote += " — network namespaces need root and /dev/net/tun: " + netem.CheckHost().Error()
		}
	}
	if !root {
		res.Skipped = append(res.Skipped, "ext4+iscsi targets (amplification, postmark): need root for loop devices and mount")
	}
	plan := Plan(c.Scale, root)
	if len(c.Suites) > 0 {
		plan = slices.DeleteFunc(plan, func(it Item) bool { return !slices.Contains(c.Suites, it.Suite) })
	}
	if len(plan) == 0 {
		return nil, errors.New("lab: no runs left in the plan")
	}
	if err := os.MkdirAll(filepath.Join(c.Out, "runs"), 0o755); err != nil {
		return nil, fmt.Errorf("lab: %w", err)
	}
	if err := writeResult(c.Out, res); err != nil {
		return nil, err
	}
	log(res.LinkNote)
	for _, s := range res.Skipped {
		log("skipped: " + s)
	}
	tmp, err := os.MkdirTemp(c.TempDir, "tristore-lab-")
	if err != nil {
		return nil, fmt.Errorf("lab: %w", err)
	}
	defer os.RemoveAll(tmp)

	total := 0
	for i := range c.Presets {
		for _, it := range plan {
			if i == 0 || !it.Once {
				total++
			}
		}
	}
	runErr := func() error {
		n := 0
		for i, preset := range c.Presets {
			srv, err := startServer(ctx, c.Bin, tmp)
			if err != nil {
				return fmt.Errorf("lab: preset %s: phase server start: %w", preset, err)
			}
			log(fmt.Sprintf("preset %s: tristore serve pid %d (S3 %s, NFS %s, iSCSI %s)", preset, srv.proc.PID(),
				strings.TrimPrefix(srv.s3, "s3://"), strings.TrimPrefix(srv.nfs, "nfs://"), strings.TrimPrefix(srv.iscsi, "iscsi://")))
			err = func() error {
				for _, it := range plan {
					if i > 0 && it.Once {
						continue
					}
					n++
					if err := c.runItem(ctx, res, srv, preset, it, fmt.Sprintf("[%d/%d]", n, total), log); err != nil {
						return err
					}
				}
				return nil
			}()
			stopErr := srv.stop()
			os.RemoveAll(srv.data)
			if err != nil {
				return err
			}
			if stopErr != nil {
				return fmt.Errorf("lab: preset %s: phase server stop: %w", preset, stopErr)
			}
		}
		return nil
	}()
	res.End = time.Now().UTC()
	if runErr != nil {
		res.Error = runErr.Error()
	} else {
		res.Partial = false
	}
	repErr := writeReport(c.Out, res)
	if err := writeResult(c.Out, res); err != nil && runErr == nil {
		runErr = err
	}
	if runErr == nil && repErr != nil {
		runErr = repErr
	}
	return res, runErr
}

func (c *Config) runItem(ctx context.Context, res *Result, srv *server, preset string, it Item, count string, log func(string)) error {
	network := preset
	if it.Counting {
		preset, network = CountingPreset, ""
	}
	name := fmt.Sprintf("%s-%s-%s", preset, it.Name, strings.ReplaceAll(it.Kind, "+", "-"))
	dir := filepath.Join("runs", name)
	info := RunInfo{Preset: preset, Name: it.Name, Suite: it.Suite, Kind: it.Kind, Dir: dir, Label: it.Kind + " " + preset}
	if it.Name != it.Suite {
		info.Label += " " + strings.TrimPrefix(it.Name, it.Suite+"-")
	}
	prefix := fmt.Sprintf("%s %s %s %s", count, preset, it.Name, it.Kind)
	log(prefix + ": start")
	scale := c.Scale
	if it.Scale > 0 {
		scale = it.Scale
	}
	bc := bench.Config{Suite: it.Suite, Target: srv.target(it.Kind), Scale: scale, Sizes: it.Sizes, Threads: it.Threads,
		Count: it.Count, FileSize: it.FileSize, Forms: it.Forms, Network: network, Link: res.Link, Out: filepath.Join(c.Out, dir),
		ClientCommand: c.ClientCommand,
		Options:       bench.Options{AccessKey: srv.accessKey, SecretKey: srv.secretKey, Timeout: c.Timeout}}
	if c.Progress != nil {
		bc.Progress = func(p bench.Progress) { c.Progress(prefix, p) }
	}
	t0 := time.Now()
	run, err := bench.Execute(ctx, bc)
	info.Seconds = time.Since(t0).Seconds()
	if run != nil {
		info.Partial = run.Partial
		if run.CleanupError != "" && err == nil {
			err = errors.New("cleanup: " + run.CleanupError)
		}
		res.Runs = append(res.Runs, info)
	}
	if err != nil {
		if e := srv.exited(); e != nil {
			err = fmt.Errorf("%w (%v)", err, e)
		}
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (interrupted)", err)
		}
		err = fmt.Errorf("lab: preset %s, suite %s (%s, run %s): %w", preset, it.Suite, it.Kind, name, err)
		if run != nil {
			res.Runs[len(res.Runs)-1].Error = err.Error()
			res.Runs[len(res.Runs)-1].Partial = true
		}
		return err
	}
	ops := run.Ops
	log(fmt.Sprintf("%s: %d requests, %d failed, %.1f s", prefix, ops, run.Errors, info.Seconds))
	return writeResult(c.Out, res)
}

// writeReport draws the report of the runs saved so far into Out.
func writeReport(out string, res *Result) error {
	var args []string
	for _, r := range res.Runs {
		args = append(args, r.Label+"="+filepath.Join(out, r.Dir))
	}
	if len(args) == 0 {
		return nil
	}
	runs, err := report.Load(args)
	if err != nil {
		return fmt.Errorf("lab: report: %w", err)
	}
	files, err := report.Write(out, runs, report.Options{})
	if err != nil {
		return fmt.Errorf("lab: report: %w", err)
	}
	res.Report = nil
	for _, f := range files {
		if rel, err := filepath.Rel(out, f); err == nil {
			f = rel
		}
		res.Report = append(res.Report, f)
	}
	return nil
}

func writeResult(out string, res *Result) error {
	b, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return err
	}
	tmp := filepath.Join(out, "lab.json.tmp")
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("lab: %w", err)
	}
	return os.Rename(tmp, filepath.Join(out, "lab.json"))
}
