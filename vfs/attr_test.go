package vfs

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestSymlinkTimes: SETATTR of atime/mtime on a symbolic link sets the
// link's own times (touch -h, tar x, rsync -a), not the target's, and is
// not silently skipped.
func TestSymlinkTimes(t *testing.T) {
	modes(t, func(t *testing.T, dir string, open func() *FS) {
		fs := open()
		f, _, _, err := fs.Create(root, fs.Root(), "f", CreateGuarded, SetAttr{}, [8]byte{})
		if err != nil {
			t.Fatal(err)
		}
		fBefore, err := fs.GetAttr(f)
		if err != nil {
			t.Fatal(err)
		}
		s, _, _, err := fs.Symlink(root, fs.Root(), "s", "f", SetAttr{})
		if err != nil {
			t.Fatal(err)
		}
		at := time.Date(2001, 2, 3, 4, 5, 6, 7000, time.UTC)
		mt := time.Date(2002, 3, 4, 5, 6, 7, 8000, time.UTC)
		_, after, err := fs.SetAttrs(root, s, SetAttr{Atime: SetTime{Set: true, T: at}, Mtime: SetTime{Set: true, T: mt}}, nil)
		if err != nil {
			t.Fatalf("set times on a symlink: %v", err)
		}
		if after.Type != TypeSymlink || !after.Mtime.Equal(mt) || !after.Atime.Equal(at) {
			t.Fatalf("attributes after: type %v mtime %v atime %v, want link %v %v", after.Type, after.Mtime, after.Atime, mt, at)
		}
		var st unix.Stat_t
		if err := unix.Lstat(filepath.Join(dir, "s"), &st); err != nil {
			t.Fatal(err)
		}
		if got := time.Unix(st.Mtim.Unix()); !got.Equal(mt) {
			t.Fatalf("lstat mtime on disk %v, want %v", got, mt)
		}
		if got := time.Unix(st.Atim.Unix()); !got.Equal(at) {
			t.Fatalf("lstat atime on disk %v, want %v", got, at)
		}
		fAfter, err := fs.GetAttr(f)
		if err != nil {
			t.Fatal(err)
		}
		if !fAfter.Mtime.Equal(fBefore.Mtime) {
			t.Fatalf("target's mtime changed %v -> %v: times went through the link", fBefore.Mtime, fAfter.Mtime)
		}
		// "Now" (touch -h without -d) moves the link's mtime too.
		if _, after, err = fs.SetAttrs(root, s, SetAttr{Mtime: SetTime{Set: true, Now: true}}, nil); err != nil {
			t.Fatal(err)
		}
		if time.Since(after.Mtime) > time.Minute {
			t.Fatalf("mtime after set-to-now: %v", after.Mtime)
		}
		if fi, err := os.Lstat(filepath.Join(dir, "s")); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Fatalf("link gone or replaced: %v %v", fi, err)
		}
	})
}
