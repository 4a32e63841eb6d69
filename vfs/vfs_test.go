package vfs

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/tristore/tristore/internal/testutil"
	"golang.org/x/sys/unix"
)

// modes runs a test with kernel handles (root) and with the persistent
// fallback index.
func modes(t *testing.T, f func(t *testing.T, dir string, open func() *FS)) {
	for _, m := range []struct {
		name  string
		force bool
	}{{"kernel", false}, {"index", true}} {
		t.Run(m.name, func(t *testing.T) {
			if !m.force {
				testutil.NeedRoot(t, "open_by_handle_at")
			}
			dir := t.TempDir()
			data := filepath.Join(dir, "data")
			os.Mkdir(data, 0o755)
			idx := filepath.Join(dir, "index")
			open := func() *FS {
				fs, err := Open(data, Options{IndexDir: idx, ForceIndex: m.force})
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { fs.Close() })
				if m.force == fs.kernel {
					t.Fatalf("kernel handles %v, want %v", fs.kernel, !m.force)
				}
				return fs
			}
			f(t, data, open)
		})
	}
}

var root = Cred{}

func TestHandlesAcrossReopenAndRename(t *testing.T) {
	modes(t, func(t *testing.T, dir string, open func() *FS) {
		fs := open()
		a, _, _, err := fs.Mkdir(root, fs.Root(), "a", SetAttr{})
		if err != nil {
			t.Fatal(err)
		}
		b, _, _, err := fs.Mkdir(root, fs.Root(), "b", SetAttr{})
		if err != nil {
			t.Fatal(err)
		}
		f, _, _, err := fs.Create(root, a, "f", CreateGuarded, SetAttr{}, [8]byte{})
		if err != nil {
			t.Fatal(err)
		}
		if len(f) > MaxHandle {
			t.Fatalf("handle of %d bytes", len(f))
		}
		if _, _, _, err := fs.Write(root, f, 3, []byte("xyz"), FileSync); err != nil {
			t.Fatal(err)
		}
		// Rename the file across directories, then rename its directory.
		if _, _, err := fs.Rename(root, a, "f", b, "g"); err != nil {
			t.Fatal(err)
		}
		if _, _, err := fs.Rename(root, fs.Root(), "b", fs.Root(), "c"); err != nil {
			t.Fatal(err)
		}
		// ".." of a nested directory is its parent (and must not corrupt the index).
		nest, _, _, err := fs.Mkdir(root, a, "n", SetAttr{})
		if err != nil {
			t.Fatal(err)
		}
		up, upAttr, _, err := fs.Lookup(root, nest, "..")
		if err != nil || !bytes.Equal(up, a) {
			t.Fatalf("Lookup(n, \"..\") = %x (ino %d), %v; want handle of a", up, upAttr.FileID, err)
		}
		// A fresh FS (a restarted server) resolves the old handle.
		fs2 := open()
		buf := make([]byte, 10)
		n, eof, attr, err := fs2.Read(root, f, 0, buf)
		if err != nil || !eof || !bytes.Equal(buf[:n], []byte("\x00\x00\x00xyz")) || attr.Size != 6 {
			t.Fatalf("read via old handle after restart: %q eof %v err %v", buf[:n], eof, err)
		}
		if _, err := fs2.GetAttr(nest); err != nil {
			t.Fatalf("nested dir after restart: %v", err)
		}
		if _, err := fs2.GetAttr(a); err != nil {
			t.Fatalf("parent dir after restart: %v", err)
		}
		if !bytes.Equal(fs2.Root(), fs.Root()) {
			t.Fatal("root handle changed")
		}
		// Removed -> stale.
		if _, err := fs2.Remove(root, b, "g"); err != nil {
			t.Fatal(err)
		}
		if _, err := fs2.GetAttr(f); !errors.Is(err, ErrStale) {
			t.Fatalf("GetAttr of removed file: %v", err)
		}
		// Garbage handles.
		for _, h := range []Handle{nil, {1}, bytes.Repeat([]byte{1}, 70), append(Handle{9}, f[1:]...)} {
			if _, err := fs2.GetAttr(h); !errors.Is(err, ErrBadHandle) && !errors.Is(err, ErrStale) {
				t.Fatalf("GetAttr(%x): %v", h, err)
			}
		}
	})
}

