package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net/url"
	"os/exec"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// Suite is one experiment of the seeds. Defaults gives its parameters at a
// scale; Run performs it through a Runner. Suites register themselves from
// init() (one file per suite).
type Suite struct {
	Name string
	// Seed says which paper section the suite reproduces.
	Seed string
	// Doc is a one-paragraph description for --help.
	Doc string
	// UsesForms says the suite measures access forms (Runner.Forms); the
	// others use each driver's default (recorded as forms ["default"]).
	UsesForms bool
	// NeedsWire asks for the bytes on the wire: a network target is run
	// through a counting link even without --network.
	NeedsWire bool
	Defaults  func(scale float64) Params
	Run       func(ctx context.Context, r *Runner) error
}

var suites = map[string]*Suite{}

func register(s *Suite) { suites[s.Name] = s }

// Suites lists the registered suites by name.
func Suites() []*Suite {
	out := make([]*Suite, 0, len(suites))
	for _, s := range suites {
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// LookupSuite returns the suite called name.
func LookupSuite(name string) (*Suite, bool) { s, ok := suites[name]; return s, ok }

// Config is one run of a suite against a target.
type Config struct {
	Suite  string
	Target string
	// Driver options (credentials, dialer, timeout).
	Options Options
	// Scale (0 < Scale <= 1) shrinks the seed's sizes and counts; 0 means 1.
	Scale float64
	// Forms restricts the access forms measured (default: all the target's).
	Forms []string
	// Sizes, Threads and Count, when set, replace the suite's (scaled)
	// parameters.
	Sizes   []int64
	Threads []int
	Count   int
	// FileSize, when set, replaces the units suite's file size (iozone's
	// data set).
	FileSize int64
	// Settings set a suite's own parameters by name: the Params.Extra
	// keys its Defaults declare (postmark's number, transactions, ...). An
	// unknown name is an error.
	Settings map[string]string
	// Network is an emulated-link preset to run across ("" for none),
	// recorded in run.json; Link is the kind of link (auto, netns, proxy:
	// see Link).
	Network string
	Link    string
	// Out is the results directory to create.
	Out string
	// MaxConsecutiveErrors ends a step after this many failed requests in a
	// row (default 10): a target that went away is reported, not hammered.
	MaxConsecutiveErrors int
	// Progress, when set, is called about five times a second while the
	// run goes on, when each step ends (StepEnded), and once at the end;
	// calls may come from several goroutines.
	Progress func(Progress)
	// Driver, when set, is used instead of opening Target (which then only
	// names it): a driver the caller built, wrapped or instrumented.
	// Execute closes it at the end, as it would its own.
	Driver Driver
	// Wire, when set, returns the bytes an emulated link carried so far in
	// each direction; every step records the difference.
	Wire func() (up, down int64)
	// ClientCommand makes the command of one client process for the
	// clients suite: the tristore binary re-executed as `tristore bench
	// client` (the CLI sets it), or a test binary that runs ClientMain. Its
	// stdin and stdout carry ClientMain's protocol.
	ClientCommand func(ctx context.Context) *exec.Cmd
}

// Runner is what a suite works with: the driver, the records, the
// parameters, the working directory on the target, and Step to run timed
// requests.
type Runner struct {
	D       Driver
	W       *Writer
	P       Params
	Forms   []string
	Workdir string
	cfg     Config
	target  string // the target as given, secrets removed (not a link's entry)
	// entry is the target as other processes must dial it: cfg.Target, or
	// pointed at the link's entry when one is used (they take no dialer).
	entry string

	phase   atomic.Pointer[string]
	planned atomic.Int64 // requests planned in the current step
	doneOps atomic.Int64 // requests done in the current step
}

// Progress is a snapshot for a progress display.
type Progress struct {
	Phase       string
	StepDone    int64 // requests done in the current step
	StepPlanned int64
	Ops, Errors int64 // whole run so far
	Bytes       int64 // payload of successful requests so far
	Elapsed     time.Duration
	// StepEnded is set on the one call made when a step finishes; Step is
	// that step's Phase record.
	StepEnded bool
	Step      Phase
}

// Progress returns the runner's current state (safe from any goroutine).
func (r *Runner) Progress() Progress {
	p := Progress{StepDone: r.doneOps.Load(), StepPlanned: r.planned.Load(), Elapsed: time.Since(r.W.Start())}
	if s := r.phase.Load(); s != nil {
		p.Phase = *s
	}
	p.Ops, p.Errors, p.Bytes = r.W.Counts()
	return p
}

// Step describes one step of a suite: Count requests of one kind, spread
// over Threads workers.
type Step struct {
	Phase   string
	Form    string
	Op      string
	Unit    int64
	Threads int
	Count   int
	// Until, when set, ends the step early: workers take no new request
	// once it returns true (the mixed suite stops a workload when its
	// co-runner is done). Requests in flight finish and are recorded, and
	// the first Threads requests always run, so every worker is measured.
	Until func() bool
}

func (s Step) String() string {
	b := &strings.Builder{}
	fmt.Fprintf(b, "%s", s.Phase)
	if s.Form != "" {
		fmt.Fprintf(b, " %s", s.Form)
	}
	if s.Unit > 0 {
		fmt.Fprintf(b, " %s", FormatSize(s.Unit))
	}
	fmt.Fprintf(b, " x%d", s.Threads)
	return b.String()
}

// ReqFunc performs request i of a step on worker w and returns the payload
// bytes moved (for op "list": the number of names returned, recorded as
// items) and, for reads, when the first byte arrived.
type ReqFunc func(ctx context.Context, w, i int) (size int64, first time.Time, err error)

// Step runs s: workers take request indexes 0..Count-1 in order, each
// request is timed and recorded (failed ones too). It returns an error only
// when the step could not go on: the context ended, or
// MaxConsecutiveErrors requests in a row failed.
func (r *Runner) Step(ctx context.Context, s Step, fn ReqFunc) error {
	if s.Threads < 1 {
		s.Threads = 1
	}
	name := s.String()
	limit := int64(r.cfg.MaxConsecutiveErrors)
	if limit <= 0 {
		limit = 10
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var next, consecutive, nops, nerr, payload atomic.Int64
	m := r.beginPhase(name, int64(s.Count))
	var wg sync.WaitGroup
	for w := range s.Threads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= s.Count || ctx.Err() != nil || (s.Until != nil && i >= s.Threads && s.Until()) {
					return
				}
				t0 := time.Now()
				n, first, err, bug := safeCall(ctx, fn, w, i)
				t1 := time.Now()
				op := Operation{Phase: s.Phase, Form: s.Form, Op: s.Op, Size: n, Unit: s.Unit, Threads: s.Threads, Worker: w,
					Start: r.W.Since(t0), End: r.W.Since(t1)}
				if !first.IsZero() {
					op.FirstByte = r.W.Since(first)
				}
				if s.Op == "list" {
					op.Items, op.Size, n = int(n), 0, 0
				}
				nops.Add(1)
				r.doneOps.Add(1)
				if err != nil {
					op.Err = err.Error()
					nerr.Add(1)
					r.W.Add(op)
					if bug != nil {
						cancel(bug)
						return
					}
					if ctx.Err() != nil {
						return // the step is over: in flight when it was stopped
					}
					if consecutive.Add(1) >= limit {
						cancel(fmt.Errorf("%d requests in a row failed; last: %w", limit, err))
						return
					}
					continue
				}
				consecutive.Store(0)
				payload.Add(n)
				r.W.Add(op)
			}
		}()
	}
	wg.Wait()
	r.endPhase(m, name, Phase{Name: s.Phase, Form: s.Form, Unit: s.Unit, Threads: s.Threads,
		Ops: nops.Load(), Errors: nerr.Load(), Payload: payload.Load()}, true)
	return r.phaseErr(ctx, name)
}

