package soak

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/tristore/tristore/internal/testutil"
)

const (
	accessKey = "SOAKTESTACCESSKEY001"
	secretKey = "soaktestsecretkey00000000000000000000001"
)

// server is the one `tristore serve` every workload talks to. The chaos
// loop kills, restarts and stalls it; it is restarted on the same
// addresses (fixed ports) so the clients can reconnect.
type server struct {
	bin, data, cfgDir, ready, logPath string
	netns                             string // server namespace path, "" = host
	addr                              map[string]string

	sup     *supervisor
	mu      sync.Mutex
	cur     int  // pid of the last serve started
	stopped bool // SIGSTOPped
	starts  int
}

// freePort returns a port on 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// newServer picks the addresses: free ports on 127.0.0.1, or the
// standard ports on the server side of an emulated link (a namespace of
// its own, so nothing else uses them).
func newServer(sup *supervisor, bin, dir, host, netns string) (*server, error) {
	s := &server{sup: sup, bin: bin, data: filepath.Join(dir, "data"), cfgDir: filepath.Join(dir, "config"),
		ready: filepath.Join(dir, "ready.json"), logPath: filepath.Join(dir, "serve.log"), netns: netns,
		addr: map[string]string{}}
	for _, d := range []string{s.data, s.cfgDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return nil, err
		}
	}
	std := map[string]int{"s3": 9000, "nfs": 2049, "iscsi": 3260}
	for name, p := range std {
		if netns == "" {
			var err error
			if p, err = freePort(); err != nil {
				return nil, err
			}
		}
		s.addr[name] = net.JoinHostPort(host, strconv.Itoa(p))
	}
	return s, nil
}

// tristore runs a one-shot CLI command (volume create, ...) with the
// server's config.
func (s *server) tristore(ctx context.Context, args ...string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, s.bin, args...)
	cmd.Env = s.env()
	return cmd.CombinedOutput()
}

func (s *server) env() []string {
	return append(os.Environ(), "XDG_CONFIG_HOME="+s.cfgDir, "HOME="+s.cfgDir,
		"TRISTORE_ACCESS_KEY="+accessKey, "TRISTORE_SECRET_KEY="+secretKey)
}

// start launches serve (through the supervisor) and waits (at most
// timeout) for its ready file. It returns how long that took.
func (s *server) start(timeout time.Duration) (time.Duration, error) {
	t0 := time.Now()
	os.Remove(s.ready)
	args := []string{"serve", "--data", s.data, "--admin-addr", "off", "--ready-file", s.ready,
		"--s3-addr", s.addr["s3"], "--nfs-addr", s.addr["nfs"], "--iscsi-addr", s.addr["iscsi"]}
	argv := append([]string{s.bin}, args...)
	if s.netns != "" {
		// The default export admits 127.0.0.0/8 only; the client side of
		// the link is 192.0.2.1.
		argv = append(argv, "--nfs-export", "/=rw,clients=127.0.0.0/8+192.0.2.0/24,no_root_squash")
		argv = append([]string{"nsenter", "--net=" + s.netns, "--"}, argv...)
	}
	if logf, err := os.OpenFile(s.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644); err == nil {
		fmt.Fprintf(logf, "=== soak: start %d at %s\n", s.starts+1, t0.Format(time.RFC3339Nano))
		logf.Close()
	}
	r, err := s.sup.call(superReq{Op: "start", Argv: argv, Env: s.env(), Log: s.logPath})
	if err != nil {
		return 0, err
	}
	s.mu.Lock()
	s.cur, s.stopped = r.Pid, false
	s.starts++
	s.mu.Unlock()
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(s.ready); err == nil && json.Valid(b) {
			return time.Since(t0), nil
		}
		if st, err := s.sup.call(superReq{Op: "status", Pid: r.Pid}); err == nil && st.Exited {
			return 0, fmt.Errorf("serve exited during start (%s); log: %s", st.Status, s.logTail(2000))
		}
		time.Sleep(50 * time.Millisecond)
	}
	return 0, fmt.Errorf("serve not ready after %v; log: %s", timeout, s.logTail(2000))
}

func (s *server) logTail(n int) string {
	b, _ := os.ReadFile(s.logPath)
	if len(b) > n {
		b = b[len(b)-n:]
	}
	return string(b)
}

// pid of the running server, 0 if none.
func (s *server) pid() int {
	s.mu.Lock()
	pid := s.cur
	s.mu.Unlock()
	if pid == 0 {
		return 0
	}
	if r, err := s.sup.call(superReq{Op: "status", Pid: pid}); err != nil || r.Exited {
		return 0
	}
	return pid
}

