package vfs

import (
	"encoding/binary"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tristore/tristore/internal/testutil"
	"golang.org/x/sys/unix"
)

// coldExt4 makes a small ext4 image, mounts it (loop) and returns the
// mount point and a function that unmounts and mounts it again: a fresh
// superblock, so no dentry or inode of it is cached (what a server sees
// after a reboot).
func coldExt4(t *testing.T) (string, func()) {
	t.Helper()
	testutil.NeedRoot(t, "loop-mounting an ext4 image")
	mkfs := testutil.NeedCmd(t, "mkfs.ext4")
	testutil.NeedCmd(t, "mount")
	dir := t.TempDir()
	img, mnt := filepath.Join(dir, "img"), filepath.Join(dir, "mnt")
	os.Mkdir(mnt, 0o755)
	if err := os.WriteFile(img, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(img, 32<<20); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(mkfs, "-q", "-F", img).CombinedOutput(); err != nil {
		t.Fatalf("mkfs.ext4: %v %s", err, out)
	}
	mount := func() {
		if out, err := exec.Command("mount", "-o", "loop", img, mnt).CombinedOutput(); err != nil {
			testutil.Missing(t, "cannot loop-mount ext4: %v %s", err, strings.TrimSpace(string(out)))
		}
	}
	mount()
	t.Cleanup(func() { exec.Command("umount", mnt).Run() }) // -o loop detaches the loop device
	return mnt, func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Fatalf("umount: %v %s", err, out)
		}
		mount()
	}
}

