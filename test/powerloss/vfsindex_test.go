package powerloss_test

import (
	"path/filepath"
	"testing"

	"github.com/tristore/tristore/internal/powerloss"
	"github.com/tristore/tristore/vfs"
)

// TestVFSIndexHandlesSurvivePowerLoss: where the kernel cannot decode file
// handles (a server not running as root), vfs keeps its own handle index.
// A handle that went out in a reply (MKDIR, CREATE, RENAME on a sync
// export) must still resolve after a power cut, so its index entry must be
// durable before the reply.
func TestVFSIndexHandlesSurvivePowerLoss(t *testing.T) {
	needFUSE(t)
	pfs := powerloss.New()
	data := t.TempDir()
	if err := pfs.Mount(data); err != nil {
		t.Fatal(err)
	}
	defer pfs.Unmount()
	open := func() *vfs.FS {
		t.Helper()
		fs, err := vfs.Open(data, vfs.Options{IndexDir: filepath.Join(data, ".tristore", "vfs", "index"), ForceIndex: true})
		if err != nil {
			t.Fatal(err)
		}
		return fs
	}
	fs := open()
	root := vfs.Cred{}
	d, _, _, err := fs.Mkdir(root, fs.Root(), "dir", vfs.SetAttr{})
	if err != nil {
		t.Fatal(err)
	}
	f, _, _, err := fs.Create(root, d, "file", vfs.CreateGuarded, vfs.SetAttr{}, [8]byte{})
	if err != nil {
		t.Fatal(err)
	}
	g, _, _, err := fs.Create(root, d, "moved", vfs.CreateGuarded, vfs.SetAttr{}, [8]byte{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := fs.Rename(root, d, "moved", fs.Root(), "moved"); err != nil {
		t.Fatal(err)
	}
	fs.Close()
	pfs.Cut()
	if err := pfs.Remount(); err != nil {
		t.Fatal(err)
	}
	fs = open()
	defer fs.Close()
	for name, h := range map[string]vfs.Handle{"dir": d, "dir/file": f, "moved (renamed out of dir)": g} {
		if _, err := fs.GetAttr(h); err != nil {
			t.Errorf("handle of %s from before the power cut: %v", name, err)
		}
	}
}
