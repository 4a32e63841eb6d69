package bench

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// clients (seed 004 §4.1 2, Figures 3-4, Tables 4-5): the server as 1 … N
// clients use it at once. Each client is a separate process (the tristore
// binary re-executed as `tristore bench-client`, Config.ClientCommand) with
// its own connections, as the seed's separate client machines. For each
// number of clients n, n processes run the same steps together, each on
// its own files and one request at a time: upload, download and delete
// large files (data-intensive: the server's MB/s) and then small 1.1 KB
// files (metadata-intensive: its fops). A barrier starts every step on all
// clients at once; the step's aggregate figures are over all clients, from
// the first request's start to the last one's end.
//
// Records: phases put, get, delete; unit = the file size (1100 B or the
// large size); threads = n (clients in the step); worker = the client.
// Phases' CPU seconds are the clients' (summed), not this process's.
func init() {
	register(&Suite{
		Name: "clients",
		Seed: "seed 004 §4.1 (Figures 3-4, Tables 4-5)",
		Doc:  "1 … 7 concurrent client processes: large files and 1.1 KB files up, down, deleted; server MB/s and fops vs clients",
		Defaults: func(scale float64) Params {
			large := int64(64 << 20)
			for large > 1<<20 && float64(large) > float64(64<<20)*math.Sqrt(scale)*1.0001 {
				large /= 2
			}
			clients := ScaleThreads([]int{1, 2, 3, 4, 5, 6, 7}, scale)
			if len(clients) < 2 {
				clients = []int{1, 2}
			}
			return Params{Sizes: []int64{1100, large}, Threads: clients, Count: ScaleCount(1000, scale, 1),
				Bytes: int64(ScaleCount(256<<20, scale, 1<<20))}
		},
		Run: runClients,
	})
}

// Per client: Count files of each size below clientLargeFrom, and
// max(1, Bytes/size) of each larger size.
const clientLargeFrom = 1 << 20

func (r *Runner) clientFiles(size int64) int {
	if size < clientLargeFrom || r.P.Bytes <= 0 {
		return max(1, r.P.Count)
	}
	return int(max(1, r.P.Bytes/size))
}

func runClients(ctx context.Context, r *Runner) error {
	if r.cfg.ClientCommand == nil {
		return errors.New("clients: no way to start client processes (Config.ClientCommand)")
	}
	r.W.Update(func(run *Run) {
		if run.Params.Extra == nil {
			run.Params.Extra = map[string]string{}
		}
		run.Params.Extra["clients"] = "one process per client, one request at a time each"
	})
	// Large files first, as the seed's data-intensive case.
	sizes := append([]int64(nil), r.P.Sizes...)
	for i := range sizes {
		for j := i + 1; j < len(sizes); j++ {
			if sizes[j] > sizes[i] {
				sizes[i], sizes[j] = sizes[j], sizes[i]
			}
		}
	}
	for _, n := range r.P.Threads {
		if err := runClientsN(ctx, r, n, sizes); err != nil {
			return err
		}
	}
	return nil
}

// clientJob is what a client process is told when it starts (the first
// line on its stdin); secrets travel here, not on its command line.
type clientJob struct {
	Target    string        `json:"target"`
	AccessKey string        `json:"access_key,omitempty"`
	SecretKey string        `json:"secret_key,omitempty"`
	Region    string        `json:"region,omitempty"`
	CHAPUser  string        `json:"chap_user,omitempty"`
	CHAPSec   string        `json:"chap_secret,omitempty"`
	Timeout   time.Duration `json:"timeout_ns"`
	// Origin is the run's start (Unix ns): records are relative to it.
	Origin    int64  `json:"origin_ns"`
	Client    int    `json:"client"`
	Clients   int    `json:"clients"`
	Dir       string `json:"dir"`
	MaxErrors int    `json:"max_errors"`
	// LUNBase and LUNSize confine an iSCSI client to its share of the LUN.
	LUNBase int64 `json:"lun_base,omitempty"`
	LUNSize int64 `json:"lun_size,omitempty"`
}

// clientStep is one step, sent to every client at once (the barrier).
type clientStep struct {
	Phase string `json:"phase"`
	Op    string `json:"op"`
	Size  int64  `json:"size"`
	Count int    `json:"count"`
}

// clientMsg is one line a client writes: a record, or the end of its
// setup or step.
type clientMsg struct {
	Op  *Operation `json:"o,omitempty"`
	End *clientEnd `json:"end,omitempty"`
}

