// Package bench is tristore's workbench: one Driver per protocol (a POSIX
// directory, S3, NFS, iSCSI), suites named after the seed papers' experiments,
// and the raw per-request records every table and plot is built from.
//
// # Saved results
//
// A run writes one results directory, which is all `tristore report` ever
// reads (the report must be redrawable from saved data alone):
//
//	DIR/run.json      one Run: what was measured, where, with which parameters,
//	                  on which machine, and whether the run finished
//	DIR/ops.jsonl.gz  one Operation per request, as gzip-compressed JSON lines,
//	                  in the order the requests completed
//
// run.json is written when the run starts with "partial": true and rewritten
// when it ends, so a run that crashed or was killed is still marked partial.
//
// run.json fields (FormatVersion 1):
//
//	format          1; a reader refuses a higher major version
//	suite           suite name: units, single, batch, objects, ...
//	target          the target URL with user info and query secrets removed
//	protocol        posix, s3, nfs or iscsi
//	forms           access forms measured (posix: default, sync, direct;
//	                other protocols: ["default"])
//	params          the suite's parameters after --scale (see Params)
//	scale           the --scale factor (0 < scale <= 1; 1 = the seed's sizes)
//	network         the emulated-link preset, "" for none
//	machine         the client machine (see Machine)
//	start, end      wall-clock start and end (RFC 3339, nanoseconds)
//	partial, error  true and the first error if the run did not finish
//	phases          per step of the suite: name (= the records' phase), form,
//	                unit, threads, start_ns/end_ns, ops, errors,
//	                payload_bytes, client CPU seconds (cpu_user_s,
//	                cpu_sys_s), and wire bytes both ways if a link was used
//	ops, errors     number of Operation records and how many have err set
//	cpu_user_s, cpu_sys_s   client CPU used by the whole process during the run
//	workdir         the directory / key prefix the run used on the target
//	cleanup_error   why removing workdir failed (absent when it was removed)
//
// An Operation record (one JSON object per line):
//
//	phase          the step of the suite this request belongs to, e.g.
//	               "write", "read", "put", "get", "list", "delete"; the report
//	               groups by (phase, form, unit, threads)
//	form           access form for POSIX targets ("default", "sync",
//	               "direct"); "" elsewhere
//	op             the Driver call: put, get, readat, writeat, list, delete,
//	               mkdir, sync
//	size           payload bytes this request moved (0 for list/delete/mkdir);
//	               for a failed request, what was asked for
//	unit           the size parameter of the step: the access unit in `units`,
//	               the file or object size in `single`, `batch`, `objects`
//	threads        how many workers ran concurrently in this step
//	worker         which of them (0 … threads-1) issued the request
//	start_ns       request start, nanoseconds since run.json's start
//	end_ns         request end (last byte received or acknowledged)
//	first_byte_ns  when the first payload arrived (whole-file reads only;
//	               absent when not measured): S3, the first bytes of the
//	               body; NFS, the first READ reply (up to rsize); POSIX, the
//	               first read(2) of up to 1 MiB; iSCSI does not measure it
//	items          names a list request returned (metadata suite); absent
//	               for other requests
//	err            the error text; absent when the request succeeded
//
// Failed requests are recorded like the others (never dropped), so a report
// can count them.
package bench

