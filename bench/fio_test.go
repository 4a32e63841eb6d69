package bench_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/tristore/tristore/bench"
	"github.com/tristore/tristore/internal/testutil"
	"golang.org/x/sys/unix"
)

// fioResult is what one fio job did: its throughput and its work.
type fioResult struct {
	MBps         float64
	IOs, Bytes   int64
	RuntimeMs    int64
	SumLatencyMs float64
}

// fioFill makes file the way bench's OpenFile makes its file: written
// through the page cache, fsynced, then dropped from the cache. fio's own
// fill left all of it cached, and the O_DIRECT write job that followed
// paid inside its timed runtime for fio's invalidate=1 dropping 32,768
// cached pages (runtime minus the sum of its I/O latencies: ~7 ms of ~100
// with the pages cached, ~1.5 ms without), one of the two reasons
// bench/fio came out at ~1.13 for writes and ~1.0 for reads (the read job
// follows O_DIRECT writes, which cache nothing). TestFioJobSameWork pins
// the drop.
func fioFill(t testing.TB, file string, size int64) {
	t.Helper()
	fioRun(t, file, size, 1<<20, "fill")
	fd, err := unix.Open(file, unix.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if err := unix.Fadvise(fd, 0, 0, unix.FADV_DONTNEED); err != nil {
		t.Fatal(err)
	}
}

// fioRun runs one fio job on file (sequential, O_DIRECT, psync, one job,
// queue depth 1: what the units suite does; "fill" makes the file with
// buffered writes and an fsync) and returns what it measured.
func fioRun(t testing.TB, file string, size, unit int64, rw string) fioResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	direct, fsync := "--direct=1", "--end_fsync=0"
	if rw == "fill" { // make the file: buffered writes, then fsync
		rw, direct, fsync = "write", "--direct=0", "--end_fsync=1"
	}
	out, err := exec.CommandContext(ctx, "fio", "--name=v", "--filename="+file, "--size="+strconv.FormatInt(size, 10),
		"--bs="+strconv.FormatInt(unit, 10), "--rw="+rw, direct, "--ioengine=psync", "--iodepth=1", "--numjobs=1",
		fsync, "--invalidate=1", "--output-format=json").Output()
	if err != nil {
		t.Fatalf("fio %s: %v\n%s", rw, err, out)
	}
	type dir struct {
		BwBytes  float64 `json:"bw_bytes"`
		IOBytes  int64   `json:"io_bytes"`
		TotalIOs int64   `json:"total_ios"`
		Runtime  int64   `json:"runtime"`
		Lat      struct {
			Mean float64 `json:"mean"`
		} `json:"lat_ns"`
	}
	var res struct {
		Jobs []struct{ Read, Write dir }
	}
	if err := json.Unmarshal(out, &res); err != nil || len(res.Jobs) != 1 {
		t.Fatalf("fio output: %v\n%s", err, out)
	}
	d := res.Jobs[0].Write
	if rw == "read" {
		d = res.Jobs[0].Read
	}
	return fioResult{MBps: d.BwBytes / 1e6, IOs: d.TotalIOs, Bytes: d.IOBytes, RuntimeMs: d.Runtime,
		SumLatencyMs: d.Lat.Mean * float64(d.TotalIOs) / 1e6}
}

// benchMBps runs the units suite (direct form, one unit) on dir and returns
// the write and read MB/s of its records.
func benchMBps(t testing.TB, dir string, size, unit int64) (write, read float64) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "res")
	if _, err := bench.Execute(context.Background(), bench.Config{Suite: "units", Target: dir, Forms: []string{bench.FormDirect},
		Sizes: []int64{unit}, FileSize: size, Out: out}); err != nil {
		t.Fatal(err)
	}
	rows, err := bench.Summarize(out)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rows {
		if r.Errors != 0 || (r.Phase != "sync" && r.Bytes != size) {
			t.Fatalf("row %+v", r)
		}
		switch r.Phase {
		case "write":
			write = r.MBps
		case "read":
			read = r.MBps
		}
	}
	return write, read
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}