type clientEnd struct {
	PID     int     `json:"pid"`
	CPUUser float64 `json:"cpu_user_s"`
	CPUSys  float64 `json:"cpu_sys_s"`
	Err     string  `json:"err,omitempty"`
}

// client is one running client process, seen from the runner.
type client struct {
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Scanner
	stderr *limitedBuffer
	pid    int

	// The process is waited for once (exec.Cmd.Wait may not be called
	// twice); exited is closed when Wait has returned, which is also when
	// every byte of stderr has been copied into the buffer.
	waitOnce sync.Once
	waitDone chan struct{}
	waitErr  error
}

func runClientsN(ctx context.Context, r *Runner, n int, sizes []int64) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var lunSize int64
	if d, ok := r.D.(*ISCSI); ok {
		lunSize = d.s.Size() / int64(n) / Alignment * Alignment
	}
	cs := make([]*client, 0, n)
	defer func() {
		for _, c := range cs {
			c.stop()
		}
	}()
	origin := r.W.Start().UnixNano()
	for i := range n {
		job := clientJob{Target: r.entry, AccessKey: r.cfg.Options.AccessKey, SecretKey: r.cfg.Options.SecretKey,
			Region: r.cfg.Options.Region, CHAPUser: r.cfg.Options.CHAPUser, CHAPSec: r.cfg.Options.CHAPSecret,
			Timeout: r.cfg.Options.timeout(), Origin: origin, Client: i, Clients: n,
			Dir: r.Path(fmt.Sprintf("clients-n%d-c%d", n, i)), MaxErrors: r.cfg.MaxConsecutiveErrors,
			LUNBase: int64(i) * lunSize, LUNSize: lunSize}
		c, err := startClient(ctx, r.cfg.ClientCommand(ctx), job)
		if c != nil {
			cs = append(cs, c)
		}
		if err := r.Setup(fmt.Sprintf("start client %d of %d", i+1, n), err); err != nil {
			return err
		}
	}
	// Every client connected and made its directory.
	pids := map[int]bool{}
	for i, c := range cs {
		end, err := c.await(nil)
		if err == nil && end.Err != "" {
			err = errors.New(end.Err)
		}
		if err := r.Setup(fmt.Sprintf("client %d of %d connecting", i+1, n), err); err != nil {
			return err
		}
		if pids[end.PID] {
			return fmt.Errorf("clients: client %d reports pid %d twice", i, end.PID)
		}
		pids[end.PID], c.pid = true, end.PID
	}
	for _, size := range sizes {
		k := r.clientFiles(size)
		for _, st := range []clientStep{{"put", "put", size, k}, {"get", "get", size, k}, {"delete", "delete", size, k}} {
			if err := clientsStep(ctx, r, cs, st); err != nil {
				return err
			}
		}
	}
	for _, c := range cs {
		c.in.Close() // end of steps: the client cleans up and exits
	}
	var errs []error
	for i, c := range cs {
		if err := c.wait(30 * time.Second); err != nil {
			errs = append(errs, fmt.Errorf("client %d: %w", i, err))
		}
	}
	cs = nil
	return r.Setup("clients exiting", errors.Join(errs...))
}

// clientsStep runs one step on every client at once and records it.
func clientsStep(ctx context.Context, r *Runner, cs []*client, st clientStep) error {
	n := len(cs)
	name := Step{Phase: st.Phase, Unit: st.Size, Threads: n}.String()
	line, _ := json.Marshal(st)
	line = append(line, '\n')
	m := r.beginPhase(name, int64(st.Count*n))
	for i, c := range cs {
		if _, err := c.in.Write(line); err != nil {
			return fmt.Errorf("phase %s on %s: client %d: %w%s", name, r.target, i, err, c.why())
		}
	}
	ph := Phase{Name: st.Phase, Unit: st.Size, Threads: n}
	var mu sync.Mutex
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i, c := range cs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			end, err := c.await(func(op Operation) {
				op.Phase, op.Op, op.Unit, op.Threads, op.Worker = st.Phase, st.Op, st.Size, n, i
				r.W.Add(op)
				r.doneOps.Add(1)
				mu.Lock()
				ph.Ops++
				if op.Failed() {
					ph.Errors++
				} else {
					ph.Payload += op.Size
				}
				mu.Unlock()
			})
			if err == nil && end.Err != "" {
				err = errors.New(end.Err)
			}
			mu.Lock()
			ph.CPUUser += end.CPUUser
			ph.CPUSys += end.CPUSys
			mu.Unlock()
			if err != nil {
				errs[i] = fmt.Errorf("client %d: %w", i, err)
			}
		}()
	}
	wg.Wait()
	// The clients' own CPU times are in ph already (summed above).
	r.endPhase(m, name, ph, false)
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("phase %s on %s: %w", name, r.target, err)
	}
	return ctx.Err()
}