import (
	"bufio"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// FormatVersion is the version of the results-directory format written here.
const FormatVersion = 1

// File names inside a results directory.
const (
	RunFile = "run.json"
	OpsFile = "ops.jsonl.gz"
)

// Operation is one request as the client saw it. Times are relative to the
// run's start so that records from one run sort and plot without a clock.
type Operation struct {
	Phase     string        `json:"phase"`
	Form      string        `json:"form,omitempty"`
	Op        string        `json:"op"`
	Size      int64         `json:"size"`
	Unit      int64         `json:"unit"`
	Threads   int           `json:"threads"`
	Worker    int           `json:"worker"`
	Start     time.Duration `json:"start_ns"`
	End       time.Duration `json:"end_ns"`
	FirstByte time.Duration `json:"first_byte_ns,omitempty"`
	Items     int           `json:"items,omitempty"`
	Err       string        `json:"err,omitempty"`
}

// Latency is End-Start.
func (o Operation) Latency() time.Duration { return o.End - o.Start }

// Failed reports whether the request failed.
func (o Operation) Failed() bool { return o.Err != "" }

// Params are a suite's parameters after --scale. Fields a suite does not use
// stay empty.
type Params struct {
	// FileSize is the file the units suite reads and writes in units.
	FileSize int64 `json:"file_size,omitempty"`
	// Sizes are the unit, file or object sizes stepped through, in bytes.
	Sizes []int64 `json:"sizes,omitempty"`
	// Threads are the parallelism levels stepped through.
	Threads []int `json:"threads,omitempty"`
	// Count is files or objects per step (batch, objects), or repetitions
	// per size (single).
	Count int `json:"count,omitempty"`
	// Counts, when set, is the count per entry of Sizes (objects: the
	// object number of seed 001 Table III, scaled).
	Counts []int `json:"counts,omitempty"`
	// Bytes bounds the payload moved per step where the suite bounds by
	// volume rather than count (units: the file is passed through once).
	Bytes int64 `json:"bytes,omitempty"`
	// Extra holds suite-specific settings as text.
	Extra map[string]string `json:"extra,omitempty"`
}

// Machine describes the client machine, so a saved run says where it ran.
type Machine struct {
	Hostname  string     `json:"hostname"`
	NProc     int        `json:"nproc"`
	MemBytes  int64      `json:"mem_bytes"`
	Kernel    string     `json:"kernel"`
	CPUModel  string     `json:"cpu_model"`
	GoVersion string     `json:"go_version"`
	OSArch    string     `json:"os_arch"`
	LoadStart [3]float64 `json:"load_start"`
	LoadEnd   [3]float64 `json:"load_end"`
	// GitRev is tristore's git revision ("" if unknown), with "-dirty" when
	// the build had local changes.
	GitRev string `json:"git_rev,omitempty"`
}

// Phase is one step of a run with the bytes that crossed an emulated link
// during it (zero when no link was used).
type Phase struct {
	Name    string        `json:"name"`
	Form    string        `json:"form,omitempty"`
	Unit    int64         `json:"unit,omitempty"`
	Threads int           `json:"threads,omitempty"`
	Ops     int64         `json:"ops"`
	Errors  int64         `json:"errors"`
	Start   time.Duration `json:"start_ns"`
	End     time.Duration `json:"end_ns"`
	Payload int64         `json:"payload_bytes,omitempty"`
	WireUp  int64         `json:"wire_up_bytes,omitempty"`
	WireDn  int64         `json:"wire_down_bytes,omitempty"`
	// CPUUser and CPUSys are the client process's CPU seconds during the
	// step (seed 001's and 004's client CPU use).
	CPUUser float64 `json:"cpu_user_s"`
	CPUSys  float64 `json:"cpu_sys_s"`
}

// Run is the metadata of one run (run.json).
type Run struct {
	Format   int       `json:"format"`
	Suite    string    `json:"suite"`
	Target   string    `json:"target"`
	Protocol string    `json:"protocol"`
	Forms    []string  `json:"forms"`
	Params   Params    `json:"params"`
	Scale    float64   `json:"scale"`
	Network  string    `json:"network,omitempty"`
	Machine  Machine   `json:"machine"`
	Start    time.Time `json:"start"`
	End      time.Time `json:"end,omitzero"`
	Partial  bool      `json:"partial"`
	Error    string    `json:"error,omitempty"`
	Phases   []Phase   `json:"phases,omitempty"`
	Ops      int64     `json:"ops"`
	Errors   int64     `json:"errors"`
	CPUUser  float64   `json:"cpu_user_s"`
	CPUSys   float64   `json:"cpu_sys_s"`
	// Workdir is the directory (or key prefix) the run worked under on the
	// target; CleanupError says why removing it failed, if it did.
	Workdir      string `json:"workdir,omitempty"`
	CleanupError string `json:"cleanup_error,omitempty"`
}

// Writer streams Operations into a results directory. It is safe for
// concurrent use. Add only hands the record to a queue (a channel send, so
// the time between a worker's requests stays tiny); one goroutine encodes
// and compresses. Memory stays bounded: the queue holds at most queueLen
// records (Add waits when it is full) and only counters are kept.
type Writer struct {
	dir string

	mu   sync.Mutex // run, done
	run  Run
	done bool

	f    *os.File
	bw   *bufio.Writer
	gz   *gzip.Writer
	qmu  sync.RWMutex // Adds hold it shared while sending; Close closes q under it
	q    chan Operation
	qend bool
	wg   sync.WaitGroup
	werr error // first write error (owned by the encoder goroutine until wg is done)

	ops, errs, bytes atomic.Int64
}

const queueLen = 8192

// Create makes dir (which must not hold a previous run) and starts a run:
// run.json is written at once with partial=true. run.Start is set to now if
// zero; Operation times passed to Add must be relative to it.
func Create(dir string, run Run) (*Writer, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("bench: results directory: %w", err)
	}
	if _, err := os.Stat(filepath.Join(dir, RunFile)); err == nil {
		return nil, fmt.Errorf("bench: results directory %s already holds a run", dir)
	}
	f, err := os.OpenFile(filepath.Join(dir, OpsFile), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("bench: results directory: %w", err)
	}
	if run.Start.IsZero() {
		run.Start = time.Now()
	}
	run.Format = FormatVersion
	run.Partial = true
	if run.Error == "" {
		run.Error = "run did not finish (interrupted or still running)"
	}
	w := &Writer{dir: dir, run: run, f: f, bw: bufio.NewWriterSize(f, 256<<10), q: make(chan Operation, queueLen)}
	w.gz, _ = gzip.NewWriterLevel(w.bw, gzip.BestSpeed)
	if err := writeRunFile(dir, &w.run); err != nil {
		f.Close()
		return nil, err
	}
	w.wg.Add(1)
	go w.encode()
	return w, nil
}

