package bench

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestRecordRoundTrip writes records from many goroutines and reads back
// exactly what was written, with the metadata marked complete.
func TestRecordRoundTrip(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "run")
	w, err := Create(dir, Run{Suite: "objects", Target: "s3://127.0.0.1:9000/b", Protocol: "s3",
		Forms: []string{"default"}, Params: Params{Sizes: []int64{1024}, Threads: []int{1, 2}, Count: 5}, Scale: 0.5, Machine: Describe()})
	if err != nil {
		t.Fatal(err)
	}
	// run.json exists at once and says partial.
	if r, err := ReadRunMeta(dir); err != nil || !r.Partial {
		t.Fatalf("run.json at start: %+v %v", r, err)
	}
	const workers, each = 8, 500
	var wg sync.WaitGroup
	for g := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				op := Operation{Phase: "put", Op: "put", Size: 1024, Unit: 1024, Threads: workers, Worker: g,
					Start: time.Duration(i) * time.Millisecond, End: time.Duration(i+1) * time.Millisecond}
				if i%100 == 0 {
					// Error texts may hold anything: quotes, control
					// characters, non-ASCII, invalid UTF-8.
					op.Err = fmt.Sprintf("boom %d: \"q\" \\ \n\t\x01 µs <&> \xff", i)
				}
				if i == 7 {
					op.Items = 42
				}
				if i%2 == 0 {
					op.FirstByte = op.Start + time.Microsecond
				}
				w.Add(op)
			}
		}()
	}
	wg.Wait()
	w.AddPhase(Phase{Name: "put", Start: 0, End: time.Second, Payload: 42})
	if err := w.Close(nil); err != nil {
		t.Fatal(err)
	}
	r, ops, err := ReadRun(dir)
	if err != nil {
		t.Fatal(err)
	}
	if r.Partial || r.Error != "" || r.Ops != workers*each || r.Errors != workers*5 || r.Suite != "objects" || r.Format != FormatVersion {
		t.Fatalf("run: %+v", r)
	}
	if len(r.Phases) != 1 || r.Phases[0].Payload != 42 || r.Machine.NProc == 0 || r.End.Before(r.Start) {
		t.Fatalf("run: %+v", r)
	}
	if !reflect.DeepEqual(r.Params.Threads, []int{1, 2}) {
		t.Fatalf("params %+v", r.Params)
	}
	if len(ops) != workers*each {
		t.Fatalf("%d records, want %d", len(ops), workers*each)
	}
	perWorker := map[int]int{}
	nerr := 0
	for _, o := range ops {
		perWorker[o.Worker]++
		if o.Failed() {
			nerr++
		}
		if o.Latency() != time.Millisecond || o.Size != 1024 || o.Phase != "put" || o.Op != "put" || o.Threads != workers || o.Unit != 1024 {
			t.Fatalf("record %+v", o)
		}
		i := int(o.Start / time.Millisecond)
		if (i == 7) != (o.Items == 42) {
			t.Fatalf("items: %+v", o)
		}
		if o.Failed() && !strings.HasPrefix(o.Err, fmt.Sprintf("boom %d: \"q\" \\ \n\t\x01 µs <&> ", i)) {
			t.Fatalf("error text changed: %q", o.Err)
		}
		if (i%2 == 0) != (o.FirstByte != 0) {
			t.Fatalf("first byte lost: %+v", o)
		}
	}
	if nerr != workers*5 || len(perWorker) != workers {
		t.Fatalf("errors %d, workers %v", nerr, perWorker)
	}
	// A second run into the same directory is refused.
	if _, err := Create(dir, Run{}); err == nil {
		t.Fatal("Create over an existing run succeeded")
	}
}

// TestRecordPartial: a run closed with an error stays partial with the
// error's text and keeps the records made before it; a run never closed
// reads back as partial.
func TestRecordPartial(t *testing.T) {
	dir := t.TempDir()
	w, err := Create(filepath.Join(dir, "a"), Run{Suite: "single"})
	if err != nil {
		t.Fatal(err)
	}
	w.Add(Operation{Phase: "write", Op: "put", Size: 4096, Err: "connection refused"})
	if err := w.Close(errors.New("phase write: target s3://x unreachable")); err != nil {
		t.Fatal(err)
	}
	r, ops, err := ReadRun(filepath.Join(dir, "a"))
	if err != nil || !r.Partial || r.Error != "phase write: target s3://x unreachable" || len(ops) != 1 || r.Errors != 1 {
		t.Fatalf("%+v %v %v", r, ops, err)
	}

	w2, err := Create(filepath.Join(dir, "b"), Run{Suite: "single"})
	if err != nil {
		t.Fatal(err)
	}
	w2.Add(Operation{Phase: "write", Op: "put"})
	// Not closed: like a killed process. The metadata says partial and the
	// records file reads without panicking (empty or truncated).
	r2, err := ReadRunMeta(filepath.Join(dir, "b"))
	if err != nil || !r2.Partial || r2.Error == "" {
		t.Fatalf("%+v %v", r2, err)
	}
	if fi, err := os.Stat(filepath.Join(dir, "b", OpsFile)); err != nil || fi.Size() != 0 {
		t.Fatalf("ops file before any flush: %v %v", fi, err)
	}
	if err := EachOp(filepath.Join(dir, "b"), func(Operation) error { return nil }); err != nil {
		t.Fatalf("empty ops file: %v", err)
	}
	w2.Close(nil)
}

// TestRedact: run.json never holds a target's secrets.
func TestRedact(t *testing.T) {
	for in, want := range map[string]string{
		"s3://AKIA:s3cr3t@127.0.0.1:9000/b":                                    "s3://AKIA@127.0.0.1:9000/b",
		"iscsi://u:chapsecret@h:3260/iqn.x:y/0?target_secret=zz&target_user=t": "iscsi://u@h:3260/iqn.x:y/0?target_secret=REDACTED&target_user=t",
		"nfs://h:2049/export":                                                  "nfs://h:2049/export",
		"/mnt/dir":                                                             "/mnt/dir",
	} {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}

// BenchmarkAdd is the cost of recording one request on the worker's side
// plus encoding it (on another goroutine).
func BenchmarkAdd(b *testing.B) {
	w, err := Create(filepath.Join(b.TempDir(), "r"), Run{})
	if err != nil {
		b.Fatal(err)
	}
	op := Operation{Phase: "write", Form: "default", Op: "writeat", Size: 4096, Unit: 4096, Threads: 1, Start: 123456789, End: 123459999}
	for b.Loop() {
		op.Start += 1000
		w.Add(op)
	}
	if err := w.Close(nil); err != nil {
		b.Fatal(err)
	}
}