// TestUnitsAgreesWithFio validates the measurement (issue 9): the same
// sequential O_DIRECT job (128 MiB file, 128 KiB units, one worker, queue
// depth 1, the file freshly written, fsynced and dropped from the cache
// for both), run by `bench units` and by fio back to back on one file
// system, gives throughputs within 10 %. Each round compares a bench run
// with the fio run next to it (they take turns going first) and the median
// of seven rounds' ratios decides; fio's runtime is in whole milliseconds,
// so the file is big enough for runs of 100+ ms.
//
// It takes ~15 s and a disk-bound comparison is only as steady as the
// machine, so it runs with TRISTORE_LONG=1 (docs/bench-workbench.md);
// TestFioJobSameWork checks in the default run that both do the same work
// on a file in the same state.
func TestUnitsAgreesWithFio(t *testing.T) {
	if os.Getenv("TRISTORE_LONG") != "1" {
		t.Skip("TRISTORE_LONG=1 runs the bench vs fio agreement (~15 s, disk-bound)")
	}
	testutil.NeedCmd(t, "fio")
	const size, unit = 128 << 20, 128 << 10
	dir := t.TempDir()
	var wr, rr []float64
	var log []string
	for i := range 7 {
		// Both work on a file made for the round the same way (written
		// through the page cache, fsynced, dropped from the cache: what
		// bench's OpenFile does) right before the job.
		fioFile := filepath.Join(t.TempDir(), "fio.dat")
		fioFill(t, fioFile, size)
		var bw, br, fw, fr float64
		if i%2 == 0 {
			bw, br = benchMBps(t, dir, size, unit)
		}
		fw = fioRun(t, fioFile, size, unit, "write").MBps
		fr = fioRun(t, fioFile, size, unit, "read").MBps
		if i%2 == 1 {
			bw, br = benchMBps(t, dir, size, unit)
		}
		os.Remove(fioFile)
		wr, rr = append(wr, bw/fw), append(rr, br/fr)
		log = append(log, fmt.Sprintf("write bench %.0f fio %.0f, read bench %.0f fio %.0f MB/s", bw, fw, br, fr))
	}
	agrees(t, "fio", "write", wr, log)
	agrees(t, "fio", "read", rr, log)
}

// agrees logs the median of bench/peer ratios for what and fails t when
// it is outside 10 %, with every round's log.
func agrees(t testing.TB, peer, what string, ratios []float64, log []string) {
	t.Helper()
	m := median(ratios)
	t.Logf("%s: bench/%s median %.3f (rounds %.3f)", what, peer, m, ratios)
	if m < 0.9 || m > 1.1 {
		t.Errorf("%s: bench/%s = %.3f, outside 10 %%; rounds:\n%s", what, peer, m, strings.Join(log, "\n"))
	}
}

// TestFioJobSameWork is the default run's part of the fio comparison:
// fio's job and `bench units` do the same requests (count and bytes) on a
// file in the same state — not in the page cache when the job starts
// (fio's own fill left it all cached, which cost fio's write job its
// invalidation inside the timed runtime).
func TestFioJobSameWork(t *testing.T) {
	testutil.NeedCmd(t, "fio")
	const size, unit = 8 << 20, 128 << 10
	file := filepath.Join(t.TempDir(), "fio.dat")
	fioFill(t, file, size)
	if n := residentPages(t, file, size); n > 0 {
		t.Fatalf("%d of %d pages of fio's fill are cached when the job starts", n, size/os.Getpagesize())
	}
	for _, rw := range []string{"write", "read"} {
		if r := fioRun(t, file, size, unit, rw); r.IOs != size/unit || r.Bytes != size {
			t.Fatalf("fio %s: %+v, want %d I/Os of %d bytes", rw, r, size/unit, unit)
		}
	}
	out := filepath.Join(t.TempDir(), "res")
	if _, err := bench.Execute(context.Background(), bench.Config{Suite: "units", Target: t.TempDir(), Forms: []string{bench.FormDirect},
		Sizes: []int64{unit}, FileSize: size, Out: out}); err != nil {
		t.Fatal(err)
	}
	_, ops, err := bench.ReadRun(out)
	if err != nil {
		t.Fatal(err)
	}
	n, bytes := map[string]int64{}, map[string]int64{}
	next := map[string]time.Duration{}
	for _, o := range ops {
		if o.Failed() || (o.Op != "sync" && o.Size != unit) || o.End < next[o.Phase] {
			t.Fatalf("record %+v", o)
		}
		n[o.Phase]++
		bytes[o.Phase] += o.Size
		next[o.Phase] = o.End // one worker: each request after the last
	}
	if n["write"] != size/unit || n["read"] != size/unit || bytes["write"] != size || bytes["read"] != size {
		t.Fatalf("bench units: %v requests, %v bytes; want %d of %d bytes each way", n, bytes, size/unit, unit)
	}
}

// TestOpenFileDropsFill pins what made bench's O_DIRECT writes ~20 %
// slower than fio's in the comparison above: the file OpenFile fills must
// not stay in the page cache (an O_DIRECT write then invalidates cached
// pages, and a "cold" read would be warm).
func TestOpenFileDropsFill(t *testing.T) {
	d, err := bench.OpenPOSIX(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	const size = 8 << 20
	f, err := d.OpenFile(context.Background(), "f", size, bench.FormDirect)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close(context.Background())
	if n := residentPages(t, filepath.Join(d.Target(), "f"), size); n > 0 {
		t.Fatalf("%d of %d pages of the fill are still cached", n, size/os.Getpagesize())
	}
}

// residentPages counts the pages of file in the page cache (mincore).
func residentPages(t *testing.T, file string, size int) int {
	fd, err := unix.Open(file, unix.O_RDONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	m, err := unix.Mmap(fd, 0, size, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	vec := make([]byte, (size+os.Getpagesize()-1)/os.Getpagesize())
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		t.Fatal(e)
	}
	n := 0
	for _, v := range vec {
		n += int(v & 1)
	}
	return n
}