// encode drains the queue into the gzip stream until Close closes it.
//
// It never waits on the empty queue: it sleeps a little and looks again.
// A goroutine parked on a channel is woken by every send, and that wakeup
// (a futex call to start a thread) fell between a worker's requests: it
// put ~10 µs between one request's end and the next one's start, which cut
// the measured throughput of fast requests (128 KiB O_DIRECT writes at
// ~80 µs each) by ~10 % against fio's on the same job. A send to a queue
// nobody waits on wakes nothing. TestWriterAddWakesNothing pins it.
func (w *Writer) encode() {
	defer w.wg.Done()
	buf := make([]byte, 0, 512)
	for {
		var op Operation
		var ok bool
		select {
		case op, ok = <-w.q:
			if !ok {
				return
			}
		default:
			time.Sleep(encodePoll)
			continue
		}
		if w.werr != nil {
			continue
		}
		buf = appendOperation(buf[:0], &op)
		if _, err := w.gz.Write(buf); err != nil {
			w.werr = err
		}
	}
}

// encodePoll is how long the encoder sleeps when the queue is empty: at
// queueLen records per poll the queue holds ~4 M requests/s without a
// worker ever waiting for it.
const encodePoll = 2 * time.Millisecond

// appendOperation is the JSON line of op, written by hand: encoding/json's
// reflection cost ~10 µs a record, which a worker issuing µs-long requests
// would have felt. TestRecordRoundTrip checks it reads back with
// encoding/json.
func appendOperation(b []byte, o *Operation) []byte {
	b = append(b, `{"phase":`...)
	b = appendJSONString(b, o.Phase)
	if o.Form != "" {
		b = append(b, `,"form":`...)
		b = appendJSONString(b, o.Form)
	}
	b = append(b, `,"op":`...)
	b = appendJSONString(b, o.Op)
	b = append(b, `,"size":`...)
	b = strconv.AppendInt(b, o.Size, 10)
	b = append(b, `,"unit":`...)
	b = strconv.AppendInt(b, o.Unit, 10)
	b = append(b, `,"threads":`...)
	b = strconv.AppendInt(b, int64(o.Threads), 10)
	b = append(b, `,"worker":`...)
	b = strconv.AppendInt(b, int64(o.Worker), 10)
	b = append(b, `,"start_ns":`...)
	b = strconv.AppendInt(b, int64(o.Start), 10)
	b = append(b, `,"end_ns":`...)
	b = strconv.AppendInt(b, int64(o.End), 10)
	if o.FirstByte != 0 {
		b = append(b, `,"first_byte_ns":`...)
		b = strconv.AppendInt(b, int64(o.FirstByte), 10)
	}
	if o.Items != 0 {
		b = append(b, `,"items":`...)
		b = strconv.AppendInt(b, int64(o.Items), 10)
	}
	if o.Err != "" {
		b = append(b, `,"err":`...)
		b = appendJSONString(b, o.Err)
	}
	return append(b, "}\n"...)
}

// appendJSONString quotes s for JSON: plain printable ASCII directly, the
// rest (error texts may hold anything) through encoding/json.
func appendJSONString(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c < 0x20 || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s)
			return append(b, q...)
		}
	}
	b = append(b, '"')
	b = append(b, s...)
	return append(b, '"')
}

// Dir is the results directory.
func (w *Writer) Dir() string { return w.dir }

// Start is the run's time origin.
func (w *Writer) Start() time.Time { return w.run.Start }

// Since converts a wall-clock time to a time relative to the run start.
func (w *Writer) Since(t time.Time) time.Duration { return t.Sub(w.run.Start) }

// Add records one Operation. After a write error or Close it only counts.
func (w *Writer) Add(op Operation) {
	w.ops.Add(1)
	if op.Err != "" {
		w.errs.Add(1)
	} else {
		w.bytes.Add(op.Size)
	}
	w.qmu.RLock()
	defer w.qmu.RUnlock()
	if !w.qend {
		w.q <- op
	}
}

// Counts returns the records added so far, how many failed and the payload
// bytes of the successful ones (for a progress display).
func (w *Writer) Counts() (ops, errs, bytes int64) {
	return w.ops.Load(), w.errs.Load(), w.bytes.Load()
}