func startClient(ctx context.Context, cmd *exec.Cmd, job clientJob) (*client, error) {
	if cmd == nil {
		return nil, errors.New("no client command")
	}
	c := &client{cmd: cmd, stderr: &limitedBuffer{b: &bytes.Buffer{}, max: 8 << 10}}
	cmd.Stderr = c.stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting %s: %w", cmd.Path, err)
	}
	c.in = in
	c.out = bufio.NewScanner(out)
	c.out.Buffer(make([]byte, 64<<10), 4<<20)
	line, _ := json.Marshal(job)
	if _, err := in.Write(append(line, '\n')); err != nil {
		return c, fmt.Errorf("client: %w%s", err, c.why())
	}
	return c, nil
}

// await reads the client's lines until the end of its setup or step,
// handing records to rec.
func (c *client) await(rec func(Operation)) (clientEnd, error) {
	for c.out.Scan() {
		var m clientMsg
		if err := json.Unmarshal(c.out.Bytes(), &m); err != nil {
			return clientEnd{}, fmt.Errorf("client wrote %.200q: %w", c.out.Text(), err)
		}
		switch {
		case m.Op != nil && rec != nil:
			rec(*m.Op)
		case m.End != nil:
			return *m.End, nil
		}
	}
	err := c.out.Err()
	if err == nil {
		err = io.ErrUnexpectedEOF
	}
	// stdout can reach EOF before exec's goroutine has copied the dying
	// client's last stderr lines: wait (briefly) for the exit, which
	// finishes that copy, so the error carries the client's own words.
	select {
	case <-c.exited():
	case <-time.After(2 * time.Second):
	}
	return clientEnd{}, fmt.Errorf("client process ended: %w%s", err, c.why())
}

// why is the end of the client's stderr, for an error message.
func (c *client) why() string {
	s := strings.TrimSpace(c.stderr.String())
	if s == "" {
		return ""
	}
	if i := strings.LastIndexByte(s, '\n'); i >= 0 && len(s)-i > 20 {
		s = s[i+1:]
	}
	return " (client stderr: " + s + ")"
}

// exited starts waiting for the process (once) and is closed when it has
// exited and its stderr has been copied.
func (c *client) exited() <-chan struct{} {
	c.waitOnce.Do(func() {
		c.waitDone = make(chan struct{})
		go func() {
			c.waitErr = c.cmd.Wait()
			close(c.waitDone)
		}()
	})
	return c.waitDone
}

// wait waits for the process to exit, killing it after d.
func (c *client) wait(d time.Duration) error {
	select {
	case <-c.exited():
		if c.waitErr != nil {
			return fmt.Errorf("%w%s", c.waitErr, c.why())
		}
		return nil
	case <-time.After(d):
		c.cmd.Process.Kill()
		<-c.exited()
		return fmt.Errorf("did not exit within %v after its last step: killed", d)
	}
}

// stop ends a client that is still running (after a failure).
func (c *client) stop() {
	if c.in != nil {
		c.in.Close()
	}
	if c.cmd.Process != nil {
		c.wait(5 * time.Second)
	}
}

