package nfs

import (
	"bufio"
	"bytes"
	"net/netip"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tristore/tristore/proto/nfs3"
	"github.com/tristore/tristore/proto/nfs4"
	"github.com/tristore/tristore/proto/sunrpc"
)

// op4 is one operation of a test COMPOUND and where its result goes.
type op4 struct {
	op   nfs4.Op
	args nfs4.Args
	res  nfs4.Res
}

func o4(op nfs4.Op, args nfs4.Args, res nfs4.Res) op4 { return op4{op, args, res} }

// compound4 sends a COMPOUND and decodes the results of the operations
// the server answered; it returns the COMPOUND status and the raw reply.
func (c *rpcConn) compound4(minor uint32, ops ...op4) (nfs4.Status, []byte) {
	c.t.Helper()
	var w sunrpc.Writer
	nfs4.CompoundArgs{Tag: []byte("t"), Minor: minor, NOps: uint32(len(ops))}.Encode(&w)
	for _, o := range ops {
		w.Uint32(uint32(o.op))
		if o.args != nil {
			o.args.Encode(&w)
		}
	}
	rep, r, err := c.raw(nfs3.ProgNFS, 4, 1, c.cred, w.Bytes())
	if err != nil {
		c.t.Fatalf("COMPOUND: %v", err)
	}
	if err := rep.Err(); err != nil {
		c.t.Fatalf("COMPOUND: %v", err)
	}
	body := append([]byte(nil), r.Rest()...)
	st := nfs4.Status(r.Uint32())
	if tag := r.Opaque(1024); string(tag) != "t" {
		c.t.Fatalf("tag %q", tag)
	}
	n := int(r.Uint32())
	if n > len(ops) {
		c.t.Fatalf("%d results for %d ops", n, len(ops))
	}
	for i := 0; i < n; i++ {
		if got := nfs4.Op(r.Uint32()); got != ops[i].op && got != nfs4.OpIllegal {
			c.t.Fatalf("result %d is for %v, want %v", i, got, ops[i].op)
		}
		res := ops[i].res
		if res == nil {
			res = &nfs4.StatusRes{}
		}
		res.Decode(r)
		if r.Err() != nil {
			c.t.Fatalf("decoding result %d (%v): %v", i, ops[i].op, r.Err())
		}
	}
	if r.Remaining() != 0 {
		c.t.Fatalf("%d trailing bytes", r.Remaining())
	}
	return st, body
}

// session41 makes a 4.1 client and session and returns the session ID and
// the client ID.
func session41(t *testing.T, c *rpcConn, owner string) ([16]byte, uint64) {
	t.Helper()
	var ex nfs4.ExchangeIDRes
	if st, _ := c.compound4(1, o4(nfs4.OpExchangeID, &nfs4.ExchangeIDArgs{OwnerID: []byte(owner), Verifier: [8]byte{1}}, &ex)); st != nfs4.OK {
		t.Fatalf("EXCHANGE_ID: %d", st)
	}
	var cs nfs4.CreateSessionRes
	attrs := nfs4.ChannelAttrs{MaxRequestSize: 1 << 20, MaxResponseSize: 1 << 20, MaxResponseSizeCached: 8192, MaxOperations: 16, MaxRequests: 8}
	if st, _ := c.compound4(1, o4(nfs4.OpCreateSession, &nfs4.CreateSessionArgs{ClientID: ex.ClientID, Sequence: ex.Sequence, Fore: attrs, Back: attrs}, &cs)); st != nfs4.OK {
		t.Fatalf("CREATE_SESSION: %d", st)
	}
	// A new 4.1 client says it has nothing to reclaim before it opens
	// anything (RFC 8881 18.51.3); "reclaimer" has, and does that itself.
	if owner != "reclaimer" {
		if st, _ := c.compound4(1, o4(nfs4.OpSequence, &nfs4.SequenceArgs{SessionID: cs.SessionID, Sequence: 1}, &nfs4.SequenceRes{}),
			o4(nfs4.OpReclaimComplete, &nfs4.ReclaimCompleteArgs{}, nil)); st != nfs4.OK {
			t.Fatalf("RECLAIM_COMPLETE: %d", st)
		}
	}
	return cs.SessionID, ex.ClientID
}

// v41 is a 4.1 client with a session (session41) on a fresh test server
// exporting dir.
type v41 struct {
	srv  *Server
	dir  string
	c    *rpcConn
	clid uint64
	sid  [16]byte
	sq   *seq41
}

func newV41(t *testing.T, owner string) *v41 {
	t.Helper()
	needRoot(t)
	dir := t.TempDir()
	srv, addr := testServer(t, dir)
	c := dial(t, addr)
	sid, clid := session41(t, c, owner)
	return &v41{srv: srv, dir: dir, c: c, clid: clid, sid: sid, sq: newSeq(sid, owner)}
}