// phaseMark is what a phase reads as it begins (the clock, the wire and
// CPU counters), so that endPhase records it as one Phase.
type phaseMark struct {
	start    time.Time
	up0, dn0 int64
	cu0, cs0 float64
}

// beginPhase makes name the running phase with planned requests (for
// progress) and reads the counters it starts from.
func (r *Runner) beginPhase(name string, planned int64) phaseMark {
	r.phase.Store(&name)
	r.planned.Store(planned)
	r.doneOps.Store(0)
	var m phaseMark
	if r.cfg.Wire != nil {
		m.up0, m.dn0 = r.cfg.Wire()
	}
	m.cu0, m.cs0 = CPUTimes()
	m.start = time.Now()
	return m
}

// endPhase completes ph (its times, wire bytes and, with cpu, this
// process's CPU time since m), records it and reports it as progress.
func (r *Runner) endPhase(m phaseMark, name string, ph Phase, cpu bool) {
	end := time.Now()
	if cpu {
		cu1, cs1 := CPUTimes()
		ph.CPUUser, ph.CPUSys = cu1-m.cu0, cs1-m.cs0
	}
	ph.Start, ph.End = r.W.Since(m.start), r.W.Since(end)
	if r.cfg.Wire != nil {
		up1, dn1 := r.cfg.Wire()
		ph.WireUp, ph.WireDn = up1-m.up0, dn1-m.dn0
	}
	r.W.AddPhase(ph)
	if r.cfg.Progress != nil {
		p := r.Progress()
		p.Phase, p.StepEnded, p.Step = name, true, ph
		r.cfg.Progress(p)
	}
}

