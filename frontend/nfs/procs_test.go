package nfs

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"github.com/tristore/tristore/proto/nfs3"
)

func mustOK(t *testing.T, what string, st nfs3.Status) {
	t.Helper()
	if st != nfs3.OK {
		t.Fatalf("%s: %v", what, st)
	}
}

func wantStatus(t *testing.T, what string, got, want nfs3.Status) {
	t.Helper()
	if got != want {
		t.Fatalf("%s: got %v, want %v", what, got, want)
	}
}

// wccAfter checks that a modifying reply carried post-op attributes.
func wccAfter(t *testing.T, what string, d nfs3.WccData) {
	t.Helper()
	if d.After.Attr == nil || d.Before.Attr == nil {
		t.Fatalf("%s: wcc_data missing (before %v after %v)", what, d.Before.Attr != nil, d.After.Attr != nil)
	}
}

func create(t *testing.T, c *rpcConn, dir nfs3.FH, name string) nfs3.FH {
	t.Helper()
	var res nfs3.CreateRes
	c.nfs(nfs3.ProcCreate, &nfs3.CreateArgs{Where: nfs3.DirOpArgs{Dir: dir, Name: name}, Mode: nfs3.Unchecked,
		Attr: nfs3.Sattr{Mode: nfs3.Uint32Ptr(0o644)}}, &res)
	mustOK(t, "CREATE "+name, res.Status)
	wccAfter(t, "CREATE", res.DirWcc)
	if res.FH.FH == nil || res.Attr.Attr == nil {
		t.Fatal("CREATE: no handle or attributes")
	}
	return append(nfs3.FH(nil), res.FH.FH...)
}

func write(t *testing.T, c *rpcConn, fh nfs3.FH, off uint64, data []byte, how nfs3.StableHow) nfs3.WriteRes {
	t.Helper()
	var res nfs3.WriteRes
	c.nfs(nfs3.ProcWrite, &nfs3.WriteArgs{FH: fh, Offset: off, Count: uint32(len(data)), Stable: how, Data: data}, &res)
	mustOK(t, "WRITE", res.Status)
	wccAfter(t, "WRITE", res.Wcc)
	if res.Count != uint32(len(data)) || res.Committed < how {
		t.Fatalf("WRITE: count %d committed %d", res.Count, res.Committed)
	}
	return res
}

func read(t *testing.T, c *rpcConn, fh nfs3.FH, off uint64, n uint32) ([]byte, bool) {
	t.Helper()
	var res nfs3.ReadRes
	c.nfs(nfs3.ProcRead, &nfs3.ReadArgs{FH: fh, Offset: off, Count: n}, &res)
	mustOK(t, "READ", res.Status)
	return append([]byte(nil), res.Data...), res.EOF
}

func lookup(c *rpcConn, dir nfs3.FH, name string) nfs3.LookupRes {
	var res nfs3.LookupRes
	c.nfs(nfs3.ProcLookup, &nfs3.DirOpArgs{Dir: dir, Name: name}, &res)
	return res
}

