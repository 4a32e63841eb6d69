package testutil

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Running external commands from tests: every command is bounded in time,
// its combined output is kept, and a failure says which command failed,
// how, and what it printed.

// ErrTimedOut is wrapped by Exec's error when the command's own time bound
// ran out (not its context's).
var ErrTimedOut = errors.New("timed out")

// execWaitDelay bounds the wait for output pipes after the command was
// killed or has exited (a grandchild that survives it may hold them).
const execWaitDelay = 10 * time.Second

// Exec runs name with args to its end, bounded by timeout and by ctx, in
// dir ("": the current directory) with env (nil: this process's
// environment), and returns its combined output. The command runs in a
// process group of its own; when a bound runs out the whole group is
// killed (a program stuck on a dead mount goes with its children) and
// Exec waits at most 10 s more for pipes a survivor still holds. The
// error names the command and its arguments and wraps exec's error, and
// ErrTimedOut when timeout, not ctx, ran out.
func Exec(ctx context.Context, timeout time.Duration, dir string, env []string, name string, args ...string) (string, error) {
	cctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	var cmd *exec.Cmd
	if dir == "" {
		cmd = exec.CommandContext(cctx, name, args...)
	} else {
		// The shell enters dir after the exec, not the forked child
		// before it: Go's forkExec holds a P in the parent until the
		// child has exec'd, so a child whose chdir waits on a FUSE mount
		// served by this very process deadlocks as soon as a garbage
		// collection needs every P (seen: TestEditorFsync hung the CI
		// run for 18 minutes in chdir, Start never returned, so no time
		// bound could fire).
		cmd = exec.CommandContext(cctx, "/bin/sh", append([]string{"-c", `cd -- "$0" && exec "$@"`, dir, name}, args...)...)
	}
	if env != nil {
		cmd.Env = env
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = execWaitDelay
	err := cmd.Run()
	if err == nil {
		return out.String(), nil
	}
	cmdline := strings.Join(append([]string{name}, args...), " ")
	if cctx.Err() != nil && ctx.Err() == nil {
		return out.String(), fmt.Errorf("%s: %w (%w after %v)", cmdline, err, ErrTimedOut, timeout)
	}
	return out.String(), fmt.Errorf("%s: %w", cmdline, err)
}

// TryRun runs name with args (Exec: at most timeout, in the current
// directory and environment) and returns its combined output and error;
// for commands whose failure the test handles itself.
func TryRun(timeout time.Duration, name string, args ...string) (string, error) {
	return Exec(context.Background(), timeout, "", nil, name, args...)
}

// Run runs name with args (TryRun) and returns its combined output as
// printed (trim it for a single value). A failure, a time-out included,
// fails t with the command, the error and the whole output.
func Run(t testing.TB, timeout time.Duration, name string, args ...string) string {
	t.Helper()
	return RunIn(t, timeout, "", nil, name, args...)
}

// RunIn is Run in directory dir ("": the current one) with environment
// env (nil: this process's).
func RunIn(t testing.TB, timeout time.Duration, dir string, env []string, name string, args ...string) string {
	t.Helper()
	out, err := Exec(context.Background(), timeout, dir, env, name, args...)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return out
}

// Quiet runs a cleanup command (at most 30 s) and ignores its failure:
// what it removes may be gone already.
func Quiet(name string, args ...string) {
	TryRun(30*time.Second, name, args...)
}
