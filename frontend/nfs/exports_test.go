package nfs

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tristore/tristore/proto/nfs3"
)

func TestParseExport(t *testing.T) {
	e, err := ParseExport("/bkt=ro,clients=10.0.0.0/8+192.0.2.7,all_squash,anonuid=1000,anongid=100")
	if err != nil {
		t.Fatal(err)
	}
	if e.Path != "/bkt" || !e.ReadOnly || !e.AllSquash || e.AnonUID != 1000 || e.AnonGID != 100 || len(e.Clients) != 2 {
		t.Fatalf("%+v", e)
	}
	if a, err := ParseExport("/=rw,async"); err != nil || !a.Async {
		t.Fatalf("async option: %+v %v", a, err)
	}
	if d, _ := ParseExport("/=rw"); d.Async {
		t.Fatal("exports must be sync by default")
	}
	for _, bad := range []string{"bkt=rw", "/a/b=rw", "/=rw,bogus", "/=clients=notacidr", "/=anonuid=x", "/.tristore=rw"} {
		if _, err := ParseExport(bad); err == nil {
			t.Errorf("ParseExport(%q) accepted", bad)
		}
	}
	d, err := ParseExport(DefaultExport)
	if err != nil || d.ReadOnly || d.RootSquash || d.Clients[0].String() != "127.0.0.0/8" {
		t.Fatalf("default export %+v %v", d, err)
	}
}

func TestExportRules(t *testing.T) {
	needRoot(t)
	dir := t.TempDir()
	for _, b := range []string{"ro-bucket", "sq-bucket", "far-bucket"} {
		os.Mkdir(filepath.Join(dir, b), 0o777)
		os.Chmod(filepath.Join(dir, b), 0o777)
	}
	os.WriteFile(filepath.Join(dir, "ro-bucket", "obj"), []byte("data"), 0o644)
	_, addr := testServer(t, dir,
		"/ro-bucket=ro",
		"/sq-bucket=rw,root_squash,anonuid=4242,anongid=4343",
		"/far-bucket=rw,clients=10.0.0.0/8",
	)
	c := dial(t, addr)

	// EXPORT lists all three.
	var ex nfs3.ExportRes
	c.call(nfs3.ProgMount, 3, nfs3.MountProcExport, nil, &ex)
	if len(ex.Exports) != 3 {
		t.Fatalf("EXPORT %+v", ex)
	}
	// Unauthorised client network -> MNT3ERR_ACCES.
	var mr nfs3.MntRes
	c.call(nfs3.ProgMount, 3, nfs3.MountProcMnt, &nfs3.DirPath{Path: "/far-bucket"}, &mr)
	if mr.Status != nfs3.MntErrAcces {
		t.Fatalf("MNT of a foreign network's export: %d", mr.Status)
	}
	c.call(nfs3.ProgMount, 3, nfs3.MountProcMnt, &nfs3.DirPath{Path: "/nowhere"}, &mr)
	if mr.Status != nfs3.MntErrNoEnt {
		t.Fatalf("MNT of a missing export: %d", mr.Status)
	}

	// Read-only export: reads work, writes get ROFS.
	ro := c.mount("/ro-bucket")
	lr := lookup(c, ro, "obj")
	mustOK(t, "LOOKUP in ro", lr.Status)
	if got, _ := read(t, c, lr.FH, 0, 10); string(got) != "data" {
		t.Fatalf("READ in ro export %q", got)
	}
	var wr nfs3.WriteRes
	c.nfs(nfs3.ProcWrite, &nfs3.WriteArgs{FH: lr.FH, Count: 1, Data: []byte("x"), Stable: nfs3.FileSync}, &wr)
	wantStatus(t, "WRITE in ro export", wr.Status, nfs3.ErrROFS)
	var cr nfs3.CreateRes
	c.nfs(nfs3.ProcCreate, &nfs3.CreateArgs{Where: nfs3.DirOpArgs{Dir: ro, Name: "new"}}, &cr)
	wantStatus(t, "CREATE in ro export", cr.Status, nfs3.ErrROFS)

	// Root squash: uid 0 becomes anonuid/anongid; others keep their ids.
	sq := c.mount("/sq-bucket")
	create(t, c, sq, "by-root")
	c.as(1000, 1000)
	create(t, c, sq, "by-user")
	for name, want := range map[string]uint32{"by-root": 4242, "by-user": 1000} {
		fi, err := os.Stat(filepath.Join(dir, "sq-bucket", name))
		if err != nil {
			t.Fatal(err)
		}
		if uid := fi.Sys().(*syscall.Stat_t).Uid; uid != want {
			t.Fatalf("%s owned by %d, want %d", name, uid, want)
		}
	}
	// Permissions are the kernel's: user 1000 cannot write a root-owned 0644 file.
	os.WriteFile(filepath.Join(dir, "sq-bucket", "roots"), []byte("r"), 0o644)
	lr = lookup(c, sq, "roots")
	c.nfs(nfs3.ProcWrite, &nfs3.WriteArgs{FH: lr.FH, Count: 1, Data: []byte("x"), Stable: nfs3.FileSync}, &wr)
	wantStatus(t, "WRITE to another user's file", wr.Status, nfs3.ErrAcces)
	// A handle from one export is not accepted as a directory of another for RENAME.
	var rn nfs3.RenameRes
	c.nfs(nfs3.ProcRename, &nfs3.RenameArgs{From: nfs3.DirOpArgs{Dir: sq, Name: "by-user"}, To: nfs3.DirOpArgs{Dir: ro, Name: "x"}}, &rn)
	wantStatus(t, "RENAME across exports", rn.Status, nfs3.ErrXDev)
}

