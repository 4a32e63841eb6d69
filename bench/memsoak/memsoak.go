// Package memsoak is issue 14's memory soak: one `tristore serve` under a
// mixed S3 + NFS (v3 and v4.1) + iSCSI load of many clients, each its own
// connection or session, about half of them reconnecting all the time
// (some without a goodbye), while the server's resident memory (VmRSS),
// open descriptors (/proc/PID/fd) and goroutines (go_goroutines of its
// /metrics) are sampled. At the end the clients stop, the server is left
// idle, and goroutines and descriptors must come back to where they were
// before the load; RSS over the second half of the load must not grow.
//
// The clients are tristore's own Go clients (aws-sdk-go-v2 for S3,
// client/nfs, client/iscsi) in one process, not kernel or FUSE mounts, so
// 64 of them fit on a 2-core machine and every one is a real connection.
// scripts/bench/memsoak (the command) and TestMemSoakShort run it.
package memsoak

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"
)

// Config says what to run.
type Config struct {
	// Bin is the tristore binary; Work a scratch directory (data, logs).
	Bin, Work string
	// Clients is the number of clients: a third S3, a third NFS (v3 and
	// v4.1 alternating), the rest iSCSI; within each protocol every other
	// client is long-lived, the others reconnect (Churn).
	Clients int
	// Duration of the load; Sample the interval between samples.
	Duration, Sample time.Duration
	// Think is the mean pause of a client between operations (uniform
	// over 0..2×Think), so the load does not take every core.
	Think time.Duration
	// Reconnecting clients reconnect every ChurnMinOps..ChurnMaxOps
	// operations; one reconnect in AbruptEvery is abrupt.
	ChurnMinOps, ChurnMaxOps, AbruptEvery int
	// Volumes iSCSI volumes of VolumeSize bytes.
	Volumes    int
	VolumeSize int64
	// IdleMax bounds the wait for goroutines and descriptors to come back.
	IdleMax time.Duration
	// TolGoroutines and TolFDs are how far above the baseline the idle
	// server may stay.
	TolGoroutines, TolFDs int
	// RSSGrowth is the RSS growth allowed over the second half of the load
	// (0.10 = 10 %).
	RSSGrowth float64
	// Seed of the clients' random choices.
	Seed uint64
	// Raw, if set, receives the samples and the result as JSON lines.
	Raw string
	// HeapProfile, if set, receives the idle server's heap profile at the
	// end (after the forced GCs; `go tool pprof -sample_index=inuse_space`).
	HeapProfile string
	// Log receives progress lines (nil: none).
	Log io.Writer
	// Command and Commit are recorded in the raw file.
	Command, Commit string
}

// Defaults fills in what c leaves zero.
func (c *Config) Defaults() {
	def := func(p *int, v int) {
		if *p == 0 {
			*p = v
		}
	}
	def(&c.Clients, 64)
	def(&c.ChurnMinOps, 5)
	def(&c.ChurnMaxOps, 60)
	def(&c.AbruptEvery, 4)
	def(&c.Volumes, 4)
	def(&c.TolGoroutines, 2)
	def(&c.TolFDs, 2)
	if c.Duration == 0 {
		c.Duration = 30 * time.Minute
	}
	if c.Sample == 0 {
		c.Sample = 10 * time.Second
	}
	if c.Think == 0 {
		c.Think = 100 * time.Millisecond
	}
	if c.VolumeSize == 0 {
		c.VolumeSize = 64 << 20
	}
	if c.IdleMax == 0 {
		c.IdleMax = 2 * time.Minute
	}
	if c.RSSGrowth == 0 {
		c.RSSGrowth = 0.10
	}
	if c.Seed == 0 {
		c.Seed = uint64(time.Now().UnixNano())
	}
}

// Sample is one reading of the server and the clients' counters.
type Sample struct {
	Type       string           `json:"type"` // "sample"
	Time       string           `json:"time"`
	T          float64          `json:"t"` // seconds since the server was ready
	Phase      string           `json:"phase"`
	RSSKiB     int64            `json:"rss_kib"`
	HWMKiB     int64            `json:"hwm_kib"`
	FDs        int              `json:"fds"`
	Goroutines int              `json:"goroutines"`
	HeapInuse  int64            `json:"heap_inuse_bytes"`
	Ops        map[string]int64 `json:"ops"`
	Errors     map[string]int64 `json:"errors"`
	Opened     map[string]int64 `json:"opened"`
	Abrupt     map[string]int64 `json:"abrupt"`
	Active     map[string]int64 `json:"active"`
	Load       string           `json:"loadavg"`
}