// TestKernelHandlesAfterColdMount: every handle of an object that still
// exists resolves to it after a remount (cold dentries, as after a
// reboot): files never moved, renamed within their directory, renamed to
// another directory over NFS and on disk, both names of a hard link
// (also after one is removed), a symlink, a directory, and a handle in
// the old encoding without a parent. Before the fix every non-directory
// was stale. Objects outside the export, in its reserved directories or
// deleted stay stale.
func TestKernelHandlesAfterColdMount(t *testing.T) {
	mnt, remount := coldExt4(t)
	data := filepath.Join(mnt, "data")
	exp := filepath.Join(data, "exp")
	for _, d := range []string{exp, filepath.Join(data, "other"), filepath.Join(exp, ".tristore", "sys")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	idx := filepath.Join(exp, ".tristore", "vfs", "index")
	const id = 77
	var opened []*FS // closed by done (and at the end), so the unmount is not busy
	done := func() {
		for _, f := range opened {
			f.Close()
		}
		opened = nil
	}
	t.Cleanup(done)
	open := func(dir string) *FS {
		t.Helper()
		fs, err := Open(dir, Options{ExportID: id, IndexDir: idx})
		if err != nil {
			t.Fatal(err)
		}
		opened = append(opened, fs)
		if !fs.kernel {
			t.Fatal("kernel handles unavailable as root on ext4")
		}
		return fs
	}
	fs := open(exp)
	mkdir := func(dir Handle, name string) Handle {
		h, _, _, err := fs.Mkdir(root, dir, name, SetAttr{})
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	create := func(dir Handle, name, content string) Handle {
		h, _, _, err := fs.Create(root, dir, name, CreateGuarded, SetAttr{}, [8]byte{})
		if err != nil {
			t.Fatal(err)
		}
		if _, _, _, err := fs.Write(root, h, 0, []byte(content), FileSync); err != nil {
			t.Fatal(err)
		}
		return h
	}
	d1, d2 := mkdir(fs.Root(), "d1"), mkdir(fs.Root(), "d2")
	sub := mkdir(d1, "sub")
	want := map[string]struct {
		h       Handle
		path    string // where it must resolve, relative to exp
		content string
	}{}
	add := func(key string, h Handle, path, content string) {
		want[key] = struct {
			h       Handle
			path    string
			content string
		}{h, path, content}
	}
	add("plain", create(d1, "plain", "plain!"), "d1/plain", "plain!")
	add("nested", create(sub, "deep", "deep!"), "d1/sub/deep", "deep!")
	add("samedir", create(d1, "a", "renamed here"), "d1/b", "renamed here")
	if _, _, err := fs.Rename(root, d1, "a", d1, "b"); err != nil {
		t.Fatal(err)
	}
	add("cross-nfs", create(d1, "c", "moved over nfs"), "d2/c2", "moved over nfs")
	if _, _, err := fs.Rename(root, d1, "c", d2, "c2"); err != nil {
		t.Fatal(err)
	}
	add("cross-disk", create(d1, "e", "moved on disk"), "d1/sub/e2", "moved on disk")
	if err := os.Rename(filepath.Join(exp, "d1/e"), filepath.Join(exp, "d1/sub/e2")); err != nil {
		t.Fatal(err)
	}
	l := create(d1, "l", "linked")
	if _, _, err := fs.Link(root, l, d2, "l2"); err != nil {
		t.Fatal(err)
	}
	l2, _, _, err := fs.Lookup(root, d2, "l2")
	if err != nil {
		t.Fatal(err)
	}
	add("link-kept", l2, "d2/l2", "linked")
	k := create(d1, "k", "two names")
	if _, _, err := fs.Link(root, k, d2, "k2"); err != nil {
		t.Fatal(err)
	}
	if _, err := fs.Remove(root, d1, "k"); err != nil { // k's handle names d1, which no longer holds it
		t.Fatal(err)
	}
	add("link-removed", k, "d2/k2", "two names")
	old := create(d2, "old", "old encoding")
	if old[1] != flagKernel|flagParent {
		t.Fatalf("file handle flags %#x, want kernel+parent", old[1])
	}
	n := int(old[22])
	oldEnc := append(Handle(nil), old[:23+n]...) // as issued before parents were encoded
	oldEnc[1] = flagKernel
	binary.BigEndian.PutUint32(oldEnc[14:18], 0)
	add("old-encoding", oldEnc, "d2/old", "old encoding")
	sym, _, _, err := fs.Symlink(root, d1, "sym", "plain", SetAttr{})
	if err != nil {
		t.Fatal(err)
	}
	add("symlink", sym, "d1/sym", "")
	add("dir", sub, "d1/sub", "")
	gone := create(d1, "gone", "x")
	if _, err := fs.Remove(root, d1, "gone"); err != nil {
		t.Fatal(err)
	}
	done()

	// Handles of objects outside the export, issued by an export of the
	// parent directory with the same id.
	wide := open(data)
	outside := map[string]Handle{}
	for _, p := range []string{"other/secret", "exp/.tristore/sys/secret"} {
		if err := os.WriteFile(filepath.Join(data, p), []byte("secret"), 0o600); err != nil {
			t.Fatal(err)
		}
		// (Lookup refuses reserved names, so build the handle directly.)
		dfd, err := unix.Open(filepath.Dir(filepath.Join(data, p)), unix.O_PATH|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		var st unix.Stat_t
		if err := unix.Fstatat(dfd, "secret", &st, 0); err != nil {
			t.Fatal(err)
		}
		h, err := wide.handleOf(dfd, "secret", &st, 0, "")
		unix.Close(dfd)
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if _, err := wide.GetAttr(h); err != nil && !strings.Contains(p, ".tristore") {
			t.Fatalf("%s: the wide export cannot resolve it: %v", p, err)
		}
		outside[p] = h
	}
	done()
	remount()
	fs = open(exp)
	for key, w := range want {
		o, err := fs.resolve(w.h)
		if err != nil {
			t.Errorf("%s: resolve after a cold mount: %v", key, err)
			continue
		}
		if p := filepath.Join(exp, w.path); o.path != p {
			t.Errorf("%s: resolved to %s, want %s", key, o.path, p)
		}
		o.close()
		if w.content != "" {
			buf := make([]byte, 64)
			n, _, _, err := fs.Read(root, w.h, 0, buf)
			if err != nil || string(buf[:n]) != w.content {
				t.Errorf("%s: read %q, %v; want %q", key, buf[:n], err, w.content)
			}
		}
	}
	if target, _, err := fs.Readlink(want["symlink"].h); err != nil || target != "plain" {
		t.Errorf("symlink: readlink %q, %v", target, err)
	}
	if _, err := fs.GetAttr(gone); !errors.Is(err, ErrStale) {
		t.Errorf("deleted file: %v, want ErrStale", err)
	}
	for p, h := range outside {
		if _, err := fs.GetAttr(h); !errors.Is(err, ErrStale) {
			t.Errorf("%s (outside the export): %v, want ErrStale", p, err)
		}
	}
	// The moves found by search are now hints: a second cold start finds
	// them without searching (checked by resolving again; correctness, not
	// speed, is what is asserted).
	done()
	remount()
	fs = open(exp)
	for key, w := range want {
		if _, err := fs.GetAttr(w.h); err != nil {
			t.Errorf("%s: second cold mount: %v", key, err)
		}
	}
}

// FuzzKernelHandles: parsing a kernel-mode handle never panics, and what
// it accepts accounts for every byte (a file handle, then optionally a
// non-empty parent handle), so a handle with trailing junk or a bad
// length is ErrBadHandle, not a different object.
func FuzzKernelHandles(f *testing.F) {
	file := append(make([]byte, 22), 8)
	file[0], file[1] = handleVersion, flagKernel
	file = append(file, 1, 2, 3, 4, 5, 6, 7, 8)
	f.Add([]byte(file))
	withParent := append(append([]byte(nil), file...), 8, 9, 9, 9, 9, 9, 9, 9, 9)
	withParent[1] |= flagParent
	f.Add(withParent)
	f.Add(append(append([]byte(nil), withParent...), 0))
	f.Add(file[:20])
	fs := &FS{kernel: true}
	f.Fuzz(func(t *testing.T, h []byte) {
		kh, ph, err := fs.kernelHandles(Handle(h))
		if err != nil {
			if !errors.Is(err, ErrBadHandle) {
				t.Fatalf("error %v, want ErrBadHandle", err)
			}
			return
		}
		n := 23 + len(kh.Bytes())
		if ph != nil {
			if len(ph.Bytes()) == 0 || h[1]&flagParent == 0 {
				t.Fatalf("parent %x from %x", ph.Bytes(), h)
			}
			n += 1 + len(ph.Bytes())
		}
		if n != len(h) {
			t.Fatalf("parsed %d of %d bytes of %x", n, len(h), h)
		}
	})
}
