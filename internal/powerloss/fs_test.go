package powerloss

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/tristore/tristore/internal/testutil"
)

// mount mounts a fresh FS in a temp dir, unmounted when the test ends.
func mount(t *testing.T) (*FS, string) {
	t.Helper()
	testutil.NeedRoot(t, "mounts FUSE directly")
	testutil.NeedFUSE(t)
	dir := t.TempDir()
	f := New()
	if err := f.Mount(dir); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Unmount() })
	return f, dir
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func fsyncPath(t *testing.T, p string) {
	t.Helper()
	fd, err := unix.Open(p, unix.O_RDONLY, 0)
	must(t, err)
	defer unix.Close(fd)
	must(t, unix.Fsync(fd))
}

func writeFile(t *testing.T, p string, data []byte, sync bool) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	must(t, err)
	_, err = f.Write(data)
	must(t, err)
	if sync {
		must(t, f.Sync())
	}
	must(t, f.Close())
}

func crash(t *testing.T, f *FS) {
	t.Helper()
	f.Cut()
	must(t, f.Remount())
}

func readOr(p string) string {
	b, err := os.ReadFile(p)
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return string(b)
}

// TestDurabilityRules pins the model of the package doc: what survives a
// cut for each combination of file and directory fsyncs.
func TestDurabilityRules(t *testing.T) {
	f, dir := mount(t)
	p := func(s string) string { return filepath.Join(dir, s) }
	must(t, os.Mkdir(p("d"), 0o755))
	fsyncPath(t, dir)
	writeFile(t, p("d/both"), []byte("kept"), true)             // data and name
	writeFile(t, p("d/nameonly"), []byte("empty after"), false) // name, no data
	must(t, unix.Setxattr(p("d/both"), "user.k", []byte("v"), 0))
	fsyncPath(t, p("d/both"))
	fsyncPath(t, p("d"))
	// After the dir fsync: an unsynced change to a synced file is lost.
	writeFile(t, p("d/both"), []byte("overwritten, never synced"), false)
	writeFile(t, p("d/nosync"), []byte("lost"), false)     // neither
	writeFile(t, p("d/fileonly"), []byte("unnamed"), true) // data, name never synced
	crash(t, f)

	if got := readOr(p("d/both")); got != "kept" {
		t.Errorf("d/both = %q, want %q", got, "kept")
	}
	if v, err := unixGetxattr(p("d/both"), "user.k"); err != nil || v != "v" {
		t.Errorf("xattr user.k of d/both = %q, %v; want v", v, err)
	}
	if got := readOr(p("d/nameonly")); got != "" {
		t.Errorf("d/nameonly = %q, want empty (name durable, data not)", got)
	}
	for _, n := range []string{"d/nosync", "d/fileonly"} {
		if _, err := os.Lstat(p(n)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s survived the cut (err %v)", n, err)
		}
	}

	// Rename: each directory's change is durable on its own fsync.
	must(t, os.Mkdir(p("e"), 0o755))
	fsyncPath(t, dir)
	must(t, os.Rename(p("d/both"), p("e/moved")))
	fsyncPath(t, p("e"))
	crash(t, f)
	if readOr(p("e/moved")) != "kept" || readOr(p("d/both")) != "kept" {
		t.Errorf("after rename with only the target dir synced: e/moved=%q d/both=%q, want both names (one inode)", readOr(p("e/moved")), readOr(p("d/both")))
	}
	must(t, os.Remove(p("d/both")))
	fsyncPath(t, p("d"))
	// Unlink is durable after the dir fsync; without it the name returns.
	must(t, os.Remove(p("e/moved")))
	crash(t, f)
	if readOr(p("e/moved")) != "kept" {
		t.Errorf("unsynced unlink was kept: e/moved = %q", readOr(p("e/moved")))
	}
	if _, err := os.Lstat(p("d/both")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("synced unlink of d/both lost (err %v)", err)
	}
}

func unixGetxattr(p, name string) (string, error) {
	buf := make([]byte, 256)
	n, err := unix.Getxattr(p, name, buf)
	if err != nil {
		return "", err
	}
	return string(buf[:n]), nil
}

// TestCutFailsEverything: after Cut no request succeeds, so an fsync that
// returns success was durable before the cut.
func TestCutFailsEverything(t *testing.T) {
	f, dir := mount(t)
	fl, err := os.Create(filepath.Join(dir, "x"))
	must(t, err)
	defer fl.Close()
	f.Cut()
	if _, err := fl.Write([]byte("after")); !errors.Is(err, syscall.EIO) {
		t.Errorf("write after cut: %v, want EIO", err)
	}
	if err := fl.Sync(); !errors.Is(err, syscall.EIO) {
		t.Errorf("fsync after cut: %v, want EIO", err)
	}
	if _, err := os.Create(filepath.Join(dir, "y")); !errors.Is(err, syscall.EIO) {
		t.Errorf("create after cut: %v, want EIO", err)
	}
	fl.Close()
	must(t, f.Remount())
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("root after remount has %d entries, want 0 (nothing was synced)", len(ents))
	}
}

// TestSparseAndPunch: holes, punch-hole, SEEK_DATA, rename NOREPLACE,
// hard links and statfs behave as on ext4, and a synced sparse file
// comes back with its holes.
func TestSparseAndPunch(t *testing.T) {
	f, dir := mount(t)
	p := filepath.Join(dir, "vol")
	fl, err := os.OpenFile(p, os.O_CREATE|os.O_RDWR, 0o644)
	must(t, err)
	must(t, fl.Truncate(4<<20))
	pat := bytes.Repeat([]byte{0xab}, 200<<10)
	_, err = fl.WriteAt(pat, 1<<20)
	must(t, err)
	must(t, unix.Fallocate(int(fl.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, 1<<20+4096, 128<<10))
	if off, err := unix.Seek(int(fl.Fd()), 0, unix.SEEK_DATA); err != nil || off != 1<<20 {
		t.Errorf("SEEK_DATA from 0 = %d, %v; want %d", off, err, 1<<20)
	}
	must(t, fl.Sync())
	must(t, fl.Close())
	fsyncPath(t, dir)
	var sfs unix.Statfs_t
	must(t, unix.Statfs(dir, &sfs))
	if sfs.Blocks == 0 || sfs.Bavail == 0 {
		t.Errorf("statfs: %+v", sfs)
	}
	must(t, os.Link(p, p+".link"))
	err = unix.Renameat2(unix.AT_FDCWD, p+".link", unix.AT_FDCWD, p, unix.RENAME_NOREPLACE)
	if !errors.Is(err, syscall.EEXIST) {
		t.Errorf("renameat2 NOREPLACE onto an existing name: %v, want EEXIST", err)
	}
	crash(t, f)
	got, err := os.ReadFile(p)
	must(t, err)
	want := make([]byte, 4<<20)
	copy(want[1<<20:], pat)
	clear(want[1<<20+4096 : 1<<20+4096+128<<10])
	if !bytes.Equal(got, want) {
		t.Errorf("sparse file after cut differs from what was synced")
	}
	if _, err := os.Lstat(p + ".link"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("unsynced hard link survived: %v", err)
	}
}
