package bench_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tristore/tristore/bench"
	"github.com/tristore/tristore/bench/drivertest"
	"github.com/tristore/tristore/internal/testutil"
)

// targets are the loopback targets every suite runs against.
func targets(t *testing.T) map[string]string {
	s := server(t)
	return map[string]string{"posix": t.TempDir(), "s3": s.S3, "nfs": s.NFS, "iscsi": s.ISCSI}
}

func execute(t *testing.T, cfg bench.Config) (*bench.Run, []bench.Operation) {
	t.Helper()
	if cfg.Out == "" {
		cfg.Out = filepath.Join(t.TempDir(), "results")
	}
	cfg.Options = bench.Options{AccessKey: drivertest.AccessKey, SecretKey: drivertest.SecretKey, Timeout: 10 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run, err := bench.Execute(ctx, cfg)
	if err != nil {
		t.Fatalf("%s on %s: %v", cfg.Suite, cfg.Target, err)
	}
	saved, ops, err := bench.ReadRun(cfg.Out)
	if err != nil {
		t.Fatal(err)
	}
	if saved.Partial || saved.Error != "" || saved.CleanupError != "" || saved.Ops != int64(len(ops)) || run.Ops != saved.Ops {
		t.Fatalf("run.json: %+v (%d records)", saved, len(ops))
	}
	for _, o := range ops {
		if o.Failed() {
			t.Fatalf("failed request: %+v", o)
		}
		if o.End < o.Start || o.Start <= 0 || (o.FirstByte != 0 && (o.FirstByte < o.Start || o.FirstByte > o.End)) {
			t.Fatalf("bad times: %+v", o)
		}
	}
	rows, err := bench.Summarize(cfg.Out)
	if err != nil || len(rows) == 0 {
		t.Fatalf("summary: %v %v", rows, err)
	}
	return saved, ops
}

// checkClean: nothing the run made is left on the target.
func checkClean(t *testing.T, proto, target string, run *bench.Run) {
	t.Helper()
	s := server(t)
	switch proto {
	case "posix":
		if ents, _ := os.ReadDir(target); len(ents) != 0 {
			t.Fatalf("left in %s: %v", target, ents)
		}
	case "nfs":
		if _, err := os.Stat(filepath.Join(s.Data, run.Workdir)); !os.IsNotExist(err) {
			t.Fatalf("workdir %s left on the NFS export: %v", run.Workdir, err)
		}
	case "s3":
		if _, err := os.Stat(filepath.Join(s.Data, "bench")); !os.IsNotExist(err) {
			t.Fatalf("bucket left: %v", err)
		}
	}
}

// count returns records per phase, and checks sizes against units.
func count(t *testing.T, ops []bench.Operation) map[string]int {
	t.Helper()
	n := map[string]int{}
	for _, o := range ops {
		n[o.Phase]++
		switch o.Phase {
		case "write", "read", "put", "get":
			if o.Size != o.Unit {
				t.Fatalf("record moved %d bytes, unit %d: %+v", o.Size, o.Unit, o)
			}
		}
	}
	return n
}

func TestSuiteUnits(t *testing.T) {
	for proto, target := range targets(t) {
		t.Run(proto, func(t *testing.T) {
			run, ops := execute(t, bench.Config{Suite: "units", Target: target, Scale: 0.02})
			file := run.Params.FileSize
			if file != 256<<10 || len(run.Params.Sizes) != 4 { // 4, 16, 64, 256 KiB
				t.Fatalf("params at scale 0.02: %+v", run.Params)
			}
			perPass := 0
			for _, u := range run.Params.Sizes {
				perPass += int(file / u)
			}
			n := count(t, ops)
			forms := len(run.Forms)
			want := map[string]int{"write": forms * perPass, "sync": forms * len(run.Params.Sizes), "read": forms * perPass}
			if proto == "s3" {
				want = map[string]int{"read": perPass}
				if run.Params.Extra["skipped_write"] == "" {
					t.Fatalf("S3 write pass not marked skipped: %+v", run.Params)
				}
			}
			if fmt.Sprint(n) != fmt.Sprint(want) {
				t.Fatalf("records per phase %v, want %v (forms %v)", n, want, run.Forms)
			}
			if proto == "posix" && strings.Join(run.Forms, ",") != "default,sync,direct" {
				t.Fatalf("posix forms %v", run.Forms)
			}
			checkClean(t, proto, target, run)
		})
	}
}

func TestSuiteSingle(t *testing.T) {
	for proto, target := range targets(t) {
		t.Run(proto, func(t *testing.T) {
			run, ops := execute(t, bench.Config{Suite: "single", Target: target, Scale: 0.001})
			// sqrt(0.001)*64 MiB = 2 MiB: 4 KiB, 16 KiB, 64 KiB, 256 KiB, 1 MiB.
			if len(run.Params.Sizes) != 5 || run.Params.Count != 1 {
				t.Fatalf("params at scale 0.001: %+v", run.Params)
			}
			n := count(t, ops)
			k := len(run.Params.Sizes) * run.Params.Count
			if want := fmt.Sprint(map[string]int{"delete": k, "read": k, "write": k}); fmt.Sprint(n) != want {
				t.Fatalf("records %v, want %v", n, want)
			}
			checkClean(t, proto, target, run)
		})
	}
}

func TestSuiteBatch(t *testing.T) {
	for proto, target := range targets(t) {
		t.Run(proto, func(t *testing.T) {
			run, ops := execute(t, bench.Config{Suite: "batch", Target: target, Scale: 0.01, Count: 12})
			// sqrt(0.01): sizes up to 1.6 MiB (4 KiB only), threads up to 6.4.
			if fmt.Sprint(run.Params.Sizes, run.Params.Threads) != "[4096] [1 2 4]" {
				t.Fatalf("params at scale 0.01: %+v", run.Params)
			}
			n := count(t, ops)
			if want := fmt.Sprint(map[string]int{"delete": 36, "read": 36, "write": 36}); fmt.Sprint(n) != want {
				t.Fatalf("records %v, want %v", n, want)
			}
			// Requests really ran in parallel: several workers of each
			// multi-threaded step took requests (not necessarily all of them:
			// a worker that starts late may find the set done).
			workers := map[int]map[int]bool{}
			for _, o := range ops {
				if o.Worker < 0 || o.Worker >= o.Threads {
					t.Fatalf("worker %d of %d", o.Worker, o.Threads)
				}
				if workers[o.Threads] == nil {
					workers[o.Threads] = map[int]bool{}
				}
				workers[o.Threads][o.Worker] = true
			}
			if len(workers[2]) < 2 || len(workers[4]) < 2 {
				t.Fatalf("steps did not run in parallel: %v", workers)
			}
			checkClean(t, proto, target, run)
		})
	}
}

func TestSuiteObjects(t *testing.T) {
	for proto, target := range targets(t) {
		t.Run(proto, func(t *testing.T) {
			run, ops := execute(t, bench.Config{Suite: "objects", Target: target, Scale: 0.0002, Sizes: []int64{1 << 10, 64 << 10}, Threads: []int{1, 4}})
			n := count(t, ops)
			// Table III: 81920 and 40960 objects, scaled: 17 and 9 per step.
			k := 2 * (17 + 9)
			if want := fmt.Sprint(map[string]int{"delete": k, "get": k, "put": k}); fmt.Sprint(n) != want {
				t.Fatalf("records %v, want %v", n, want)
			}
			fb := 0
			for _, o := range ops {
				if o.Phase == "get" && o.FirstByte > 0 {
					fb++
				}
			}
			if proto != "iscsi" && fb != k {
				t.Fatalf("%d of %d GETs have a first-byte time", fb, k)
			}
			checkClean(t, proto, target, run)
		})
	}
}

// TestNetworkPreset: --network puts an emulated link between client and
// target (a netem proxy, and as root a netns link with real loss); every
// step records the bytes that crossed it, at least its payload in the
// step's direction, and the client's CPU time. The iSCSI case goes through
// the portal rewrite (the initiator takes no dialer).
func TestNetworkPreset(t *testing.T) {
	s := server(t)
	for _, c := range []struct{ link, preset, proto, target string }{
		{"proxy", "lan", "s3", s.S3},
		{"proxy", "lan", "iscsi", s.ISCSI},
		{"netns", "realistic", "s3", s.S3},
		{"netns", "realistic", "iscsi", s.ISCSI},
	} {
		t.Run(c.link+"-"+c.proto, func(t *testing.T) {
			if c.link == "netns" {
				testutil.NeedRoot(t, "a netns link")
				testutil.NeedTUN(t)
			}
			run, ops := execute(t, bench.Config{Suite: "single", Target: c.target, Network: c.preset, Link: c.link,
				Sizes: []int64{64 << 10, 256 << 10}, Count: 2})
			if run.Network != c.preset || run.Params.Extra["link"] != c.link || len(ops) != 12 {
				t.Fatalf("run: %+v", run)
			}
			checkWire(t, run)
		})
	}
}

func checkWire(t *testing.T, run *bench.Run) {
	t.Helper()
	cpu := 0.0
	for _, ph := range run.Phases {
		cpu += ph.CPUUser + ph.CPUSys
		switch ph.Name {
		case "write":
			if ph.WireUp < ph.Payload || ph.Payload != 2*ph.Unit {
				t.Fatalf("write step: %+v", ph)
			}
		case "read":
			if ph.WireDn < ph.Payload || ph.Payload != 2*ph.Unit {
				t.Fatalf("read step: %+v", ph)
			}
		}
	}
	// The client's CPU time is recorded per step (each may round to 0 on
	// a tick-accounting kernel, all of them together not).
	if cpu <= 0 || run.CPUUser+run.CPUSys < cpu*0.99 {
		t.Fatalf("client CPU: steps %.4f s, run %.4f+%.4f s", cpu, run.CPUUser, run.CPUSys)
	}
}
