// Package lab_test runs `tristore lab` through the real binary: the report
// it writes, and that nothing it started outlives it.
package lab_test

import (
	"bytes"
	"context"
	"encoding/csv"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tristore/tristore/bench/lab"
	"github.com/tristore/tristore/internal/testutil"
	"github.com/tristore/tristore/netem"
)

func TestMain(m *testing.M) { testutil.Main(m) }

// labCmd is `tristore lab ARGS` with its temporary files (the server's
// data directory, the FUSE and ext4 mount points) under tmp, so the test
// can look for leftovers there.
func labCmd(ctx context.Context, t *testing.T, tmp string, args ...string) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer) {
	bin := testutil.TristoreBin(ctx, t)
	cmd := exec.CommandContext(ctx, bin, append([]string{"lab"}, args...)...)
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	return cmd, &stdout, &stderr
}

// TestLabCommand: two presets, three suites at a tiny scale; the report
// holds every run's figures and the lab leaves nothing behind.
func TestLabCommand(t *testing.T) {
	testutil.NeedRoot(t, "netns links and ext4 on the LUN")
	testutil.NeedTUN(t)
	testutil.NeedFUSE(t)
	testutil.NeedCmd(t, "mkfs.ext4")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	tmp, out := t.TempDir(), filepath.Join(t.TempDir(), "lab")
	cmd, stdout, stderr := labCmd(ctx, t, tmp, "--out", out, "--scale", "0.001", "--presets", "ideal,lan",
		"--suites", "batch,efficiency,amplification")
	if err := cmd.Run(); err != nil {
		t.Fatalf("%v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
	}
	checkNothingLeft(t, tmp, cmd.Process.Pid)
	if !strings.Contains(stdout.String(), "lab (complete)") || !strings.Contains(stderr.String(), "netns link") {
		t.Fatalf("stdout:\n%s\nstderr:\n%s", stdout, stderr)
	}
	res, err := lab.ReadResult(out)
	if err != nil {
		t.Fatal(err)
	}
	// batch-small, batch-large on both presets, efficiency and
	// amplification (with ext4 on the LUN) on the first: 3*2*2 + 3 + 4.
	if res.Partial || res.Error != "" || len(res.Runs) != 19 || res.Link != "netns" {
		t.Fatalf("lab.json: %+v", res)
	}
	html, err := os.ReadFile(filepath.Join(out, "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	page := string(html)
	if n := strings.Count(page, "<svg"); n < 8 {
		t.Fatalf("index.html has %d plots", n)
	}
	for _, want := range []string{"s3 ideal small", "nfs lan large", "iscsi ideal", "ext4+iscsi counting"} {
		if !strings.Contains(page, want) {
			t.Fatalf("index.html lacks %q", want)
		}
	}
	if strings.Contains(page, "PARTIAL") {
		t.Fatal("index.html marks a run partial")
	}
	rows := readCSV(t, filepath.Join(out, "summary.csv"))
	col := map[string]int{}
	for i, h := range rows[0] {
		col[h] = i
	}
	for _, c := range []string{"run", "suite", "phase", "threads", "mb_per_s", "efficiency", "amplification"} {
		if _, ok := col[c]; !ok {
			t.Fatalf("summary.csv has no column %q: %v", c, rows[0])
		}
	}
	get := func(r []string, c string) float64 { v, _ := strconv.ParseFloat(r[col[c]], 64); return v }
	writes := map[string]bool{}
	eff := map[string]float64{}
	amp := map[string]float64{}
	for _, r := range rows[1:] {
		label := r[col["run"]]
		switch {
		case r[col["suite"]] == "batch" && r[col["phase"]] == "write" && r[col["threads"]] == "8":
			if get(r, "mb_per_s") <= 0 {
				t.Fatalf("%s: batch write at 8 threads: %v", label, r)
			}
			writes[label] = true
		case r[col["suite"]] == "efficiency" && r[col["phase"]] == "put":
			eff[label+" "+r[col["unit"]]] = get(r, "efficiency")
		case r[col["suite"]] == "amplification" && r[col["phase"]] == "write" && r[col["form"]] == "sync":
			amp[label+" "+r[col["unit"]]] = get(r, "amplification")
		}
	}
	if len(writes) != 12 {
		t.Fatalf("batch write rows at 8 threads for %d runs, want 12: %v", len(writes), writes)
	}
	// Seed 004's direction through the link's own counters: 1 KiB files
	// carry less payload per wire byte than 1 MiB files.
	for _, p := range []string{"s3", "nfs", "iscsi"} {
		small, large := eff[p+" counting 1024"], eff[p+" counting 1048576"]
		if !(small > 0 && small < large && large <= 1) {
			t.Fatalf("%s efficiency 1 KiB %v, 1 MiB %v (%v)", p, small, large, eff)
		}
	}
	// Every write form moves at least its payload over the wire.
	if len(amp) < 6 {
		t.Fatalf("amplification rows: %v", amp)
	}
	for k, v := range amp {
		if v < 1 {
			t.Fatalf("amplification %s = %v < 1", k, v)
		}
	}
}

// TestLabInterrupted: SIGINT in the middle: exit 1, an error naming the
// preset and suite, the report drawn from the runs so far and marked
// partial, and nothing left behind.
func TestLabInterrupted(t *testing.T) {
	testutil.NeedRoot(t, "netns links")
	testutil.NeedTUN(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tmp, out := t.TempDir(), filepath.Join(t.TempDir(), "lab")
	// batch-large on realistic at 8 threads takes tens of seconds: the
	// signal lands inside it.
	cmd, stdout, stderr := labCmd(ctx, t, tmp, "--out", out, "--scale", "0.001", "--presets", "realistic",
		"--suites", "batch", "--progress=false")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	// Wait until the first run is saved and the second has begun.
	for deadline := time.Now().Add(90 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if res, err := lab.ReadResult(out); err == nil && len(res.Runs) >= 4 {
			break
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			<-done
			t.Fatalf("no run finished in 90 s\n%s", stderr)
		}
	}
	time.Sleep(300 * time.Millisecond)
	cmd.Process.Signal(syscall.SIGINT)
	var err error
	select {
	case err = <-done:
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("lab did not end within 60 s of SIGINT\n%s", stderr)
	}
	if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
		t.Fatalf("exit: %v\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
	}
	checkNothingLeft(t, tmp, cmd.Process.Pid)
	for _, want := range []string{"lab: preset realistic, suite batch (", "interrupted", "partial results in " + out} {
		if !strings.Contains(stderr.String(), want) {
			t.Fatalf("stderr lacks %q:\n%s", want, stderr)
		}
	}
	res, rerr := lab.ReadResult(out)
	if rerr != nil {
		t.Fatal(rerr)
	}
	last := res.Runs[len(res.Runs)-1]
	if !res.Partial || !strings.Contains(res.Error, "preset realistic") || !last.Partial || last.Error == "" {
		t.Fatalf("lab.json: %+v", res)
	}
	for _, r := range res.Runs[:len(res.Runs)-1] {
		if r.Partial {
			t.Fatalf("finished run marked partial: %+v", r)
		}
	}
	html, err := os.ReadFile(filepath.Join(out, "index.html"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(html), "PARTIAL") || !strings.Contains(string(html), "s3 realistic small") {
		t.Fatal("index.html: no partial run, or the finished runs are missing")
	}
}

// TestLabKilled: a lab killed with SIGKILL (no chance to clean up) does not
// leave its server running.
func TestLabKilled(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tmp, out := t.TempDir(), filepath.Join(t.TempDir(), "lab")
	cmd, _, stderr := labCmd(ctx, t, tmp, "--out", out, "--scale", "0.001", "--presets", "ideal",
		"--suites", "batch", "--progress=false")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	server := func() []string {
		var pids []string
		procs, _ := filepath.Glob("/proc/[0-9]*")
		for _, p := range procs {
			cmdline, _ := os.ReadFile(p + "/cmdline")
			if strings.Contains(string(cmdline), "\x00serve\x00") && strings.Contains(string(cmdline), tmp) {
				pids = append(pids, filepath.Base(p))
			}
		}
		return pids
	}
	for deadline := time.Now().Add(60 * time.Second); len(server()) == 0; time.Sleep(50 * time.Millisecond) {
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			<-done
			t.Fatalf("the lab's server did not start in 60 s\n%s", stderr)
		}
	}
	cmd.Process.Kill()
	<-done
	// The killed lab's link namespaces (ts-<pid>-*) are left; remove them
	// as the next link start would (only those of dead processes).
	if os.Geteuid() == 0 {
		defer netem.Cleanup(true)
	}
	var left []string
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if left = server(); len(left) == 0 {
			break
		}
	}
	if len(left) != 0 {
		for _, pid := range left {
			if n, err := strconv.Atoi(pid); err == nil {
				syscall.Kill(n, syscall.SIGKILL)
			}
		}
		t.Fatalf("server %v still running 15 s after the lab was killed", left)
	}
}

func readCSV(t *testing.T, path string) [][]string {
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	rows, err := csv.NewReader(f).ReadAll()
	if err != nil || len(rows) < 2 {
		t.Fatalf("%s: %d rows, %v", path, len(rows), err)
	}
	return rows
}

// checkNothingLeft: after lab (pid) exited, no process runs from under tmp
// or was its child, nothing is mounted under tmp, no loop device is backed
// by a file there, no network namespace of lab's is left, and tmp is empty.
func checkNothingLeft(t *testing.T, tmp string, pid int) {
	t.Helper()
	bin := testutil.TristoreBin(context.Background(), t)
	procs, _ := filepath.Glob("/proc/[0-9]*")
	for _, p := range procs {
		cmdline, _ := os.ReadFile(p + "/cmdline")
		if strings.Contains(string(cmdline), tmp) || strings.HasPrefix(string(cmdline), bin+"\x00bench-client") {
			t.Errorf("left running: %s %q", p, bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '}))
		}
	}
	if mi, err := os.ReadFile("/proc/self/mountinfo"); err == nil && strings.Contains(string(mi), tmp) {
		t.Errorf("left mounted under %s:\n%s", tmp, mi)
	}
	loops, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	for _, l := range loops {
		if b, _ := os.ReadFile(l); strings.Contains(string(b), tmp) {
			t.Errorf("loop device left: %s -> %s", l, b)
		}
	}
	nss, _ := os.ReadDir("/run/netns")
	for _, ns := range nss {
		if strings.HasPrefix(ns.Name(), "ts-"+strconv.Itoa(pid)+"-") {
			t.Errorf("network namespace left: %s", ns.Name())
		}
	}
	if ents, _ := os.ReadDir(tmp); len(ents) != 0 {
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		t.Errorf("left in TMPDIR: %v", names)
	}
}
