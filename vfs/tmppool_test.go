package vfs

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tristore/tristore/internal/testutil"
	"github.com/tristore/tristore/store/inodepool"
	"golang.org/x/sys/unix"
)

// poolInodes waits (up to 5 s) for fs's pool to be full and returns the
// inode numbers of the unnamed files in it.
func poolInodes(t *testing.T, fs *FS) map[uint64]bool {
	t.Helper()
	if fs.pool == nil {
		t.Fatal("no pool of unnamed files (O_TMPFILE unsupported here?)")
	}
	deadline := time.Now().Add(5 * time.Second)
	for fs.pool.Ready() < inodepool.Size && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	inos := map[uint64]bool{}
	for ino, p := range testutil.UnnamedFiles(t, fs.root) {
		// A file CreateFile named is still listed through the pool's
		// descriptor the READ/WRITE cache keeps (filecache.go): skip it.
		var st unix.Stat_t
		if unix.Stat(p, &st) == nil && st.Nlink > 0 {
			continue
		}
		inos[ino] = true
	}
	if len(inos) != inodepool.Size {
		t.Fatalf("pool holds %d files, want %d", len(inos), inodepool.Size)
	}
	return inos
}

// TestCreateFileFromPool: CreateFile names an inode made beforehand (not
// one allocated during the call) and gives it what a plain create as the
// caller would: owner, group (the directory's when it is set-group-ID),
// exact mode, size 0, current times; an existing name and a directory the
// caller may not write still fail as in Create.
func TestCreateFileFromPool(t *testing.T) {
	testutil.NeedRoot(t, "chown to the caller, open_by_handle_at")
	data := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	fs, err := Open(data, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	user := Cred{UID: 4321, GID: 8765, Groups: []uint32{8765}}
	for _, d := range []struct {
		name    string
		mode    os.FileMode
		gid     int
		wantGID uint32
	}{{"plain", 0o777, 0, 8765}, {"setgid", 0o777 | os.ModeSetgid, 777, 777}} {
		p := filepath.Join(data, d.name)
		if err := os.Mkdir(p, 0o777); err != nil {
			t.Fatal(err)
		}
		if err := os.Chown(p, 0, d.gid); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, d.mode); err != nil {
			t.Fatal(err)
		}
		dh, _, _, err := fs.Lookup(root, fs.Root(), d.name)
		if err != nil {
			t.Fatal(err)
		}
		pooled := poolInodes(t, fs)
		start := time.Now().Add(-time.Second)
		mode := uint32(0o640)
		h, a, dc, err := fs.CreateFile(user, dh, "f", CreateGuarded, SetAttr{Mode: &mode}, [8]byte{})
		if err != nil {
			t.Fatalf("%s: CreateFile: %v", d.name, err)
		}
		if !pooled[a.FileID] {
			t.Errorf("%s: the new file's inode %d was not one of the pool's: allocated during the call", d.name, a.FileID)
		}
		if a.UID != 4321 || a.GID != d.wantGID || a.Mode != 0o640 || a.Size != 0 || a.Nlink != 1 || a.Type != TypeRegular {
			t.Errorf("%s: attrs uid %d gid %d mode %o size %d nlink %d type %d, want 4321 %d 640 0 1 regular",
				d.name, a.UID, a.GID, a.Mode, a.Size, a.Nlink, a.Type, d.wantGID)
		}
		if a.Mtime.Before(start) || a.Atime.Before(start) || a.Ctime.Before(start) {
			t.Errorf("%s: times %v %v %v are older than the call", d.name, a.Atime, a.Mtime, a.Ctime)
		}
		if dc.Before == nil || dc.After == nil {
			t.Errorf("%s: directory attributes before/after missing", d.name)
		}
		got, ga, _, err := fs.Lookup(user, dh, "f")
		if err != nil || got.FileID() != h.FileID() || ga.FileID != a.FileID {
			t.Fatalf("%s: lookup of the new name: %v (ino %d, want %d)", d.name, err, ga.FileID, a.FileID)
		}
		if _, _, _, err := fs.Write(user, h, 0, []byte("hello"), FileSync); err != nil {
			t.Fatalf("%s: write as the owner: %v", d.name, err)
		}
		// An existing name: GUARDED fails, the file is left as it is.
		if _, _, _, err := fs.CreateFile(user, dh, "f", CreateGuarded, SetAttr{Mode: &mode}, [8]byte{}); !errors.Is(err, unix.EEXIST) {
			t.Errorf("%s: GUARDED create of an existing name: %v, want EEXIST", d.name, err)
		}
		if b, err := os.ReadFile(filepath.Join(p, "f")); err != nil || string(b) != "hello" {
			t.Errorf("%s: existing file now %q, %v", d.name, b, err)
		}
	}
	// A caller who may not write the directory is refused, and no name appears.
	ro := filepath.Join(data, "ro")
	if err := os.Mkdir(ro, 0o755); err != nil {
		t.Fatal(err)
	}
	rh, _, _, err := fs.Lookup(root, fs.Root(), "ro")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := fs.CreateFile(user, rh, "f", CreateGuarded, SetAttr{}, [8]byte{}); !errors.Is(err, unix.EACCES) {
		t.Errorf("create in a directory the caller may not write: %v, want EACCES", err)
	}
	if _, err := os.Lstat(filepath.Join(ro, "f")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("refused create left a name: %v", err)
	}
	// The pool fills up again in the background.
	poolInodes(t, fs)
}
