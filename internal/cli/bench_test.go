package cli

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tristore/tristore/bench"
)

// TestBenchCommandPOSIX: `bench units DIR` prints the table with every
// access form and saves a complete results directory; the directory target
// is left empty.
func TestBenchCommandPOSIX(t *testing.T) {
	dir, out := t.TempDir(), filepath.Join(t.TempDir(), "res")
	stdout, stderr, err := runCLI3(t, "bench", "units", dir, "--scale", "0.02", "--out", out)
	if err != nil {
		t.Fatalf("%v\n%s\n%s", err, stdout, stderr)
	}
	for _, want := range []string{"phase", "p99", "direct", "sync", "default", "256KiB", "results (complete): " + out} {
		if !strings.Contains(stdout, want) {
			t.Fatalf("output lacks %q:\n%s", want, stdout)
		}
	}
	run, ops, err := bench.ReadRun(out)
	if err != nil || run.Partial || len(ops) == 0 || run.Ops != int64(len(ops)) {
		t.Fatalf("%+v %d %v", run, len(ops), err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("left behind: %v", ents)
	}
}

// TestBenchCommandS3JSON: `bench objects s3://...` against serve, with
// credentials from TRISTORE_ACCESS_KEY/TRISTORE_SECRET_KEY and --json.
func TestBenchCommandS3JSON(t *testing.T) {
	const ak, sk = "TRISTOREBENCHCLI0001", "tristore-bench-cli-secret-01"
	data := t.TempDir()
	ep := serveS3(t, data, ak, sk)
	t.Setenv("TRISTORE_ACCESS_KEY", ak)
	t.Setenv("TRISTORE_SECRET_KEY", sk)
	out := filepath.Join(t.TempDir(), "res")
	stdout, stderr, err := runCLI3(t, "bench", "objects", "s3://"+strings.TrimPrefix(ep, "http://")+"/benchcli", "--sizes", "4KiB,64KiB",
		"--threads", "1,4", "--count", "8", "--json", "--out", out)
	if err != nil {
		t.Fatalf("%v\n%s\n%s", err, stdout, stderr)
	}
	var res struct {
		Dir  string
		Run  bench.Run
		Rows []bench.Row
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	// 2 sizes x 2 parallelism x (put, get, delete).
	if res.Dir != out || res.Run.Ops != 2*2*3*8 || res.Run.Errors != 0 || len(res.Rows) != 12 {
		t.Fatalf("%+v", res)
	}
	for _, r := range res.Rows {
		if r.Ops != 8 || r.Errors != 0 || r.P50 <= 0 || (r.Phase != "delete" && r.MBps <= 0) {
			t.Fatalf("row %+v", r)
		}
	}
	if _, err := os.Stat(filepath.Join(data, "benchcli")); !os.IsNotExist(err) {
		t.Fatalf("the bucket the run made is still there: %v", err)
	}
}

// TestBenchCommandUnreachable: an unreachable target exits with an error
// naming the target and phase, and saves partial results.
func TestBenchCommandUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	target := "nfs://" + addr + "/"
	out := filepath.Join(t.TempDir(), "res")
	stdout, _, err := runCLI3(t, "bench", "batch", target, "--scale", "0.01", "--out", out, "--timeout", "2s")
	if err == nil || !strings.Contains(err.Error(), "target "+target+": phase connect") || !strings.Contains(err.Error(), "partial results in "+out) {
		t.Fatalf("error: %v", err)
	}
	if !strings.Contains(stdout, "results (PARTIAL)") {
		t.Fatalf("stdout: %s", stdout)
	}
	run, err := bench.ReadRunMeta(out)
	if err != nil || !run.Partial || !strings.Contains(run.Error, "connection refused") {
		t.Fatalf("%+v %v", run, err)
	}
}