// create opens name in the export root for reading and writing as open
// owner "o1", creating it (createMode, attrs), and returns the open result
// and the file's handle; any status but OK fails the test.
func (v *v41) create(t *testing.T, name string, createMode uint32, attrs nfs4.RawFattr) (nfs4.OpenRes, nfs4.GetFHRes) {
	t.Helper()
	var open nfs4.OpenRes
	var fh nfs4.GetFHRes
	st, _ := v.c.compound4(1, v.sq.op(), o4(nfs4.OpPutRootFH, &nfs4.NoArgs{}, nil),
		o4(nfs4.OpOpen, &nfs4.OpenArgs{ShareAccess: nfs4.ShareAccessBoth, Owner: nfs4.Owner{ClientID: v.clid, Owner: []byte("o1")},
			Create: true, CreateMode: createMode, Attrs: attrs, Claim: nfs4.ClaimNull, Name: name}, &open),
		o4(nfs4.OpGetFH, &nfs4.NoArgs{}, &fh))
	if st != nfs4.OK {
		t.Fatalf("OPEN %s: %d", name, st)
	}
	return open, fh
}

type seq41 struct {
	id   [16]byte
	next uint32
}

// newSeq continues a session made by session41 (slot 0 has used
// sequence 1 unless owner is "reclaimer").
func newSeq(id [16]byte, owner string) *seq41 {
	if owner == "reclaimer" {
		return &seq41{id: id}
	}
	return &seq41{id: id, next: 1}
}

func (s *seq41) op() op4 {
	s.next++
	return o4(nfs4.OpSequence, &nfs4.SequenceArgs{SessionID: s.id, Sequence: s.next, Slot: 0, HighestSlot: 0}, &nfs4.SequenceRes{})
}

func TestNFSv41OpenWriteReadClose(t *testing.T) {
	v := newV41(t, "client-a")
	c, dir, clid, sq := v.c, v.dir, v.clid, v.sq
	open, fh := v.create(t, "f.txt", nfs4.CreateGuarded, nfs4.RawFattr{Mask: nfs4.NewBitmap(nfs4.AttrMode), Vals: []byte{0, 0, 1, 0xa4}})
	var wr nfs4.WriteRes
	var rd nfs4.ReadRes
	st, _ := c.compound4(1, sq.op(), o4(nfs4.OpPutFH, &nfs4.PutFHArgs{FH: fh.FH}, nil),
		o4(nfs4.OpWrite, &nfs4.WriteArgs{Stateid: open.Stateid, Offset: 0, Stable: nfs4.FileSync, Data: []byte("hello v4")}, &wr),
		o4(nfs4.OpRead, &nfs4.ReadArgs{Stateid: open.Stateid, Offset: 0, Count: 100}, &rd),
		o4(nfs4.OpClose, &nfs4.CloseArgs{Stateid: open.Stateid}, &nfs4.StateidRes{}))
	if st != nfs4.OK || wr.Count != 8 || wr.Committed != nfs4.FileSync || string(rd.Data) != "hello v4" || !rd.EOF {
		t.Fatalf("WRITE/READ/CLOSE: status %d, wrote %d (%d), read %q eof %v", st, wr.Count, wr.Committed, rd.Data, rd.EOF)
	}
	b, err := os.ReadFile(filepath.Join(dir, "f.txt"))
	if err != nil || string(b) != "hello v4" {
		t.Fatalf("file on disk: %q %v", b, err)
	}
	fi, _ := os.Stat(filepath.Join(dir, "f.txt"))
	if fi.Mode().Perm() != 0o644 {
		t.Fatalf("mode %v, want 0644", fi.Mode().Perm())
	}
	// The closed stateid is gone.
	st, _ = c.compound4(1, sq.op(), o4(nfs4.OpPutFH, &nfs4.PutFHArgs{FH: fh.FH}, nil),
		o4(nfs4.OpRead, &nfs4.ReadArgs{Stateid: open.Stateid, Count: 10}, &nfs4.ReadRes{}))
	if st != nfs4.ErrBadStateID {
		t.Fatalf("READ with a closed stateid: %d, want BAD_STATEID", st)
	}
	// GUARDED create of an existing name.
	st, _ = c.compound4(1, sq.op(), o4(nfs4.OpPutRootFH, &nfs4.NoArgs{}, nil),
		o4(nfs4.OpOpen, &nfs4.OpenArgs{ShareAccess: nfs4.ShareAccessRead, Owner: nfs4.Owner{ClientID: clid, Owner: []byte("o1")},
			Create: true, CreateMode: nfs4.CreateGuarded, Claim: nfs4.ClaimNull, Name: "f.txt"}, &nfs4.OpenRes{}))
	if st != nfs4.ErrExist {
		t.Fatalf("GUARDED OPEN of an existing file: %d, want EXIST", st)
	}
}

