package testutil

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// ServeOptions says how StartServe runs `tristore serve`.
type ServeOptions struct {
	// Bin is the tristore binary (TristoreBin, or a prebuilt one).
	Bin string
	// Data is the --data directory.
	Data string
	// On names the front ends to listen on 127.0.0.1:0 ("s3", "nfs",
	// "iscsi", "admin"); every other --X-addr flag that `serve --help`
	// lists is set to "off", so a front end added later does not open a
	// port behind a test's back.
	On []string
	// Args are extra arguments after the generated ones.
	Args []string
	// Env is added to the environment. TRISTORE_* and XDG_CONFIG_HOME of
	// the test's own environment are not passed on (a developer's settings
	// must not change a test); XDG_CONFIG_HOME is a fresh temporary
	// directory.
	Env []string
	// Ready bounds the wait for the ready file (default 60 s: a loaded
	// 2-core machine).
	Ready time.Duration
}

// Served is a running `tristore serve`. Its output goes to a file (not a
// pipe, so Wait returns as soon as serve exits even if something it
// started still holds the descriptor). t.Cleanup stops it: SIGTERM, then
// SIGKILL after 30 s.
type Served struct {
	// Addrs are the listening addresses from the ready file, by front end.
	Addrs map[string]string
	cmd   *exec.Cmd
	log   string
	done  chan struct{}
	once  sync.Once
	err   error
}

var addrFlag = regexp.MustCompile(`--([a-z0-9]+)-addr\b`)

var serveHelp sync.Map // binary path -> []string (the --X-addr flags)

// addrFlags lists the --X-addr flags of bin's `serve` (once per binary).
func addrFlags(t testing.TB, bin string, env []string) []string {
	if v, ok := serveHelp.Load(bin); ok {
		return v.([]string)
	}
	help := exec.Command(bin, "serve", "--help")
	help.Env = env
	out, err := help.CombinedOutput()
	if err != nil {
		t.Fatalf("tristore serve --help: %v\n%s", err, out)
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
	return names
}

// StartServe runs `tristore serve` as o says and waits for its ready file.
// It fails t if serve exits first or is not ready in time, with its log.
func StartServe(t testing.TB, o ServeOptions) *Served {
	t.Helper()
	tmp := t.TempDir()
	ready := filepath.Join(tmp, "ready.json")
	logPath := filepath.Join(tmp, "serve.log")
	args := []string{"serve", "--data", o.Data, "--ready-file", ready}
	env := []string{"XDG_CONFIG_HOME=" + filepath.Join(tmp, "config")}
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
	for _, f := range addrFlags(t, o.Bin, env) {
		addr := "off"
		if on[f] {
			addr = "127.0.0.1:0"
		}
		args = append(args, "--"+f+"-addr", addr)
	}
	args = append(args, o.Args...)
	cmd := exec.Command(o.Bin, args...)
	cmd.Env = env
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close() // the child has its own descriptor
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &Served{cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() { s.err = cmd.Wait(); close(s.done) }()
	t.Cleanup(func() {
		if !s.Stop() {
			t.Errorf("tristore serve did not stop within 30 s of SIGTERM; killed")
		}
	})
	wait := o.Ready
	if wait == 0 {
		wait = 60 * time.Second
	}
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(ready); err == nil && json.Unmarshal(b, &s.Addrs) == nil && s.ready(o.On) {
			return s
		}
		select {
		case <-s.done:
			t.Fatalf("tristore serve exited before it was ready (%v):\n%s", s.err, s.Log())
		case <-time.After(50 * time.Millisecond):
		}
	}
	t.Fatalf("tristore serve not ready after %v:\n%s", wait, s.Log())
	return nil
}

// ready reports whether every front end asked for has an address.
func (s *Served) ready(on []string) bool {
	for _, f := range on {
		if s.Addrs[f] == "" {
			return false
		}
	}
	return true
}

// Log returns what serve has written so far.
func (s *Served) Log() string {
	b, _ := os.ReadFile(s.log)
	return string(b)
}

// LogPath is the file serve writes its log to.
func (s *Served) LogPath() string { return s.log }

// PID is the server's process ID.
func (s *Served) PID() int { return s.cmd.Process.Pid }

// Done is closed when serve has exited.
func (s *Served) Done() <-chan struct{} { return s.done }

// Err is serve's exit error; valid after Done is closed.
func (s *Served) Err() error { return s.err }

// Signal sends sig to serve (SIGSTOP/SIGCONT for stalls).
func (s *Served) Signal(sig os.Signal) error { return s.cmd.Process.Signal(sig) }

// Kill is a crash: SIGKILL, then wait (up to 30 s) until the process is
// gone. Idempotent.
func (s *Served) Kill() {
	select {
	case <-s.done:
		return
	default:
	}
	s.cmd.Process.Signal(syscall.SIGCONT) // a stopped process still dies, but be explicit
	s.cmd.Process.Signal(syscall.SIGKILL)
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
	}
}

// Stop asks for a graceful shutdown (SIGTERM) and waits up to 30 s; it
// reports false (and kills serve) when that was not enough. Idempotent.
func (s *Served) Stop() bool {
	select {
	case <-s.done:
		return true
	default:
	}
	s.cmd.Process.Signal(syscall.SIGCONT)
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
		return true
	case <-time.After(30 * time.Second):
		s.Kill()
		return false
	}
}

// ExitedCleanly reports whether serve exited with status 0 (after Stop).
func (s *Served) ExitedCleanly() bool {
	select {
	case <-s.done:
		return s.err == nil
	default:
		return false
	}
}
