package testutil

import (
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
)

type emptyRoot struct{ fs.Inode }

// TestUnmountFUSEWithCopyInOtherNamespace: with a copy of the mount held
// in another mount namespace, go-fuse's Unmount alone never returns;
// UnmountFUSE returns within its bound and leaves dir unmounted.
func TestUnmountFUSEWithCopyInOtherNamespace(t *testing.T) {
	NeedRoot(t, "mounts FUSE")
	NeedFUSE(t)
	old := fuseUnmountWait
	fuseUnmountWait = time.Second
	t.Cleanup(func() { fuseUnmountWait = old })
	dir := t.TempDir()
	srv, err := fs.Mount(dir, &emptyRoot{}, &fs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	HoldMountCopy(t)
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- UnmountFUSE(dir, srv.Unmount, time.Second) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("unmounted after %v", time.Since(start).Round(time.Millisecond))
	case <-time.After(20 * time.Second):
		t.Fatal("UnmountFUSE still waits 20 s after it began (bound: 2 x 1 s)")
	}
	if IsMounted(dir) {
		t.Errorf("%s still mounted", dir)
	}
}