func TestNFSv41SlotReplay(t *testing.T) {
	needRoot(t)
	dir := t.TempDir()
	_, addr := testServer(t, dir)
	c := dial(t, addr)
	sid, _ := session41(t, c, "client-r")
	mk := func(seq uint32) []op4 {
		return []op4{o4(nfs4.OpSequence, &nfs4.SequenceArgs{SessionID: sid, Sequence: seq}, &nfs4.SequenceRes{}),
			o4(nfs4.OpPutRootFH, &nfs4.NoArgs{}, nil),
			o4(nfs4.OpCreate, &nfs4.CreateArgs{Type: nfs4.TypeDir, Name: "d"}, &nfs4.CreateRes{})}
	}
	st1, b1 := c.compound4(1, mk(2)...)
	if st1 != nfs4.OK {
		t.Fatalf("CREATE: %d", st1)
	}
	// A retransmission is answered from the reply cache (not EXIST).
	st2, b2 := c.compound4(1, mk(2)...)
	if st2 != nfs4.OK || !bytes.Equal(b1, b2) {
		t.Fatalf("replay: status %d, same reply %v", st2, bytes.Equal(b1, b2))
	}
	// The next sequence runs again and meets the directory.
	if st, _ := c.compound4(1, mk(3)...); st != nfs4.ErrExist {
		t.Fatalf("new request: %d, want EXIST", st)
	}
	if st, _ := c.compound4(1, mk(5)...); st != nfs4.ErrSeqMisordered {
		t.Fatalf("sequence gap: %d, want SEQ_MISORDERED", st)
	}
}

