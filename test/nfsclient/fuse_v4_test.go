package nfsclient

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"testing"
	"time"

	"github.com/tristore/tristore/fusefs/nfstree"
	"github.com/tristore/tristore/internal/testutil"
)

// The FUSE mount over NFSv4.1 (nfstree.New4), against tristore and
// nfs-ganesha (its v4 root for the export is the Pseudo path /export).

// mountFUSE4 mounts tg's export through nfstree over a fresh v4.1 session.
func mountFUSE4(t testing.TB, tg *target, opts nfstree.Options) (string, func(), *nfstree.FS) {
	t.Helper()
	testutil.NeedRoot(t, "FUSE mounts (mount(2) directly) need root")
	testutil.NeedFUSE(t)
	c := tg.client4(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	root, _, err := c.LookupPath(ctx, tg.v4path())
	if err != nil {
		t.Fatalf("v4 root %s: %v", tg.v4path(), err)
	}
	tree, err := nfstree.New4(c, root, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tree.Close)
	dir, unmount := mountTree(t, tree)
	return dir, unmount, tree
}

// forEachTarget4 runs f against both servers with FUSE mounts over v4.1.
func forEachTarget4(t *testing.T, f func(t *testing.T, tg *target)) {
	forEachTarget(t, func(t *testing.T, tg *target) { tg.v4 = true; f(t, tg) })
}

// The v3 FUSE tests, over v4.1.
func TestFUSE4UntarRemount(t *testing.T)   { forEachTarget4(t, testUntarRemount) }
func TestFUSE4Postmark(t *testing.T)       { forEachTarget4(t, testPostmark) }
func TestFUSE4AccessForms(t *testing.T)    { forEachTarget4(t, testAccessForms) }
func TestFUSE4UnlinkOpen(t *testing.T)     { forEachTarget4(t, testUnlinkOpen) }
func TestFUSE4RandomIO(t *testing.T)       { forEachTarget4(t, testRandomIO) }
func TestFUSE4RenameOverOpen(t *testing.T) { forEachTarget4(t, testRenameOverOpen) }

func TestFUSE4FileOps(t *testing.T) { forEachTarget4(t, testFileOps4) }

func TestFUSE4Ownership(t *testing.T)   { testOwnership(t, true) }
func TestFUSE4CallerCreds(t *testing.T) { testCallerCreds(t, true) }

// TestFUSE4ServerRestart: TestFUSEServerRestart over v4.1: the restart
// loses the session; the mount makes a new one (same owner ID, so the
// server's grace period ends at once) and resends the uncommitted data.
func TestFUSE4ServerRestart(t *testing.T) {
	tg := startOurs(t, "")
	tg.v4 = true
	testServerRestart(t, tg)
}

// testFileOps4: write, read back, rename (also over an existing file),
// links, chmod/chown/utimes/truncate, readdir, unlink and rmdir through a
// v4.1 mount, each checked in the mount and on the server's disk.
func testFileOps4(t *testing.T, tg *target) {
	mnt, _ := mountFUSE(t, tg, nfstree.Options{WriteBehind: 256 << 10})
	d := filepath.Join(mnt, "d")
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	onDisk := func(name string) ([]byte, error) { return os.ReadFile(filepath.Join(tg.Dir, "d", name)) }

	// A large write-back file (UNSTABLE WRITEs + COMMIT) and a small one.
	big := randBytes(t, 3<<20+77)
	if err := os.WriteFile(filepath.Join(d, "big"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(d, "big")); err != nil || !bytes.Equal(got, big) {
		t.Fatalf("read back through the mount: %d bytes, equal %v, %v", len(got), bytes.Equal(got, big), err)
	}
	if got, err := onDisk("big"); err != nil || !bytes.Equal(got, big) {
		t.Fatalf("on the server's disk: %d bytes, equal %v, %v", len(got), bytes.Equal(got, big), err)
	}
	if err := os.WriteFile(filepath.Join(d, "small"), []byte("small file"), 0o640); err != nil {
		t.Fatal(err)
	}
	// O_SYNC and O_DIRECT writes (FILE_SYNC WRITEs).
	for _, fl := range []int{syscall.O_SYNC, syscall.O_DIRECT} {
		f, err := os.OpenFile(filepath.Join(d, "small"), os.O_WRONLY|fl, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := f.WriteAt([]byte("rewritten."), 0); err != nil {
			t.Fatalf("write with flag %#x: %v", fl, err)
		}
		if err := f.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if got, err := onDisk("small"); err != nil || string(got) != "rewritten." {
		t.Fatalf("small on disk: %q %v", got, err)
	}
	if _, err := os.OpenFile(filepath.Join(d, "small"), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o600); !errors.Is(err, os.ErrExist) {
		t.Fatalf("O_EXCL create of an existing file: %v, want EEXIST", err)
	}

	// Rename, then rename over an existing file.
	if err := os.Rename(filepath.Join(d, "big"), filepath.Join(d, "moved")); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(d, "big")); !os.IsNotExist(err) {
		t.Fatalf("old name after rename: %v", err)
	}
	if err := os.Rename(filepath.Join(d, "small"), filepath.Join(d, "moved")); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(d, "moved")); err != nil || string(got) != "rewritten." {
		t.Fatalf("after rename over: %q %v", got, err)
	}
	if got, err := onDisk("moved"); err != nil || string(got) != "rewritten." {
		t.Fatalf("after rename over, on disk: %q %v", got, err)
	}

	// Links.
	if err := os.Symlink("moved", filepath.Join(d, "sym")); err != nil {
		t.Fatal(err)
	}
	if l, err := os.Readlink(filepath.Join(d, "sym")); err != nil || l != "moved" {
		t.Fatalf("readlink: %q %v", l, err)
	}
	if l, err := os.Readlink(filepath.Join(tg.Dir, "d", "sym")); err != nil || l != "moved" {
		t.Fatalf("symlink on disk: %q %v", l, err)
	}
	if err := os.Link(filepath.Join(d, "moved"), filepath.Join(d, "hard")); err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(d, "hard"), &st); err != nil || st.Nlink != 2 {
		t.Fatalf("hard link: nlink %d, %v", st.Nlink, err)
	}

	// Attributes: mode, owner (numeric ids both ways), times, size.
	p := filepath.Join(d, "moved")
	if err := os.Chmod(p, 0o604); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(p, 1234, 5678); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(p, 3); err != nil {
		t.Fatal(err)
	}
	mt := time.Unix(1_600_000_000, 0)
	if err := os.Chtimes(p, mt, mt); err != nil {
		t.Fatal(err)
	}
	for _, where := range []string{p, filepath.Join(tg.Dir, "d", "moved")} {
		if err := syscall.Stat(where, &st); err != nil {
			t.Fatal(err)
		}
		if st.Mode&0o7777 != 0o604 || st.Uid != 1234 || st.Gid != 5678 || st.Mtim.Sec != mt.Unix() || st.Size != 3 {
			t.Fatalf("%s: mode %o uid %d gid %d mtime %d size %d; want 604 1234 5678 %d 3", where, st.Mode&0o7777, st.Uid, st.Gid, st.Mtim.Sec, st.Size, mt.Unix())
		}
	}

	// Listing.
	ents, err := os.ReadDir(d)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	if want := []string{"hard", "moved", "sym"}; !equalStrings(names, want) {
		t.Fatalf("readdir: %v, want %v", names, want)
	}

	// Unlink everything, then rmdir.
	for _, n := range names {
		if err := os.Remove(filepath.Join(d, n)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Remove(d); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(filepath.Join(tg.Dir, "d")); !os.IsNotExist(err) {
		t.Fatalf("directory still on the server: %v", err)
	}
	var sfs syscall.Statfs_t
	if err := syscall.Statfs(mnt, &sfs); err != nil || sfs.Blocks == 0 {
		t.Fatalf("statfs: %+v %v", sfs, err)
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