// TestRestart: handles survive a server restart, the write verifier changes.
func TestRestart(t *testing.T) {
	dir := t.TempDir()
	s1, addr := testServer(t, dir)
	c := dial(t, addr)
	root := c.mount("/")
	var mk nfs3.CreateRes
	c.nfs(nfs3.ProcMkdir, &nfs3.MkdirArgs{Where: nfs3.DirOpArgs{Dir: root, Name: "sub"}}, &mk)
	f := create(t, c, mk.FH.FH, "keep")
	v1 := write(t, c, f, 0, []byte("persist"), nfs3.FileSync).Verf
	s1.Close()

	time.Sleep(2 * time.Millisecond)
	_, addr2 := testServer(t, dir)
	c2 := dial(t, addr2)
	if root2 := c2.mount("/"); !bytes.Equal(root2, root) {
		t.Fatal("root handle changed across restart")
	}
	if got, _ := read(t, c2, f, 0, 100); string(got) != "persist" {
		t.Fatalf("READ with pre-restart handle %q", got)
	}
	v2 := write(t, c2, f, 7, []byte("!"), nfs3.Unstable).Verf
	if v1 == v2 {
		t.Fatal("write verifier did not change across restart")
	}
	// Same inode number, new file: the old handle is stale.
	os.Remove(filepath.Join(dir, "sub", "keep"))
	os.WriteFile(filepath.Join(dir, "sub", "keep"), []byte("other"), 0o644)
	var ga nfs3.GetattrRes
	c2.nfs(nfs3.ProcGetattr, &nfs3.GetattrArgs{FH: f}, &ga)
	wantStatus(t, "GETATTR of replaced file", ga.Status, nfs3.ErrStale)
}

// TestFileSyncSurvivesKill runs the server in a child process, writes with
// FILE_SYNC, kills the child with SIGKILL before it can do anything else and
// checks the bytes on disk; then does UNSTABLE + COMMIT the same way.
func TestFileSyncSurvivesKill(t *testing.T) {
	if os.Getenv("TRISTORE_NFS_CHILD") != "" {
		return
	}
	dir := t.TempDir()
	readyFile := filepath.Join(t.TempDir(), "addr")
	cmd := exec.Command(os.Args[0], "-test.run=^TestChildServer$")
	cmd.Env = append(os.Environ(), "TRISTORE_NFS_CHILD="+dir, "TRISTORE_NFS_CHILD_READY="+readyFile)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	t.Cleanup(func() {
		if !killed {
			cmd.Process.Kill()
			cmd.Wait()
		}
	})
	var addr string
	for i := 0; i < 600 && addr == ""; i++ {
		if b, err := os.ReadFile(readyFile); err == nil && strings.Contains(string(b), ":") {
			addr = string(b)
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if addr == "" {
		t.Fatal("child server did not start in 30s")
	}
	c := dial(t, addr)
	root := c.mount("/")
	f := create(t, c, root, "durable")
	payload := bytes.Repeat([]byte("0123456789abcdef"), 4096)
	write(t, c, f, 0, payload, nfs3.FileSync)
	g := create(t, c, root, "committed")
	write(t, c, g, 0, payload[:1000], nfs3.Unstable)
	var cm nfs3.CommitRes
	c.nfs(nfs3.ProcCommit, &nfs3.CommitArgs{FH: g}, &cm)
	mustOK(t, "COMMIT", cm.Status)
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	killed = true
	if b, _ := os.ReadFile(filepath.Join(dir, "durable")); !bytes.Equal(b, payload) {
		t.Fatalf("FILE_SYNC data after kill -9: %d bytes", len(b))
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "committed")); !bytes.Equal(b, payload[:1000]) {
		t.Fatalf("committed data after kill -9: %d bytes", len(b))
	}
}

// TestChildServer is the child half of TestFileSyncSurvivesKill.
func TestChildServer(t *testing.T) {
	dir := os.Getenv("TRISTORE_NFS_CHILD")
	if dir == "" {
		t.Skip("child process of TestFileSyncSurvivesKill only")
	}
	_, addr := testServer(t, dir)
	ready := os.Getenv("TRISTORE_NFS_CHILD_READY")
	os.WriteFile(ready+".tmp", []byte(addr), 0o644)
	os.Rename(ready+".tmp", ready)
	time.Sleep(2 * time.Minute) // killed by the parent long before this
}
