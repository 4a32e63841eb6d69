package nfs

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"net/netip"
	"testing"
	"time"

	"github.com/tristore/tristore/proto/nfs3"
	"github.com/tristore/tristore/proto/sunrpc"
)

// validStatus is the nfsstat3 set of RFC 1813.
var validStatus = map[nfs3.Status]bool{}

func init() {
	for _, v := range []uint32{0, 1, 2, 5, 6, 13, 17, 18, 19, 20, 21, 22, 27, 28, 30, 31, 63, 66, 69, 70, 71,
		10001, 10002, 10003, 10004, 10005, 10006, 10007, 10008} {
		validStatus[nfs3.Status(v)] = true
	}
}

// discardConn is a net.Conn that swallows replies.
type discardConn struct{ net.Conn }

func (discardConn) Write(b []byte) (int, error)       { return len(b), nil }
func (discardConn) Close() error                      { return nil }
func (discardConn) SetWriteDeadline(time.Time) error  { return nil }
func (discardConn) RemoteAddr() net.Addr              { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }
func (discardConn) SetReadDeadline(t time.Time) error { return nil }
func (discardConn) SetDeadline(t time.Time) error     { return nil }
func (discardConn) LocalAddr() net.Addr               { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }
func (discardConn) Read(b []byte) (int, error)        { return 0, net.ErrClosed }

// captureConn is a discardConn that keeps what is written.
type captureConn struct {
	discardConn
	buf *bytes.Buffer
}

func (c captureConn) Write(b []byte) (int, error) { return c.buf.Write(b) }

// FuzzHandleCall feeds arbitrary records to the call dispatcher (header
// decoding, auth, every procedure's argument decoding and execution against
// a temp export) and checks the answer, not only that nothing panics:
// either nothing is sent (a record too short to carry an XID) or exactly
// one well-framed record, a reply header that decodes, with the call's
// XID; an accepted SUCCESS reply to an NFS v3 call starts with a valid
// nfsstat3; no reply is larger than a maximal READ reply.
func FuzzHandleCall(f *testing.F) {
	dir := f.TempDir()
	s, err := New(Options{DataDir: dir})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { s.Close() })
	root := s.exports[0].fs.Root()
	seed := func(prog, vers, proc uint32, args interface{ Encode(*sunrpc.Writer) }) {
		var w sunrpc.Writer
		sunrpc.Call{XID: 1, Prog: prog, Vers: vers, Proc: proc, Cred: sunrpc.AuthSys{MachineName: "f", UID: 0}.Auth(), Verf: sunrpc.AuthNone()}.Encode(&w)
		if args != nil {
			args.Encode(&w)
		}
		f.Add(append([]byte(nil), w.Bytes()...))
	}
	fh := nfs3.FH(root)
	seed(nfs3.ProgNFS, 3, nfs3.ProcGetattr, &nfs3.GetattrArgs{FH: fh})
	seed(nfs3.ProgNFS, 3, nfs3.ProcLookup, &nfs3.DirOpArgs{Dir: fh, Name: "x"})
	seed(nfs3.ProgNFS, 3, nfs3.ProcCreate, &nfs3.CreateArgs{Where: nfs3.DirOpArgs{Dir: fh, Name: "c"}, Mode: nfs3.Guarded})
	seed(nfs3.ProgNFS, 3, nfs3.ProcWrite, &nfs3.WriteArgs{FH: fh, Count: 1, Data: []byte("x")})
	seed(nfs3.ProgNFS, 3, nfs3.ProcReaddirplus, &nfs3.ReaddirplusArgs{Dir: fh, DirCount: 100, MaxCount: 1000})
	seed(nfs3.ProgNFS, 3, nfs3.ProcSetattr, &nfs3.SetattrArgs{FH: fh, Attr: nfs3.Sattr{Mode: nfs3.Uint32Ptr(0o755)}})
	seed(nfs3.ProgMount, 3, nfs3.MountProcMnt, &nfs3.DirPath{Path: "/"})
	seed(nfs3.ProgMount, 3, nfs3.MountProcExport, nil)
	seed(nfs3.ProgPortmap, 2, nfs3.PortmapProcGetport, &nfs3.Mapping{Prog: nfs3.ProgNFS, Vers: 3, Prot: 6})
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 1, 0x86, 0xa3, 0, 0, 0, 3, 0, 0, 0, 99})
	var out bytes.Buffer
	c := &conn{s: s, c: captureConn{buf: &out}, addr: netip.MustParseAddr("127.0.0.1")}
	f.Fuzz(func(t *testing.T, rec []byte) {
		out.Reset()
		c.handle(rec, false)
		if out.Len() == 0 {
			// Only a record too short for a call header, or one that is
			// not a CALL (the connection is closed instead), goes unanswered.
			if len(rec) >= 24 && binary.BigEndian.Uint32(rec[4:]) == sunrpc.MsgCall {
				t.Fatalf("no reply to a %d-byte call", len(rec))
			}
			return
		}
		br := bufio.NewReader(bytes.NewReader(out.Bytes()))
		reply, err := sunrpc.ReadRecord(br, maxIO+64<<10)
		if err != nil {
			t.Fatalf("reply record: %v", err)
		}
		if _, err := sunrpc.ReadRecord(br, 1<<20); !errors.Is(err, io.EOF) {
			t.Fatalf("more than one record sent for one call: %v", err)
		}
		r := sunrpc.NewReader(reply)
		rep, err := sunrpc.DecodeReply(r)
		if err != nil {
			t.Fatalf("reply header: %v", err)
		}
		if len(rec) >= 4 && rep.XID != binary.BigEndian.Uint32(rec) {
			t.Fatalf("reply XID %#x to call XID %#x", rep.XID, binary.BigEndian.Uint32(rec))
		}
		call, cerr := sunrpc.DecodeCall(sunrpc.NewReader(rec))
		if cerr == nil && rep.Accepted && rep.AcceptStat == sunrpc.Success && call.Prog == nfs3.ProgNFS && call.Vers == nfs3.VersNFS && call.Proc != nfs3.ProcNull {
			st := nfs3.Status(r.Uint32())
			if r.Err() != nil || !validStatus[st] {
				t.Fatalf("procedure %d answered status %d", call.Proc, st)
			}
		}
	})
}