func TestNFSv4LocksConflict(t *testing.T) {
	needRoot(t)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "lk"), make([]byte, 100), 0o666)
	_, addr := testServer(t, dir)
	open := func(c *rpcConn, sq *seq41, clid uint64, owner string) (nfs4.Stateid, []byte) {
		var o nfs4.OpenRes
		var fh nfs4.GetFHRes
		if st, _ := c.compound4(1, sq.op(), o4(nfs4.OpPutRootFH, &nfs4.NoArgs{}, nil),
			o4(nfs4.OpOpen, &nfs4.OpenArgs{ShareAccess: nfs4.ShareAccessBoth, Owner: nfs4.Owner{ClientID: clid, Owner: []byte(owner)}, Claim: nfs4.ClaimNull, Name: "lk"}, &o),
			o4(nfs4.OpGetFH, &nfs4.NoArgs{}, &fh)); st != nfs4.OK {
			t.Fatalf("OPEN: %d", st)
		}
		return o.Stateid, fh.FH
	}
	ca, cb := dial(t, addr), dial(t, addr)
	sa, ida := session41(t, ca, "A")
	sb, idb := session41(t, cb, "B")
	qa, qb := newSeq(sa, "A"), newSeq(sb, "B")
	oa, fh := open(ca, qa, ida, "oa")
	ob, _ := open(cb, qb, idb, "ob")
	var la nfs4.LockRes
	if st, _ := ca.compound4(1, qa.op(), o4(nfs4.OpPutFH, &nfs4.PutFHArgs{FH: fh}, nil),
		o4(nfs4.OpLock, &nfs4.LockArgs{Type: nfs4.WriteLT, Offset: 10, Length: 20,
			Locker: nfs4.Locker{New: true, OpenStateid: oa, LockOwner: nfs4.Owner{ClientID: ida, Owner: []byte("la")}}}, &la)); st != nfs4.OK {
		t.Fatalf("LOCK A: %d", st)
	}
	lb := nfs4.LockRes{}
	st, _ := cb.compound4(1, qb.op(), o4(nfs4.OpPutFH, &nfs4.PutFHArgs{FH: fh}, nil),
		o4(nfs4.OpLock, &nfs4.LockArgs{Type: nfs4.ReadLT, Offset: 0, Length: 15,
			Locker: nfs4.Locker{New: true, OpenStateid: ob, LockOwner: nfs4.Owner{ClientID: idb, Owner: []byte("lb")}}}, &lb))
	if st != nfs4.ErrDenied || lb.Denied.Offset != 10 || lb.Denied.Length != 20 || lb.Denied.Type != nfs4.WriteLT || string(lb.Denied.Owner.Owner) != "la" {
		t.Fatalf("conflicting LOCK: %d %+v", st, lb.Denied)
	}
	// A WRITE by B into A's locked range is refused; outside it is fine.
	if st, _ := cb.compound4(1, qb.op(), o4(nfs4.OpPutFH, &nfs4.PutFHArgs{FH: fh}, nil),
		o4(nfs4.OpWrite, &nfs4.WriteArgs{Stateid: ob, Offset: 12, Data: []byte("x")}, &nfs4.WriteRes{})); st != nfs4.ErrLocked {
		t.Fatalf("WRITE into a range locked by another owner: %d, want LOCKED", st)
	}
	// So is a v3 WRITE (v3 has no locks of its own); outside the range it works.
	c3 := dial(t, addr)
	root := c3.mount("/")
	var lk nfs3.LookupRes
	c3.nfs(nfs3.ProcLookup, &nfs3.DirOpArgs{Dir: root, Name: "lk"}, &lk)
	var w3 nfs3.WriteRes
	c3.nfs(nfs3.ProcWrite, &nfs3.WriteArgs{FH: lk.FH, Offset: 25, Count: 1, Stable: nfs3.FileSync, Data: []byte("y")}, &w3)
	wantStatus(t, "v3 WRITE into a v4 write lock", w3.Status, nfs3.ErrAcces)
	c3.nfs(nfs3.ProcWrite, &nfs3.WriteArgs{FH: lk.FH, Offset: 50, Count: 1, Stable: nfs3.FileSync, Data: []byte("y")}, &w3)
	wantStatus(t, "v3 WRITE outside a v4 lock", w3.Status, nfs3.OK)
	if st, _ := ca.compound4(1, qa.op(), o4(nfs4.OpPutFH, &nfs4.PutFHArgs{FH: fh}, nil),
		o4(nfs4.OpClose, &nfs4.CloseArgs{Stateid: oa}, &nfs4.StateidRes{})); st != nfs4.ErrLocksHeld {
		t.Fatalf("CLOSE with locks held: %d, want LOCKS_HELD", st)
	}
	var lu nfs4.StateidRes
	if st, _ := ca.compound4(1, qa.op(), o4(nfs4.OpPutFH, &nfs4.PutFHArgs{FH: fh}, nil),
		o4(nfs4.OpLockU, &nfs4.LockUArgs{Type: nfs4.WriteLT, Stateid: la.Stateid, Offset: 10, Length: 20}, &lu)); st != nfs4.OK {
		t.Fatalf("LOCKU: %d", st)
	}
	if st, _ := cb.compound4(1, qb.op(), o4(nfs4.OpPutFH, &nfs4.PutFHArgs{FH: fh}, nil),
		o4(nfs4.OpLock, &nfs4.LockArgs{Type: nfs4.ReadLT, Offset: 0, Length: 15,
			Locker: nfs4.Locker{New: true, OpenStateid: ob, LockOwner: nfs4.Owner{ClientID: idb, Owner: []byte("lb")}}}, &lb)); st != nfs4.OK {
		t.Fatalf("LOCK after unlock: %d", st)
	}
}

