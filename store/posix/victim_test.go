package posix_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tristore/tristore/store"
	"github.com/tristore/tristore/store/posix"
)

// TestOverwriteFreesOldFileAfterPut: the file an overwriting PUT replaces
// is released after the PUT returned (by the background drainer), not in
// its rename: with the drainer held, the PUT still returns, the new content
// is there, and the held descriptor is the old file, already without a
// name (nlink 0). Fails when the PUT does not hold the old file (the hook
// never runs) or when its release is on the PUT's path (the PUT waits).
func TestOverwriteFreesOldFileAfterPut(t *testing.T) {
	ctx := context.Background()
	b := open(t, posix.Options{})
	if err := b.CreateBucket(ctx, "bkt", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Put(ctx, "bkt", "d/k", strings.NewReader("old"), 3, store.ObjectMeta{}); err != nil {
		t.Fatal(err)
	}
	var old unix.Stat_t
	if err := unix.Stat(filepath.Join(b.Root(), "bkt", "d", "k"), &old); err != nil {
		t.Fatal(err)
	}
	type held struct{ st unix.Stat_t }
	got := make(chan held, 16)
	release := make(chan struct{})
	posix.SetHookVictimClose(func(fd int) {
		var st unix.Stat_t
		unix.Fstat(fd, &st)
		got <- held{st}
		<-release
	})
	defer posix.SetHookVictimClose(nil)
	defer close(release)

	done := make(chan error, 1)
	go func() {
		_, err := b.Put(ctx, "bkt", "d/k", strings.NewReader("new!"), 4, store.ObjectMeta{})
		done <- err
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the overwriting PUT did not return while the release of the old file was held")
	}
	if s, _ := readAll(t, b, "d/k"); s != "new!" {
		t.Fatalf("after the overwrite: %q", s)
	}
	select {
	case h := <-got:
		if h.st.Ino != old.Ino || h.st.Dev != old.Dev {
			t.Errorf("held inode %d, want the replaced file's %d", h.st.Ino, old.Ino)
		}
		if h.st.Nlink != 0 {
			t.Errorf("held file still has %d names", h.st.Nlink)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the replaced file was not handed to the background release")
	}
}
