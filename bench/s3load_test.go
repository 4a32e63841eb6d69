package bench_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tristore/tristore/bench"
	"github.com/tristore/tristore/bench/drivertest"
	"github.com/tristore/tristore/internal/testutil"
	"golang.org/x/sys/unix"
)

// TestObjectsAgreesWithS3load validates the objects suite against the
// repository's S3 load generator (scripts/bench/s3load, issue 9's check for
// objects): 64 KiB objects at parallelism 4 against one loopback tristore,
// s3load for 1 s per phase, then `bench objects` with as many objects as
// s3load made GETs (so that both GET phases last ~1 s: with as many as it
// PUT, bench's GET phase lasted a quarter of s3load's, and on this VM the
// GET rate moves 2-3x from one 250 ms to the next with the other
// sessions' load), nine short rounds taking turns (so that the two runs
// of a round meet the same load); the median bench/s3load throughput ratio
// of PUT and of GET must be within 10 %.
//
// The server keeps its data on tmpfs (/dev/shm when there is one): with
// its data on this VM's disk every PUT waits for an fsync, and the disk's
// stalls (other sessions' builds and tests write to it) made single
// rounds' PUT ratios range from 0.57 to 2.5, a comparison of two moments
// of the disk rather than of two tools. TRISTORE_LONG=1 (~1 min);
// TestObjectsSameWorkAsS3load checks in the default run that both do the
// same requests.
func TestObjectsAgreesWithS3load(t *testing.T) {
	if os.Getenv("TRISTORE_LONG") != "1" {
		t.Skip("TRISTORE_LONG=1 runs the bench vs s3load agreement (~1 min)")
	}
	const size, par = 64 << 10, 4
	s := serveOnTmpfs(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	load := buildS3load(ctx, t)
	var put, get []float64
	var log []string
	count := 2000 // bench's objects: s3load's GETs of the last round
	for i := range 9 {
		var lput, lget float64
		var lops int
		runLoad := func() {
			out, err := exec.CommandContext(ctx, load, "-endpoint", "http://"+s.S3Addr, "-access", drivertest.AccessKey,
				"-secret", drivertest.SecretKey, "-bucket", fmt.Sprintf("s3load%d", i), "-sizes", "64KiB",
				"-par", fmt.Sprint(par), "-duration", "1s", "-json", "-getbuf").Output()
			if err != nil {
				t.Fatalf("s3load: %v\n%s", err, out)
			}
			var res []struct {
				Op        string  `json:"op"`
				Ops       int     `json:"ops"`
				MiBPerSec float64 `json:"mib_per_s"`
			}
			if err := json.Unmarshal(out, &res); err != nil || len(res) != 2 {
				t.Fatalf("s3load output %v: %s", err, out)
			}
			for _, r := range res {
				if r.Op == "PUT" {
					lput = r.MiBPerSec * (1 << 20) / 1e6
				} else {
					lget, lops = r.MiBPerSec*(1<<20)/1e6, r.Ops
				}
			}
		}
		var bput, bget float64
		runBench := func(n int) {
			out := filepath.Join(t.TempDir(), "res")
			if _, err := bench.Execute(ctx, bench.Config{Suite: "objects", Target: s.S3, Sizes: []int64{size}, Threads: []int{par},
				Count: n, Out: out, Options: bench.Options{AccessKey: drivertest.AccessKey, SecretKey: drivertest.SecretKey}}); err != nil {
				t.Fatal(err)
			}
			rows, err := bench.Summarize(out)
			if err != nil {
				t.Fatal(err)
			}
			for _, r := range rows {
				switch r.Phase {
				case "put":
					bput = r.MBps
				case "get":
					bget = r.MBps
				}
			}
		}
		if i%2 == 0 {
			runLoad()
			count = lops
			runBench(count)
		} else {
			runBench(count)
			runLoad()
			count = lops
		}
		put, get = append(put, bput/lput), append(get, bget/lget)
		log = append(log, fmt.Sprintf("PUT bench %.1f s3load %.1f, GET bench %.1f s3load %.1f MB/s", bput, lput, bget, lget))
	}
	t.Logf("rounds:\n%s", strings.Join(log, "\n"))
	agrees(t, "s3load", "put", put, log)
	agrees(t, "s3load", "get", get, log)
}

// serveOnTmpfs starts a loopback tristore whose data directory is on
// /dev/shm when that is a tmpfs (else the test's temporary directory).
func serveOnTmpfs(t *testing.T) *drivertest.Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	base := ""
	var st unix.Statfs_t
	if unix.Statfs("/dev/shm", &st) == nil && st.Type == unix.TMPFS_MAGIC {
		base = "/dev/shm"
	}
	data, err := os.MkdirTemp(base, "tristore-s3load-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(data) })
	s, err := drivertest.Start(ctx, testutil.TristoreBin(ctx, t), data)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Error(err)
		}
	})
	return s
}

func buildS3load(ctx context.Context, t *testing.T) string {
	t.Helper()
	load := filepath.Join(t.TempDir(), "s3load")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", load, "github.com/tristore/tristore/scripts/bench/s3load").CombinedOutput(); err != nil {
		t.Fatalf("building s3load: %v\n%s", err, out)
	}
	return load
}

// TestObjectsSameWorkAsS3load is the default run's part of the s3load
// comparison: with s3load's -getbuf (each GET body read whole into a
// buffer, as the workbench does), both tools do the same requests: as many
// 64 KiB PUTs (bench objects is given s3load's count) and GETs of whole
// objects, none failed.
func TestObjectsSameWorkAsS3load(t *testing.T) {
	const size, par = 64 << 10, 2
	s := server(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	load := buildS3load(ctx, t)
	out, err := exec.CommandContext(ctx, load, "-endpoint", "http://"+s.S3Addr, "-access", drivertest.AccessKey,
		"-secret", drivertest.SecretKey, "-bucket", "s3loadsame", "-sizes", "64KiB", "-par", fmt.Sprint(par),
		"-duration", "300ms", "-json", "-getbuf").Output()
	if err != nil {
		t.Fatalf("s3load: %v\n%s", err, out)
	}
	var res []struct {
		Op     string `json:"op"`
		Ops    int    `json:"ops"`
		Errors int    `json:"errors"`
	}
	if err := json.Unmarshal(out, &res); err != nil || len(res) != 2 || res[0].Op != "PUT" || res[1].Op != "GET" || res[0].Ops == 0 || res[1].Ops == 0 {
		t.Fatalf("s3load output %v: %s", err, out)
	}
	n := res[0].Ops
	run, ops := execute(t, bench.Config{Suite: "objects", Target: s.S3, Sizes: []int64{size}, Threads: []int{par}, Count: n})
	got := map[string]int{}
	for _, o := range ops {
		if o.Op != "delete" && o.Size != size {
			t.Fatalf("record %+v", o)
		}
		got[o.Op]++
	}
	if got["put"] != n || got["get"] != n || run.Errors != 0 {
		t.Fatalf("bench did %v (errors %d); s3load PUT %d objects", got, run.Errors, n)
	}
}