// phaseErr is a phase's error once it ended: the cause that stopped it,
// or the context's error.
func (r *Runner) phaseErr(ctx context.Context, name string) error {
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return fmt.Errorf("phase %s on %s: %w", name, r.target, cause)
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("phase %s on %s: %w", name, r.target, err)
	}
	return nil
}

// safeCall runs one request; a panic in it (a bug in a driver or suite)
// becomes the request's error and bug, which ends the step and the run with
// saved, partial results instead of ending the process.
func safeCall(ctx context.Context, fn ReqFunc, w, i int) (n int64, first time.Time, err, bug error) {
	defer func() {
		if v := recover(); v != nil {
			err = fmt.Errorf("panic: %v", v)
			bug = fmt.Errorf("internal error in worker %d: %v\n%s", w, v, debug.Stack())
		}
	}()
	n, first, err = fn(ctx, w, i)
	return n, first, err, nil
}

// Setup runs a preparatory call (not a measured request) and names the
// phase in its error.
func (r *Runner) Setup(what string, err error) error {
	if err != nil {
		return fmt.Errorf("phase setup (%s) on %s: %w", what, r.target, err)
	}
	return nil
}

// Path names a file under the run's working directory.
func (r *Runner) Path(elem ...string) string {
	return r.Workdir + "/" + strings.Join(elem, "/")
}