// AddPhase appends a phase to run.json's phase list.
func (w *Writer) AddPhase(p Phase) {
	w.mu.Lock()
	w.run.Phases = append(w.run.Phases, p)
	w.mu.Unlock()
}

// Update lets the caller amend the metadata before Close (machine load at the
// end, CPU use).
func (w *Writer) Update(f func(*Run)) {
	w.mu.Lock()
	f(&w.run)
	w.mu.Unlock()
}

// Close ends the run: flushes the records and rewrites run.json. runErr nil
// marks the run complete; otherwise it stays partial with runErr's text. A
// failure to save the records also leaves the run partial and is returned.
func (w *Writer) Close(runErr error) error {
	w.mu.Lock()
	if w.done {
		w.mu.Unlock()
		return errors.New("bench: results writer already closed")
	}
	w.done = true
	w.mu.Unlock()
	w.qmu.Lock()
	w.qend = true
	close(w.q)
	w.qmu.Unlock()
	w.wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	err := w.werr
	if e := w.gz.Close(); err == nil {
		err = e
	}
	if e := w.bw.Flush(); err == nil {
		err = e
	}
	if e := w.f.Sync(); err == nil {
		err = e
	}
	if e := w.f.Close(); err == nil {
		err = e
	}
	w.run.End = time.Now()
	w.run.Ops, w.run.Errors = w.ops.Load(), w.errs.Load()
	switch {
	case runErr != nil:
		w.run.Partial, w.run.Error = true, runErr.Error()
	case err != nil:
		w.run.Partial, w.run.Error = true, "saving records: "+err.Error()
	default:
		w.run.Partial, w.run.Error = false, ""
	}
	if e := writeRunFile(w.dir, &w.run); err == nil {
		err = e
	}
	if err != nil {
		return fmt.Errorf("bench: saving results in %s: %w", w.dir, err)
	}
	return nil
}

// Run returns a copy of the metadata as it stands.
func (w *Writer) Run() Run {
	w.mu.Lock()
	defer w.mu.Unlock()
	r := w.run
	r.Ops, r.Errors = w.ops.Load(), w.errs.Load()
	return r
}

// writeRunFile replaces run.json atomically (temp file + rename), so a reader
// never sees half a file.
func writeRunFile(dir string, run *Run) error {
	b, err := json.MarshalIndent(run, "", "  ")
	if err != nil {
		return fmt.Errorf("bench: encoding run.json: %w", err)
	}
	tmp := filepath.Join(dir, RunFile+".tmp")
	if err := os.WriteFile(tmp, append(b, '\n'), 0o644); err != nil {
		return fmt.Errorf("bench: writing run.json: %w", err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, RunFile)); err != nil {
		return fmt.Errorf("bench: writing run.json: %w", err)
	}
	return nil
}

// ReadRunMeta reads only run.json.
func ReadRunMeta(dir string) (*Run, error) {
	b, err := os.ReadFile(filepath.Join(dir, RunFile))
	if err != nil {
		return nil, fmt.Errorf("bench: %s is not a results directory: %w", dir, err)
	}
	var r Run
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("bench: %s: %w", filepath.Join(dir, RunFile), err)
	}
	if r.Format > FormatVersion {
		return nil, fmt.Errorf("bench: %s: format %d is newer than this tristore reads (%d)", dir, r.Format, FormatVersion)
	}
	return &r, nil
}

// EachOp streams the records of dir to fn in file order, without holding them
// all in memory. A truncated file (a run killed mid-write) yields the records
// before the damage and then an error wrapping io.ErrUnexpectedEOF.
func EachOp(dir string, fn func(Operation) error) error {
	f, err := os.Open(filepath.Join(dir, OpsFile))
	if err != nil {
		return fmt.Errorf("bench: %w", err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(bufio.NewReader(f))
	if err != nil {
		if errors.Is(err, io.EOF) {
			return nil // no record was ever flushed
		}
		return fmt.Errorf("bench: %s: %w", f.Name(), err)
	}
	dec := json.NewDecoder(gz)
	for n := 1; ; n++ {
		var op Operation
		if err := dec.Decode(&op); err != nil {
			if err == io.EOF {
				return nil
			}
			return fmt.Errorf("bench: %s record %d: %w", f.Name(), n, err)
		}
		if err := fn(op); err != nil {
			return err
		}
	}
}

// ReadRun reads a results directory: the metadata and every record. For very
// large runs prefer ReadRunMeta + EachOp.
func ReadRun(dir string) (*Run, []Operation, error) {
	r, err := ReadRunMeta(dir)
	if err != nil {
		return nil, nil, err
	}
	var ops []Operation
	err = EachOp(dir, func(o Operation) error { ops = append(ops, o); return nil })
	return r, ops, err
}
