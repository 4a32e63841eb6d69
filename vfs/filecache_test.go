package vfs

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tristore/tristore/internal/testutil"
	"golang.org/x/sys/unix"
)

// readAll reads h (up to 64 KiB) as c through Read.
func readAll(fs *FS, c Cred, h Handle) ([]byte, error) {
	buf := make([]byte, 64<<10)
	n, _, _, err := fs.Read(c, h, 0, buf)
	return buf[:n], err
}

// The READ cache (filecache.go) never lets a cached descriptor outlive
// what the handle and the caller's rights allow: a chmod that takes the
// caller's read permission away is obeyed at the next READ, a file whose
// directory moved into the store's reserved names is stale, a removed file
// is stale, and a file replaced in place (new data, same inode) is read anew.
func TestFileCacheRechecks(t *testing.T) {
	testutil.NeedRoot(t, "setfsuid")
	modes(t, func(t *testing.T, dir string, open func() *FS) {
		fs := open()
		other := Cred{UID: 4321, GID: 4321}
		d, _, _, err := fs.Mkdir(root, fs.Root(), "d", SetAttr{})
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, "d", "f")
		if err := os.WriteFile(p, []byte("readable by all"), 0o644); err != nil {
			t.Fatal(err)
		}
		h, _, _, err := fs.Lookup(root, d, "f")
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 2; i++ {
			if b, err := readAll(fs, other, h); err != nil || string(b) != "readable by all" {
				t.Fatalf("READ %d as another user: %q, %v", i, b, err)
			}
		}
		if fs.cachedFiles() != 1 {
			t.Fatalf("%d files cached after two READs, want 1", fs.cachedFiles())
		}

		// chmod: the other user may no longer read.
		if err := os.Chmod(p, 0o600); err != nil {
			t.Fatal(err)
		}
		if b, err := readAll(fs, other, h); !errors.Is(err, unix.EACCES) {
			t.Fatalf("READ after chmod 600 as another user: %q, %v; want EACCES", b, err)
		}

		// Rewritten in place (same inode): the new data.
		if err := os.WriteFile(p, []byte("second version!"), 0o644); err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 2; i++ {
			if b, err := readAll(fs, root, h); err != nil || string(b) != "second version!" {
				t.Fatalf("READ %d after an in-place rewrite: %q, %v", i, b, err)
			}
		}

		// The directory above moves into a reserved name: the file is
		// outside what the export shows, so its handle is stale, though
		// the file itself did not change (same ctime).
		if err := os.Rename(filepath.Join(dir, "d"), filepath.Join(dir, ReservedPrefix+"-moved")); err != nil {
			t.Fatal(err)
		}
		if b, err := readAll(fs, root, h); !errors.Is(err, ErrStale) {
			t.Fatalf("READ of a file moved under %s: %q, %v; want ErrStale", ReservedPrefix, b, err)
		}
		if err := os.Rename(filepath.Join(dir, ReservedPrefix+"-moved"), filepath.Join(dir, "d")); err != nil {
			t.Fatal(err)
		}
		if b, err := readAll(fs, root, h); err != nil || !bytes.Equal(b, []byte("second version!")) {
			t.Fatalf("READ after the directory came back: %q, %v", b, err)
		}

		// Removed behind the server's back: stale at once.
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
		if b, err := readAll(fs, root, h); !errors.Is(err, ErrStale) {
			t.Fatalf("READ of a removed file: %q, %v; want ErrStale", b, err)
		}
	})
}

