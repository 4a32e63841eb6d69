package bench_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tristore/tristore/bench"
	"github.com/tristore/tristore/internal/testutil"
)

// The test binary is also the clients suite's client process: re-executed
// with this variable set, it runs bench.ClientMain instead of the tests.
const clientEnv = "TRISTORE_BENCH_TEST_CLIENT"

func init() {
	if os.Getenv(clientEnv) == "1" {
		if err := bench.ClientMain(context.Background(), os.Stdin, os.Stdout); err != nil {
			fmt.Fprintln(os.Stderr, "bench client:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
}

// clientCommand re-executes the test binary as a client and counts the
// processes started.
func clientCommand(started *atomic.Int32) func(ctx context.Context) *exec.Cmd {
	return func(ctx context.Context) *exec.Cmd {
		started.Add(1)
		cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), clientEnv+"=1")
		return cmd
	}
}

// TestSuiteClients: 1 and 2 (and 3) client processes against one loopback
// server, every protocol: each step's records come from as many separate
// processes as the step has clients, all of a client's files moved, the
// steps of n clients overlap in time (they ran at once), nothing is left
// on the target, and the report redraws throughput and fops vs clients.
func TestSuiteClients(t *testing.T) {
	if got := fmt.Sprint(mustSuite(t, "clients").Defaults(1).Threads, mustSuite(t, "clients").Defaults(0.01)); !strings.HasPrefix(got, "[1 2 3 4 5 6 7] {0 [1100 4194304] [1 2] 10 [] 2684355") {
		t.Fatalf("defaults at scale 1 and 0.01: %s", got)
	}
	for proto, target := range targets(t) {
		t.Run(proto, func(t *testing.T) {
			var started atomic.Int32
			out := filepath.Join(t.TempDir(), "results")
			run, ops := execute(t, bench.Config{Suite: "clients", Target: target, Out: out, Scale: 0.0001,
				Threads: []int{1, 3}, ClientCommand: clientCommand(&started)})
			if started.Load() != 4 {
				t.Fatalf("%d client processes started, want 1+3", started.Load())
			}
			// scale 0.0001: 1 MiB large files (1 per client), 1 small file
			// of 1100 B per client: --count 4 is not given, so Count is 1.
			if fmt.Sprint(run.Params.Sizes) != "[1100 1048576]" || run.Params.Count != 1 {
				t.Fatalf("params: %+v", run.Params)
			}
			n := count(t, ops)
			// per size: 1 file per client, clients 1+3 = 4 requests per phase
			if want := fmt.Sprint(map[string]int{"delete": 8, "get": 8, "put": 8}); fmt.Sprint(n) != want {
				t.Fatalf("records %v, want %v", n, want)
			}
			workers := map[string]map[int]bool{}
			for _, o := range ops {
				k := fmt.Sprintf("%s %d x%d", o.Phase, o.Unit, o.Threads)
				if workers[k] == nil {
					workers[k] = map[int]bool{}
				}
				workers[k][o.Worker] = true
			}
			for k, w := range workers {
				if want := map[bool]int{true: 3, false: 1}[strings.HasSuffix(k, "x3")]; len(w) != want {
					t.Fatalf("%s: records from clients %v", k, w)
				}
			}
			if len(run.Phases) != 12 {
				t.Fatalf("%d phases, want 2 client counts x 2 sizes x 3", len(run.Phases))
			}
			for _, ph := range run.Phases {
				if ph.Ops != int64(ph.Threads) || ph.Errors != 0 || ph.End < ph.Start {
					t.Fatalf("phase %+v", ph)
				}
			}
			page := redraw(t, out)
			for _, s := range []string{"clients: server throughput (large files)", "clients: server file operations per second (small files)",
				"put 1MiB</text>", "delete 1100B</text>"} {
				if !strings.Contains(page, s) {
					t.Fatalf("report lacks %q", s)
				}
			}
			checkClean(t, proto, target, run)
		})
	}
}

// TestSuiteClientsFails: a client process that cannot start, and one that
// dies, end the run with an error naming the phase, partial results, and
// no process left behind.
func TestSuiteClientsFails(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name string
		cmd  func(ctx context.Context) *exec.Cmd
		want string
	}{
		{"missing", func(ctx context.Context) *exec.Cmd {
			return exec.CommandContext(ctx, filepath.Join(dir, "no-such-client"))
		}, "phase setup (start client 1 of 1)"},
		{"dies", func(ctx context.Context) *exec.Cmd {
			return exec.CommandContext(ctx, "/bin/sh", "-c", "read job; exec 1>&-; sleep 0.3; echo oops >&2; exit 3")
		}, "client 1 of 1 connecting"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "results")
			target := t.TempDir()
			_, err := bench.Execute(context.Background(), bench.Config{Suite: "clients", Target: target, Out: out, Scale: 0.0001,
				Threads: []int{1}, ClientCommand: c.cmd})
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one naming %q", err, c.want)
			}
			if c.name == "dies" && !strings.Contains(err.Error(), "oops") {
				t.Fatalf("error %v does not carry the client's stderr", err)
			}
			run, rerr := bench.ReadRunMeta(out)
			if rerr != nil || !run.Partial {
				t.Fatalf("run.json: %+v %v", run, rerr)
			}
			if ents, _ := os.ReadDir(target); len(ents) != 0 {
				t.Fatalf("left in the target: %v", ents)
			}
		})
	}
}

// TestClientsCommand: `tristore bench clients` starts its clients as
// `tristore bench-client` processes (the CLI's ClientCommand) and saves a
// complete run.
func TestClientsCommand(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bin := testutil.TristoreBin(ctx, t)
	dir, out := t.TempDir(), filepath.Join(t.TempDir(), "results")
	cmd := exec.CommandContext(ctx, bin, "bench", "clients", dir, "--scale", "0.0001", "--threads", "1,2", "--out", out)
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, b)
	}
	run, ops, err := bench.ReadRun(out)
	if err != nil || run.Partial || len(ops) != 2*3*3 {
		t.Fatalf("%+v, %d records, %v\n%s", run, len(ops), err, b)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("left behind: %v", ents)
	}
}

// TestSuiteClientsThroughLink: with --network, the client processes dial
// the link's entry (they cannot take the runner's dialer), so every step's
// payload crosses the link and is counted.
func TestSuiteClientsThroughLink(t *testing.T) {
	s := server(t)
	var started atomic.Int32
	run, _ := execute(t, bench.Config{Suite: "clients", Target: s.S3, Scale: 0.0001, Threads: []int{2},
		Network: "lan", Link: "proxy", ClientCommand: clientCommand(&started)})
	for _, ph := range run.Phases {
		if (ph.Name == "put" && ph.WireUp < ph.Payload) || (ph.Name == "get" && ph.WireDn < ph.Payload) || ph.WireUp+ph.WireDn == 0 {
			t.Fatalf("%s %d x%d: payload %d, wire up %d down %d", ph.Name, ph.Unit, ph.Threads, ph.Payload, ph.WireUp, ph.WireDn)
		}
	}
}
