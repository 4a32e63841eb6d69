// Package netemlink tests `tristore netem` end to end as root: the built
// binary leaves nothing behind after a normal run, a failing child and a
// SIGTERM; and the seed 000 effect (parallel connections keep a lossy,
// long link full) appears with the S3 front end and aws-sdk-go-v2 across
// the `realistic` link.
package netemlink

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/tristore/tristore/internal/testutil"
)

var binPath string

func TestMain(m *testing.M) {
	code := func() int {
		dir, err := os.MkdirTemp("", "netemlink-")
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		defer os.RemoveAll(dir)
		binPath = filepath.Join(dir, "tristore")
		_, file, _, _ := runtime.Caller(0)
		root := filepath.Join(filepath.Dir(file), "..", "..")
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/tristore")
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "building tristore: %v\n%s", err, out)
			return 1
		}
		return m.Run()
	}()
	os.Exit(code)
}

func needLink(t *testing.T) {
	t.Helper()
	testutil.NeedRoot(t, "network namespaces and /dev/net/tun")
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		t.Skipf("needs /dev/net/tun: %v", err)
	}
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

func run(t *testing.T, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(binPath, args...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
	case <-time.After(60 * time.Second):
		cmd.Process.Kill()
		<-done
		t.Fatalf("tristore %v did not finish:\n%s", args, out.String())
	}
	return out.String(), cmd.ProcessState.ExitCode()
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
	cmd := exec.Command(binPath, "netem", "run", "--name", name, "--server-cmd", "sleep "+marker, "--", "sleep", "3600.4")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-done
		}
	}()
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
		t.Fatalf("link/child never came up:\n%s", out.String())
	}
	if err := cmd.Process.Signal(syscallSIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatalf("netem run ignored SIGTERM:\n%s", out.String())
	}
	if code := cmd.ProcessState.ExitCode(); code == 0 {
		t.Errorf("exit 0 after a signal:\n%s", out.String())
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
