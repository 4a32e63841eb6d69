package nfs

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/tristore/tristore/proto/nfs3"
	"github.com/tristore/tristore/proto/sunrpc"
)

// TestBadInput: each kind of bad input gets the protocol's own answer and
// the server keeps serving.
func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	_, addr := testServer(t, dir)
	c := dial(t, addr)
	root := c.mount("/")
	none := sunrpc.AuthNone()

	check := func(what string, rep sunrpc.Reply, err error, want string) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		got := ""
		if e := rep.Err(); e != nil {
			got = e.Error()
		}
		if got != want {
			t.Fatalf("%s: reply %q, want %q", what, got, want)
		}
	}
	rep, _, err := c.raw(999999, 1, 0, none, nil)
	check("unknown program", rep, err, "rpc: PROG_UNAVAIL")
	rep, _, err = c.raw(nfs3.ProgNFS, 2, 0, none, nil)
	check("NFS v2", rep, err, "rpc: PROG_MISMATCH (supported 3..4)")
	rep, _, err = c.raw(nfs3.ProgNFS, 4, 2, none, nil)
	check("NFS v4 proc 2", rep, err, "rpc: PROC_UNAVAIL")
	rep, _, err = c.raw(nfs3.ProgNFS, 4, 1, none, []byte{0, 0, 0, 200})
	check("NFS v4 truncated COMPOUND", rep, err, "rpc: GARBAGE_ARGS")
	rep, _, err = c.raw(nfs3.ProgMount, 1, 0, none, nil)
	check("MOUNT v1", rep, err, "rpc: PROG_MISMATCH (supported 3..3)")
	rep, _, err = c.raw(nfs3.ProgNFS, 3, 22, none, nil)
	check("proc 22", rep, err, "rpc: PROC_UNAVAIL")
	rep, _, err = c.raw(nfs3.ProgNFS, 3, nfs3.ProcGetattr, sunrpc.OpaqueAuth{Flavor: 6, Body: []byte{1, 2, 3, 4}}, nil)
	check("RPCSEC_GSS", rep, err, "rpc: AUTH_ERROR (auth_stat 5)")
	rep, _, err = c.raw(nfs3.ProgNFS, 3, nfs3.ProcGetattr, sunrpc.OpaqueAuth{Flavor: sunrpc.AuthFlavorSys, Body: []byte{0, 0, 0, 1}}, nil)
	check("bad AUTH_SYS body", rep, err, "rpc: AUTH_ERROR (auth_stat 1)")
	// A handle whose length runs past the end of the record.
	rep, _, err = c.raw(nfs3.ProgNFS, 3, nfs3.ProcGetattr, none, []byte{0, 0, 0, 40, 1, 2})
	check("length past end", rep, err, "rpc: GARBAGE_ARGS")
	// A handle over 64 bytes.
	var w sunrpc.Writer
	w.Opaque(make([]byte, 65))
	rep, _, err = c.raw(nfs3.ProgNFS, 3, nfs3.ProcGetattr, none, w.Bytes())
	check("65-byte handle", rep, err, "rpc: GARBAGE_ARGS")
	// A mount path over MNTPATHLEN.
	w.Reset()
	w.String(string(make([]byte, 2000)))
	rep, _, err = c.raw(nfs3.ProgMount, 3, nfs3.MountProcMnt, none, w.Bytes())
	check("long dirpath", rep, err, "rpc: GARBAGE_ARGS")
	// WRITE whose count disagrees with its data.
	w.Reset()
	(&nfs3.WriteArgs{FH: root, Count: 99, Data: []byte("x")}).Encode(&w)
	rep, _, err = c.raw(nfs3.ProgNFS, 3, nfs3.ProcWrite, none, w.Bytes())
	check("WRITE count mismatch", rep, err, "rpc: GARBAGE_ARGS")

	// RPC version 3 -> MSG_DENIED RPC_MISMATCH.
	w.Reset()
	for _, v := range []uint32{77, sunrpc.MsgCall, 3, nfs3.ProgNFS, 3, 0, 0, 0, 0, 0} {
		w.Uint32(v)
	}
	sunrpc.WriteRecord(c.c, w.Bytes())
	rep, _, err = c.readReply()
	check("rpcvers 3", rep, err, "rpc: RPC_MISMATCH (supported 2..2)")

	// Protocol-level errors: stale and malformed handles, bad names.
	var ga nfs3.GetattrRes
	c.nfs(nfs3.ProcGetattr, &nfs3.GetattrArgs{FH: nfs3.FH{1, 2, 3}}, &ga)
	wantStatus(t, "short handle", ga.Status, nfs3.ErrBadHandle)
	f := create(t, c, root, "victim")
	os.Remove(filepath.Join(dir, "victim"))
	c.nfs(nfs3.ProcGetattr, &nfs3.GetattrArgs{FH: f}, &ga)
	wantStatus(t, "deleted file", ga.Status, nfs3.ErrStale)
	bogus := append(nfs3.FH(nil), root...)
	bogus[3] ^= 0xff // another export id
	c.nfs(nfs3.ProcGetattr, &nfs3.GetattrArgs{FH: bogus}, &ga)
	wantStatus(t, "unknown export", ga.Status, nfs3.ErrStale)
	var cr nfs3.CreateRes
	for _, name := range []string{"a/b", "nul\x00x", ".tristore-mine", ""} {
		c.nfs(nfs3.ProcCreate, &nfs3.CreateArgs{Where: nfs3.DirOpArgs{Dir: root, Name: name}}, &cr)
		wantStatus(t, "CREATE "+name, cr.Status, nfs3.ErrAcces)
	}
	c.nfs(nfs3.ProcCreate, &nfs3.CreateArgs{Where: nfs3.DirOpArgs{Dir: root, Name: "x" + filepathRepeat("y", 300)}}, &cr)
	wantStatus(t, "CREATE long name", cr.Status, nfs3.ErrNameTooLong)
	os.MkdirAll(filepath.Join(dir, ".tristore", "secret"), 0o755)
	wantStatus(t, "LOOKUP .tristore", lookup(c, root, ".tristore").Status, nfs3.ErrNoEnt)

	// Garbage on a fresh connection: the record is answered or dropped, the
	// server keeps serving.
	g := dial(t, addr)
	sunrpc.WriteRecord(g.c, []byte("this is not an rpc call at all!!"))
	g.c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if rep, _, err := g.readReply(); err == nil && rep.AcceptStat != sunrpc.GarbageArgs || isTimeout(err) {
		t.Fatalf("garbage record answered with %+v", rep)
	}
	// An oversized fragment drops that connection.
	o := dial(t, addr)
	o.c.Write(sunrpc.AppendFragmentHeader(nil, 1<<30, true))
	o.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := o.br.ReadByte(); !errors.Is(err, io.EOF) && !isConnClosed(err) {
		t.Fatalf("oversized fragment: connection not dropped (%v)", err)
	}
	// A multi-fragment call is reassembled.
	m := dial(t, addr)
	w.Reset()
	sunrpc.Call{XID: 5, Prog: nfs3.ProgNFS, Vers: 3, Proc: nfs3.ProcGetattr, Cred: none, Verf: none}.Encode(&w)
	(&nfs3.GetattrArgs{FH: root}).Encode(&w)
	b := w.Bytes()
	var rec []byte
	rec = append(sunrpc.AppendFragmentHeader(rec, 10, false), b[:10]...)
	rec = append(sunrpc.AppendFragmentHeader(rec, len(b)-10, true), b[10:]...)
	m.c.Write(rec)
	rep, r, err := m.readReply()
	if err != nil || rep.Err() != nil || rep.XID != 5 {
		t.Fatalf("multi-fragment call: %v %v", err, rep.Err())
	}
	if ga.Decode(r); ga.Status != nfs3.OK {
		t.Fatalf("multi-fragment GETATTR %v", ga.Status)
	}
	// The first connection still works.
	c.nfs(nfs3.ProcGetattr, &nfs3.GetattrArgs{FH: root}, &ga)
	mustOK(t, "GETATTR after bad input", ga.Status)
}

