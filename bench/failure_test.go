package bench_test

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tristore/tristore/bench"
	"github.com/tristore/tristore/bench/drivertest"
)

// closedPort is a 127.0.0.1 port nothing listens on.
func closedPort(t *testing.T) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// TestUnreachableTarget: every protocol's unreachable target fails at once
// with an error naming the target and the phase, and the results directory
// is saved, marked partial, with that error.
func TestUnreachableTarget(t *testing.T) {
	addr := closedPort(t)
	for _, target := range []string{"s3://" + addr + "/b", "nfs://" + addr + "/", "iscsi://" + addr + "/iqn.2026-11.io.tristore:vols:x/0", "/nonexistent/dir"} {
		t.Run(strings.Split(target, ":")[0], func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "res")
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			start := time.Now()
			_, err := bench.Execute(ctx, bench.Config{Suite: "single", Target: target, Scale: 0.001, Out: out,
				Options: bench.Options{AccessKey: "a", SecretKey: "b", Timeout: 2 * time.Second}})
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), target) || !strings.Contains(err.Error(), "phase connect") {
				t.Fatalf("error does not name target and phase: %v", err)
			}
			if d := time.Since(start); d > 15*time.Second {
				t.Fatalf("took %v to fail", d)
			}
			run, ops, rerr := bench.ReadRun(out)
			if rerr != nil || !run.Partial || run.Error != err.Error() || len(ops) != 0 {
				t.Fatalf("saved: %+v %v %v", run, ops, rerr)
			}
		})
	}
}

// TestWrongCredentials: S3 with a wrong secret fails naming the target and
// saying access was denied.
func TestWrongCredentials(t *testing.T) {
	s := server(t)
	out := filepath.Join(t.TempDir(), "res")
	_, err := bench.Execute(context.Background(), bench.Config{Suite: "objects", Target: s.S3, Scale: 0.001, Out: out,
		Options: bench.Options{AccessKey: drivertest.AccessKey, SecretKey: "wrong-secret"}})
	if err == nil || !strings.Contains(err.Error(), s.S3) || !strings.Contains(err.Error(), "access denied") {
		t.Fatalf("error: %v", err)
	}
	if run, err := bench.ReadRunMeta(out); err != nil || !run.Partial {
		t.Fatalf("%+v %v", run, err)
	}
}

// failing wraps a driver whose Puts start failing after a number of them,
// like a target whose disk filled up or that went away mid-run.
type failing struct {
	bench.Driver
	left atomic.Int64
}

var errInjected = errors.New("injected: no space left on device")

// Target is where the driver really connects (a link's entry, say); errors
// must name the target the user gave instead.
func (f *failing) Target() string { return "127.0.0.1:1/entry-of-a-link" }

func (f *failing) Put(ctx context.Context, name string, data []byte) error {
	if f.left.Add(-1) < 0 {
		return errInjected
	}
	return f.Driver.Put(ctx, name, data)
}

// TestFailsMidRun: when requests start failing the failures are recorded
// (not hidden), the step stops after 10 in a row, the error names the phase
// and target, results are saved partial, and the run's files are removed.
func TestFailsMidRun(t *testing.T) {
	root := t.TempDir()
	p, err := bench.OpenPOSIX(root)
	if err != nil {
		t.Fatal(err)
	}
	d := &failing{Driver: p}
	d.left.Store(30)
	out := filepath.Join(t.TempDir(), "res")
	_, err = bench.Execute(context.Background(), bench.Config{Suite: "batch", Target: root, Driver: d, Scale: 0.01, Count: 40, Out: out})
	if err == nil || !strings.Contains(err.Error(), "phase write") || !strings.Contains(err.Error(), "on "+root+":") ||
		strings.Contains(err.Error(), "entry-of-a-link") || !errors.Is(err, errInjected) {
		t.Fatalf("error: %v", err)
	}
	run, ops, err := bench.ReadRun(out)
	if err != nil || !run.Partial {
		t.Fatalf("%+v %v", run, err)
	}
	var okW, failW int
	for _, o := range ops {
		if o.Phase == "write" {
			if o.Failed() {
				failW++
			} else {
				okW++
			}
		}
	}
	// Step 1 (1 thread, 40 files): 30 puts succeed, then 10 fail in a row.
	if okW != 30 || failW != 10 || run.Errors != 10 {
		t.Fatalf("writes ok %d failed %d, run errors %d", okW, failW, run.Errors)
	}
	if ents, _ := os.ReadDir(root); len(ents) != 0 || run.CleanupError != "" {
		t.Fatalf("left behind: %v (%s)", ents, run.CleanupError)
	}
}

