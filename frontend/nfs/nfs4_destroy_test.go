package nfs

import (
	"testing"

	"github.com/tristore/tristore/proto/nfs4"
)

// TestNFSv41DestroyClientIDAfterClose: a 4.1 client that opened a file,
// closed it and destroyed its session holds no state (and, 4.1 having no
// seqid replays, no open owner is kept after the CLOSE), so DESTROY_CLIENTID
// must succeed and free the client record at once (RFC 8881 18.50.3: only
// opens, locks, delegations and layouts make it CLIENTID_BUSY). An open
// owner with no open stateid left is not state. Before the fix the server
// answered CLIENTID_BUSY and kept the client, its owners and the owners'
// closed-stateid replay entries until the lease ran out: issue 14's memory
// soak found 25 MB of them in the idle server.
func TestNFSv41DestroyClientIDAfterClose(t *testing.T) {
	v := newV41(t, "client-d")
	srv, c, clid, sid, sq := v.srv, v.c, v.clid, v.sid, v.sq
	open, fh := v.create(t, "f.txt", nfs4.CreateUnchecked, nfs4.RawFattr{})
	busy := func() {
		t.Helper()
		if st, _ := c.compound4(1, o4(nfs4.OpDestroyClientID, &nfs4.ClientIDArgs{ClientID: clid}, nil)); st != nfs4.ErrClientIDBusy {
			t.Fatalf("DESTROY_CLIENTID with state left: %d, want CLIENTID_BUSY", st)
		}
	}
	busy() // the session and the open are still there
	if st, _ := c.compound4(1, sq.op(), o4(nfs4.OpPutFH, &nfs4.PutFHArgs{FH: fh.FH}, nil), o4(nfs4.OpClose, &nfs4.CloseArgs{Stateid: open.Stateid}, &nfs4.StateidRes{})); st != nfs4.OK {
		t.Fatalf("CLOSE: %d", st)
	}
	srv.v4.mu.Lock()
	owners := len(srv.v4.clients[clid].owners)
	srv.v4.mu.Unlock()
	if owners != 0 {
		t.Errorf("%d open owners kept after the 4.1 CLOSE of the only open", owners)
	}
	if st, _ := c.compound4(1, o4(nfs4.OpDestroySession, &nfs4.SessionArgs{SessionID: sid}, nil)); st != nfs4.OK {
		t.Fatalf("DESTROY_SESSION: %d", st)
	}
	if st, _ := c.compound4(1, o4(nfs4.OpDestroyClientID, &nfs4.ClientIDArgs{ClientID: clid}, nil)); st != nfs4.OK {
		t.Fatalf("DESTROY_CLIENTID after CLOSE and DESTROY_SESSION: %d, want OK", st)
	}
	v4 := srv.v4
	v4.mu.Lock()
	defer v4.mu.Unlock()
	if n := len(v4.clients); n != 0 {
		t.Errorf("%d client records left after DESTROY_CLIENTID", n)
	}
	if n := len(v4.closed); n != 0 {
		t.Errorf("%d closed-stateid replay entries left after DESTROY_CLIENTID", n)
	}
}
