package testutil

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestTryRunFailure: a failing command's output (both streams) comes back
// and the error names the command and wraps its exit status.
func TestTryRunFailure(t *testing.T) {
	out, err := TryRun(10*time.Second, "sh", "-c", "echo to-out; echo to-err >&2; exit 3")
	if !strings.Contains(out, "to-out") || !strings.Contains(out, "to-err") {
		t.Errorf("output %q lacks a stream", out)
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("error %v: want exit status 3", err)
	}
	if !strings.HasPrefix(err.Error(), "sh -c echo to-out") {
		t.Errorf("error %q does not name the command", err)
	}
	if errors.Is(err, ErrTimedOut) {
		t.Errorf("error %v claims a time-out", err)
	}
}

// TestTryRunTimeoutKillsGroup: when the bound runs out the command and
// the child it started (which holds the output pipe) are killed, TryRun
// returns soon after the bound, and the error says it timed out.
func TestTryRunTimeoutKillsGroup(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "child.pid")
	start := time.Now()
	out, err := TryRun(500*time.Millisecond, "sh", "-c", "sleep 60 & echo $! > "+pidFile+"; echo started; wait")
	took := time.Since(start)
	if !errors.Is(err, ErrTimedOut) {
		t.Fatalf("error %v (output %q): want ErrTimedOut", err, out)
	}
	if !strings.Contains(out, "started") {
		t.Errorf("output before the time-out lost: %q", out)
	}
	if took > 5*time.Second {
		t.Errorf("returned %v after a 500 ms bound", took)
	}
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); syscall.Kill(pid, 0) == nil; time.Sleep(20 * time.Millisecond) {
		if zombie(pid) {
			break
		}
		if time.Now().After(deadline) {
			syscall.Kill(pid, syscall.SIGKILL)
			t.Fatalf("the command's child %d still runs after the time-out", pid)
		}
	}
}

// zombie reports whether pid has exited and waits for its parent (init)
// to reap it.
func zombie(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return true
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i > 0 && len(s) > i+2 && s[i+2] == 'Z'
}

// TestRunInDirEnv: RunIn runs in dir with env and returns the output as
// printed.
func TestRunInDirEnv(t *testing.T) {
	dir := t.TempDir()
	got := RunIn(t, 10*time.Second, dir, []string{"X=42"}, "sh", "-c", "echo; pwd; echo $X; echo")
	if d, _ := filepath.EvalSymlinks(dir); got != "\n"+d+"\n42\n\n" {
		t.Errorf("got %q, want %q", got, "\n"+d+"\n42\n\n")
	}
}