// kill9 SIGKILLs the server and waits for it to be reaped.
func (s *server) kill9() error {
	s.mu.Lock()
	pid := s.cur
	s.mu.Unlock()
	if pid == 0 {
		return nil
	}
	_, err := s.sup.call(superReq{Op: "kill9", Pid: pid})
	return err
}

// signal sends sig (SIGSTOP/SIGCONT/SIGQUIT) to the server's process group.
func (s *server) signal(sig syscall.Signal) error {
	s.mu.Lock()
	pid := s.cur
	s.stopped = sig == syscall.SIGSTOP
	s.mu.Unlock()
	if pid == 0 {
		return fmt.Errorf("no server")
	}
	_, err := s.sup.call(superReq{Op: "signal", Pid: pid, Sig: int(sig)})
	return err
}

// shutdown ends the server politely (SIGCONT first, in case it is
// stopped), then by SIGKILL after 40 s; it fails unless SIGTERM was
// enough and the exit status 0.
func (s *server) shutdown() error {
	s.mu.Lock()
	pid := s.cur
	s.mu.Unlock()
	if pid == 0 {
		return nil
	}
	r, err := s.sup.call(superReq{Op: "term", Pid: pid})
	if err != nil {
		return err
	}
	if r.Status != "exit status 0" {
		return fmt.Errorf("serve exited with %s after SIGTERM", r.Status)
	}
	return nil
}

// proc is a long-running helper process (a mount, the netem link) with
// its output in a log file.
type proc struct {
	name   string
	cmd    *exec.Cmd
	exited chan struct{}
	log    string
}

func startProc(name, logPath string, env []string, argv ...string) (*proc, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &proc{name: name, cmd: cmd, exited: make(chan struct{}), log: logPath}
	go func() { cmd.Wait(); close(p.exited) }()
	return p, nil
}

func (p *proc) alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

func (p *proc) output() string {
	b, _ := os.ReadFile(p.log)
	if len(b) > 3000 {
		b = b[len(b)-3000:]
	}
	return string(b)
}

// stop sends sig and waits up to wait; then SIGKILLs the group. It
// reports an error if sig was not enough or the exit status was not 0.
func (p *proc) stop(sig syscall.Signal, wait time.Duration) error {
	if p == nil {
		return nil
	}
	if !p.alive() {
		if p.cmd.ProcessState != nil && !p.cmd.ProcessState.Success() {
			return fmt.Errorf("%s had exited: %s", p.name, p.cmd.ProcessState)
		}
		return nil
	}
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.exited:
		if !p.cmd.ProcessState.Success() {
			return fmt.Errorf("%s exited with %s after %v: %s", p.name, p.cmd.ProcessState, sig, p.output())
		}
		return nil
	case <-time.After(wait):
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
	}
	return fmt.Errorf("%s (pid %d) did not exit %v after %v; killed: %s", p.name, p.cmd.Process.Pid, wait, sig, p.output())
}

// mountsUnder lists mount points at or below dir.
func mountsUnder(dir string) []string {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 4 && (f[4] == dir || strings.HasPrefix(f[4], dir+"/")) {
			out = append(out, f[4])
		}
	}
	return out
}

// startMount runs `tristore mount URL DIR` (in netns if set) and waits
// until DIR is mounted (and, for iSCSI, DIR/lun has the LUN's size).
func startMount(ctx context.Context, s *server, name, url, dir, logPath, netns string, wantFile string, wantSize int64) (*proc, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	argv := []string{s.bin, "mount", url, dir}
	if netns != "" {
		argv = append([]string{"nsenter", "--net=" + netns, "--"}, argv...)
	}
	p, err := startProc(name, logPath, s.env(), argv...)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		if testutil.IsMounted(dir) {
			if wantFile == "" {
				return p, nil
			}
			if st, err := os.Stat(filepath.Join(dir, wantFile)); err == nil && st.Size() == wantSize {
				return p, nil
			}
		}
		if !p.alive() {
			return p, fmt.Errorf("%s exited before mounting: %s", name, p.output())
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			p.stop(syscall.SIGKILL, 10*time.Second)
			return p, fmt.Errorf("%s: %s not mounted after 90 s: %s", name, dir, p.output())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// run runs a command to its end (testutil.Exec: bounded by timeout and
// parent, in dir with env, killed with its process group) and returns its
// combined output; a command that ran out of time is an errHang, and the
// error carries the start of the output.
func run(parent context.Context, timeout time.Duration, dir string, env []string, name string, args ...string) (string, error) {
	out, err := testutil.Exec(parent, timeout, dir, env, name, args...)
	if errors.Is(err, testutil.ErrTimedOut) {
		err = fmt.Errorf("%w: %w", errHang, err)
	}
	if err != nil {
		return out, fmt.Errorf("%w: %s", err, clip(out, 600))
	}
	return out, nil
}

func clip(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}