// TestNFSv40OpenConfirm runs the 4.0 client-ID and open-owner protocol,
// including a retransmitted OPEN answered from the owner's replay cache.
func TestNFSv40OpenConfirm(t *testing.T) {
	needRoot(t)
	dir := t.TempDir()
	_, addr := testServer(t, dir)
	c := dial(t, addr)
	var sc nfs4.SetClientIDRes
	if st, _ := c.compound4(0, o4(nfs4.OpSetClientID, &nfs4.SetClientIDArgs{Verifier: [8]byte{9}, ID: []byte("v40"), CBNetID: "tcp", CBAddr: "127.0.0.1.0.0"}, &sc)); st != nfs4.OK {
		t.Fatalf("SETCLIENTID: %d", st)
	}
	if st, _ := c.compound4(0, o4(nfs4.OpSetClientIDConfirm, &nfs4.SetClientIDConfirmArgs{ClientID: sc.ClientID, Confirm: sc.Confirm}, nil)); st != nfs4.OK {
		t.Fatalf("SETCLIENTID_CONFIRM: %d", st)
	}
	openOps := func(seqid uint32, res *nfs4.OpenRes) []op4 {
		return []op4{o4(nfs4.OpPutRootFH, &nfs4.NoArgs{}, nil),
			o4(nfs4.OpOpen, &nfs4.OpenArgs{Seqid: seqid, ShareAccess: nfs4.ShareAccessWrite, Owner: nfs4.Owner{ClientID: sc.ClientID, Owner: []byte("own")},
				Create: true, CreateMode: nfs4.CreateUnchecked, Claim: nfs4.ClaimNull, Name: "g"}, res)}
	}
	var o1, o2 nfs4.OpenRes
	if st, _ := c.compound4(0, openOps(1, &o1)...); st != nfs4.OK || o1.Flags&nfs4.OpenResultConfirm == 0 {
		t.Fatalf("OPEN: %d flags %#x", st, o1.Flags)
	}
	if st, _ := c.compound4(0, openOps(1, &o2)...); st != nfs4.OK || o2.Stateid != o1.Stateid {
		t.Fatalf("retransmitted OPEN: %d %v vs %v", st, o2.Stateid, o1.Stateid)
	}
	var fh nfs4.GetFHRes
	var oc nfs4.StateidRes
	if st, _ := c.compound4(0, o4(nfs4.OpPutRootFH, &nfs4.NoArgs{}, nil), o4(nfs4.OpLookup, &nfs4.NameArgs{Name: "g"}, nil),
		o4(nfs4.OpGetFH, &nfs4.NoArgs{}, &fh), o4(nfs4.OpOpenConfirm, &nfs4.OpenConfirmArgs{Stateid: o1.Stateid, Seqid: 2}, &oc)); st != nfs4.OK {
		t.Fatalf("OPEN_CONFIRM: %d", st)
	}
	if st, _ := c.compound4(0, openOps(7, &o2)...); st != nfs4.ErrBadSeqID {
		t.Fatalf("OPEN with a wrong seqid: %d, want BAD_SEQID", st)
	}
	var wr nfs4.WriteRes
	if st, _ := c.compound4(0, o4(nfs4.OpPutFH, &nfs4.PutFHArgs{FH: fh.FH}, nil),
		o4(nfs4.OpWrite, &nfs4.WriteArgs{Stateid: oc.Stateid, Data: []byte("v4.0"), Stable: nfs4.Unstable}, &wr),
		o4(nfs4.OpCommit, &nfs4.CommitArgs{}, &nfs4.VerfRes{}),
		o4(nfs4.OpClose, &nfs4.CloseArgs{Seqid: 3, Stateid: oc.Stateid}, &nfs4.StateidRes{})); st != nfs4.OK {
		t.Fatalf("WRITE/COMMIT/CLOSE: %d", st)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "g")); string(b) != "v4.0" {
		t.Fatalf("file: %q", b)
	}
	if st, _ := c.compound4(0, o4(nfs4.OpRenew, &nfs4.ClientIDArgs{ClientID: sc.ClientID}, nil)); st != nfs4.OK {
		t.Fatalf("RENEW: %d", st)
	}
}