// Execute runs cfg.Suite against cfg.Target and saves the results directory
// cfg.Out. The returned Run is what run.json says; the error (also in
// run.json, with partial=true) names the target and phase. Whatever the run
// created on the target is removed, also after a failure.
func Execute(ctx context.Context, cfg Config) (*Run, error) {
	s, ok := suites[cfg.Suite]
	if !ok {
		names := []string{}
		for _, s := range Suites() {
			names = append(names, s.Name)
		}
		return nil, fmt.Errorf("bench: no suite %q (have %s)", cfg.Suite, strings.Join(names, ", "))
	}
	if cfg.Scale == 0 {
		cfg.Scale = 1
	}
	if cfg.Scale < 0 || cfg.Scale > 1 || math.IsNaN(cfg.Scale) {
		return nil, fmt.Errorf("bench: --scale %v: want 0 < scale <= 1", cfg.Scale)
	}
	if cfg.Out == "" {
		return nil, errors.New("bench: no results directory")
	}
	p := s.Defaults(cfg.Scale)
	if len(cfg.Sizes) > 0 {
		p.Sizes, p.Counts = cfg.Sizes, nil
		if s.Name == "units" || s.Name == "iozone" {
			p.FileSize = max(p.FileSize, slices.Max(cfg.Sizes))
		}
	}
	if len(cfg.Threads) > 0 {
		p.Threads = cfg.Threads
	}
	if cfg.Count > 0 {
		p.Count = cfg.Count
	}
	if cfg.FileSize > 0 && (s.Name == "units" || s.Name == "iozone") {
		p.FileSize = cfg.FileSize
	}
	for k, v := range cfg.Settings {
		if _, ok := p.Extra[k]; !ok {
			var have []string
			for k := range p.Extra {
				have = append(have, k)
			}
			slices.Sort(have)
			return nil, fmt.Errorf("bench: suite %s has no setting %q (has: %s)", s.Name, k, strings.Join(have, ", "))
		}
		p.Extra[k] = v
	}
	target := Redact(cfg.Target)
	w, err := Create(cfg.Out, Run{Suite: s.Name, Target: target, Protocol: protocolOf(cfg.Target), Params: p,
		Scale: cfg.Scale, Network: cfg.Network, Machine: Describe()})
	if err != nil {
		return nil, err
	}
	u0, s0 := CPUTimes()
	r := &Runner{W: w, P: p, cfg: cfg, target: target, entry: cfg.Target}
	if cfg.Progress != nil {
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			tick := time.NewTicker(200 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
					cfg.Progress(r.Progress())
				}
			}
		}()
		defer func() {
			close(stop)
			wg.Wait()
			cfg.Progress(r.Progress())
		}()
	}
	var link *Link // closed after the cleanup, which goes through it
	openTarget := cfg.Target
	runErr := func() (err error) {
		defer func() {
			if v := recover(); v != nil {
				err = fmt.Errorf("internal error: %v\n%s", v, debug.Stack())
			}
		}()
		counting := s.NeedsWire && cfg.Network == "" && protocolOf(cfg.Target) != "posix"
		if (cfg.Network != "" || counting) && cfg.Wire == nil && cfg.Driver == nil {
			l, hostport, err := StartLink(ctx, cfg.Target, cfg.Network, cfg.Link)
			if err != nil {
				return fmt.Errorf("phase network: %w", err)
			}
			link = l
			cfg.Options.Dial = link.Dialer(hostport)
			if p := protocolOf(cfg.Target); p == "iscsi" || p == "ext4+iscsi" { // the initiator takes no dialer
				openTarget = link.Rewrite(cfg.Target)
			}
			cfg.Wire = link.Wire
			r.cfg.Wire = link.Wire
			r.entry = link.Rewrite(cfg.Target)
			w.Update(func(run *Run) {
				if run.Params.Extra == nil {
					run.Params.Extra = map[string]string{}
				}
				run.Params.Extra["network_emulation"] = l.Kind + " link in front of " + hostport + ": " + l.Note
				run.Params.Extra["link"] = l.Kind
			})
		}
		d := cfg.Driver
		if d == nil {
			var err error
			if d, err = Open(ctx, openTarget, cfg.Options); err != nil {
				return &connectError{target: target, err: err}
			}
		}
		r.D = d
		r.Forms = d.Forms()
		if len(cfg.Forms) > 0 {
			for _, f := range cfg.Forms {
				if !slices.Contains(d.Forms(), f) {
					return fmt.Errorf("target %s (%s) has no access form %q (has %s)", target, d.Protocol(), f, strings.Join(d.Forms(), ", "))
				}
			}
			r.Forms = cfg.Forms
		}
		if !s.UsesForms {
			if len(cfg.Forms) > 0 && !slices.Equal(cfg.Forms, []string{FormDefault}) {
				return fmt.Errorf("suite %s does not measure access forms (only units and amplification do)", s.Name)
			}
			r.Forms = []string{FormDefault}
		}
		r.Workdir = "tristore-bench-" + s.Name + "-" + randomHex(4)
		w.Update(func(run *Run) { run.Forms, run.Workdir, run.Protocol = r.Forms, r.Workdir, d.Protocol() })
		if err := r.Setup("mkdir "+r.Workdir, d.Mkdir(ctx, r.Workdir)); err != nil {
			return err
		}
		return s.Run(ctx, r)
	}()
	if r.D != nil {
		// Clean up with a fresh context: the run's may have ended.
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Minute)
		var cerr error
		if r.Workdir != "" {
			cerr = r.D.RemoveAll(cctx, r.Workdir)
		}
		if err := r.D.Close(cctx); cerr == nil {
			cerr = err
		}
		cancel()
		if cerr != nil {
			w.Update(func(run *Run) { run.CleanupError = cerr.Error() })
		}
	}
	if link != nil {
		link.Close()
	}
	u1, s1 := CPUTimes()
	w.Update(func(run *Run) {
		run.Machine.LoadEnd = LoadAvg()
		run.CPUUser, run.CPUSys = u1-u0, s1-s0
	})
	if runErr != nil && !strings.Contains(runErr.Error(), target) {
		runErr = fmt.Errorf("target %s: %w", target, runErr)
	}
	if err := w.Close(runErr); err != nil && runErr == nil {
		runErr = err
	}
	run := w.Run()
	return &run, runErr
}