type limitedBuffer struct {
	mu  sync.Mutex
	b   *bytes.Buffer
	max int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if room := l.max - l.b.Len(); room > 0 {
		l.b.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// String is what has been written so far; safe while the copy goroutine
// is still writing.
func (l *limitedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// ClientMain is a client process of the clients suite: it reads a job and
// then steps from in, runs each step's requests one at a time against the
// target, and writes records and step ends to out. It returns when in ends
// (after removing its directory) or on a setup failure, which it also
// reports on out. `tristore bench-client` runs it.
func ClientMain(ctx context.Context, in io.Reader, out io.Writer) error {
	// Not realtime, even when started by a process running a netns link.
	_ = normalScheduling()
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	bw := bufio.NewWriterSize(out, 64<<10)
	enc := json.NewEncoder(bw)
	end := func(cu0, cs0 float64, err error) error {
		cu, cs := CPUTimes()
		e := &clientEnd{PID: os.Getpid(), CPUUser: cu - cu0, CPUSys: cs - cs0}
		if err != nil {
			e.Err = err.Error()
		}
		if werr := enc.Encode(clientMsg{End: e}); werr != nil {
			return werr
		}
		return bw.Flush()
	}
	if !sc.Scan() {
		return fmt.Errorf("bench client: no job on stdin: %v", sc.Err())
	}
	var job clientJob
	if err := json.Unmarshal(sc.Bytes(), &job); err != nil {
		return fmt.Errorf("bench client: bad job: %w", err)
	}
	cu0, cs0 := CPUTimes()
	d, err := Open(ctx, job.Target, Options{AccessKey: job.AccessKey, SecretKey: job.SecretKey, Region: job.Region,
		CHAPUser: job.CHAPUser, CHAPSecret: job.CHAPSec, Timeout: job.Timeout})
	if err != nil {
		end(cu0, cs0, err)
		return err
	}
	defer d.Close(context.WithoutCancel(ctx))
	if is, ok := d.(*ISCSI); ok && job.LUNSize > 0 {
		is.confine(job.LUNBase, job.LUNSize)
	}
	if err := d.Mkdir(ctx, job.Dir); err != nil {
		err = fmt.Errorf("mkdir %s: %w", job.Dir, err)
		end(cu0, cs0, err)
		return err
	}
	defer d.RemoveAll(context.WithoutCancel(ctx), job.Dir)
	if err := end(cu0, cs0, nil); err != nil {
		return err
	}
	origin := time.Unix(0, job.Origin)
	limit := max(job.MaxErrors, 1)
	if job.MaxErrors <= 0 {
		limit = 10
	}
	data := map[int64][]byte{}
	var buf []byte
	for sc.Scan() {
		var st clientStep
		if err := json.Unmarshal(sc.Bytes(), &st); err != nil {
			return fmt.Errorf("bench client: bad step: %w", err)
		}
		cu0, cs0 := CPUTimes()
		if data[st.Size] == nil {
			// Each client its own bytes, checked on download: clients
			// that overwrote each other's files would be caught.
			data[st.Size] = AlignedBuffer(int(st.Size))
			Fill(data[st.Size], uint64(st.Size)^uint64(job.Client+1)<<40)
		}
		if int64(len(buf)) < st.Size {
			buf = AlignedBuffer(int(st.Size))
		}
		var stepErr error
		consecutive := 0
		for i := range st.Count {
			name := fmt.Sprintf("%s/%s-%06d", job.Dir, FormatSize(st.Size), i)
			op := Operation{Size: st.Size}
			t0 := time.Now()
			var err error
			var first time.Time
			switch st.Op {
			case "put":
				err = d.Put(ctx, name, data[st.Size])
			case "get":
				var n int
				n, first, err = d.Get(ctx, name, buf[:st.Size])
				if err == nil && int64(n) != st.Size {
					err = fmt.Errorf("short read of %s: %d of %d bytes", name, n, st.Size)
				} else if err == nil && !bytes.Equal(buf[:n], data[st.Size]) {
					err = fmt.Errorf("%s does not hold what client %d wrote", name, job.Client)
				}
			case "delete":
				op.Size = 0
				err = d.Delete(ctx, name)
			default:
				err = fmt.Errorf("unknown op %q", st.Op)
			}
			t1 := time.Now()
			op.Start, op.End = t0.Sub(origin), t1.Sub(origin)
			if !first.IsZero() {
				op.FirstByte = first.Sub(origin)
			}
			if err != nil {
				op.Err = err.Error()
			}
			if werr := enc.Encode(clientMsg{Op: &op}); werr != nil {
				return werr
			}
			if err == nil {
				consecutive = 0
				continue
			}
			if consecutive++; consecutive >= limit || ctx.Err() != nil {
				stepErr = fmt.Errorf("%d requests in a row failed; last: %w", consecutive, err)
				break
			}
		}
		if err := end(cu0, cs0, stepErr); err != nil {
			return err
		}
	}
	return sc.Err()
}

// confine makes the driver allocate only in [base, base+size) of the LUN,
// so that several client processes share one LUN without overlapping.
func (d *ISCSI) confine(base, size int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.base, d.limit, d.next, d.free = base, base+size, base, nil
}