func filepathRepeat(s string, n int) string {
	b := make([]byte, 0, n)
	for len(b) < n {
		b = append(b, s...)
	}
	return string(b)
}

// TestPipelined sends many calls on one connection before reading any
// reply and matches replies by XID.
func TestPipelined(t *testing.T) {
	dir := t.TempDir()
	_, addr := testServer(t, dir)
	c := dial(t, addr)
	root := c.mount("/")
	f := create(t, c, root, "p")
	const n = 200
	var mu sync.Mutex
	go func() {
		for i := 0; i < n; i++ {
			var w sunrpc.Writer
			sunrpc.Call{XID: uint32(1000 + i), Prog: nfs3.ProgNFS, Vers: 3, Proc: nfs3.ProcWrite, Cred: c.cred, Verf: sunrpc.AuthNone()}.Encode(&w)
			(&nfs3.WriteArgs{FH: f, Offset: uint64(i) * 4, Count: 4, Stable: nfs3.Unstable, Data: []byte{byte(i), 0, 0, 1}}).Encode(&w)
			mu.Lock()
			sunrpc.WriteRecord(c.c, w.Bytes())
			mu.Unlock()
		}
	}()
	seen := map[uint32]bool{}
	c.c.SetReadDeadline(time.Now().Add(60 * time.Second))
	for i := 0; i < n; i++ {
		rep, r, err := c.readReply()
		if err != nil || rep.Err() != nil {
			t.Fatalf("reply %d: %v %v", i, err, rep.Err())
		}
		var wr nfs3.WriteRes
		if wr.Decode(r); wr.Status != nfs3.OK || wr.Count != 4 {
			t.Fatalf("pipelined WRITE %v", wr.Status)
		}
		if rep.XID < 1000 || rep.XID >= 1000+n || seen[rep.XID] {
			t.Fatalf("unexpected xid %d", rep.XID)
		}
		seen[rep.XID] = true
	}
	b, _ := os.ReadFile(filepath.Join(dir, "p"))
	if len(b) != 4*n || b[4*(n-1)] != byte(n-1) {
		t.Fatalf("file after pipelined writes: %d bytes", len(b))
	}
}
