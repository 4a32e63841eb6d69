package nfs

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tristore/tristore/proto/sunrpc"
)

// rpcClient is one ONC RPC conversation over TCP with many calls in flight:
//
//	caller goroutines --encode--> [write mutex] --record--> conn
//	conn --record--> reader goroutine --xid--> pending[xid] chan --> caller
//
// Calls are matched to replies by XID, so replies may come back in any
// order. When the connection drops, every pending call fails with
// errConnDropped; call() then redials and retransmits idempotent calls
// (same XID, so a server's duplicate request cache can recognise them) and
// reports ErrConnLost for the others.
type rpcClient struct {
	addr    string
	dial    DialFunc
	cred    sunrpc.OpaqueAuth // the client's own identity
	base    *sunrpc.AuthSys   // its AUTH_SYS fields (nil: AUTH_NONE), for per-call identities
	timeout time.Duration     // per attempt
	retries int

	xid atomic.Uint32

	mu     sync.Mutex
	cur    *rpcConn
	closed bool
	gen    int // number of connections made (for tests and logs)
}

// DialFunc opens the TCP connection; tests use it to dial inside a network
// namespace.
type DialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

type rpcConn struct {
	c       net.Conn
	wmu     sync.Mutex
	mu      sync.Mutex
	pending map[uint32]chan rpcResult
	err     error // set once the connection is dead
	dead    chan struct{}
}

type rpcResult struct {
	rec []byte
	err error
}

var errConnDropped = errors.New("nfs: connection dropped")

// newRPCClient makes a client for addr; sys is the AUTH_SYS identity (nil
// for AUTH_NONE, as for the portmapper).
func newRPCClient(addr string, dial DialFunc, sys *sunrpc.AuthSys, timeout time.Duration, retries int) *rpcClient {
	cred := sunrpc.AuthNone()
	if sys != nil {
		cred = sys.Auth()
	}
	rc := &rpcClient{addr: addr, dial: dial, cred: cred, base: sys, timeout: timeout, retries: retries}
	rc.xid.Store(uint32(time.Now().UnixNano()))
	return rc
}

// conn returns the live connection, dialing a new one if needed.
func (rc *rpcClient) conn(ctx context.Context) (*rpcConn, error) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	if rc.closed {
		return nil, ErrClosed
	}
	if rc.cur != nil {
		select {
		case <-rc.cur.dead:
		default:
			return rc.cur, nil
		}
	}
	dctx, cancel := context.WithTimeout(ctx, rc.timeout)
	defer cancel()
	c, err := rc.dial(dctx, "tcp", rc.addr)
	if err != nil {
		return nil, fmt.Errorf("nfs: dial %s: %w", rc.addr, err)
	}
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
		tc.SetKeepAlive(true)
	}
	cn := &rpcConn{c: c, pending: map[uint32]chan rpcResult{}, dead: make(chan struct{})}
	rc.cur = cn
	rc.gen++
	go cn.readLoop()
	return cn, nil
}

// readLoop is the connection's only reader: it hands each reply record to
// the call waiting for its XID. Replies for unknown XIDs (a call that gave
// up) are dropped.
func (cn *rpcConn) readLoop() {
	br := bufio.NewReaderSize(cn.c, 256<<10)
	for {
		rec, err := sunrpc.ReadRecord(br, sunrpc.DefaultMaxRecord+(3<<20))
		if err != nil {
			cn.fail(err)
			return
		}
		if len(rec) < 4 {
			cn.fail(fmt.Errorf("nfs: short reply record (%d bytes)", len(rec)))
			return
		}
		xid := uint32(rec[0])<<24 | uint32(rec[1])<<16 | uint32(rec[2])<<8 | uint32(rec[3])
		cn.mu.Lock()
		ch := cn.pending[xid]
		delete(cn.pending, xid)
		cn.mu.Unlock()
		if ch != nil {
			ch <- rpcResult{rec: rec}
		}
	}
}

// fail marks the connection dead and fails every pending call.
func (cn *rpcConn) fail(err error) {
	cn.mu.Lock()
	if cn.err != nil {
		cn.mu.Unlock()
		return
	}
	cn.err = err
	close(cn.dead)
	p := cn.pending
	cn.pending = map[uint32]chan rpcResult{}
	cn.mu.Unlock()
	cn.c.Close()
	for _, ch := range p {
		ch <- rpcResult{err: fmt.Errorf("%w: %v", errConnDropped, err)}
	}
}

