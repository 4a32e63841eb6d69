package nfs

import (
	"context"
	"errors"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tristore/tristore/proto/nfs3"
	"github.com/tristore/tristore/proto/sunrpc"
)

// outageServer is a fake server that can be "down": its dial then fails
// with ECONNREFUSED, like a stopped server's port.
type outageServer struct {
	fakeServer
	down atomic.Bool
}

func newOutageServer() *outageServer {
	o := &outageServer{}
	o.handle = func(call sunrpc.Call, r *sunrpc.Reader) ([]byte, bool) {
		return okReply(call.XID, &nfs3.GetattrRes{Status: nfs3.OK, Attr: nfs3.Fattr{Type: nfs3.TypeReg, FileID: 7}}), false
	}
	return o
}

func (o *outageServer) client(t *testing.T, opts Options) *Client {
	t.Helper()
	opts.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if o.down.Load() {
			return nil, &net.OpError{Op: "dial", Net: network, Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
		}
		return o.dial(ctx, network, addr)
	}
	c, err := Dial(context.Background(), "fake:2049", opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// goDown takes the server away: the connection drops and redials are refused.
func (o *outageServer) goDown(c *Client) {
	o.down.Store(true)
	c.DropConnection()
}

// Soft: with the server refusing connections a call fails after the
// budget timeo + 2*timeo (retrans 1), with ErrTimedOut mapped to EIO, not
// ECONNREFUSED.
func TestSoftTimesOut(t *testing.T) {
	o := newOutageServer()
	c := o.client(t, Options{Timeout: 200 * time.Millisecond, Retries: 1})
	o.goDown(c)
	start := time.Now()
	_, err := c.Getattr(context.Background(), FH{1})
	took := time.Since(start)
	if !errors.Is(err, ErrTimedOut) {
		t.Fatalf("soft call while down: %v, want ErrTimedOut", err)
	}
	if e := ToErrno(err); e != syscall.EIO {
		t.Fatalf("errno %v, want EIO", e)
	}
	if took < 500*time.Millisecond || took > 3*time.Second {
		t.Fatalf("soft call gave up after %v, want about 600ms", took)
	}
}

// Hard: a call made while the server is down waits and succeeds once it
// is back; interrupt and GiveUp end the wait.
func TestHardWaitsForServer(t *testing.T) {
	o := newOutageServer()
	c := o.client(t, Options{Timeout: 100 * time.Millisecond, Retries: 1, Hard: true})
	o.goDown(c)
	time.AfterFunc(1500*time.Millisecond, func() { o.down.Store(false) })
	start := time.Now()
	a, err := c.Getattr(context.Background(), FH{1})
	if err != nil || a.FileID != 7 {
		t.Fatalf("hard call across an outage: %v %v", a, err)
	}
	if took := time.Since(start); took < 1400*time.Millisecond || took > 5*time.Second {
		t.Fatalf("hard call returned after %v, want soon after the server came back (1.5 s)", took)
	}

	o.goDown(c)
	intr := make(chan struct{})
	time.AfterFunc(300*time.Millisecond, func() { close(intr) })
	start = time.Now()
	_, err = c.Getattr(WithInterrupt(context.Background(), intr), FH{1})
	if !errors.Is(err, ErrInterrupted) || ToErrno(err) != syscall.EINTR {
		t.Fatalf("interrupted hard call: %v (%v), want ErrInterrupted/EINTR", err, ToErrno(err))
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("interrupt took %v", took)
	}

	time.AfterFunc(300*time.Millisecond, c.GiveUp)
	start = time.Now()
	if _, err = c.Getattr(context.Background(), FH{1}); !errors.Is(err, ErrTimedOut) || ToErrno(err) != syscall.EIO {
		t.Fatalf("hard call after GiveUp: %v, want ErrTimedOut/EIO", err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Fatalf("GiveUp took %v", took)
	}
}

// An interrupt does not cut short a call to a server that answers (slowly).
func TestInterruptIgnoredWhileAnswering(t *testing.T) {
	o := newOutageServer()
	h := o.handle
	o.handle = func(call sunrpc.Call, r *sunrpc.Reader) ([]byte, bool) {
		time.Sleep(300 * time.Millisecond)
		return h(call, r)
	}
	c := o.client(t, Options{Timeout: 5 * time.Second, Hard: true})
	intr := make(chan struct{})
	close(intr)
	if _, err := c.Getattr(WithInterrupt(context.Background(), intr), FH{1}); err != nil {
		t.Fatalf("slow but healthy call with an interrupt pending: %v", err)
	}
}
