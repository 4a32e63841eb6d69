// Package serveproc starts `tristore serve` as a child process and waits
// until it is ready: one way for every test (internal/testutil wraps it
// with a testing.TB) and every benchmark program (bench/lab,
// bench/drivertest, bench/memsoak), instead of a copy of the same start,
// ready-file poll and stop in each.
//
// The server is a child process, not goroutines of the caller, so its CPU
// and memory are its own (as a real server's would be), a crash is a real
// SIGKILL, and stopping it cannot leave state behind in the caller.
package serveproc

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Options says how Start runs `tristore serve`.
type Options struct {
	// Bin is the tristore binary.
	Bin string
	// Data is the --data directory.
	Data string
	// On names the front ends to listen on 127.0.0.1:0 ("s3", "nfs",
	// "iscsi", "admin"); every other --X-addr flag that `serve --help`
	// lists is set to "off", so a front end added later does not open a
	// port behind the caller's back.
	On []string
	// Args are extra arguments after the generated ones.
	Args []string
	// Env is added to the environment. TRISTORE_* and XDG_CONFIG_HOME of
	// the caller's own environment are not passed on (a developer's
	// settings must not change a test or a benchmark); XDG_CONFIG_HOME is
	// Dir/config.
	Env []string
	// Dir holds the ready file, the log (unless LogPath is set) and the
	// config directory. It must exist; the caller removes it.
	Dir string
	// LogPath is where serve's output goes (default Dir/serve.log). A
	// file, not a pipe, so Wait returns as soon as serve exits even if
	// something it started still holds the descriptor.
	LogPath string
	// Ready bounds the wait for the ready file (default 60 s: a loaded
	// 2-core machine).
	Ready time.Duration
	// OwnGroup puts serve in its own process group, so a Ctrl-C on the
	// terminal reaches the caller only (which then stops serve in order).
	OwnGroup bool
}

// Proc is a running `tristore serve`. The kernel sends it SIGKILL if the
// thread that started it dies (Pdeathsig), so a caller killed with
// SIGKILL leaves no server behind.
type Proc struct {
	// Addrs are the listening addresses from the ready file, by front end.
	Addrs map[string]string
	cmd   *exec.Cmd
	log   string
	done  chan struct{}
	err   error
}

var addrFlag = regexp.MustCompile(`--([a-z0-9]+)-addr\b`)

var serveHelp sync.Map // binary path -> []string (the --X-addr flags)

// addrFlags lists the --X-addr flags of bin's `serve` (once per binary).
func addrFlags(bin string, env []string) ([]string, error) {
	if v, ok := serveHelp.Load(bin); ok {
		return v.([]string), nil
	}
	help := exec.Command(bin, "serve", "--help")
	help.Env = env
	out, err := help.CombinedOutput()
	if err != nil {
		return nil, fmt.Errorf("tristore serve --help: %v\n%s", err, out)
	}
	var names []string
	seen := map[string]bool{}
	for _, m := range addrFlag.FindAllStringSubmatch(string(out), -1) {
		if !seen[m[1]] {
			seen[m[1]] = true
			names = append(names, m[1])
		}
	}
	serveHelp.Store(bin, names)
	return names, nil
}