// Quarter summarises the samples of one quarter of the load.
type Quarter struct {
	Samples                   int
	RSSMedianKiB, RSSMaxKiB   int64
	HeapMedian                int64
	GorMin, GorMax            int
	FDMin, FDMax              int
	OpsPerSec, ConnectsPerSec float64
}

// Check is one pass/fail criterion.
type Check struct {
	Name   string `json:"name"`
	Pass   bool   `json:"pass"`
	Judged bool   `json:"judged"`
	Detail string `json:"detail"`
}

// Result is the outcome of a run.
type Result struct {
	Type                  string     `json:"type"` // "result"
	Start, Baseline, End  Sample     `json:"-"`
	SettleSeconds         float64    `json:"settle_seconds"`
	Quarters              [4]Quarter `json:"quarters"`
	SlopeKiBPerHour       float64    `json:"rss_slope_kib_per_hour"`
	Checks                []Check    `json:"checks"`
	Pass                  bool       `json:"pass"`
	FirstErrors           []string   `json:"first_errors,omitempty"`
	StartSample           Sample     `json:"start"`
	BaselineSample        Sample     `json:"baseline"`
	EndSample             Sample     `json:"end"`
	GoroutineDump, FDDump string     `json:"-"`
	Samples               []Sample   `json:"-"`
}

// header is the raw file's first line.
type header struct {
	Type    string `json:"type"` // "memsoak"
	Command string `json:"command"`
	Commit  string `json:"commit"`
	Config  any    `json:"config"`
	Split   string `json:"split"`
	Machine any    `json:"machine"`
}

type runner struct {
	cfg  Config
	srv  *server
	c    *counters
	t0   time.Time
	raw  *os.File
	mu   sync.Mutex
	all  []Sample
	logf func(format string, a ...any)
}

// split is how many clients of each protocol Clients gives.
func split(n int) [nProto]int {
	var s [nProto]int
	s[pS3] = n / 3
	nfsN := n / 3
	s[pNFS3] = (nfsN + 1) / 2
	s[pNFS4] = nfsN / 2
	s[pISCSI] = n - s[pS3] - nfsN
	return s
}

// Run runs the soak. It returns an error when the run could not be made
// (the server did not start, ...); a run that was made returns its Result,
// whose Pass says whether every check held.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	cfg.Defaults()
	r := &runner{cfg: cfg, c: &counters{}, logf: func(string, ...any) {}}
	if cfg.Log != nil {
		r.logf = func(f string, a ...any) { fmt.Fprintf(cfg.Log, "memsoak: "+f+"\n", a...) }
	}
	data := filepath.Join(cfg.Work, "data")
	sp := split(cfg.Clients)
	if err := r.prepare(data, sp); err != nil {
		return nil, err
	}
	if cfg.Raw != "" {
		f, err := os.Create(cfg.Raw)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r.raw = f
		cc := cfg
		cc.Log = nil
		r.write(header{Type: "memsoak", Command: cfg.Command, Commit: cfg.Commit, Config: cc,
			Split: fmt.Sprintf("s3 %d, nfs3 %d, nfs4.1 %d, iscsi %d", sp[pS3], sp[pNFS3], sp[pNFS4], sp[pISCSI]), Machine: machine()})
	}
	srv, err := startServer(ctx, cfg.Bin, data, filepath.Join(cfg.Work, "serve.log"), nil)
	if err != nil {
		return nil, err
	}
	r.srv = srv
	defer srv.stop()
	r.t0 = time.Now()
	return r.run(ctx, sp)
}

func (r *runner) prepare(data string, sp [nProto]int) error {
	for i := range r.cfg.Clients {
		if err := os.MkdirAll(filepath.Join(data, nfsDir, fmt.Sprintf("c%d", i)), 0o755); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(filepath.Join(data, bucket), 0o755); err != nil {
		return err
	}
	for v := range r.cfg.Volumes {
		cmd := exec.Command(r.cfg.Bin, "volume", "create", "--data", data, fmt.Sprintf("vols/lun%d", v), fmt.Sprint(r.cfg.VolumeSize))
		cmd.Env = append(os.Environ(), "XDG_CONFIG_HOME="+filepath.Join(r.cfg.Work, "config"))
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("volume create: %v\n%s", err, out)
		}
	}
	return nil
}

func (r *runner) env() *env {
	e := &env{addrs: r.srv.addrs, volSize: r.cfg.VolumeSize, think: r.cfg.Think, c: r.c,
		churn: churn{MinOps: r.cfg.ChurnMinOps, MaxOps: r.cfg.ChurnMaxOps, AbruptEvery: r.cfg.AbruptEvery}}
	for v := range r.cfg.Volumes {
		e.volumes = append(e.volumes, fmt.Sprintf("iqn.2026-11.io.tristore:vols:lun%d", v))
	}
	return e
}