// TestBadForms: an access form the target lacks, or forms for a suite that
// does not measure them, fail before any request, naming the problem.
func TestBadForms(t *testing.T) {
	for _, c := range []struct {
		suite, form, want string
	}{{"units", "fua", `has no access form "fua"`}, {"batch", "direct", "only units and amplification do"}} {
		out := filepath.Join(t.TempDir(), "res")
		_, err := bench.Execute(context.Background(), bench.Config{Suite: c.suite, Target: t.TempDir(), Forms: []string{c.form}, Scale: 0.001, Out: out})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("%s --forms %s: %v", c.suite, c.form, err)
		}
		if run, _, err := bench.ReadRun(out); err != nil || !run.Partial || run.Ops != 0 {
			t.Fatalf("%+v %v", run, err)
		}
	}
}

// cancelling cancels the run's context at its n-th Put, as SIGINT does.
type cancelling struct {
	bench.Driver
	n      atomic.Int64
	at     int64
	cancel context.CancelFunc
}

func (c *cancelling) Put(ctx context.Context, name string, data []byte) error {
	if c.n.Add(1) == c.at {
		c.cancel()
	}
	return c.Driver.Put(ctx, name, data)
}

// TestInterruptedRun: an interrupted run (context cancelled, as by SIGINT)
// stops promptly, keeps the records made so far, is marked partial with
// the phase, and still removes its files.
func TestInterruptedRun(t *testing.T) {
	root := t.TempDir()
	p, err := bench.OpenPOSIX(root)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	d := &cancelling{Driver: p, at: 20, cancel: cancel}
	out := filepath.Join(t.TempDir(), "res")
	_, err = bench.Execute(ctx, bench.Config{Suite: "batch", Target: root, Driver: d, Scale: 0.01, Count: 1000, Out: out})
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "phase write") {
		t.Fatalf("error: %v", err)
	}
	run, ops, err := bench.ReadRun(out)
	if err != nil || !run.Partial || len(ops) < 19 || len(ops) > 25 || run.Ops != int64(len(ops)) {
		t.Fatalf("%d records, %+v, %v", len(ops), run, err)
	}
	if ents, _ := os.ReadDir(root); len(ents) != 0 {
		t.Fatalf("left behind: %v", ents)
	}
}

// TestUnitsSizesAnyOrder: --sizes need not be sorted (the buffer is sized
// by the largest unit).
func TestUnitsSizesAnyOrder(t *testing.T) {
	out := filepath.Join(t.TempDir(), "res")
	run, err := bench.Execute(context.Background(), bench.Config{Suite: "units", Target: t.TempDir(), Forms: []string{"default"},
		Sizes: []int64{256 << 10, 4 << 10}, FileSize: 256 << 10, Out: out})
	if err != nil || run.Ops != 64+1+64+1+1+1 {
		t.Fatalf("%+v %v", run, err)
	}
}

// panicking is a driver with a bug: its Get panics.
type panicking struct{ bench.Driver }

func (p panicking) Get(ctx context.Context, name string, buf []byte) (int, time.Time, error) {
	panic("driver bug")
}

// TestDriverPanic: a panic in a driver ends the run with an error and
// partial results, and the run's files are still removed.
func TestDriverPanic(t *testing.T) {
	root := t.TempDir()
	p, err := bench.OpenPOSIX(root)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "res")
	_, err = bench.Execute(context.Background(), bench.Config{Suite: "single", Target: root, Driver: panicking{p}, Scale: 0.001, Out: out})
	if err == nil || !strings.Contains(err.Error(), "driver bug") || !strings.Contains(err.Error(), "phase read") {
		t.Fatalf("error: %v", err)
	}
	// The request that panicked is recorded as failed.
	run, ops, err := bench.ReadRun(out)
	if err != nil || !run.Partial || run.Errors != 1 || len(ops) != 2 || ops[1].Err != "panic: driver bug" {
		t.Fatalf("%+v %+v %v", run, ops, err)
	}
	if ents, _ := os.ReadDir(root); len(ents) != 0 {
		t.Fatalf("left behind: %v", ents)
	}
}