// Start runs `tristore serve` as o says and waits for its ready file
// (bounded by o.Ready and ctx). If serve exits first or is not ready in
// time, it is stopped and the error carries the end of its log.
func Start(ctx context.Context, o Options) (*Proc, error) {
	ready := filepath.Join(o.Dir, "ready.json")
	os.Remove(ready)
	logPath := o.LogPath
	if logPath == "" {
		logPath = filepath.Join(o.Dir, "serve.log")
	}
	args := []string{"serve", "--data", o.Data, "--ready-file", ready}
	env := []string{"XDG_CONFIG_HOME=" + filepath.Join(o.Dir, "config")}
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "TRISTORE_") && !strings.HasPrefix(e, "XDG_CONFIG_HOME=") {
			env = append(env, e)
		}
	}
	env = append(env, o.Env...)
	on := map[string]bool{}
	for _, f := range o.On {
		on[f] = true
	}
	flags, err := addrFlags(o.Bin, env)
	if err != nil {
		return nil, err
	}
	for _, f := range flags {
		addr := "off"
		if on[f] {
			addr = "127.0.0.1:0"
		}
		args = append(args, "--"+f+"-addr", addr)
	}
	args = append(args, o.Args...)
	cmd := exec.Command(o.Bin, args...)
	cmd.Env = env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: o.OwnGroup, Pdeathsig: syscall.SIGKILL}
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close() // the child has its own descriptor
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &Proc{cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() { p.err = cmd.Wait(); close(p.done) }()
	wait := o.Ready
	if wait == 0 {
		wait = 60 * time.Second
	}
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(ready); err == nil && json.Unmarshal(b, &p.Addrs) == nil && p.ready(o.On) {
			return p, nil
		}
		select {
		case <-p.done:
			return nil, fmt.Errorf("tristore serve exited before it was ready (%v); log %s:\n%s", p.err, logPath, p.LogTail(4000))
		case <-ctx.Done():
			p.Stop()
			return nil, fmt.Errorf("tristore serve: %w while waiting for it to be ready", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	p.Stop()
	return nil, fmt.Errorf("tristore serve not ready after %v; log %s:\n%s", wait, logPath, p.LogTail(4000))
}

// ready reports whether every front end asked for has an address.
func (p *Proc) ready(on []string) bool {
	for _, f := range on {
		if p.Addrs[f] == "" {
			return false
		}
	}
	return true
}

// Log returns what serve has written so far.
func (p *Proc) Log() string {
	b, _ := os.ReadFile(p.log)
	return string(b)
}

// LogTail returns the last n bytes of the log.
func (p *Proc) LogTail(n int) string {
	s := p.Log()
	if len(s) > n {
		s = "..." + s[len(s)-n:]
	}
	return s
}

// LogPath is the file serve writes its log to.
func (p *Proc) LogPath() string { return p.log }

// PID is the server's process ID.
func (p *Proc) PID() int { return p.cmd.Process.Pid }

// Done is closed when serve has exited.
func (p *Proc) Done() <-chan struct{} { return p.done }

// Err is serve's exit error; valid after Done is closed.
func (p *Proc) Err() error { return p.err }

// Exited returns serve's exit error (non-nil even for status 0) if it has
// exited, nil while it runs: for a caller whose failure may be the
// server's exit.
func (p *Proc) Exited() error {
	select {
	case <-p.done:
		if p.err == nil {
			return fmt.Errorf("tristore serve exited (status 0): %s", p.LogTail(2000))
		}
		return fmt.Errorf("tristore serve exited (%v): %s", p.err, p.LogTail(2000))
	default:
		return nil
	}
}

// WaitLog waits until serve's log holds s, at most d; it reports whether
// it does (false also when serve exited without writing it).
func (p *Proc) WaitLog(s string, d time.Duration) bool {
	deadline := time.Now().Add(d)
	for {
		if strings.Contains(p.Log(), s) {
			return true
		}
		if !time.Now().Before(deadline) {
			return false
		}
		select {
		case <-p.done:
			return strings.Contains(p.Log(), s)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// Signal sends sig to serve (SIGSTOP/SIGCONT for stalls).
func (p *Proc) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Kill is a crash: SIGKILL, then wait (up to 30 s) until the process is
// gone. Idempotent.
func (p *Proc) Kill() {
	select {
	case <-p.done:
		return
	default:
	}
	p.cmd.Process.Signal(syscall.SIGCONT) // a stopped process still dies, but be explicit
	p.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
	}
}

// Stop asks for a graceful shutdown (SIGTERM) and waits up to 30 s; it
// reports false (and kills serve) when that was not enough. Idempotent.
func (p *Proc) Stop() bool {
	select {
	case <-p.done:
		return true
	default:
	}
	p.cmd.Process.Signal(syscall.SIGCONT)
	p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return true
	case <-time.After(30 * time.Second):
		p.Kill()
		return false
	}
}

// ExitedCleanly reports whether serve exited with status 0 (after Stop).
func (p *Proc) ExitedCleanly() bool {
	select {
	case <-p.done:
		return p.err == nil
	default:
		return false
	}
}
