package nfs

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tristore/tristore/proto/nfs3"
	"github.com/tristore/tristore/proto/sunrpc"
)

// fakeServer speaks just enough ONC RPC to drive the client's transport
// through orderings and failures a real server rarely produces. handle
// gets each call and returns the reply record (nil = no reply) and whether
// to drop the connection instead.
type fakeServer struct {
	handle func(call sunrpc.Call, args *sunrpc.Reader) (reply []byte, drop bool)
	conns  atomic.Int32
}

// dial returns a DialFunc connecting to this fake over net.Pipe.
func (f *fakeServer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	cl, sv := net.Pipe()
	f.conns.Add(1)
	go f.serve(sv)
	return cl, nil
}

func (f *fakeServer) serve(c net.Conn) {
	defer c.Close()
	var wmu sync.Mutex
	for {
		rec, err := sunrpc.ReadRecord(c, sunrpc.DefaultMaxRecord)
		if err != nil {
			return
		}
		r := sunrpc.NewReader(rec)
		call, err := sunrpc.DecodeCall(r)
		if err != nil {
			return
		}
		go func() {
			reply, drop := f.handle(call, r)
			if drop {
				c.Close()
				return
			}
			if reply != nil {
				wmu.Lock()
				sunrpc.WriteRecord(c, reply)
				wmu.Unlock()
			}
		}()
	}
}

func okReply(xid uint32, res interface{ Encode(*sunrpc.Writer) }) []byte {
	var w sunrpc.Writer
	sunrpc.EncodeAccepted(&w, xid, sunrpc.Success)
	res.Encode(&w)
	return w.Bytes()
}

