package nfs

import (
	"net"
	"testing"
	"time"

	"github.com/tristore/tristore/proto/nfs3"
	"github.com/tristore/tristore/proto/sunrpc"
)

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

// FuzzHandleCall feeds arbitrary records to the call dispatcher (header
// decoding, auth, every procedure's argument decoding and execution against
// a temp export). Nothing may panic; the result is always a reply or a drop.
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
	c := &conn{s: s, c: discardConn{}}
	f.Fuzz(func(t *testing.T, rec []byte) {
		c.handle(rec)
	})
}