// TestNFSv4Grace restarts the server over the same data: a client known
// before the restart reclaims its open during the grace period, new opens
// wait with GRACE, and RECLAIM_COMPLETE ends the grace period.
func TestNFSv4Grace(t *testing.T) {
	needRoot(t)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "r"), []byte("x"), 0o666)
	opts := Options{DataDir: dir, V4Lease: 5 * time.Second, V4Grace: 30 * time.Second}
	s1, addr1 := serveOpts(t, opts)
	c := dial(t, addr1.String())
	sid, clid := session41(t, c, "reclaimer")
	sq := newSeq(sid, "reclaimer")
	if st, _ := c.compound4(1, sq.op(), o4(nfs4.OpReclaimComplete, &nfs4.ReclaimCompleteArgs{}, nil)); st != nfs4.OK {
		t.Fatalf("RECLAIM_COMPLETE: %d", st)
	}
	var fh nfs4.GetFHRes
	if st, _ := c.compound4(1, sq.op(), o4(nfs4.OpPutRootFH, &nfs4.NoArgs{}, nil),
		o4(nfs4.OpOpen, &nfs4.OpenArgs{ShareAccess: nfs4.ShareAccessRead, Owner: nfs4.Owner{ClientID: clid, Owner: []byte("o")}, Claim: nfs4.ClaimNull, Name: "r"}, &nfs4.OpenRes{}),
		o4(nfs4.OpGetFH, &nfs4.NoArgs{}, &fh)); st != nfs4.OK {
		t.Fatalf("OPEN: %d", st)
	}
	s1.Close()
	_, addr2 := serveOpts(t, opts)
	c2 := dial(t, addr2.String())
	// Another client's new open waits for the grace period.
	sidN, clidN := session41(t, c2, "newcomer")
	qn := newSeq(sidN, "newcomer")
	if st, _ := c2.compound4(1, qn.op(), o4(nfs4.OpPutRootFH, &nfs4.NoArgs{}, nil),
		o4(nfs4.OpOpen, &nfs4.OpenArgs{ShareAccess: nfs4.ShareAccessRead, Owner: nfs4.Owner{ClientID: clidN, Owner: []byte("n")}, Claim: nfs4.ClaimNull, Name: "r"}, &nfs4.OpenRes{})); st != nfs4.ErrGrace {
		t.Fatalf("new OPEN in grace: %d, want GRACE", st)
	}
	// The newcomer has nothing to reclaim.
	if st, _ := c2.compound4(1, qn.op(), o4(nfs4.OpPutFH, &nfs4.PutFHArgs{FH: fh.FH}, nil),
		o4(nfs4.OpOpen, &nfs4.OpenArgs{ShareAccess: nfs4.ShareAccessRead, Owner: nfs4.Owner{ClientID: clidN, Owner: []byte("n")}, Claim: nfs4.ClaimPrevious}, &nfs4.OpenRes{})); st != nfs4.ErrReclaimBad {
		t.Fatalf("reclaim by an unknown client: %d, want RECLAIM_BAD", st)
	}
	sid2, clid2 := session41(t, c2, "reclaimer")
	q2 := newSeq(sid2, "reclaimer")
	if st, _ := c2.compound4(1, q2.op(), o4(nfs4.OpPutFH, &nfs4.PutFHArgs{FH: fh.FH}, nil),
		o4(nfs4.OpOpen, &nfs4.OpenArgs{ShareAccess: nfs4.ShareAccessRead, Owner: nfs4.Owner{ClientID: clid2, Owner: []byte("o")}, Claim: nfs4.ClaimPrevious}, &nfs4.OpenRes{})); st != nfs4.OK {
		t.Fatalf("reclaim: %d", st)
	}
	if st, _ := c2.compound4(1, q2.op(), o4(nfs4.OpReclaimComplete, &nfs4.ReclaimCompleteArgs{}, nil)); st != nfs4.OK {
		t.Fatalf("RECLAIM_COMPLETE: %d", st)
	}
	if st, _ := c2.compound4(1, qn.op(), o4(nfs4.OpPutRootFH, &nfs4.NoArgs{}, nil),
		o4(nfs4.OpOpen, &nfs4.OpenArgs{ShareAccess: nfs4.ShareAccessRead, Owner: nfs4.Owner{ClientID: clidN, Owner: []byte("n")}, Claim: nfs4.ClaimNull, Name: "r"}, &nfs4.OpenRes{})); st != nfs4.OK {
		t.Fatalf("OPEN after the grace period ended: %d", st)
	}
}

// TestNFSv4BadCompounds: unknown operations, a missing filehandle, an
// operation outside a session, and a minor version that does not exist.
func TestNFSv4BadCompounds(t *testing.T) {
	needRoot(t)
	_, addr := testServer(t, t.TempDir())
	c := dial(t, addr)
	if st, _ := c.compound4(0, o4(nfs4.Op(9999), nil, nil)); st != nfs4.ErrOpIllegal {
		t.Fatalf("unknown op: %d", st)
	}
	if st, _ := c.compound4(0, o4(nfs4.OpGetFH, &nfs4.NoArgs{}, &nfs4.GetFHRes{})); st != nfs4.ErrNoFileHandle {
		t.Fatalf("GETFH without a filehandle: %d", st)
	}
	if st, _ := c.compound4(1, o4(nfs4.OpPutRootFH, &nfs4.NoArgs{}, nil)); st != nfs4.ErrOpNotInSession {
		t.Fatalf("4.1 op without SEQUENCE: %d", st)
	}
	if st, _ := c.compound4(2, o4(nfs4.OpPutRootFH, &nfs4.NoArgs{}, nil)); st != nfs4.ErrMinorVersMismatch {
		t.Fatalf("minor version 2: %d", st)
	}
	if st, _ := c.compound4(0, o4(nfs4.OpPutFH, &nfs4.PutFHArgs{FH: []byte{1, 2, 3}}, nil)); st != nfs4.ErrBadHandle {
		t.Fatalf("forged handle: %d", st)
	}
	// The server still serves.
	var ga nfs4.GetattrRes
	if st, _ := c.compound4(0, o4(nfs4.OpPutRootFH, &nfs4.NoArgs{}, nil), o4(nfs4.OpGetattr, &nfs4.GetattrArgs{Request: nfs4.NewBitmap(nfs4.AttrType, nfs4.AttrSize)}, &ga)); st != nfs4.OK {
		t.Fatalf("GETATTR: %d", st)
	}
	fa, st := ga.Attrs.Parse()
	if st != nfs4.OK || fa.Type != nfs4.TypeDir {
		t.Fatalf("root attrs: %d %+v", st, fa)
	}
}

