package nfs

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/tristore/tristore/proto/nfs3"
	"github.com/tristore/tristore/store/inuse"
)

// REMOVE, RENAME (away and over) and a SETATTR size change of a file
// served as a block volume answer NFS3ERR_ACCES over the wire and leave
// the file as it was; after the volume is closed they work.
func TestServedVolumeRefusedOverNFS(t *testing.T) {
	needRoot(t)
	dir := t.TempDir()
	os.Mkdir(filepath.Join(dir, "vols"), 0o755)
	vp := filepath.Join(dir, "vols", "disk")
	content := bytes.Repeat([]byte("lun data"), 1024)
	if err := os.WriteFile(vp, content, 0o644); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "vols", "new"), []byte("replacement"), 0o644)
	_, addr := testServer(t, dir)
	c := dial(t, addr)
	root := c.mount("/")
	lr := lookup(c, root, "vols")
	mustOK(t, "LOOKUP vols", lr.Status)
	vols := append(nfs3.FH(nil), lr.FH...)
	lr = lookup(c, vols, "disk")
	mustOK(t, "LOOKUP disk", lr.Status)
	disk := append(nfs3.FH(nil), lr.FH...)

	served, err := inuse.Serve(vp)
	if err != nil {
		t.Fatal(err)
	}
	defer served.Close()
	var rm nfs3.RemoveRes
	c.nfs(nfs3.ProcRemove, &nfs3.DirOpArgs{Dir: vols, Name: "disk"}, &rm)
	wantStatus(t, "REMOVE served volume", rm.Status, nfs3.ErrAcces)
	var sa nfs3.SetattrRes
	c.nfs(nfs3.ProcSetattr, &nfs3.SetattrArgs{FH: disk, Attr: nfs3.Sattr{Size: nfs3.Uint64Ptr(1 << 20)}}, &sa)
	wantStatus(t, "SETATTR truncate served volume", sa.Status, nfs3.ErrAcces)
	var rn nfs3.RenameRes
	c.nfs(nfs3.ProcRename, &nfs3.RenameArgs{From: nfs3.DirOpArgs{Dir: vols, Name: "new"}, To: nfs3.DirOpArgs{Dir: vols, Name: "disk"}}, &rn)
	wantStatus(t, "RENAME over served volume", rn.Status, nfs3.ErrAcces)
	c.nfs(nfs3.ProcRename, &nfs3.RenameArgs{From: nfs3.DirOpArgs{Dir: vols, Name: "disk"}, To: nfs3.DirOpArgs{Dir: root, Name: "away"}}, &rn)
	wantStatus(t, "RENAME served volume away", rn.Status, nfs3.ErrAcces)
	if got, _ := read(t, c, disk, 0, 8); string(got) != "lun data" {
		t.Fatalf("READ of a served volume: %q", got)
	}
	if got, err := os.ReadFile(vp); err != nil || !bytes.Equal(got, content) {
		t.Fatalf("served volume changed: %v", err)
	}

	served.Close()
	c.nfs(nfs3.ProcSetattr, &nfs3.SetattrArgs{FH: disk, Attr: nfs3.Sattr{Size: nfs3.Uint64Ptr(0)}}, &sa)
	mustOK(t, "SETATTR truncate after close", sa.Status)
	c.nfs(nfs3.ProcRemove, &nfs3.DirOpArgs{Dir: vols, Name: "disk"}, &rm)
	mustOK(t, "REMOVE after close", rm.Status)
}
