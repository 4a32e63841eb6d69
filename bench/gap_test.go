package bench

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestWriterAddWakesNothing pins the fix that made `bench units` agree with
// fio: recording a request must not put time between it and the next one.
// The encoder used to wait on the record queue, so every Add woke it (a
// futex call to start a thread) while the worker was between requests:
// the median gap between one request's end and the next one's start was
// ~10 µs, ~8 % of the wall time of 128 KiB O_DIRECT writes. Requests here
// are blocking syscalls of 50 µs, like a fast disk's.
func TestWriterAddWakesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("a timing test: the race detector adds microseconds to every request")
	}
	dir := filepath.Join(t.TempDir(), "run")
	w, err := Create(dir, Run{Suite: "gap", Machine: Describe()})
	if err != nil {
		t.Fatal(err)
	}
	r := &Runner{W: w, target: "gap"}
	const n = 2000
	err = r.Step(context.Background(), Step{Phase: "p", Op: "nanosleep", Threads: 1, Count: n},
		func(ctx context.Context, _, _ int) (int64, time.Time, error) {
			ts := unix.NsecToTimespec(int64(50 * time.Microsecond))
			return 0, time.Time{}, unix.Nanosleep(&ts, nil)
		})
	if err != nil {
		t.Fatal(err)
	}
	if err := w.Close(nil); err != nil {
		t.Fatal(err)
	}
	_, ops, err := ReadRun(dir)
	if err != nil || len(ops) != n {
		t.Fatalf("%d records, %v", len(ops), err)
	}
	slices.SortFunc(ops, func(a, b Operation) int { return int(a.Start - b.Start) })
	gaps := make([]time.Duration, 0, n-1)
	for i := 1; i < n; i++ {
		gaps = append(gaps, ops[i].Start-ops[i-1].End)
	}
	slices.Sort(gaps)
	p50 := gaps[len(gaps)/2]
	t.Logf("gap between requests: p50 %v, p90 %v", p50, gaps[len(gaps)*9/10])
	if p50 > 2*time.Microsecond {
		t.Fatalf("median gap between requests %v (p90 %v): recording a request costs the next one time", p50, gaps[len(gaps)*9/10])
	}
}