// FuzzCompound4 feeds arbitrary COMPOUND arguments (after a well-formed RPC
// header) to the v4 dispatcher, as 4.0 and 4.1, against a temp export. The
// answer must be one reply: GARBAGE_ARGS for an unreadable header, else a
// COMPOUND4res whose status is an nfsstat4 this server uses, whose tag is
// the call's and which has no more results than operations; and after
// every input the server still answers a plain PUTROOTFH+GETFH.
func FuzzCompound4(f *testing.F) {
	s, err := New(Options{DataDir: f.TempDir(), V4Lease: time.Second})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { s.Close() })
	seed := func(minor uint32, ops ...op4) {
		var w sunrpc.Writer
		nfs4.CompoundArgs{Tag: []byte("fz"), Minor: minor, NOps: uint32(len(ops))}.Encode(&w)
		for _, o := range ops {
			w.Uint32(uint32(o.op))
			if o.args != nil {
				o.args.Encode(&w)
			}
		}
		f.Add(append([]byte(nil), w.Bytes()...))
	}
	root := s.exports[0].fs.Root()
	seed(0, o4(nfs4.OpPutRootFH, &nfs4.NoArgs{}, nil), o4(nfs4.OpGetattr, &nfs4.GetattrArgs{Request: nfs4.NewBitmap(0, 1, 3, 4, 19, 33, 36)}, nil))
	seed(0, o4(nfs4.OpSetClientID, &nfs4.SetClientIDArgs{ID: []byte("f"), CBNetID: "tcp"}, nil))
	seed(0, o4(nfs4.OpPutFH, &nfs4.PutFHArgs{FH: root}, nil), o4(nfs4.OpOpen, &nfs4.OpenArgs{Seqid: 1, ShareAccess: 3, Owner: nfs4.Owner{ClientID: 1, Owner: []byte("o")}, Create: true, Claim: nfs4.ClaimNull, Name: "n"}, nil))
	seed(0, o4(nfs4.OpPutRootFH, &nfs4.NoArgs{}, nil), o4(nfs4.OpCreate, &nfs4.CreateArgs{Type: nfs4.TypeDir, Name: "d"}, nil), o4(nfs4.OpReaddir, &nfs4.ReaddirArgs{MaxCount: 4096, Request: nfs4.NewBitmap(1, 20)}, nil))
	seed(1, o4(nfs4.OpExchangeID, &nfs4.ExchangeIDArgs{OwnerID: []byte("f")}, nil))
	seed(1, o4(nfs4.OpSequence, &nfs4.SequenceArgs{}, nil), o4(nfs4.OpPutRootFH, &nfs4.NoArgs{}, nil))
	seed(1, o4(nfs4.OpCreateSession, &nfs4.CreateSessionArgs{ClientID: 1, Fore: nfs4.ChannelAttrs{MaxRequestSize: 4096, MaxResponseSize: 4096, MaxOperations: 8, MaxRequests: 2}}, nil))
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff})
	valid := map[nfs4.Status]bool{}
	for v := nfs4.Status(0); v <= 100; v++ {
		valid[v] = true
	}
	for v := nfs4.ErrBadHandle; v <= nfs4.ErrDelegRevoked; v++ {
		valid[v] = true
	}
	var out bytes.Buffer
	c := &conn{s: s, c: captureConn{buf: &out}, addr: netip.MustParseAddr("127.0.0.1")}
	call := func(body []byte) (sunrpc.Reply, *sunrpc.Reader) {
		var w sunrpc.Writer
		sunrpc.Call{XID: 7, Prog: nfs3.ProgNFS, Vers: 4, Proc: 1, Cred: sunrpc.AuthSys{MachineName: "f"}.Auth(), Verf: sunrpc.AuthNone()}.Encode(&w)
		out.Reset()
		c.handle(append(w.Bytes(), body...), false)
		rec, err := sunrpc.ReadRecord(bufio.NewReader(bytes.NewReader(out.Bytes())), maxIO+128<<10)
		if err != nil {
			f.Fatalf("reply record: %v", err)
		}
		r := sunrpc.NewReader(rec)
		rep, err := sunrpc.DecodeReply(r)
		if err != nil || rep.XID != 7 {
			f.Fatalf("reply header: %v (xid %d)", err, rep.XID)
		}
		return rep, r
	}
	var plain sunrpc.Writer
	nfs4.CompoundArgs{Tag: []byte("p"), NOps: 2}.Encode(&plain)
	plain.Uint32(uint32(nfs4.OpPutRootFH))
	plain.Uint32(uint32(nfs4.OpGetFH))
	f.Fuzz(func(t *testing.T, body []byte) {
		rep, r := call(body)
		if rep.Accepted && rep.AcceptStat == sunrpc.Success {
			var hdr nfs4.CompoundArgs
			hdr.Decode(sunrpc.NewReader(body))
			st := nfs4.Status(r.Uint32())
			tag := r.Opaque(nfs4.MaxTag)
			n := r.Uint32()
			if r.Err() != nil || !valid[st] || !bytes.Equal(tag, hdr.Tag) || n > max(hdr.NOps, 1) {
				t.Fatalf("COMPOUND4res: status %d, tag %q (sent %q), %d results for %d ops, %v", st, tag, hdr.Tag, n, hdr.NOps, r.Err())
			}
		} else if !rep.Accepted || rep.AcceptStat != sunrpc.GarbageArgs {
			t.Fatalf("reply %+v", rep)
		}
		rep, r = call(plain.Bytes())
		if st := nfs4.Status(r.Uint32()); !rep.Accepted || st != nfs4.OK {
			t.Fatalf("the server stopped answering: %+v, status %d", rep, st)
		}
	})
}