func fakeClient(t *testing.T, f *fakeServer, opts Options) *Client {
	t.Helper()
	opts.Dial = f.dial
	if opts.Timeout == 0 {
		opts.Timeout = 10 * time.Second
	}
	c, err := Dial(context.Background(), "fake:2049", opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// Replies come back in reverse order; each call must get its own.
func TestRepliesOutOfOrder(t *testing.T) {
	const n = 16
	var mu sync.Mutex
	var waiting []func()
	f := &fakeServer{}
	release := make(chan struct{})
	f.handle = func(call sunrpc.Call, r *sunrpc.Reader) ([]byte, bool) {
		var a nfs3.GetattrArgs
		a.Decode(r)
		id := uint64(a.FH[0])
		done := make(chan struct{})
		mu.Lock()
		waiting = append(waiting, func() { close(done) })
		if len(waiting) == n {
			close(release)
		}
		mu.Unlock()
		<-done
		return okReply(call.XID, &nfs3.GetattrRes{Status: nfs3.OK, Attr: nfs3.Fattr{Type: nfs3.TypeReg, FileID: id}}), false
	}
	c := fakeClient(t, f, Options{})
	go func() {
		<-release
		mu.Lock()
		defer mu.Unlock()
		for i := len(waiting) - 1; i >= 0; i-- {
			waiting[i]()
			time.Sleep(time.Millisecond)
		}
	}()
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			a, err := c.Getattr(context.Background(), FH{byte(i)})
			if err != nil {
				errs <- err
				return
			}
			if a.FileID != uint64(i) {
				errs <- errors.New("reply matched to the wrong call")
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// A dropped connection: idempotent calls are retransmitted on a new
// connection; non-idempotent ones fail with ErrConnLost.
func TestReconnectRetry(t *testing.T) {
	var calls atomic.Int32
	f := &fakeServer{}
	f.handle = func(call sunrpc.Call, r *sunrpc.Reader) ([]byte, bool) {
		if calls.Add(1) == 1 || call.Proc == nfs3.ProcRemove {
			return nil, true
		}
		return okReply(call.XID, &nfs3.GetattrRes{Status: nfs3.OK, Attr: nfs3.Fattr{Type: nfs3.TypeDir, FileID: 7}}), false
	}
	c := fakeClient(t, f, Options{})
	a, err := c.Getattr(context.Background(), FH{1})
	if err != nil || a.FileID != 7 {
		t.Fatalf("GETATTR across a drop: %v %+v", err, a)
	}
	if c.Reconnects() != 2 {
		t.Fatalf("connections: %d, want 2", c.Reconnects())
	}
	err = c.Remove(context.Background(), FH{1}, "x")
	if !errors.Is(err, ErrConnLost) {
		t.Fatalf("REMOVE across a drop: %v, want ErrConnLost", err)
	}
}

// RPC-level errors and undecodable replies are errors, and the client
// stays usable.
func TestRPCErrorsAndGarbage(t *testing.T) {
	f := &fakeServer{}
	f.handle = func(call sunrpc.Call, r *sunrpc.Reader) ([]byte, bool) {
		var w sunrpc.Writer
		switch call.Proc {
		case nfs3.ProcGetattr:
			sunrpc.EncodeAccepted(&w, call.XID, sunrpc.ProcUnavail)
		case nfs3.ProcAccess:
			sunrpc.EncodeAccepted(&w, call.XID, sunrpc.Success)
			w.Uint32(0) // OK, then a truncated post_op_attr
			w.Uint32(1)
		case nfs3.ProcReadlink:
			return okReply(call.XID, &nfs3.ReadlinkRes{Status: nfs3.ErrStale}), false
		default:
			sunrpc.EncodeAccepted(&w, call.XID, sunrpc.Success)
		}
		return w.Bytes(), false
	}
	c := fakeClient(t, f, Options{})
	ctx := context.Background()
	_, err := c.Getattr(ctx, FH{1})
	var re *sunrpc.RPCError
	if !errors.As(err, &re) || re.Reply.AcceptStat != sunrpc.ProcUnavail {
		t.Fatalf("PROC_UNAVAIL: %v", err)
	}
	if _, err := c.Access(ctx, FH{1}, AccessRead); err == nil || !errors.Is(err, sunrpc.ErrGarbage) {
		t.Fatalf("truncated reply: %v, want ErrGarbage", err)
	}
	if _, err := c.Readlink(ctx, FH{1}); !errors.Is(err, ErrStale) {
		t.Fatalf("READLINK: %v, want ErrStale", err)
	}
	if err := c.Null(ctx); err != nil {
		t.Fatalf("client unusable after bad replies: %v", err)
	}
}

// A server that never answers: ctx ends the call promptly; the per-call
// timeout drops the connection and fails non-idempotent calls.
func TestContextAndTimeout(t *testing.T) {
	f := &fakeServer{handle: func(call sunrpc.Call, r *sunrpc.Reader) ([]byte, bool) { return nil, false }}
	c := fakeClient(t, f, Options{Timeout: 300 * time.Millisecond, Retries: 1})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := c.Getattr(ctx, FH{1}); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("GETATTR with a 100ms context: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("cancelled call took %v", d)
	}
	if err := c.Rmdir(context.Background(), FH{1}, "d"); !errors.Is(err, ErrConnLost) {
		t.Fatalf("RMDIR without reply: %v, want ErrConnLost after the timeout", err)
	}
	c.Close()
	if err := c.Null(context.Background()); !errors.Is(err, ErrClosed) {
		t.Fatalf("call after Close: %v", err)
	}
}

// FuzzReply feeds arbitrary bytes as the reply body of every procedure the
// client decodes: it must return (an error or a result), never panic or hang.
func FuzzReply(f *testing.F) {
	var w sunrpc.Writer
	(&nfs3.GetattrRes{Status: nfs3.OK, Attr: nfs3.Fattr{Type: nfs3.TypeReg, Size: 10}}).Encode(&w)
	f.Add(append([]byte(nil), w.Bytes()...))
	w.Reset()
	(&nfs3.ReadRes{Status: nfs3.OK, Count: 3, EOF: true, Data: []byte("abc")}).Encode(&w)
	f.Add(append([]byte(nil), w.Bytes()...))
	w.Reset()
	(&nfs3.ReaddirplusRes{Status: nfs3.OK, EOF: true, Entries: []nfs3.EntryPlus{{FileID: 1, Name: "a", Cookie: 1}}}).Encode(&w)
	f.Add(append([]byte(nil), w.Bytes()...))
	f.Add([]byte{0, 0, 0, 0, 0, 0, 0, 1})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	// A body starting with JUKEBOX would otherwise be retried for seconds.
	jukeboxTries = 1
	defer func() { jukeboxTries = 8 }()
	f.Fuzz(func(t *testing.T, body []byte) {
		srv := &fakeServer{handle: func(call sunrpc.Call, r *sunrpc.Reader) ([]byte, bool) {
			var w sunrpc.Writer
			sunrpc.EncodeAccepted(&w, call.XID, sunrpc.Success)
			return append(w.Bytes(), body...), false
		}}
		c := fakeClient(t, srv, Options{Timeout: 5 * time.Second, Retries: 1})
		ctx := context.Background()
		fh := FH{1, 2, 3}
		c.Getattr(ctx, fh)
		c.Lookup(ctx, fh, "x")
		c.Read(ctx, fh, 0, make([]byte, 16))
		c.Write(ctx, fh, 0, []byte("x"), FileSync)
		c.Create(ctx, fh, "x", Unchecked, SetAttr{}, Verifier{})
		c.ReaddirplusPage(ctx, fh, 0, Verifier{}, 0, 0)
		c.ReaddirPage(ctx, fh, 0, Verifier{}, 0)
		c.Fsinfo(ctx, fh)
		c.Fsstat(ctx, fh)
		c.Pathconf(ctx, fh)
		c.Commit(ctx, fh, 0, 0)
		c.Rename(ctx, fh, "a", fh, "b")
		c.Link(ctx, fh, fh, "l")
		c.Exports(ctx)
	})
}

// NFS3ERR_JUKEBOX is retried after a delay; other statuses are returned.
func TestJukeboxRetry(t *testing.T) {
	var calls atomic.Int32
	f := &fakeServer{handle: func(call sunrpc.Call, r *sunrpc.Reader) ([]byte, bool) {
		if calls.Add(1) <= 2 {
			return okReply(call.XID, &nfs3.GetattrRes{Status: nfs3.ErrJukebox}), false
		}
		return okReply(call.XID, &nfs3.GetattrRes{Status: nfs3.OK, Attr: nfs3.Fattr{Type: nfs3.TypeReg, FileID: 9}}), false
	}}
	c := fakeClient(t, f, Options{})
	a, err := c.Getattr(context.Background(), FH{1})
	if err != nil || a.FileID != 9 || calls.Load() != 3 {
		t.Fatalf("after 2 JUKEBOX replies: %+v %v (%d calls)", a, err, calls.Load())
	}
}

// A non-idempotent call whose reply is lost is sent again, and the answer
// that shows the first attempt ran counts as success.
func TestLostReplyRecovery(t *testing.T) {
	seen := map[uint32]int{}
	var mu sync.Mutex
	f := &fakeServer{handle: func(call sunrpc.Call, r *sunrpc.Reader) ([]byte, bool) {
		mu.Lock()
		seen[call.Proc]++
		n := seen[call.Proc]
		mu.Unlock()
		switch call.Proc {
		case nfs3.ProcRemove, nfs3.ProcRmdir, nfs3.ProcMkdir, nfs3.ProcRename, nfs3.ProcCreate:
			if n == 1 {
				return nil, true // "ran", then the connection died
			}
		}
		switch call.Proc {
		case nfs3.ProcRemove, nfs3.ProcRmdir:
			return okReply(call.XID, &nfs3.WccRes{Status: nfs3.ErrNoEnt}), false
		case nfs3.ProcRename:
			return okReply(call.XID, &nfs3.RenameRes{Status: nfs3.ErrNoEnt}), false
		case nfs3.ProcMkdir:
			return okReply(call.XID, &nfs3.CreateRes{Status: nfs3.ErrExist}), false
		case nfs3.ProcCreate:
			return okReply(call.XID, &nfs3.CreateRes{Status: nfs3.ErrExist}), false
		case nfs3.ProcLookup:
			return okReply(call.XID, &nfs3.LookupRes{Status: nfs3.OK, FH: nfs3.FH{9}, Attr: nfs3.PostOpAttr{Attr: &nfs3.Fattr{Type: nfs3.TypeDir, FileID: 9}}}), false
		}
		return okReply(call.XID, &nfs3.GetattrRes{Status: nfs3.ErrNotSupp}), false
	}}
	c := fakeClient(t, f, Options{})
	ctx := context.Background()
	if err := c.Remove(ctx, FH{1}, "f"); err != nil {
		t.Fatalf("REMOVE whose reply was lost: %v", err)
	}
	if err := c.Rmdir(ctx, FH{1}, "d"); err != nil {
		t.Fatalf("RMDIR whose reply was lost: %v", err)
	}
	if err := c.Rename(ctx, FH{1}, "a", FH{1}, "b"); err != nil {
		t.Fatalf("RENAME whose reply was lost: %v", err)
	}
	if fh, a, err := c.Mkdir(ctx, FH{1}, "d", SetAttr{}); err != nil || a.Type != TypeDir || fh[0] != 9 {
		t.Fatalf("MKDIR whose reply was lost: %v", err)
	}
	// GUARDED CREATE cannot tell its own success from a real conflict.
	if _, _, err := c.Create(ctx, FH{1}, "g", Guarded, SetAttr{}, Verifier{}); !errors.Is(err, ErrConnLost) {
		t.Fatalf("GUARDED CREATE across a drop: %v, want ErrConnLost", err)
	}
}

// Calls carry the client's AUTH_SYS identity, or the one WithCred attached
// to the context.
func TestPerCallCred(t *testing.T) {
	var got sunrpc.AuthSys
	f := &fakeServer{handle: func(call sunrpc.Call, r *sunrpc.Reader) ([]byte, bool) {
		a, err := sunrpc.DecodeAuthSys(call.Cred.Body)
		if err != nil || call.Cred.Flavor != sunrpc.AuthFlavorSys {
			return nil, true
		}
		got = a
		return okReply(call.XID, &nfs3.GetattrRes{Status: nfs3.OK}), false
	}}
	uid, gid := uint32(10), uint32(20)
	c := fakeClient(t, f, Options{UID: &uid, GID: &gid, Machine: "box"})
	if _, err := c.Getattr(context.Background(), FH{1}); err != nil || got.UID != 10 || got.GID != 20 || got.MachineName != "box" {
		t.Fatalf("own identity: %+v %v", got, err)
	}
	gids := make([]uint32, 20)
	for i := range gids {
		gids[i] = uint32(100 + i)
	}
	ctx := WithCred(context.Background(), Cred{UID: 1234, GID: 99, GIDs: gids})
	if _, err := c.Getattr(ctx, FH{1}); err != nil || got.UID != 1234 || got.GID != 99 || len(got.GIDs) != 16 || got.MachineName != "box" {
		t.Fatalf("per-call identity: %+v %v", got, err)
	}
}

// Large READ replies are read into recycled buffers: a 64 MiB ReadAt with
// 8 READs in flight makes a handful of 1 MiB buffers, not one per READ,
// and every byte still lands where it belongs.
func TestReadRecyclesReplyBuffers(t *testing.T) {
	const mib = 1 << 20
	f := &fakeServer{}
	f.handle = func(call sunrpc.Call, r *sunrpc.Reader) ([]byte, bool) {
		var a nfs3.ReadArgs
		a.Decode(r)
		data := make([]byte, a.Count)
		for i := range data {
			data[i] = byte(a.Offset>>20) + byte(i*7)
		}
		return okReply(call.XID, &nfs3.ReadRes{Status: nfs3.OK, Count: a.Count, Data: data}), false
	}
	c := fakeClient(t, f, Options{Rsize: mib, Parallel: 8})
	if c.Rsize() != mib {
		t.Fatalf("rsize %d", c.Rsize())
	}
	p := make([]byte, 64*mib)
	before := recordBufsMade.Load()
	if n, err := c.ReadAt(context.Background(), FH{1}, p, 0); err != nil || n != len(p) {
		t.Fatalf("ReadAt: %d %v", n, err)
	}
	made := recordBufsMade.Load() - before
	for off := 0; off < len(p); off += mib {
		for i := 0; i < mib; i += 4099 {
			if want := byte(off>>20) + byte(i*7); p[off+i] != want {
				t.Fatalf("byte %d: %d, want %d", off+i, p[off+i], want)
			}
		}
	}
	if made > 32 {
		t.Fatalf("%d reply buffers made for 64 READs: not recycled", made)
	}
	t.Logf("%d reply buffers made for 64 READs", made)
}
