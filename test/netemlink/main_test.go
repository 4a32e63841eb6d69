// Package netemlink tests `tristore netem` end to end as root: the built
// binary leaves nothing behind after a normal run, a failing child and a
// SIGTERM; and the seed 000 effect (parallel connections keep a lossy,
// long link full) appears with the S3 front end and aws-sdk-go-v2 across
// the `realistic` link.
package netemlink

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tristore/tristore/internal/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

// bin returns the tristore binary, built once per test run.
func bin(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	return testutil.TristoreBin(ctx, t)
}

// proc is a tristore child process whose stdout and stderr are collected.
type proc struct {
	cmd    *exec.Cmd
	lines  chan string   // output lines as they come (dropped when nobody reads); closed at EOF
	exited chan struct{} // closed once the process is reaped and its output read
	mu     sync.Mutex
	out    strings.Builder
}

// startTristore starts the tristore binary with args; the process is
// killed and reaped when the test ends if it still runs.
func startTristore(t *testing.T, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(bin(t), args...), lines: make(chan string, 100), exited: make(chan struct{})}
	pr, pw := io.Pipe()
	p.cmd.Stdout, p.cmd.Stderr = pw, pw
	// Children that outlive a killed tristore keep the pipe open; do not
	// wait for them to reap it.
	p.cmd.WaitDelay = 10 * time.Second
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		defer close(p.lines)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			p.mu.Lock()
			p.out.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
			select {
			case p.lines <- sc.Text():
			default:
			}
		}
		io.Copy(io.Discard, pr) // after a scan error: never block the child
	}()
	go func() {
		p.cmd.Wait()
		pw.Close()
		<-scanned
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.cmd.Process.Kill()
		<-p.exited
	})
	return p
}

// output is what the process printed so far (all of it once exited is closed).
func (p *proc) output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// waitLine reads output lines until done returns true for one; it fails
// the test if the process exits first or timeout passes.
func (p *proc) waitLine(t *testing.T, timeout time.Duration, done func(line string) bool) {
	t.Helper()
	deadline := time.After(timeout)
	for {
		select {
		case l, ok := <-p.lines:
			if !ok {
				<-p.exited
				t.Fatalf("tristore %v exited:\n%s", p.cmd.Args[1:], p.output())
			}
			if done(l) {
				return
			}
		case <-deadline:
			t.Fatalf("tristore %v not ready within %v:\n%s", p.cmd.Args[1:], timeout, p.output())
		}
	}
}

// signal sends sig and waits up to 30 s for the process to exit.
func (p *proc) signal(t *testing.T, sig os.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.exited:
	case <-time.After(30 * time.Second):
		t.Fatalf("tristore %v ignored %v:\n%s", p.cmd.Args[1:], sig, p.output())
	}
}

func needLink(t *testing.T) {
	t.Helper()
	testutil.NeedRoot(t, "network namespaces and /dev/net/tun")
	testutil.NeedTUN(t)
	testutil.NeedCmd(t, "nsenter")
	testutil.NeedCmd(t, "chrt")
	testutil.NeedCmd(t, "ip")
}

// linkName is a unique namespace prefix attributed to this test process.
func linkName(t *testing.T) string {
	n := fmt.Sprintf("ts-%d-%s", os.Getpid(), strings.ToLower(strings.ReplaceAll(t.Name(), "/", "")))
	return n[:min(40, len(n))]
}

// leftovers reports namespaces named name* and processes whose command
// line contains marker.
func leftovers(t *testing.T, name, marker string) string {
	t.Helper()
	var msg []string
	out, err := exec.Command("ip", "netns", "list").CombinedOutput()
	if err != nil {
		t.Fatalf("ip netns list: %v %s", err, out)
	}
	if strings.Contains(string(out), name) {
		msg = append(msg, "namespaces: "+string(out))
	}
	links, _ := exec.Command("ip", "-o", "link").CombinedOutput()
	for _, l := range strings.Split(string(links), "\n") {
		if strings.Contains(l, name) || strings.Contains(l, "tsc0") || strings.Contains(l, "tss0") {
			msg = append(msg, "device: "+l)
		}
	}
	if marker != "" {
		ents, _ := os.ReadDir("/proc")
		for _, e := range ents {
			b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
			if err == nil && bytes.Contains(b, []byte(marker)) && !bytes.Contains(b, []byte("netem")) {
				msg = append(msg, "process "+e.Name()+": "+strings.ReplaceAll(string(b), "\x00", " "))
			}
		}
	}
	return strings.Join(msg, "\n")
}

