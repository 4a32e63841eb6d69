package powerloss

import (
	"bufio"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/tristore/tristore/internal/testutil"
)

// TestUnmountWithCopyInOtherNamespace: a process that unshared its mount
// namespace while the file system was mounted keeps a copy of the mount
// (test/powerloss once hung 14 minutes in Unmount: a `tristore serve` run
// by someone else held one). Unmount still returns, within its bound, and
// the copy's connection is aborted.
func TestUnmountWithCopyInOtherNamespace(t *testing.T) {
	testutil.NeedRoot(t, "mounts FUSE directly and unshares a mount namespace")
	testutil.NeedFUSE(t)
	unshare := testutil.NeedCmd(t, "unshare")
	old := unmountWait
	unmountWait = time.Second
	t.Cleanup(func() { unmountWait = old })

	dir := t.TempDir()
	f := New()
	if err := f.Mount(dir); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Unmount() })

	// The copy's holder: a new mount namespace, then it waits (at most a
	// minute; killed by PID when the test ends).
	cmd := exec.Command(unshare, "--mount", "sh", "-c", "echo ready; exec sleep 60")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		syscall.Kill(cmd.Process.Pid, syscall.SIGKILL)
		cmd.Wait()
	})
	ready := make(chan bool, 1)
	go func() { ready <- bufio.NewScanner(out).Scan() }()
	select {
	case ok := <-ready:
		if !ok {
			t.Fatal("unshare --mount did not start")
		}
	case <-time.After(30 * time.Second):
		t.Fatal("unshare --mount not ready within 30 s")
	}

	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- f.Unmount() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Unmount: %v", err)
		}
		t.Logf("Unmount returned after %v", time.Since(start).Round(time.Millisecond))
	case <-time.After(20 * time.Second):
		t.Fatal("Unmount still waits 20 s after it began (bound: 2 x 1 s)")
	}
}
