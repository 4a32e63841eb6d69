package bench

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSummarize pins the table's arithmetic on hand-made records: groups by
// (phase, form, unit, threads) in first-seen order, MB/s over the group's
// wall time from successful payload only, nearest-rank percentiles, errors
// counted and shown.
func TestSummarize(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "r")
	w, err := Create(dir, Run{Suite: "x"})
	if err != nil {
		t.Fatal(err)
	}
	ms := time.Millisecond
	// 100 puts of 1 MB by 2 workers over exactly 1 s, latencies 1..100 ms;
	// two more failed.
	for i := range 100 {
		start := time.Duration(i) * 9 * ms
		w.Add(Operation{Phase: "put", Op: "put", Size: 1e6, Unit: 1e6, Threads: 2, Worker: i % 2, Start: start + ms, End: start + ms + time.Duration(i+1)*ms})
	}
	w.Add(Operation{Phase: "put", Op: "put", Size: 1e6, Unit: 1e6, Threads: 2, Start: 500 * ms, End: 501 * ms, Err: "boom"})
	w.Add(Operation{Phase: "put", Op: "put", Size: 1e6, Unit: 1e6, Threads: 2, Start: 502 * ms, End: 1001 * ms, Err: "boom"})
	w.Add(Operation{Phase: "get", Op: "get", Size: 10, Unit: 1e6, Threads: 1, Start: 2000 * ms, End: 2010 * ms, FirstByte: 2004 * ms})
	if err := w.Close(nil); err != nil {
		t.Fatal(err)
	}
	rows, err := Summarize(dir)
	if err != nil || len(rows) != 2 {
		t.Fatalf("%+v %v", rows, err)
	}
	put, get := rows[0], rows[1]
	if put.Phase != "put" || put.Ops != 102 || put.Errors != 2 || put.Bytes != 100e6 || put.Wall != time.Second || put.FirstError != "boom" {
		t.Fatalf("put row %+v", put)
	}
	if put.MBps != 100 || put.OpsPerSec != 100 || put.P50 != 50*ms || put.P99 != 99*ms {
		t.Fatalf("put figures %+v", put)
	}
	if get.FirstByteP50 != 4*ms || get.P50 != 10*ms || get.MBps != 10/0.01/1e6 {
		t.Fatalf("get row %+v", get)
	}
	var b strings.Builder
	if err := WriteTable(&b, rows); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "2 of 102 failed, e.g. boom") {
		t.Fatalf("table does not show the errors:\n%s", b.String())
	}
}