func (r *runner) write(v any) {
	if r.raw == nil {
		return
	}
	b, _ := json.Marshal(v)
	r.raw.Write(append(b, '\n'))
}

// sample reads the server and records the sample.
func (r *runner) sample(ctx context.Context, phase string) (Sample, error) {
	s := Sample{Type: "sample", Phase: phase, Time: time.Now().UTC().Format(time.RFC3339)}
	s.T = math.Round(time.Since(r.t0).Seconds()*10) / 10
	var err error
	// /proc first, then the scrape, whose own connection is then not
	// among the descriptors counted.
	if s.RSSKiB, s.HWMKiB, s.FDs, err = procStats(r.srv.pid()); err != nil {
		return s, err
	}
	mctx, cancel := context.WithTimeout(ctx, 20*time.Second)
	defer cancel()
	m, err := r.srv.metrics(mctx, "go_goroutines", "go_memstats_heap_inuse_bytes")
	if err != nil {
		return s, err
	}
	s.Goroutines, s.HeapInuse = int(m["go_goroutines"]), int64(m["go_memstats_heap_inuse_bytes"])
	s.Ops, s.Errors, s.Opened, s.Abrupt, s.Active = map[string]int64{}, map[string]int64{}, map[string]int64{}, map[string]int64{}, map[string]int64{}
	for p := range nProto {
		n := protoNames[p]
		s.Ops[n], s.Errors[n], s.Opened[n] = r.c.ops[p].Load(), r.c.errs[p].Load(), r.c.opened[p].Load()
		s.Abrupt[n], s.Active[n] = r.c.abrupt[p].Load(), r.c.active[p].Load()
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		f := strings.Fields(string(b))
		if len(f) >= 3 {
			s.Load = strings.Join(f[:3], " ")
		}
	}
	r.mu.Lock()
	r.all = append(r.all, s)
	r.mu.Unlock()
	r.write(s)
	return s, nil
}

// settle samples every second until goroutines and descriptors have not
// changed for 3 s (or max passed), or until done says so, and returns the
// last sample.
func (r *runner) settle(ctx context.Context, phase string, max time.Duration, done func(Sample) bool) (Sample, bool, error) {
	deadline := time.Now().Add(max)
	var last Sample
	same := 0
	for i := 0; ; i++ {
		s, err := r.sample(ctx, phase)
		if err != nil {
			return s, false, err
		}
		// ±1 goroutine is the scrapes' own connection handling.
		if i > 0 && abs(s.Goroutines-last.Goroutines) <= 1 && s.FDs == last.FDs {
			same++
		} else {
			same = 0
		}
		last = s
		if (done == nil && same >= 3) || (done != nil && done(s)) {
			return s, true, nil
		}
		if time.Now().After(deadline) {
			return s, false, nil
		}
		sleep(ctx, time.Second)
		if ctx.Err() != nil {
			return s, false, ctx.Err()
		}
	}
}