// TestAllProcedures drives every NFS v3 procedure once or more through the
// wire and checks the results against the directory tree on disk.
func TestAllProcedures(t *testing.T) {
	dir := t.TempDir()
	_, addr := testServer(t, dir)
	c := dial(t, addr)
	root := c.mount("/")

	c.nfs(nfs3.ProcNull, nil, nil)

	var ga nfs3.GetattrRes
	c.nfs(nfs3.ProcGetattr, &nfs3.GetattrArgs{FH: root}, &ga)
	mustOK(t, "GETATTR root", ga.Status)
	if ga.Attr.Type != nfs3.TypeDir {
		t.Fatalf("root type %d", ga.Attr.Type)
	}

	// MKDIR, CREATE
	var mk nfs3.CreateRes
	c.nfs(nfs3.ProcMkdir, &nfs3.MkdirArgs{Where: nfs3.DirOpArgs{Dir: root, Name: "d"}, Attr: nfs3.Sattr{Mode: nfs3.Uint32Ptr(0o750)}}, &mk)
	mustOK(t, "MKDIR", mk.Status)
	wccAfter(t, "MKDIR", mk.DirWcc)
	if mk.Attr.Attr.Mode != 0o750 {
		t.Fatalf("MKDIR mode %o", mk.Attr.Attr.Mode)
	}
	d := append(nfs3.FH(nil), mk.FH.FH...)
	f := create(t, c, d, "f.txt")

	// WRITE (unstable) + COMMIT, READ back, partial overwrite.
	w1 := write(t, c, f, 0, []byte("hello world"), nfs3.Unstable)
	var cm nfs3.CommitRes
	c.nfs(nfs3.ProcCommit, &nfs3.CommitArgs{FH: f}, &cm)
	mustOK(t, "COMMIT", cm.Status)
	wccAfter(t, "COMMIT", cm.Wcc)
	if cm.Verf != w1.Verf {
		t.Fatal("COMMIT verifier differs from WRITE verifier")
	}
	write(t, c, f, 6, []byte("WORLD"), nfs3.FileSync)
	write(t, c, f, 11, []byte("!"), nfs3.DataSync)
	if got, eof := read(t, c, f, 0, 100); string(got) != "hello WORLD!" || !eof {
		t.Fatalf("READ %q eof %v", got, eof)
	}
	if got, eof := read(t, c, f, 6, 3); string(got) != "WOR" || eof {
		t.Fatalf("partial READ %q eof %v", got, eof)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "d", "f.txt")); string(b) != "hello WORLD!" {
		t.Fatalf("on disk %q", b)
	}

	// Sparse write far past the end: the gap reads as zeros.
	sp := create(t, c, d, "sparse")
	write(t, c, sp, 1<<20, []byte("tail"), nfs3.FileSync)
	if got, _ := read(t, c, sp, 1<<20-4, 8); !bytes.Equal(got, []byte("\x00\x00\x00\x00tail")) {
		t.Fatalf("sparse READ %q", got)
	}
	c.nfs(nfs3.ProcGetattr, &nfs3.GetattrArgs{FH: sp}, &ga)
	if ga.Attr.Size != 1<<20+4 || ga.Attr.Used >= 1<<20 {
		t.Fatalf("sparse size %d used %d", ga.Attr.Size, ga.Attr.Used)
	}

	// SETATTR: truncate, then guard mismatch.
	c.nfs(nfs3.ProcGetattr, &nfs3.GetattrArgs{FH: f}, &ga)
	var sa nfs3.SetattrRes
	c.nfs(nfs3.ProcSetattr, &nfs3.SetattrArgs{FH: f, Attr: nfs3.Sattr{Size: nfs3.Uint64Ptr(5), Mode: nfs3.Uint32Ptr(0o600)}, Guard: &ga.Attr.Ctime}, &sa)
	mustOK(t, "SETATTR", sa.Status)
	wccAfter(t, "SETATTR", sa.Wcc)
	if sa.Wcc.After.Attr.Size != 5 || sa.Wcc.After.Attr.Mode != 0o600 {
		t.Fatalf("SETATTR result size %d mode %o", sa.Wcc.After.Attr.Size, sa.Wcc.After.Attr.Mode)
	}
	c.nfs(nfs3.ProcSetattr, &nfs3.SetattrArgs{FH: f, Attr: nfs3.Sattr{Size: nfs3.Uint64Ptr(1)}, Guard: &nfs3.Time{Sec: 1}}, &sa)
	wantStatus(t, "SETATTR bad guard", sa.Status, nfs3.ErrNotSync)
	mt := nfs3.Time{Sec: 1_000_000_000, Nsec: 5}
	c.nfs(nfs3.ProcSetattr, &nfs3.SetattrArgs{FH: f, Attr: nfs3.Sattr{Mtime: nfs3.SetTime{How: nfs3.SetToClientTime, Time: mt}}}, &sa)
	mustOK(t, "SETATTR mtime", sa.Status)
	if sa.Wcc.After.Attr.Mtime != mt {
		t.Fatalf("mtime %+v", sa.Wcc.After.Attr.Mtime)
	}

	// LOOKUP, ACCESS
	lr := lookup(c, d, "f.txt")
	mustOK(t, "LOOKUP", lr.Status)
	if !bytes.Equal(lr.FH, f) || lr.DirAttr.Attr == nil || lr.Attr.Attr.Size != 5 {
		t.Fatal("LOOKUP returned a different handle or no attributes")
	}
	wantStatus(t, "LOOKUP missing", lookup(c, d, "nope").Status, nfs3.ErrNoEnt)
	if lr := lookup(c, d, ".."); lr.Status != nfs3.OK || !bytes.Equal(lr.FH, root) {
		t.Fatalf("LOOKUP .. -> %v", lr.Status)
	}
	if lr := lookup(c, root, ".."); lr.Status != nfs3.OK || !bytes.Equal(lr.FH, root) {
		t.Fatalf("LOOKUP .. at root -> %v (must stay inside the export)", lr.Status)
	}
	var ac nfs3.AccessRes
	c.nfs(nfs3.ProcAccess, &nfs3.AccessArgs{FH: f, Access: 0x3f}, &ac)
	mustOK(t, "ACCESS", ac.Status)
	if ac.Access&(nfs3.AccessRead|nfs3.AccessModify) != nfs3.AccessRead|nfs3.AccessModify {
		t.Fatalf("ACCESS %x", ac.Access)
	}

	// SYMLINK, READLINK
	var sl nfs3.CreateRes
	c.nfs(nfs3.ProcSymlink, &nfs3.SymlinkArgs{Where: nfs3.DirOpArgs{Dir: d, Name: "ln"}, Target: "f.txt"}, &sl)
	mustOK(t, "SYMLINK", sl.Status)
	wccAfter(t, "SYMLINK", sl.DirWcc)
	var rl nfs3.ReadlinkRes
	c.nfs(nfs3.ProcReadlink, &nfs3.GetattrArgs{FH: sl.FH.FH}, &rl)
	if rl.Status != nfs3.OK || rl.Path != "f.txt" {
		t.Fatalf("READLINK %v %q", rl.Status, rl.Path)
	}
	c.nfs(nfs3.ProcReadlink, &nfs3.GetattrArgs{FH: f}, &rl)
	wantStatus(t, "READLINK of a file", rl.Status, nfs3.ErrInval)

	// LINK
	var lk nfs3.LinkRes
	c.nfs(nfs3.ProcLink, &nfs3.LinkArgs{FH: f, Link: nfs3.DirOpArgs{Dir: root, Name: "hard"}}, &lk)
	mustOK(t, "LINK", lk.Status)
	wccAfter(t, "LINK", lk.LinkWcc)
	if lk.Attr.Attr.Nlink != 2 {
		t.Fatalf("nlink after LINK %d", lk.Attr.Attr.Nlink)
	}

	// RENAME across directories; the handle stays valid.
	var rn nfs3.RenameRes
	c.nfs(nfs3.ProcRename, &nfs3.RenameArgs{From: nfs3.DirOpArgs{Dir: d, Name: "f.txt"}, To: nfs3.DirOpArgs{Dir: root, Name: "moved.txt"}}, &rn)
	mustOK(t, "RENAME", rn.Status)
	wccAfter(t, "RENAME from", rn.FromWcc)
	wccAfter(t, "RENAME to", rn.ToWcc)
	if _, err := os.Stat(filepath.Join(dir, "moved.txt")); err != nil {
		t.Fatal(err)
	}
	if got, _ := read(t, c, f, 0, 10); string(got) != "hello" {
		t.Fatalf("READ after rename %q", got)
	}

	// MKNOD makes a FIFO.
	var mn nfs3.CreateRes
	c.nfs(nfs3.ProcMknod, &nfs3.MknodArgs{Where: nfs3.DirOpArgs{Dir: d, Name: "fifo"}, Type: nfs3.TypeFifo}, &mn)
	wantStatus(t, "MKNOD", mn.Status, nfs3.OK)

	// CREATE GUARDED on an existing name; EXCLUSIVE is idempotent per verifier.
	var cr nfs3.CreateRes
	c.nfs(nfs3.ProcCreate, &nfs3.CreateArgs{Where: nfs3.DirOpArgs{Dir: root, Name: "moved.txt"}, Mode: nfs3.Guarded}, &cr)
	wantStatus(t, "CREATE GUARDED existing", cr.Status, nfs3.ErrExist)
	v1 := [8]byte{1, 2, 3, 4, 5, 6, 7, 8}
	c.nfs(nfs3.ProcCreate, &nfs3.CreateArgs{Where: nfs3.DirOpArgs{Dir: root, Name: "ex"}, Mode: nfs3.Exclusive, Verf: v1}, &cr)
	mustOK(t, "CREATE EXCLUSIVE", cr.Status)
	exFH := append(nfs3.FH(nil), cr.FH.FH...)
	c.nfs(nfs3.ProcCreate, &nfs3.CreateArgs{Where: nfs3.DirOpArgs{Dir: root, Name: "ex"}, Mode: nfs3.Exclusive, Verf: v1}, &cr)
	mustOK(t, "CREATE EXCLUSIVE retransmitted", cr.Status)
	if !bytes.Equal(cr.FH.FH, exFH) {
		t.Fatal("retransmitted EXCLUSIVE create returned another file")
	}
	c.nfs(nfs3.ProcCreate, &nfs3.CreateArgs{Where: nfs3.DirOpArgs{Dir: root, Name: "ex"}, Mode: nfs3.Exclusive, Verf: [8]byte{9}}, &cr)
	wantStatus(t, "CREATE EXCLUSIVE other verifier", cr.Status, nfs3.ErrExist)
	c.nfs(nfs3.ProcCreate, &nfs3.CreateArgs{Where: nfs3.DirOpArgs{Dir: root, Name: "moved.txt"}, Mode: nfs3.Unchecked, Attr: nfs3.Sattr{Size: nfs3.Uint64Ptr(0)}}, &cr)
	mustOK(t, "CREATE UNCHECKED existing", cr.Status)
	if cr.Attr.Attr.Size != 0 {
		t.Fatalf("UNCHECKED create with size 0 left size %d", cr.Attr.Attr.Size)
	}

	// READDIR / READDIRPLUS paging over many entries with small counts.
	big := func() nfs3.FH {
		var r nfs3.CreateRes
		c.nfs(nfs3.ProcMkdir, &nfs3.MkdirArgs{Where: nfs3.DirOpArgs{Dir: root, Name: "big"}}, &r)
		mustOK(t, "MKDIR big", r.Status)
		return append(nfs3.FH(nil), r.FH.FH...)
	}()
	var want []string
	for i := 0; i < 60; i++ {
		n := fmt.Sprintf("entry-%03d", i)
		want = append(want, n)
		create(t, c, big, n)
	}
	os.WriteFile(filepath.Join(dir, "big", ".tristore-tmp-hidden"), nil, 0o644)
	var names []string
	var cookie uint64
	for i := 0; ; i++ {
		if i > 100 {
			t.Fatal("READDIR did not finish")
		}
		var rd nfs3.ReaddirRes
		c.nfs(nfs3.ProcReaddir, &nfs3.ReaddirArgs{Dir: big, Cookie: cookie, Count: 512}, &rd)
		mustOK(t, "READDIR", rd.Status)
		for _, e := range rd.Entries {
			names = append(names, e.Name)
			cookie = e.Cookie
		}
		if rd.EOF {
			break
		}
	}
	sort.Strings(names)
	if fmt.Sprint(names) != fmt.Sprint(want) {
		t.Fatalf("READDIR names %v", names)
	}
	names, cookie = nil, 0
	for i := 0; ; i++ {
		if i > 100 {
			t.Fatal("READDIRPLUS did not finish")
		}
		var rd nfs3.ReaddirplusRes
		c.nfs(nfs3.ProcReaddirplus, &nfs3.ReaddirplusArgs{Dir: big, Cookie: cookie, DirCount: 256, MaxCount: 2048}, &rd)
		mustOK(t, "READDIRPLUS", rd.Status)
		for _, e := range rd.Entries {
			if e.Attr.Attr == nil || e.FH.FH == nil {
				t.Fatalf("READDIRPLUS entry %s without attributes or handle", e.Name)
			}
			names = append(names, e.Name)
			cookie = e.Cookie
		}
		if rd.EOF {
			break
		}
	}
	sort.Strings(names)
	if fmt.Sprint(names) != fmt.Sprint(want) {
		t.Fatalf("READDIRPLUS names %v", names)
	}
	var rd nfs3.ReaddirRes
	c.nfs(nfs3.ProcReaddir, &nfs3.ReaddirArgs{Dir: big, Count: 50}, &rd)
	wantStatus(t, "READDIR tiny count", rd.Status, nfs3.ErrTooSmall)

	// REMOVE, RMDIR
	var rm nfs3.RemoveRes
	c.nfs(nfs3.ProcRmdir, &nfs3.DirOpArgs{Dir: root, Name: "d"}, &rm)
	wantStatus(t, "RMDIR non-empty", rm.Status, nfs3.ErrNotEmpty)
	for _, n := range []string{"ln", "sparse", "fifo"} {
		c.nfs(nfs3.ProcRemove, &nfs3.DirOpArgs{Dir: d, Name: n}, &rm)
		mustOK(t, "REMOVE "+n, rm.Status)
		wccAfter(t, "REMOVE", rm.Wcc)
	}
	c.nfs(nfs3.ProcRemove, &nfs3.DirOpArgs{Dir: d, Name: "gone"}, &rm)
	wantStatus(t, "REMOVE missing", rm.Status, nfs3.ErrNoEnt)
	c.nfs(nfs3.ProcRmdir, &nfs3.DirOpArgs{Dir: root, Name: "d"}, &rm)
	mustOK(t, "RMDIR", rm.Status)
	c.nfs(nfs3.ProcGetattr, &nfs3.GetattrArgs{FH: d}, &ga)
	wantStatus(t, "GETATTR removed dir", ga.Status, nfs3.ErrStale)

	// FSSTAT, FSINFO, PATHCONF
	var fst nfs3.FsstatRes
	c.nfs(nfs3.ProcFsstat, &nfs3.GetattrArgs{FH: root}, &fst)
	mustOK(t, "FSSTAT", fst.Status)
	if fst.TBytes == 0 || fst.ABytes > fst.TBytes {
		t.Fatalf("FSSTAT %+v", fst)
	}
	var fi nfs3.FsinfoRes
	c.nfs(nfs3.ProcFsinfo, &nfs3.GetattrArgs{FH: root}, &fi)
	mustOK(t, "FSINFO", fi.Status)
	if fi.RtMax != maxRead || fi.WtMax != 1<<20 || fi.Properties&nfs3.FSFCanSetTime == 0 {
		t.Fatalf("FSINFO %+v", fi)
	}
	var pc nfs3.PathconfRes
	c.nfs(nfs3.ProcPathconf, &nfs3.GetattrArgs{FH: root}, &pc)
	if pc.Status != nfs3.OK || pc.NameMax != 255 || !pc.NoTrunc {
		t.Fatalf("PATHCONF %+v", pc)
	}
}
