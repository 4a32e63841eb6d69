package nfsclient

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tristore/tristore/fusefs/nfstree"
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