func (r *runner) run(ctx context.Context, sp [nProto]int) (*Result, error) {
	res := &Result{Type: "result"}
	cfg := r.cfg
	sleep(ctx, 2*time.Second)
	start, err := r.sample(ctx, "start")
	if err != nil {
		return nil, err
	}
	res.Start = start
	r.logf("server pid %d ready: RSS %.1f MiB, %d fds, %d goroutines", r.srv.pid(), mib(start.RSSKiB), start.FDs, start.Goroutines)

	// Warm-up: one short client of each kind on every bucket, export and
	// volume, one after the other, so what the server opens once and keeps
	// (a volume's file, a bucket's settings) is in the baseline and not
	// taken for a leak.
	e := r.env()
	ids := clientIDs(sp)
	warm := func(p, id int) {
		cn, err := dial(ctx, e, p, id)
		if err != nil {
			r.c.fail(p, fmt.Errorf("warm-up connect: %w", err))
			return
		}
		rng := newRand(cfg.Seed, id)
		for range 10 {
			if err := cn.op(ctx, rng); err != nil {
				r.c.fail(p, fmt.Errorf("warm-up: %w", err))
			}
		}
		if err := cn.close(false); err != nil {
			r.c.fail(p, fmt.Errorf("warm-up close: %w", err))
		}
	}
	for p := range nProto {
		n := 1
		if p == pISCSI {
			n = min(cfg.Volumes, len(ids[p]))
		}
		for _, id := range ids[p][:min(n, len(ids[p]))] {
			warm(p, id)
		}
	}
	if _, _, err := r.settle(ctx, "baseline", 30*time.Second, nil); err != nil {
		return nil, err
	}
	// The baseline and the end are both read after a forced GC, so the
	// heap in use they show is live data, not garbage of the last requests.
	if err := r.srv.forceGC(ctx, nil); err != nil {
		return nil, err
	}
	sleep(ctx, time.Second)
	base, err := r.sample(ctx, "baseline")
	if err != nil {
		return nil, err
	}
	res.Baseline = base
	r.logf("baseline after warm-up: RSS %.1f MiB, %d fds, %d goroutines", mib(base.RSSKiB), base.FDs, base.Goroutines)

	// The load.
	lctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for p := range nProto {
		for i, id := range ids[p] {
			wg.Add(1)
			go func() {
				defer wg.Done()
				runClient(lctx, e, p, id, i%2 == 0, cfg.Seed)
			}()
		}
	}
	loadStart := time.Now()
	tick := time.NewTicker(cfg.Sample)
	end := time.NewTimer(cfg.Duration)
	var loadT0 float64 = time.Since(r.t0).Seconds()
loop:
	for {
		select {
		case <-tick.C:
			s, err := r.sample(ctx, "load")
			if err != nil {
				stop()
				wg.Wait()
				return nil, err
			}
			r.logf("%5.0fs RSS %6.1f MiB heap %6.1f MiB fds %4d goroutines %5d ops %d connects %d errors %d load %s",
				time.Since(loadStart).Seconds(), mib(s.RSSKiB), float64(s.HeapInuse)/(1<<20), s.FDs, s.Goroutines,
				sum(s.Ops), sum(s.Opened), sum(s.Errors), s.Load)
		case <-end.C:
			break loop
		case <-ctx.Done():
			break loop
		}
	}
	tick.Stop()
	stop()
	stopped := make(chan struct{})
	go func() { wg.Wait(); close(stopped) }()
	clientsStopped := true
	select {
	case <-stopped:
	case <-time.After(2 * time.Minute):
		clientsStopped = false
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	loadEnd := time.Since(r.t0).Seconds()

	// Idle: wait for goroutines and descriptors to come back.
	idleStart := time.Now()
	back := func(s Sample) bool {
		return s.Goroutines <= base.Goroutines+cfg.TolGoroutines && s.FDs <= base.FDs+cfg.TolFDs
	}
	endS, ok, err := r.settle(ctx, "idle", cfg.IdleMax, back)
	if err != nil {
		return nil, err
	}
	if ok {
		// Settled: a forced GC and a few more seconds, to see it stays there.
		var prof bytes.Buffer
		if err := r.srv.forceGC(ctx, &prof); err != nil {
			return nil, err
		}
		if cfg.HeapProfile != "" {
			if err := os.WriteFile(cfg.HeapProfile, prof.Bytes(), 0o644); err != nil {
				return nil, err
			}
		}
		sleep(ctx, 5*time.Second)
		if endS, err = r.sample(ctx, "end"); err != nil {
			return nil, err
		}
		ok = back(endS)
	}
	res.End = endS
	res.SettleSeconds = math.Round(time.Since(idleStart).Seconds()*10) / 10
	if !ok {
		if d, err := r.srv.goroutineDump(ctx); err == nil {
			res.GoroutineDump = string(d)
		}
		res.FDDump = strings.Join(fdList(r.srv.pid()), "\n")
	}
	if !r.srv.stop() {
		r.logf("tristore serve did not stop within 30 s of SIGTERM")
	}

	r.mu.Lock()
	res.Samples = slices.Clone(r.all)
	r.mu.Unlock()
	r.judge(res, loadT0, loadEnd, clientsStopped)
	r.c.mu.Lock()
	res.FirstErrors = slices.Clone(r.c.firstErrs)
	r.c.mu.Unlock()
	res.StartSample, res.BaselineSample, res.EndSample = res.Start, res.Baseline, res.End
	r.write(res)
	return res, nil
}

// clientIDs numbers the clients of each protocol (ids are unique over all).
func clientIDs(sp [nProto]int) [nProto][]int {
	var ids [nProto][]int
	id := 0
	for p := range nProto {
		for range sp[p] {
			ids[p] = append(ids[p], id)
			id++
		}
	}
	return ids
}

func abs(x int) int { return max(x, -x) }

func mib(kib int64) float64 { return float64(kib) / 1024 }

func sum(m map[string]int64) int64 {
	var t int64
	for _, v := range m {
		t += v
	}
	return t
}

func machine() map[string]any {
	m := map[string]any{"nproc": runtime.NumCPU(), "go_version": runtime.Version()}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m["kernel"] = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				m["cpu_model"] = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int64
		fmt.Sscanf(string(b), "MemTotal: %d kB", &kb)
		m["mem_bytes"] = kb << 10
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		m["load_at_start"] = strings.TrimSpace(string(b))
	}
	return m
}
