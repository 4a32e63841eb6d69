package nfsclient

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tristore/tristore/client/nfs"
	"github.com/tristore/tristore/fusefs/nfstree"
	"github.com/tristore/tristore/internal/testutil"
)

// testRenameOverOpen: the write-temp-then-rename save of editors, package
// managers and config reloaders, with a reader holding the old file open.
// The old descriptor must keep reading the old contents (the mount
// silly-renames the replaced file, as the Linux NFS client does), fsync and
// close must succeed, the hidden file must be gone after the last close,
// and a new open must see the new contents.
func testRenameOverOpen(t *testing.T, tg *target) {
	mnt, _ := mountFUSE(t, tg, nfstree.Options{})
	d := filepath.Join(mnt, "save")
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	a, tmp := filepath.Join(d, "config"), filepath.Join(d, "config.tmp")
	const oldData, newData = "old contents, version 1\n", "new contents\n"
	if err := os.WriteFile(a, []byte(oldData), 0o644); err != nil {
		t.Fatal(err)
	}
	old, err := os.OpenFile(a, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	if err := os.WriteFile(tmp, []byte(newData), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, a); err != nil {
		t.Fatalf("rename tmp over the open file: %v", err)
	}
	if fi, err := old.Stat(); err != nil || fi.Size() != int64(len(oldData)) {
		t.Fatalf("fstat of the old descriptor after rename-over: %v %v, want size %d", fi, err, len(oldData))
	}
	buf := make([]byte, 100)
	if n, err := old.ReadAt(buf, 0); string(buf[:n]) != oldData {
		t.Fatalf("read through the old descriptor: %q %v, want %q", buf[:n], err, oldData)
	}
	if err := old.Sync(); err != nil {
		t.Fatalf("fsync of the old descriptor: %v", err)
	}
	if err := old.Close(); err != nil {
		t.Fatalf("close of the old descriptor: %v", err)
	}
	// FUSE sends RELEASE asynchronously after close(2): wait (bounded) for
	// the hidden name to go from the server.
	var names []string
	for i := 0; i < 100; i++ {
		ents, err := os.ReadDir(filepath.Join(tg.Dir, "save"))
		if err != nil {
			t.Fatal(err)
		}
		names = names[:0]
		for _, e := range ents {
			names = append(names, e.Name())
		}
		if len(names) == 1 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if strings.Join(names, " ") != "config" {
		t.Fatalf("server dir after the last close: %q, want only config", names)
	}
	if got, err := os.ReadFile(a); err != nil || string(got) != newData {
		t.Fatalf("new open after rename: %q %v, want %q", got, err, newData)
	}
}

func TestFUSERenameOverOpen(t *testing.T) { forEachTarget(t, testRenameOverOpen) }

// testSymlinkTimes: `touch -h -d` on a symlink through the FUSE mount sets
// the link's own mtime (what tar x and rsync -a do), seen by lstat through
// the mount and on the server's disk, and leaves the target alone.
func testSymlinkTimes(t *testing.T, tg *target) {
	testutil.NeedCmd(t, "touch")
	mnt, _ := mountFUSE(t, tg, nfstree.Options{})
	d := filepath.Join(mnt, "links")
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(d, "target"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	l := filepath.Join(d, "link")
	if err := os.Symlink("target", l); err != nil {
		t.Fatal(err)
	}
	tfi, err := os.Stat(filepath.Join(d, "target"))
	if err != nil {
		t.Fatal(err)
	}
	want := time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC)
	testutil.Run(t, time.Minute, "touch", "-h", "-d", want.Format(time.RFC3339), l)
	fi, err := os.Lstat(l)
	if err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("lstat link: %v %v", fi, err)
	}
	if !fi.ModTime().Equal(want) {
		t.Fatalf("link mtime through the mount %v, want %v", fi.ModTime(), want)
	}
	if disk, err := os.Lstat(filepath.Join(tg.Dir, "links", "link")); err != nil || !disk.ModTime().Equal(want) {
		t.Fatalf("link mtime on the server's disk %v (%v), want %v", disk.ModTime(), err, want)
	}
	if now, err := os.Stat(filepath.Join(d, "target")); err != nil || !now.ModTime().Equal(tfi.ModTime()) {
		t.Fatalf("target mtime %v -> %v (%v): the times went through the link", tfi.ModTime(), now.ModTime(), err)
	}
}

// TestFUSESymlinkTimes runs against our server only: nfs-ganesha (VFS
// FSAL, as packaged here) answers the SETATTR but leaves the link's mtime
// unchanged, so it is no reference for this.
func TestFUSESymlinkTimes(t *testing.T) { testSymlinkTimes(t, startOurs(t, "")) }

// TestClientSymlinkTimes: SETATTR of mtime on a symlink's handle, over our
// server with our client, changes the link's own time (GETATTR and disk).
func TestClientSymlinkTimes(t *testing.T) {
	tg := startOurs(t, "")
	c, root := tg.client(t, nfs.Options{})
	ctx := ctxT(t)
	fh, _, err := c.Symlink(ctx, root, "l", "nowhere", nfs.SetAttr{})
	if err != nil {
		t.Fatal(err)
	}
	want := time.Date(1999, 12, 31, 23, 59, 58, 123456789, time.UTC)
	wcc, err := c.Setattr(ctx, fh, nfs.SetAttr{Mtime: &want}, nil)
	if err != nil {
		t.Fatalf("SETATTR mtime on a symlink: %v", err)
	}
	if wcc.After != nil && !wcc.After.Mtime.Equal(want) {
		t.Fatalf("post-op mtime %v, want %v", wcc.After.Mtime, want)
	}
	a, err := c.Getattr(ctx, fh)
	if err != nil || !a.Mtime.Equal(want) {
		t.Fatalf("GETATTR mtime %v (%v), want %v", a.Mtime, err, want)
	}
	if disk, err := os.Lstat(filepath.Join(tg.Dir, "l")); err != nil || !disk.ModTime().Equal(want) {
		t.Fatalf("mtime on disk %v (%v), want %v", disk.ModTime(), err, want)
	}
}