// connectError reads "target T: phase connect: why" without repeating the
// target Open's error already names.
type connectError struct {
	target string
	err    error
}

func (e *connectError) Error() string {
	why := strings.TrimPrefix(e.err.Error(), "bench: ")
	why = strings.TrimPrefix(why, "target "+e.target+": ")
	return "target " + e.target + ": phase connect: " + why
}

func (e *connectError) Unwrap() error { return e.err }

func protocolOf(target string) string {
	scheme, _, ok := strings.Cut(target, "://")
	switch {
	case !ok || scheme == "file":
		return "posix"
	case strings.HasPrefix(scheme, "s3"):
		return "s3"
	}
	if u, err := url.Parse(target); err == nil {
		return u.Scheme
	}
	return scheme
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// Scaling: counts shrink linearly with scale; sizes and thread counts with
// its square root, so that a small scale still spans several sizes and
// parallelism levels (scale 0.01 keeps sizes up to a tenth of the largest
// and up to 6 threads of 64).

// ScaleCount is ceil(n*scale), at least lo.
func ScaleCount(n int, scale float64, lo int) int {
	return max(lo, int(math.Ceil(float64(n)*scale)))
}

// ScaleSizes keeps the sizes up to max(sizes)*sqrt(scale) (at least the
// smallest).
func ScaleSizes(sizes []int64, scale float64) []int64 {
	top := float64(slices.Max(sizes)) * math.Sqrt(scale)
	var out []int64
	for _, s := range sizes {
		if float64(s) <= top*1.0001 || len(out) == 0 {
			out = append(out, s)
		}
	}
	return out
}

// ScaleThreads keeps the thread counts up to max(threads)*sqrt(scale) (at
// least the smallest).
func ScaleThreads(threads []int, scale float64) []int {
	top := float64(slices.Max(threads)) * math.Sqrt(scale)
	var out []int
	for _, t := range threads {
		if float64(t) <= top*1.0001 || len(out) == 0 {
			out = append(out, t)
		}
	}
	return out
}

// Powers returns lo, lo*f, lo*f², … up to hi.
func Powers(lo, hi, f int64) []int64 {
	var out []int64
	for v := lo; v <= hi; v *= f {
		out = append(out, v)
	}
	return out
}

// FormatSize prints a byte count with a binary suffix (4KiB, 16MiB).
func FormatSize(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%dGiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%dMiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%dKiB", n>>10)
	}
	return fmt.Sprintf("%dB", n)
}
