package vfs

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/tristore/tristore/store"
	"github.com/tristore/tristore/store/inuse"
)

// A file served as a block volume (the served lock of store/inuse, as the
// iSCSI target takes it) cannot be removed, renamed away, replaced by a
// rename or truncated through the file view; it can still be read and its
// other attributes set. Once it is no longer served everything works.
func TestServedVolumeRefusesNamespaceChanges(t *testing.T) {
	modes(t, func(t *testing.T, dir string, open func() *FS) {
		fs := open()
		content := bytes.Repeat([]byte("lun data"), 512)
		vp := filepath.Join(dir, "vol")
		if err := os.WriteFile(vp, content, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "other"), []byte("new"), 0o644); err != nil {
			t.Fatal(err)
		}
		served, err := inuse.Serve(vp)
		if err != nil {
			t.Fatal(err)
		}
		defer served.Close()
		vh, _, _, err := fs.Lookup(root, fs.Root(), "vol")
		if err != nil {
			t.Fatal(err)
		}
		zero, same := uint64(0), uint64(len(content))
		refused := map[string]error{}
		_, refused["REMOVE"] = fs.Remove(root, fs.Root(), "vol")
		_, _, refused["SETATTR size 0"] = fs.SetAttrs(root, vh, SetAttr{Size: &zero}, nil)
		_, _, refused["RENAME away"] = fs.Rename(root, fs.Root(), "vol", fs.Root(), "moved")
		_, _, refused["RENAME over"] = fs.Rename(root, fs.Root(), "other", fs.Root(), "vol")
		_, _, _, refused["CREATE unchecked size 0"] = fs.Create(root, fs.Root(), "vol", CreateUnchecked, SetAttr{Size: &zero}, [8]byte{})
		for op, err := range refused {
			if !errors.Is(err, ErrInUse) || !errors.Is(err, store.ErrInUse) {
				t.Errorf("%s of a served volume: %v, want ErrInUse", op, err)
			}
		}
		if got, err := os.ReadFile(vp); err != nil || !bytes.Equal(got, content) {
			t.Fatalf("volume changed by refused operations: %v", err)
		}
		if _, err := os.Stat(filepath.Join(dir, "other")); err != nil {
			t.Fatalf("the refused rename's source went away: %v", err)
		}
		// Allowed while served: a size that does not change, mode, reads.
		mode := uint32(0o600)
		if _, _, err := fs.SetAttrs(root, vh, SetAttr{Size: &same, Mode: &mode}, nil); err != nil {
			t.Fatalf("SETATTR keeping the size: %v", err)
		}
		buf := make([]byte, 8)
		if n, _, _, err := fs.Read(root, vh, 0, buf); err != nil || n != 8 || string(buf) != "lun data" {
			t.Fatalf("READ of a served volume: %d %v %q", n, err, buf)
		}

		served.Close()
		if _, _, err := fs.SetAttrs(root, vh, SetAttr{Size: &zero}, nil); err != nil {
			t.Fatalf("truncate after the volume was closed: %v", err)
		}
		if _, _, err := fs.Rename(root, fs.Root(), "other", fs.Root(), "vol"); err != nil {
			t.Fatalf("rename over after close: %v", err)
		}
		if _, err := fs.Remove(root, fs.Root(), "vol"); err != nil {
			t.Fatalf("remove after close: %v", err)
		}
	})
}