// The cache is bounded in entries and in time: at most fileCacheMax files,
// each closed once unused for fileCacheIdle (so a removed file's inode is
// not kept alive), and a REMOVE through the server closes it at once.
func TestFileCacheBounded(t *testing.T) {
	modes(t, func(t *testing.T, dir string, open func() *FS) {
		fs := open()
		var hs []Handle
		for i := 0; i < fileCacheMax+8; i++ {
			name := fmt.Sprintf("f%d", i)
			if err := os.WriteFile(filepath.Join(dir, name), []byte(name), 0o644); err != nil {
				t.Fatal(err)
			}
			h, _, _, err := fs.Lookup(root, fs.Root(), name)
			if err != nil {
				t.Fatal(err)
			}
			if b, err := readAll(fs, root, h); err != nil || string(b) != name {
				t.Fatalf("READ %s: %q, %v", name, b, err)
			}
			hs = append(hs, h)
		}
		if n := fs.cachedFiles(); n != fileCacheMax {
			t.Fatalf("%d files cached after %d READs, want %d", n, len(hs), fileCacheMax)
		}
		last := hs[len(hs)-1]
		if _, err := fs.Remove(root, fs.Root(), fmt.Sprintf("f%d", len(hs)-1)); err != nil {
			t.Fatal(err)
		}
		if n := fs.cachedFiles(); n != fileCacheMax-1 {
			t.Fatalf("%d files cached after a REMOVE of a cached file, want %d", n, fileCacheMax-1)
		}
		if _, err := readAll(fs, root, last); !errors.Is(err, ErrStale) {
			t.Fatalf("READ of the removed file: %v, want ErrStale", err)
		}
		deadline := time.Now().Add(fileCacheIdle*2 + 5*time.Second)
		for fs.cachedFiles() != 0 {
			if time.Now().After(deadline) {
				t.Fatalf("%d files still cached %v after the last READ", fs.cachedFiles(), fileCacheIdle*2+5*time.Second)
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
}

// A file CreateFile made is cached open for its creator's WRITEs and
// COMMIT (no handle resolution for them), each of its own writes keeps
// the entry valid, and a chmod that takes another writer's permission
// away is obeyed at that writer's next WRITE.
func TestFileCacheWrites(t *testing.T) {
	testutil.NeedRoot(t, "setfsuid, open_by_handle_at")
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	fs, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	if fs.pool == nil {
		t.Skip("no O_TMPFILE here: CreateFile does not use the pool")
	}
	owner := Cred{UID: 4321, GID: 4321}
	mode := uint32(0o666)
	h, _, _, err := fs.CreateFile(owner, fs.Root(), "f", CreateGuarded, SetAttr{Mode: &mode}, [8]byte{})
	if err != nil {
		t.Fatal(err)
	}
	opens := fs.files.opens.Load()
	for i := 0; i < 10; i++ {
		if _, _, _, err := fs.Write(owner, h, uint64(i)*4096, bytes.Repeat([]byte{byte(i)}, 4096), Unstable); err != nil {
			t.Fatalf("WRITE %d: %v", i, err)
		}
	}
	if _, a, err := fs.CommitAs(owner, h); err != nil || a.Size != 10*4096 {
		t.Fatalf("COMMIT: size %d, %v", a.Size, err)
	}
	if n := fs.files.opens.Load() - opens; n != 0 {
		t.Fatalf("10 WRITEs and a COMMIT after CreateFile opened the file %d times, want 0 (cached)", n)
	}

	// Another writer, allowed by the mode, then not.
	other := Cred{UID: 5555, GID: 5555}
	for i := 0; i < 2; i++ {
		if _, _, _, err := fs.Write(other, h, 0, []byte("other"), Unstable); err != nil {
			t.Fatalf("WRITE %d by another user (mode 666): %v", i, err)
		}
	}
	if err := os.Chmod(filepath.Join(dir, "f"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := fs.Write(other, h, 0, []byte("other"), Unstable); !errors.Is(err, unix.EACCES) {
		t.Fatalf("WRITE by another user after chmod 644: %v, want EACCES", err)
	}
	// The owner still may (an owner may always write its file).
	if _, _, _, err := fs.Write(owner, h, 0, []byte("owner"), FileSync); err != nil {
		t.Fatalf("WRITE by the owner after chmod 644: %v", err)
	}
	if err := os.Remove(filepath.Join(dir, "f")); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := fs.Write(owner, h, 0, []byte("gone"), Unstable); !errors.Is(err, ErrStale) {
		t.Fatalf("WRITE to a removed file: %v, want ErrStale", err)
	}
	if _, _, err := fs.CommitAs(owner, h); !errors.Is(err, ErrStale) {
		t.Fatalf("COMMIT of a removed file: %v, want ErrStale", err)
	}
}

// Whole-file mappings stay within fileMapBudget per export; a closed
// entry gives its share back.
func TestFileCacheMapBudget(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	var fc fileCache
	var fs []*openFile
	const size = fileMapMax
	for i := 0; i <= fileMapBudget/size; i++ {
		fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			t.Fatal(err)
		}
		f := &openFile{fc: &fc, fd: fd, refs: 1}
		fs = append(fs, f)
		m := f.mapping(size) // past the end of the file: never touched here
		if want := i < fileMapBudget/size; (m != nil) != want {
			t.Fatalf("mapping %d of %d MiB: mapped %v, want %v (budget %d MiB)", i, size>>20, m != nil, want, fileMapBudget>>20)
		}
	}
	fs[0].release()
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	f := &openFile{fc: &fc, fd: fd, refs: 1}
	if f.mapping(size) == nil {
		t.Fatal("no mapping after an entry within the budget closed")
	}
	for _, f := range append(fs[1:], f) {
		f.release()
	}
	if n := fc.mapped.Load(); n != 0 {
		t.Fatalf("%d bytes counted as mapped after every entry closed", n)
	}
}