// waitGone polls until nothing is left (teardown of children may take a moment).
func waitGone(t *testing.T, name, marker string) {
	t.Helper()
	var left string
	for i := 0; i < 100; i++ {
		if left = leftovers(t, name, marker); left == "" {
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Errorf("left behind:\n%s", left)
}

// run runs tristore with args to its end (at most 60 s) and returns its
// output and exit code.
func run(t *testing.T, args ...string) (string, int) {
	t.Helper()
	p := startTristore(t, args...)
	select {
	case <-p.exited:
	case <-time.After(60 * time.Second):
		p.cmd.Process.Kill()
		<-p.exited
		t.Fatalf("tristore %v did not finish:\n%s", args, p.output())
	}
	return p.output(), p.cmd.ProcessState.ExitCode()
}

func TestRunNormalLeavesNothing(t *testing.T) {
	needLink(t)
	testutil.NeedCmd(t, "ping")
	name := linkName(t)
	marker := "3600.1" + fmt.Sprint(os.Getpid())
	out, code := run(t, "netem", "run", "--name", name, "--delay", "2ms", "--json",
		"--server-cmd", "sleep "+marker, "--", "ping", "-n", "-c", "3", "-i", "0.05", "192.0.2.2")
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	if !strings.Contains(out, "3 received") || !strings.Contains(out, `"delivered_packets"`) {
		t.Errorf("output lacks ping result or JSON counters:\n%s", out)
	}
	waitGone(t, name, marker)
}

func TestRunFailingChildLeavesNothing(t *testing.T) {
	needLink(t)
	name := linkName(t)
	marker := "3600.2" + fmt.Sprint(os.Getpid())
	out, code := run(t, "netem", "run", "--name", name, "--preset", "realistic",
		"--server-cmd", "sleep "+marker, "--", "sh", "-c", "exit 3")
	if code != 3 {
		t.Fatalf("exit %d, want the child's 3:\n%s", code, out)
	}
	waitGone(t, name, marker)
}

func TestRunSIGTERMLeavesNothing(t *testing.T) {
	needLink(t)
	name := linkName(t)
	marker := "3600.3" + fmt.Sprint(os.Getpid())
	p := startTristore(t, "netem", "run", "--name", name, "--server-cmd", "sleep "+marker, "--", "sleep", "3600.4")
	// Wait for the link to exist, then signal.
	up := false
	for i := 0; i < 200 && !up; i++ {
		_, err := os.Stat("/run/netns/" + name + "-c")
		up = err == nil && leftovers(t, "no-such-ns", "3600.4") != ""
		if !up {
			time.Sleep(50 * time.Millisecond)
		}
	}
	if !up {
		t.Fatalf("link/child never came up:\n%s", p.output())
	}
	p.signal(t, syscallSIGTERM)
	if code := p.cmd.ProcessState.ExitCode(); code == 0 {
		t.Errorf("exit 0 after a signal:\n%s", p.output())
	}
	waitGone(t, name, marker)
	waitGone(t, name, "3600.4")
}

func TestRunRefusesBadSettings(t *testing.T) {
	needLink(t)
	name := linkName(t)
	for _, args := range [][]string{
		{"--loss", "1.5"}, {"--rate", "-5mbit"}, {"--queue", "100"}, {"--delay", "-1ms"}, {"--preset", "moon"},
	} {
		out, code := run(t, append(append([]string{"netem", "run", "--name", name}, args...), "--", "true")...)
		if code == 0 || !strings.Contains(out, "invalid setting") {
			t.Errorf("%v: exit %d, output %q", args, code, out)
		}
		if _, err := os.Stat("/run/netns/" + name + "-c"); err == nil {
			t.Errorf("%v: a namespace was created", args)
		}
	}
}

func TestCleanupRemovesLeftovers(t *testing.T) {
	needLink(t)
	// A namespace of a dead netem process (pid 4194304 is above pid_max).
	name := "ts-4194304-left"
	if out, err := exec.Command("ip", "netns", "add", name+"-c").CombinedOutput(); err != nil {
		t.Fatalf("ip netns add: %v %s", err, out)
	}
	defer exec.Command("ip", "netns", "del", name+"-c").Run()
	out, code := run(t, "netem", "cleanup")
	if code != 0 || !strings.Contains(out, name+"-c") {
		t.Errorf("cleanup: exit %d:\n%s", code, out)
	}
	waitGone(t, name, "")
}

func TestPresetsAndProxyHelp(t *testing.T) {
	out, code := run(t, "netem", "presets")
	if code != 0 || !strings.Contains(out, "realistic") || !strings.Contains(out, "0.1%") {
		t.Errorf("presets: exit %d:\n%s", code, out)
	}
}
