package nfs

import (
	"bufio"
	"context"
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/tristore/tristore/internal/testutil"
	"github.com/tristore/tristore/proto/nfs3"
	"github.com/tristore/tristore/proto/sunrpc"
)

// A minimal RPC caller for loopback tests: one call at a time, or raw
// records for the bad-input tests.

type codec interface {
	Encode(w *sunrpc.Writer)
	Decode(r *sunrpc.Reader) error
}

type rpcConn struct {
	t    testing.TB
	c    net.Conn
	br   *bufio.Reader
	xid  uint32
	cred sunrpc.OpaqueAuth
}

func dial(t testing.TB, addr string) *rpcConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &rpcConn{t: t, c: c, br: bufio.NewReader(c), xid: 100,
		cred: sunrpc.AuthSys{MachineName: "test", UID: 0, GID: 0}.Auth()}
}

func (c *rpcConn) as(uid, gid uint32) *rpcConn {
	c.cred = sunrpc.AuthSys{MachineName: "test", UID: uid, GID: gid}.Auth()
	return c
}

// raw sends one call with the given header fields and raw argument bytes
// and returns the decoded reply header and a reader over the results.
func (c *rpcConn) raw(prog, vers, proc uint32, cred sunrpc.OpaqueAuth, args []byte) (sunrpc.Reply, *sunrpc.Reader, error) {
	c.xid++
	var w sunrpc.Writer
	sunrpc.Call{XID: c.xid, Prog: prog, Vers: vers, Proc: proc, Cred: cred, Verf: sunrpc.AuthNone()}.Encode(&w)
	b := append(w.Bytes(), args...)
	c.c.SetDeadline(time.Now().Add(30 * time.Second))
	if err := sunrpc.WriteRecord(c.c, b); err != nil {
		return sunrpc.Reply{}, nil, err
	}
	return c.readReply()
}

func (c *rpcConn) readReply() (sunrpc.Reply, *sunrpc.Reader, error) {
	rec, err := sunrpc.ReadRecord(c.br, 8<<20)
	if err != nil {
		return sunrpc.Reply{}, nil, err
	}
	r := sunrpc.NewReader(rec)
	rep, err := sunrpc.DecodeReply(r)
	return rep, r, err
}

// call makes a successful RPC and decodes the result into res.
func (c *rpcConn) call(prog, vers, proc uint32, args, res codec) {
	c.t.Helper()
	var w sunrpc.Writer
	if args != nil {
		args.Encode(&w)
	}
	rep, r, err := c.raw(prog, vers, proc, c.cred, w.Bytes())
	if err != nil {
		c.t.Fatalf("rpc %d/%d/%d: %v", prog, vers, proc, err)
	}
	if rep.XID != c.xid {
		c.t.Fatalf("reply xid %d, want %d", rep.XID, c.xid)
	}
	if err := rep.Err(); err != nil {
		c.t.Fatalf("rpc %d/%d/%d: %v", prog, vers, proc, err)
	}
	if res != nil {
		if err := res.Decode(r); err != nil {
			c.t.Fatalf("decoding result of proc %d: %v", proc, err)
		}
		if r.Remaining() != 0 {
			c.t.Fatalf("proc %d: %d trailing bytes in reply", proc, r.Remaining())
		}
	}
}

func (c *rpcConn) nfs(proc uint32, args, res codec) {
	c.t.Helper()
	c.call(nfs3.ProgNFS, nfs3.VersNFS, proc, args, res)
}

func (c *rpcConn) mount(p string) nfs3.FH {
	c.t.Helper()
	var res nfs3.MntRes
	c.call(nfs3.ProgMount, nfs3.VersMount, nfs3.MountProcMnt, &nfs3.DirPath{Path: p}, &res)
	if res.Status != nfs3.MntOK {
		c.t.Fatalf("MNT %s: status %d", p, res.Status)
	}
	return append(nfs3.FH(nil), res.FH...)
}

// testServer starts a server over dir with the given exports on 127.0.0.1:0.
func testServer(t testing.TB, dir string, exports ...string) (*Server, string) {
	t.Helper()
	var ex []Export
	for _, s := range exports {
		e, err := ParseExport(s)
		if err != nil {
			t.Fatal(err)
		}
		ex = append(ex, e)
	}
	s, addr := serveOpts(t, Options{DataDir: dir, Exports: ex})
	return s, addr.String()
}

// serveOpts starts a server with opts on 127.0.0.1:0 and returns it and its
// address; t's cleanup stops it (failing t if that takes over 30s).
func serveOpts(t testing.TB, opts Options) (*Server, net.Addr) {
	t.Helper()
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		s.Close()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("server did not stop")
		}
	})
	return s, ln.Addr()
}

func needRoot(t testing.TB) {
	t.Helper()
	testutil.NeedRoot(t, "open_by_handle_at and per-call fsuid switching")
}

func isConnClosed(err error) bool {
	return err != nil && !errors.Is(err, os.ErrDeadlineExceeded)
}
