package inodepool_test

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tristore/tristore/store/inodepool"
	"golang.org/x/sys/unix"
)

func TestTakeLinkRefill(t *testing.T) {
	dir := t.TempDir()
	dfd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(dfd)
	p := inodepool.New(dfd, 0o600)
	if p == nil {
		t.Fatalf("no pool in %s (no O_TMPFILE?)", dir)
	}
	seen := map[uint64]bool{}
	var held []int // kept open: a closed unnamed file's inode number is free again
	defer func() {
		for _, fd := range held {
			unix.Close(fd)
		}
	}()
	for i := range 2 * inodepool.Size {
		fd := -1
		for range 500 { // refilled in the background: bounded wait
			if fd = p.Take(); fd >= 0 {
				break
			}
			time.Sleep(2 * time.Millisecond)
		}
		if fd < 0 {
			t.Fatalf("take %d: pool not refilled within 1 s", i)
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			t.Fatal(err)
		}
		if st.Mode&unix.S_IFMT != unix.S_IFREG || st.Nlink != 0 || st.Size != 0 || seen[st.Ino] {
			t.Fatalf("take %d: mode %o nlink %d size %d ino %d (seen before: %v); want a new unnamed empty regular file",
				i, st.Mode, st.Nlink, st.Size, st.Ino, seen[st.Ino])
		}
		seen[st.Ino] = true
		if i == 0 {
			if _, err := unix.Write(fd, []byte("data")); err != nil {
				t.Fatal(err)
			}
			if err := inodepool.Link(fd, dfd, "named"); err != nil {
				t.Fatal(err)
			}
			if b, err := os.ReadFile(filepath.Join(dir, "named")); err != nil || string(b) != "data" {
				t.Fatalf("linked file reads %q, %v", b, err)
			}
		}
		held = append(held, fd)
	}
	p.Close()
	if ents, _ := os.ReadDir(dir); len(ents) != 1 {
		t.Fatalf("directory holds %d names, want only the linked one", len(ents))
	}
	var nilPool *inodepool.Pool
	if fd := nilPool.Take(); fd != -1 {
		t.Fatalf("nil pool gave fd %d", fd)
	}
	nilPool.Close()
}

// TestNoPoolUnderDefaultACL: a file made in the pool's directory would
// inherit that directory's default ACL, not the one of where it is linked.
func TestNoPoolUnderDefaultACL(t *testing.T) {
	dir := t.TempDir()
	// system.posix_acl_default: version 2, entries USER_OBJ rwx, GROUP_OBJ r-x, OTHER ---.
	acl := []byte{2, 0, 0, 0, 1, 0, 7, 0, 0xff, 0xff, 0xff, 0xff, 4, 0, 5, 0, 0xff, 0xff, 0xff, 0xff, 0x20, 0, 0, 0, 0xff, 0xff, 0xff, 0xff}
	if err := unix.Setxattr(dir, "system.posix_acl_default", acl, 0); err != nil {
		t.Fatalf("setting a default ACL on %s: %v", dir, err)
	}
	dfd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(dfd)
	if !inodepool.HasDefaultACL(dfd) {
		t.Fatal("HasDefaultACL is false for a directory with a default ACL")
	}
	if p := inodepool.New(dfd, 0o600); p != nil {
		p.Close()
		t.Fatal("a pool was made in a directory with a default ACL")
	}
}

// TestQuietRefill: a NewQuiet pool makes no file while files are being
// taken (the caller is busy with the one it took), only once nothing was
// taken for its quiet time; and at once when it runs low.
func TestQuietRefill(t *testing.T) {
	dir := t.TempDir()
	dfd, err := unix.Open(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(dfd)
	const quiet = 700 * time.Millisecond
	p := inodepool.NewQuiet(dfd, 0o600, quiet)
	if p == nil {
		t.Fatalf("no pool in %s (no O_TMPFILE?)", dir)
	}
	defer p.Close()
	if p.Ready() != inodepool.Size {
		t.Fatalf("a new pool holds %d files, want %d", p.Ready(), inodepool.Size)
	}
	var held []int
	defer func() {
		for _, fd := range held {
			unix.Close(fd)
		}
	}()
	take := func() {
		t.Helper()
		fd := p.Take()
		if fd < 0 {
			t.Fatal("pool empty")
		}
		held = append(held, fd)
	}
	// Takes 100 ms apart: none refilled meanwhile (the quiet restarts at each).
	t0 := time.Now()
	for range 3 {
		take()
		time.Sleep(100 * time.Millisecond)
	}
	if n := p.Ready(); n != inodepool.Size-3 && time.Since(t0) < quiet {
		t.Fatalf("%d files ready 100 ms after the third take, want %d: the pool refilled while files were being taken", n, inodepool.Size-3)
	}
	// Quiet: refilled.
	waitReady(t, p, inodepool.Size, 5*time.Second)
	// Low (a quarter left): refilled at once, without the quiet time.
	for p.Ready() > inodepool.Size/4 {
		take()
	}
	waitReady(t, p, inodepool.Size/4+1, quiet/2)
}

// waitReady waits up to d for at least n files in p.
func waitReady(t *testing.T, p *inodepool.Pool, n int, d time.Duration) {
	t.Helper()
	for end := time.Now().Add(d); p.Ready() < n; {
		if time.Now().After(end) {
			t.Fatalf("%d files ready after %v, want %d", p.Ready(), d, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
