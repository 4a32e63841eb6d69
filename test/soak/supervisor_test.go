package soak

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// The server is started, killed and restarted by a supervisor: this test
// binary run again (TRISTORE_SOAK_SUPERVISOR=1) before any mount exists.
// The soak's own process must not fork the server once it has files open
// on the NFS FUSE mount: exec closes the child's copies of those files,
// each close is a FUSE FLUSH, and the FUSE daemon answers it only when the
// server is back — which is the child that is exec'ing. The restart then
// hangs for good (seen: chaos stuck in exec.Cmd.Start, the child still
// named soak.test, every later NFS operation waiting).

const supervisorEnv = "TRISTORE_SOAK_SUPERVISOR"

type superReq struct {
	Op   string   `json:"op"` // start, kill9, signal, term, status
	Argv []string `json:"argv,omitempty"`
	Env  []string `json:"env,omitempty"`
	Log  string   `json:"log,omitempty"`
	Pid  int      `json:"pid,omitempty"`
	Sig  int      `json:"sig,omitempty"`
}

type superResp struct {
	Pid    int    `json:"pid,omitempty"`
	Exited bool   `json:"exited,omitempty"`
	Status string `json:"status,omitempty"`
	Err    string `json:"err,omitempty"`
}

// superviseMain is the supervisor: one JSON request per line on stdin, one
// answer per line on stdout; when stdin closes it kills what it started.
func superviseMain() {
	type child struct {
		cmd  *exec.Cmd
		done chan struct{}
	}
	var mu sync.Mutex
	kids := map[int]*child{}
	get := func(pid int) *child { mu.Lock(); defer mu.Unlock(); return kids[pid] }
	wait := func(c *child, d time.Duration) bool {
		select {
		case <-c.done:
			return true
		case <-time.After(d):
			return false
		}
	}
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 1<<20)
	out := json.NewEncoder(os.Stdout)
	for in.Scan() {
		var q superReq
		var r superResp
		if err := json.Unmarshal(in.Bytes(), &q); err != nil {
			r.Err = err.Error()
			out.Encode(r)
			continue
		}
		c := get(q.Pid)
		if q.Op != "start" && c == nil {
			r.Err = fmt.Sprintf("no child %d", q.Pid)
			out.Encode(r)
			continue
		}
		switch q.Op {
		case "start":
			logf, err := os.OpenFile(q.Log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
			if err != nil {
				r.Err = err.Error()
				break
			}
			cmd := exec.Command(q.Argv[0], q.Argv[1:]...)
			cmd.Env, cmd.Stdout, cmd.Stderr = q.Env, logf, logf
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
			err = cmd.Start()
			logf.Close()
			if err != nil {
				r.Err = err.Error()
				break
			}
			c := &child{cmd: cmd, done: make(chan struct{})}
			go func() { cmd.Wait(); close(c.done) }()
			mu.Lock()
			kids[cmd.Process.Pid] = c
			mu.Unlock()
			r.Pid = cmd.Process.Pid
		case "status":
			r.Exited = wait(c, 0)
		case "signal":
			if err := syscall.Kill(-q.Pid, syscall.Signal(q.Sig)); err != nil {
				r.Err = err.Error()
			}
		case "kill9":
			syscall.Kill(-q.Pid, syscall.SIGKILL)
			if r.Exited = wait(c, 30*time.Second); !r.Exited {
				r.Err = fmt.Sprintf("pid %d not reaped 30 s after SIGKILL", q.Pid)
			}
		case "term":
			syscall.Kill(-q.Pid, syscall.SIGCONT)
			syscall.Kill(-q.Pid, syscall.SIGTERM)
			if !wait(c, 40*time.Second) {
				syscall.Kill(-q.Pid, syscall.SIGKILL)
				wait(c, 30*time.Second)
				r.Err = fmt.Sprintf("pid %d ignored SIGTERM for 40 s; killed", q.Pid)
			}
			r.Exited = wait(c, 0)
		default:
			r.Err = "unknown op " + q.Op
		}
		if c := get(q.Pid); c != nil && c.cmd.ProcessState != nil {
			r.Status = c.cmd.ProcessState.String()
		}
		out.Encode(r)
	}
	mu.Lock()
	for pid := range kids {
		syscall.Kill(-pid, syscall.SIGKILL)
	}
	mu.Unlock()
}

// supervisor is the soak's handle on the supervisor process.
type supervisor struct {
	mu  sync.Mutex
	cmd *exec.Cmd
	in  io.WriteCloser
	out *json.Decoder
}

func startSupervisor() (*supervisor, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self)
	cmd.Env = append(os.Environ(), supervisorEnv+"=1")
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	outp, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return &supervisor{cmd: cmd, in: in, out: json.NewDecoder(outp)}, nil
}

func (s *supervisor) call(q superReq) (superResp, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var r superResp
	b, _ := json.Marshal(q)
	if _, err := s.in.Write(append(b, '\n')); err != nil {
		return r, fmt.Errorf("supervisor: %w", err)
	}
	if err := s.out.Decode(&r); err != nil {
		return r, fmt.Errorf("supervisor: %w", err)
	}
	if r.Err != "" {
		return r, fmt.Errorf("supervisor %s: %s", q.Op, r.Err)
	}
	return r, nil
}

// close ends the supervisor, which kills whatever it still runs.
func (s *supervisor) close() {
	s.in.Close()
	done := make(chan struct{})
	go func() { s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		s.cmd.Process.Kill()
		<-done
	}
}
