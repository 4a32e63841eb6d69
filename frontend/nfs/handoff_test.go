package nfs

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/tristore/tristore/proto/nfs3"
	"github.com/tristore/tristore/proto/sunrpc"
)

// A call answered on the connection's reading goroutine (readLoop) that
// takes long must not hold up the calls behind it: once it has run for
// handOffAfter, another goroutine reads and answers the next call.
func TestSlowCallHandsOffReading(t *testing.T) {
	_, addr := testServer(t, t.TempDir())
	c := dial(t, addr)
	root := c.mount("/")
	release := make(chan struct{})
	blocked := make(chan struct{}, 1)
	handleHook = func(rec []byte) {
		if len(rec) >= 24 && binary.BigEndian.Uint32(rec[20:]) == nfs3.ProcFsstat {
			blocked <- struct{}{}
			<-release
		}
	}
	defer func() { handleHook = nil }()
	defer close(release)

	send := func(xid, proc uint32, args codec) {
		t.Helper()
		var w sunrpc.Writer
		sunrpc.Call{XID: xid, Prog: nfs3.ProgNFS, Vers: 3, Proc: proc, Cred: c.cred, Verf: sunrpc.AuthNone()}.Encode(&w)
		args.Encode(&w)
		c.c.SetDeadline(time.Now().Add(30 * time.Second))
		if err := sunrpc.WriteRecord(c.c, w.Bytes()); err != nil {
			t.Fatal(err)
		}
	}
	send(9001, nfs3.ProcFsstat, &nfs3.GetattrArgs{FH: root}) // FSSTAT3args is one handle, like GETATTR3args
	select {
	case <-blocked:
	case <-time.After(10 * time.Second):
		t.Fatal("FSSTAT never reached the handler")
	}
	// Sent after FSSTAT started (not buffered with it): only the hand-off
	// after handOffAfter gets it read while FSSTAT is still blocked.
	send(9002, nfs3.ProcGetattr, &nfs3.GetattrArgs{FH: root})
	c.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	rep, _, err := c.readReply()
	if err != nil {
		t.Fatalf("no reply to GETATTR while FSSTAT was blocked: %v", err)
	}
	if rep.XID != 9002 {
		t.Fatalf("first reply is for XID %d, want the GETATTR's (9002)", rep.XID)
	}
}