// TestNFSv4RestartStaleIDs: a server restarted at once (within the same
// second) must not issue the IDs of its previous instance: the old client
// ID is stale and the old session unknown to the new server.
func TestNFSv4RestartStaleIDs(t *testing.T) {
	needRoot(t)
	dir := t.TempDir()
	opts := Options{DataDir: dir, V4Grace: -1}
	s1, a1 := serveOpts(t, opts)
	c1 := dial(t, a1.String())
	sid, clid := session41(t, c1, "fast-restart")
	s1.Close()
	_, a2 := serveOpts(t, opts)
	c2 := dial(t, a2.String())
	sid2, clid2 := session41(t, c2, "other")
	if clid2 == clid || sid2 == sid {
		t.Fatalf("the restarted server issued the old IDs again: client %x, session %x", clid2, sid2)
	}
	if st, _ := c2.compound4(1, o4(nfs4.OpSequence, &nfs4.SequenceArgs{SessionID: sid, Sequence: 2}, &nfs4.SequenceRes{})); st != nfs4.ErrBadSession {
		t.Fatalf("SEQUENCE on the old session: %d, want BADSESSION", st)
	}
	if st, _ := c2.compound4(1, o4(nfs4.OpCreateSession, &nfs4.CreateSessionArgs{ClientID: clid, Sequence: 2,
		Fore: nfs4.ChannelAttrs{MaxRequestSize: 4096, MaxResponseSize: 4096, MaxOperations: 8, MaxRequests: 2},
		Back: nfs4.ChannelAttrs{MaxRequestSize: 4096, MaxResponseSize: 4096, MaxOperations: 2, MaxRequests: 1}}, &nfs4.CreateSessionRes{})); st != nfs4.ErrStaleClientID {
		t.Fatalf("CREATE_SESSION with the old client ID: %d, want STALE_CLIENTID", st)
	}
}

// TestNFSv41SessionCap: a client that keeps creating sessions without
// destroying them is told to wait once it holds v4MaxSessions; after it
// destroys one it can create another.
func TestNFSv41SessionCap(t *testing.T) {
	needRoot(t)
	_, addr := testServer(t, t.TempDir())
	c := dial(t, addr)
	var ex nfs4.ExchangeIDRes
	if st, _ := c.compound4(1, o4(nfs4.OpExchangeID, &nfs4.ExchangeIDArgs{OwnerID: []byte("many-sessions")}, &ex)); st != nfs4.OK {
		t.Fatal(st)
	}
	attrs := nfs4.ChannelAttrs{MaxRequestSize: 8192, MaxResponseSize: 8192, MaxResponseSizeCached: 8192, MaxOperations: 8, MaxRequests: 64}
	seq := ex.Sequence
	var last [16]byte
	create := func() nfs4.Status {
		var cs nfs4.CreateSessionRes
		st, _ := c.compound4(1, o4(nfs4.OpCreateSession, &nfs4.CreateSessionArgs{ClientID: ex.ClientID, Sequence: seq, Fore: attrs, Back: attrs}, &cs))
		if st == nfs4.OK {
			seq++
			last = cs.SessionID
		}
		return st
	}
	for i := range v4MaxSessions {
		if st := create(); st != nfs4.OK {
			t.Fatalf("session %d: %d", i, st)
		}
	}
	if st := create(); st != nfs4.ErrDelay {
		t.Fatalf("session %d: %d, want DELAY", v4MaxSessions+1, st)
	}
	if st, _ := c.compound4(1, o4(nfs4.OpDestroySession, &nfs4.SessionArgs{SessionID: last}, nil)); st != nfs4.OK {
		t.Fatal(st)
	}
	if st := create(); st != nfs4.OK {
		t.Fatalf("after DESTROY_SESSION: %d", st)
	}
}