// send registers xid and writes the record; the reply arrives on the
// returned channel (buffered, so the reader never blocks on it).
func (cn *rpcConn) send(xid uint32, rec []byte) (chan rpcResult, error) {
	ch := make(chan rpcResult, 1)
	cn.mu.Lock()
	if cn.err != nil {
		cn.mu.Unlock()
		return nil, fmt.Errorf("%w: %v", errConnDropped, cn.err)
	}
	cn.pending[xid] = ch
	cn.mu.Unlock()
	cn.wmu.Lock()
	err := sunrpc.WriteRecord(cn.c, rec)
	cn.wmu.Unlock()
	if err != nil {
		cn.fail(err)
		return nil, fmt.Errorf("%w: %v", errConnDropped, err)
	}
	return ch, nil
}

func (cn *rpcConn) forget(xid uint32) {
	cn.mu.Lock()
	delete(cn.pending, xid)
	cn.mu.Unlock()
}

var writerPool = sync.Pool{New: func() any { return sunrpc.NewWriter(4096) }}

// call runs one procedure: args encodes the arguments (may be nil), and the
// returned Reader is positioned at the start of the results. idempotent
// calls are retransmitted after a connection drop or a timeout, up to
// rc.retries times; others fail with ErrConnLost.
func (rc *rpcClient) call(ctx context.Context, prog, vers, proc uint32, idempotent bool, args func(*sunrpc.Writer)) (*sunrpc.Reader, error) {
	xid := rc.xid.Add(1)
	w := writerPool.Get().(*sunrpc.Writer)
	w.Reset()
	defer func() {
		if w.Len() <= 4<<20 {
			writerPool.Put(w)
		}
	}()
	sunrpc.Call{XID: xid, Prog: prog, Vers: vers, Proc: proc, Cred: rc.authFor(ctx), Verf: sunrpc.AuthNone()}.Encode(w)
	if args != nil {
		args(w)
	}
	var lastErr error
	for attempt := 0; attempt <= rc.retries; attempt++ {
		if attempt > 0 {
			// Back off a little so a restarting server can come back.
			d := time.Duration(attempt) * 200 * time.Millisecond
			if d > 2*time.Second {
				d = 2 * time.Second
			}
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(d):
			}
		}
		cn, err := rc.conn(ctx)
		if err != nil {
			if errors.Is(err, ErrClosed) || ctx.Err() != nil {
				return nil, err
			}
			lastErr = err
			continue
		}
		ch, err := cn.send(xid, w.Bytes())
		if err != nil {
			if !idempotent {
				return nil, fmt.Errorf("%w (%v)", ErrConnLost, err)
			}
			lastErr = err
			continue
		}
		timer := time.NewTimer(rc.timeout)
		select {
		case <-ctx.Done():
			timer.Stop()
			cn.forget(xid)
			return nil, ctx.Err()
		case <-timer.C:
			// Over TCP a lost reply means a broken connection: drop it so
			// every caller reconnects, as the kernel client does.
			cn.fail(fmt.Errorf("no reply to xid %d within %v", xid, rc.timeout))
			if !idempotent {
				return nil, fmt.Errorf("%w (timeout after %v)", ErrConnLost, rc.timeout)
			}
			lastErr = fmt.Errorf("nfs: timeout after %v", rc.timeout)
			continue
		case res := <-ch:
			timer.Stop()
			if res.err != nil {
				if !idempotent {
					return nil, fmt.Errorf("%w (%v)", ErrConnLost, res.err)
				}
				lastErr = res.err
				continue
			}
			r := sunrpc.NewReader(res.rec)
			rep, err := sunrpc.DecodeReply(r)
			if err != nil {
				return nil, fmt.Errorf("nfs: bad reply header: %w", err)
			}
			if err := rep.Err(); err != nil {
				return nil, err
			}
			return r, nil
		}
	}
	return nil, fmt.Errorf("nfs: %d attempts failed: %w", rc.retries+1, lastErr)
}

// breakConn closes the current connection (tests use it to simulate a drop).
func (rc *rpcClient) breakConn() {
	rc.mu.Lock()
	cn := rc.cur
	rc.mu.Unlock()
	if cn != nil {
		cn.fail(errors.New("connection closed by client"))
	}
}

func (rc *rpcClient) close() {
	rc.mu.Lock()
	rc.closed = true
	cn := rc.cur
	rc.mu.Unlock()
	if cn != nil {
		cn.fail(ErrClosed)
	}
}