func TestNamesAndLinks(t *testing.T) {
	modes(t, func(t *testing.T, dir string, open func() *FS) {
		fs := open()
		for _, n := range []string{"", ".", "..", "a/b", "x\x00", ".tristore-tmp-1"} {
			if _, _, _, err := fs.Create(root, fs.Root(), n, CreateUnchecked, SetAttr{}, [8]byte{}); err == nil {
				t.Fatalf("Create(%q) accepted", n)
			}
		}
		if _, _, _, err := fs.Create(root, fs.Root(), string(bytes.Repeat([]byte("n"), 256)), CreateUnchecked, SetAttr{}, [8]byte{}); !errors.Is(err, unix.ENAMETOOLONG) {
			t.Fatalf("256-byte name: %v", err)
		}
		f, _, _, err := fs.Create(root, fs.Root(), "f", CreateUnchecked, SetAttr{Mode: u32(0o640)}, [8]byte{})
		if err != nil {
			t.Fatal(err)
		}
		attr, dc, err := fs.Link(root, f, fs.Root(), "f2")
		if err != nil || attr.Nlink != 2 || dc.After == nil {
			t.Fatalf("Link: %v nlink %d", err, attr.Nlink)
		}
		s, _, _, err := fs.Symlink(root, fs.Root(), "s", "f", SetAttr{})
		if err != nil {
			t.Fatal(err)
		}
		if tgt, _, err := fs.Readlink(s); err != nil || tgt != "f" {
			t.Fatalf("Readlink %q %v", tgt, err)
		}
		os.WriteFile(filepath.Join(dir, ".tristore-tmp-x"), nil, 0o644)
		ents, eof, _, err := fs.ReadDir(root, fs.Root(), 0, 100, true)
		if err != nil || !eof {
			t.Fatalf("ReadDir: %v eof %v", err, eof)
		}
		var names []string
		for _, e := range ents {
			names = append(names, e.Name)
			if e.Attr == nil || e.Handle == nil {
				t.Fatalf("entry %s lacks attr/handle", e.Name)
			}
		}
		sort.Strings(names)
		if len(names) != 3 || names[0] != "f" || names[1] != "f2" || names[2] != "s" {
			t.Fatalf("ReadDir names %v", names)
		}
		if _, _, _, err := fs.Lookup(root, fs.Root(), ".tristore-tmp-x"); !errors.Is(err, unix.ENOENT) {
			t.Fatalf("Lookup of a reserved name: %v", err)
		}
		// Paging one entry at a time with cookies visits every entry once.
		var paged []string
		var cookie uint64
		for i := 0; i < 10; i++ {
			ents, eof, _, err := fs.ReadDir(root, fs.Root(), cookie, 1, false)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range ents {
				paged = append(paged, e.Name)
				cookie = e.Cookie
			}
			if eof {
				break
			}
		}
		sort.Strings(paged)
		if len(paged) != 3 {
			t.Fatalf("paged ReadDir %v", paged)
		}
	})
}

func u32(v uint32) *uint32 { return &v }

// TestWriteAlwaysMovesMtime: two same-size writes in quick succession
// (likely within one kernel clock tick) still give different mtimes, so
// caches keyed on size+mtime (NFS clients, the store's ETag) see the change.
func TestWriteAlwaysMovesMtime(t *testing.T) {
	modes(t, func(t *testing.T, dir string, open func() *FS) {
		fs := open()
		f, _, _, err := fs.Create(root, fs.Root(), "m", CreateUnchecked, SetAttr{}, [8]byte{})
		if err != nil {
			t.Fatal(err)
		}
		_, _, a1, err := fs.Write(root, f, 0, []byte("aaaa"), Unstable)
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 20; i++ {
			_, b, a2, err := fs.Write(root, f, 0, []byte{byte('b' + i%2), 'b', 'b', 'b'}, Unstable)
			if err != nil {
				t.Fatal(err)
			}
			if !a2.Mtime.After(b.Mtime) || a2.Size != a1.Size {
				t.Fatalf("write %d: mtime %v -> %v (size %d)", i, b.Mtime, a2.Mtime, a2.Size)
			}
		}
	})
}

// TestHandleOutsideExport: a handle naming a file on the same file system
// but outside the export (as a forged handle would) is stale, never served.
func TestHandleOutsideExport(t *testing.T) {
	testutil.NeedRoot(t, "open_by_handle_at")
	dir := t.TempDir()
	for _, d := range []string{"export", "outside", "export/.tristore"} {
		os.Mkdir(filepath.Join(dir, d), 0o755)
	}
	os.WriteFile(filepath.Join(dir, "outside", "secret"), []byte("s"), 0o600)
	os.WriteFile(filepath.Join(dir, "export", ".tristore", "sys"), []byte("s"), 0o600)
	out, err := Open(filepath.Join(dir, "outside"), Options{ExportID: 7})
	if err != nil {
		t.Fatal(err)
	}
	defer out.Close()
	sys, err := Open(filepath.Join(dir, "export", ".tristore"), Options{ExportID: 7})
	if err != nil {
		t.Fatal(err)
	}
	defer sys.Close()
	exp, err := Open(filepath.Join(dir, "export"), Options{ExportID: 7})
	if err != nil {
		t.Fatal(err)
	}
	defer exp.Close()
	for _, src := range []*FS{out, sys} {
		var name string
		if src == out {
			name = "secret"
		} else {
			name = "sys"
		}
		h, _, _, err := src.Lookup(root, src.Root(), name)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := exp.GetAttr(h); !errors.Is(err, ErrStale) {
			t.Fatalf("handle of %s outside the export: %v, want ErrStale", name, err)
		}
		buf := make([]byte, 1)
		if _, _, _, err := exp.Read(root, h, 0, buf); !errors.Is(err, ErrStale) {
			t.Fatalf("READ through a foreign handle: %v", err)
		}
	}
}
