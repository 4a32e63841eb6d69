package testutil

import (
	"bufio"
	"errors"
	"fmt"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/tristore/tristore/internal/fusectl"
)

// fuseUnmountWait bounds each wait for an in-process FUSE server's
// Unmount before its connection is aborted (fusectl.Unmount).
var fuseUnmountWait = 10 * time.Second

// UnmountFUSE unmounts the in-process FUSE file system mounted at dir;
// unmount is its server's Unmount (go-fuse's, blockfile's). An unmount
// that fails (EBUSY while a loop device or udev still holds a file) is
// retried for up to retryFor; if it still fails, dir is detached lazily
// and its connection aborted, so no mount and no waiting server is left,
// and the error is returned. Every call of unmount is bounded
// (fusectl.Unmount: a copy of the mount in another mount namespace would
// otherwise keep the server waiting forever).
func UnmountFUSE(dir string, unmount func() error, retryFor time.Duration) error {
	conn := fusectl.Conn(dir)
	var err error
	for deadline, i := time.Now().Add(retryFor), 0; i < 10000; i++ {
		if err = fusectl.Unmount(unmount, conn, fuseUnmountWait); err == nil {
			return nil
		}
		if errors.Is(err, fusectl.ErrStuck) || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	syscall.Unmount(dir, syscall.MNT_DETACH)
	fusectl.Abort(conn)
	return fmt.Errorf("unmount FUSE %s (retried for %v; detached lazily): %w", dir, retryFor, err)
}

// HoldMountCopy starts a process in a new mount namespace (unshare
// --mount), which holds a copy of every mount there is now, as a
// concurrent benchmark script's would; it waits at most 30 s for it to
// start, lives at most a minute, and is killed by PID when the test ends.
// For tests of unmounting while such a copy exists.
func HoldMountCopy(t testing.TB) {
	t.Helper()
	NeedRoot(t, "unshare --mount")
	cmd := exec.Command(NeedCmd(t, "unshare"), "--mount", "sh", "-c", "echo ready; exec sleep 60")
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
}
