package powerloss

import (
	"testing"
	"time"

	"github.com/tristore/tristore/internal/testutil"
)

// TestUnmountWithCopyInOtherNamespace: a process that unshared its mount
// namespace while the file system was mounted keeps a copy of the mount
// (test/powerloss once hung 14 minutes in Unmount: a `tristore serve`
// started by a benchmark script under unshare --mount held one). Unmount still returns, within its bound, and
// the copy's connection is aborted.
func TestUnmountWithCopyInOtherNamespace(t *testing.T) {
	testutil.NeedRoot(t, "mounts FUSE directly and unshares a mount namespace")
	testutil.NeedFUSE(t)
	old := unmountWait
	unmountWait = time.Second
	t.Cleanup(func() { unmountWait = old })

	dir := t.TempDir()
	f := New()
	if err := f.Mount(dir); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Unmount() })

	testutil.HoldMountCopy(t)

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
