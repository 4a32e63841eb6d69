package nfs

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tristore/tristore/proto/nfs3"
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
	timeout time.Duration     // first attempt; attempt i gets (i+1)*timeout
	retries int               // soft: attempts after the first before ErrTimedOut
	hard    bool              // retry without end (Options.Hard)
	giveUp  chan struct{}     // closed by GiveUp
	giveMu  sync.Once
	// notResponding is set while a hard call has seen an attempt time
	// out, so "not responding" and "OK" are logged once per outage.
	notResponding atomic.Bool

	xid atomic.Uint32
	// calls counts calls made (not retransmissions): round trips, for
	// benchmarks that compare protocol versions.
	calls atomic.Int64

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
	pending map[uint32]pendingCall
	err     error // set once the connection is dead
	dead    chan struct{}
}

// pendingCall is a call waiting for its reply: the channel the reply goes
// to and, for a READ, where its data may be put straight from the socket.
type pendingCall struct {
	ch   chan rpcResult
	sink *readSink
}

type rpcResult struct {
	rec []byte
	// direct is the number of READ data bytes readLoop put into the
	// call's readSink; rec then holds the reply only up to the data's
	// length (nfs3.ReadRes.DecodeHead reads it). -1: rec is the whole
	// reply.
	direct int
	err    error
}

var errConnDropped = errors.New("nfs: connection dropped")

// errNotSent marks a call that never reached the wire (the connection was
// already dead), so even a non-idempotent one may be sent again.
var errNotSent = errors.New("nfs: call not sent")

// newRPCClient makes a client for addr; sys is the AUTH_SYS identity (nil
// for AUTH_NONE, as for the portmapper).
func newRPCClient(addr string, dial DialFunc, sys *sunrpc.AuthSys, timeout time.Duration, retries int, hard bool) *rpcClient {
	cred := sunrpc.AuthNone()
	if sys != nil {
		cred = sys.Auth()
	}
	rc := &rpcClient{addr: addr, dial: dial, cred: cred, base: sys, timeout: timeout, retries: retries, hard: hard, giveUp: make(chan struct{})}
	rc.xid.Store(uint32(time.Now().UnixNano()))
	return rc
}

// conn returns the live connection, dialing a new one if needed; a dial
// takes at most the per-call timeout and ends by end (zero: no bound).
func (rc *rpcClient) conn(ctx context.Context, end time.Time) (*rpcConn, error) {
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
	dto := rc.timeout
	if !end.IsZero() {
		dto = min(dto, max(time.Until(end), 10*time.Millisecond))
	}
	dctx, cancel := context.WithTimeout(ctx, dto)
	defer cancel()
	c, err := rc.dial(dctx, "tcp", rc.addr)
	if err != nil {
		return nil, fmt.Errorf("nfs: dial %s: %w", rc.addr, err)
	}
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
		tc.SetKeepAlive(true)
	}
	cn := &rpcConn{c: c, pending: map[uint32]pendingCall{}, dead: make(chan struct{})}
	rc.cur = cn
	rc.gen++
	go cn.readLoop()
	return cn, nil
}

// readLoop is the connection's only reader: it hands each reply record to
// the call waiting for its XID. Replies for unknown XIDs (a call that gave
// up) are dropped.
func (cn *rpcConn) readLoop() {
	// Small, so that little of a READ's data passes through it (see
	// readDirect); records larger than it are read around it.
	br := bufio.NewReaderSize(cn.c, readBufSize)
	for {
		if done, err := cn.readDirect(br); err != nil {
			cn.fail(err)
			return
		} else if done {
			continue
		}
		// A large reply (READ data) goes into a recycled buffer: a fresh
		// 1 MiB per READ cost more in page faults and zeroing than the
		// copy itself (perf: 53 % of a 512 MiB read in clear_page).
		var buf []byte
		if h, err := br.Peek(4); err == nil && int(binary.BigEndian.Uint32(h)&^(1<<31)) >= bigRecord {
			buf = getRecordBuf()
		}
		rec, err := sunrpc.ReadRecordInto(br, sunrpc.DefaultMaxRecord+(3<<20), buf)
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
		pc := cn.pending[xid]
		delete(cn.pending, xid)
		cn.mu.Unlock()
		if pc.ch != nil {
			pc.ch <- rpcResult{rec: rec, direct: -1}
		}
	}
}

// readBufSize is the connection's read buffer: enough for many small
// replies per system call and for a READ reply's header (directPeek).
const readBufSize = 16 << 10

// directPeek bounds the header of a READ reply that readDirect parses
// before the data: RPC reply header with a verifier of up to 400 bytes,
// status, attributes, count, eof, length (about 540 bytes).
const directPeek = 1024

// readDirect reads the next reply if it is a successful READ reply to a
// call that gave a readSink and its data fits there: the data goes from
// the socket straight into the caller's buffer (one copy, by the kernel),
// not into a record buffer and then again into the caller's. Anything
// else (other calls, errors, multi-fragment records, odd sizes) is left
// for the general path: done is false and nothing was consumed. err is a
// connection error after something was consumed.
func (cn *rpcConn) readDirect(br *bufio.Reader) (done bool, err error) {
	h, err := br.Peek(8)
	if err != nil {
		return false, nil // the general path reports it
	}
	fh := binary.BigEndian.Uint32(h)
	n := int(fh &^ (1 << 31))
	if fh&(1<<31) == 0 || n < bigRecord {
		return false, nil
	}
	xid := binary.BigEndian.Uint32(h[4:])
	cn.mu.Lock()
	pc := cn.pending[xid]
	cn.mu.Unlock()
	if pc.sink == nil {
		return false, nil
	}
	// The record is longer than directPeek, so these bytes are coming.
	hb, err := br.Peek(directPeek)
	if err != nil {
		return false, nil
	}
	r := sunrpc.NewReader(hb[4:])
	rep, err := sunrpc.DecodeReply(r)
	if err != nil || rep.Err() != nil {
		return false, nil
	}
	var res nfs3.ReadRes
	dlen, err := res.DecodeHead(r)
	hlen := r.Offset()
	if err != nil || res.Status != nfs3.OK || dlen > len(pc.sink.dst) || hlen+dlen+(4-dlen%4)%4 != n {
		return false, nil
	}
	if !pc.sink.claim(cn) {
		return false, nil // the caller gave up
	}
	cn.mu.Lock()
	delete(cn.pending, xid)
	cn.mu.Unlock()
	hdr := append([]byte(nil), hb[4:4+hlen]...)
	br.Discard(4 + hlen)
	_, err = io.ReadFull(br, pc.sink.dst[:dlen])
	if err == nil {
		_, err = br.Discard((4 - dlen%4) % 4)
	}
	pc.sink.release()
	if err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		pc.ch <- rpcResult{err: fmt.Errorf("%w: %v", errConnDropped, err)}
		return true, err
	}
	pc.ch <- rpcResult{rec: hdr, direct: dlen}
	return true, nil
}

// readSink is where a READ call wants its data: readLoop may put it there
// straight from the socket (readDirect). The caller must not use dst
// (return it to its own caller) while readLoop writes into it, so it
// closes the sink before returning; a caller that leaves while the data
// is arriving (cancelled, timed out) drops the connection to end the
// write, and waits for it.
type readSink struct {
	dst []byte

	mu     sync.Mutex
	cond   *sync.Cond
	writer *rpcConn // the connection writing into dst, nil if none
	closed bool
	// got is the number of bytes the consumed reply put into dst, -1 if
	// the reply came as a whole record (set by await).
	got int
}

func newReadSink(dst []byte) *readSink {
	s := &readSink{dst: dst, got: -1}
	s.cond = sync.NewCond(&s.mu)
	return s
}

// claim reserves dst for cn's readLoop; false if the caller has closed the
// sink.
func (s *readSink) claim(cn *rpcConn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.writer != nil {
		return false
	}
	s.writer = cn
	return true
}

func (s *readSink) release() {
	s.mu.Lock()
	s.writer = nil
	s.cond.Broadcast()
	s.mu.Unlock()
}

// close ends the sink's use: no connection writes into dst afterwards.
func (s *readSink) close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.closed = true
	if w := s.writer; w != nil {
		s.mu.Unlock()
		w.fail(errors.New("nfs: READ abandoned while its data was arriving"))
		s.mu.Lock()
	}
	for s.writer != nil {
		s.cond.Wait()
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
	cn.pending = map[uint32]pendingCall{}
	cn.mu.Unlock()
	cn.c.Close()
	for _, pc := range p {
		pc.ch <- rpcResult{err: fmt.Errorf("%w: %v", errConnDropped, err)}
	}
}

// send registers xid and writes the record; the reply arrives on the
// returned channel (buffered, so the reader never blocks on it). sink, if
// not nil, is where a READ reply's data may go (readDirect).
func (cn *rpcConn) send(xid uint32, rec []byte, sink *readSink) (chan rpcResult, error) {
	ch := make(chan rpcResult, 1)
	cn.mu.Lock()
	if cn.err != nil {
		cn.mu.Unlock()
		return nil, fmt.Errorf("%w: %w: %v", errNotSent, errConnDropped, cn.err)
	}
	cn.pending[xid] = pendingCall{ch, sink}
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

// bigRecord is the reply size from which readLoop reads into a buffer from
// recordPool; recordCap is those buffers' capacity (a 1 MiB READ and its
// headers). A larger reply still gets a buffer of its own.
const (
	bigRecord = 64 << 10
	recordCap = 1<<20 + 64<<10
)

var recordPool sync.Pool // of *[]byte with capacity recordCap

// recordBufsMade counts the buffers recordPool had to make (tests check
// that READs recycle theirs); recordBufGets counts the large replies read
// into one (tests check that READ data goes straight to the caller).
var recordBufsMade, recordBufGets atomic.Int64

func getRecordBuf() []byte {
	recordBufGets.Add(1)
	if b, ok := recordPool.Get().(*[]byte); ok {
		return (*b)[:0]
	}
	recordBufsMade.Add(1)
	return make([]byte, 0, recordCap)
}

// putRecordBuf recycles a reply record once nothing decoded from it is in
// use (only READ does: it copies the data out first). Records of another
// capacity were allocated for themselves and are left to the GC.
func putRecordBuf(b []byte) {
	if cap(b) == recordCap {
		b = b[:0]
		recordPool.Put(&b)
	}
}

// maxAttemptTimeout caps the linear growth of the per-attempt timeout
// (nfs(5): "up to the maximum of 600 seconds").
const maxAttemptTimeout = 600 * time.Second

// attemptTimeout is how long attempt number i (0-based) may take: timeo,
// 2*timeo, 3*timeo, ... as the Linux client does over TCP.
func (rc *rpcClient) attemptTimeout(i int) time.Duration {
	d := rc.timeout * time.Duration(i+1)
	if d > maxAttemptTimeout || d <= 0 {
		d = max(maxAttemptTimeout, rc.timeout)
	}
	return d
}

// reconnectDelay is the pause between connection attempts while the server
// refuses or drops them: short at first so a restarted server is found
// quickly, growing to a few seconds.
func reconnectDelay(n int) time.Duration {
	return min(time.Duration(n+1)*100*time.Millisecond, 2*time.Second)
}

// call runs one procedure: args encodes the arguments (may be nil), and the
// returned Reader is positioned at the start of the results.
//
// Retries follow nfs(5) over TCP. Attempt i may take (i+1)*Timeout; while
// it lasts, a server that refuses or drops connections is redialed after
// a short pause, and an idempotent call is retransmitted (same XID) on the
// new connection. A call that was never sent is always safe to resend; a
// non-idempotent one that was sent and lost its connection or reply fails
// with ErrConnLost (dirops.go decides what its re-send means). When an
// attempt runs out, a soft client (the default) tries again until
// Retries+1 attempts have failed and then returns ErrTimedOut; a hard one
// (Options.Hard) tries again without end; the client logs once per outage
// that the server is not responding, and once that it is back.
//
// ctx cancellation ends the call at any time. An interrupt channel
// (WithInterrupt) ends it only while it waits for a server that is not
// answering: between connection attempts, or for a reply once an attempt
// has timed out. A healthy call is never cut short, so a signal to the
// caller (Go programs get SIGURG all the time) does not fail a working
// system call. GiveUp does the same for every call, for shutdown.
func (rc *rpcClient) call(ctx context.Context, prog, vers, proc uint32, idempotent bool, args func(*sunrpc.Writer)) (*sunrpc.Reader, error) {
	return rc.callInto(ctx, prog, vers, proc, idempotent, args, nil)
}

// callInto is call for a READ whose data may be read straight into sink
// (see readDirect). It closes sink before returning, so the caller may use
// its buffer; sink.got tells how the returned reply came.
func (rc *rpcClient) callInto(ctx context.Context, prog, vers, proc uint32, idempotent bool, args func(*sunrpc.Writer), sink *readSink) (*sunrpc.Reader, error) {
	if sink != nil {
		sink.got = -1
		defer sink.close()
	}
	xid := rc.xid.Add(1)
	rc.calls.Add(1)
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
	intr := interruptOf(ctx)
	start := time.Now()
	for try := 0; ; try++ {
		r, err, again := rc.attempt(ctx, intr, xid, w.Bytes(), idempotent, try, sink)
		if !again {
			if err == nil && rc.notResponding.CompareAndSwap(true, false) {
				slog.Info("nfs: server OK", "server", rc.addr)
			}
			return r, err
		}
		if !rc.hard && try >= rc.retries {
			return nil, fmt.Errorf("%w: %s: %d attempts in %v (last: %v)", ErrTimedOut, rc.addr, try+1, time.Since(start).Round(time.Millisecond), err)
		}
		if rc.hard && rc.notResponding.CompareAndSwap(false, true) {
			slog.Warn("nfs: server not responding, still trying", "server", rc.addr, "err", err)
		}
	}
}

// attempt runs attempt number try of one call. It returns the reply, or
// an error with again=false (final: the call fails with it), or the last
// transport error with again=true when the attempt's time ran out.
func (rc *rpcClient) attempt(ctx context.Context, intr interrupt, xid uint32, rec []byte, idempotent bool, try int, sink *readSink) (_ *sunrpc.Reader, _ error, again bool) {
	end := time.Now().Add(rc.attemptTimeout(try))
	var lastErr error
	for n := 0; ; n++ {
		if n > 0 {
			// The server refused or dropped us: pause, then redial.
			d := min(reconnectDelay(n-1), time.Until(end))
			if err := rc.pause(ctx, intr, d); err != nil {
				return nil, err, false
			}
			if !time.Now().Before(end) {
				return nil, lastErr, true
			}
		}
		cn, err := rc.conn(ctx, end)
		if err != nil {
			if errors.Is(err, ErrClosed) || ctx.Err() != nil {
				return nil, err, false
			}
			lastErr = err
			continue
		}
		ch, err := cn.send(xid, rec, sink)
		if err != nil {
			if !idempotent && !errors.Is(err, errNotSent) {
				return nil, fmt.Errorf("%w (%v)", ErrConnLost, err), false
			}
			lastErr = err
			continue
		}
		r, err, again, final := rc.await(ctx, intr, cn, xid, ch, idempotent, try, end, sink)
		if final || err == nil {
			return r, err, false
		}
		if again {
			return nil, err, true
		}
		lastErr = err
	}
}

// giveUpGrace is how long a call to a server that has not (yet) missed a
// timeout may run on after GiveUp, so a healthy call in flight at shutdown
// (a COMMIT at close) usually completes.
const giveUpGrace = time.Second

// await waits for the reply to xid until end. It returns the reply; or a
// final error; or again=true when the attempt timed out; or a transport
// error of an idempotent call to resend within this attempt.
func (rc *rpcClient) await(ctx context.Context, intr interrupt, cn *rpcConn, xid uint32, ch chan rpcResult, idempotent bool, try int, end time.Time, sink *readSink) (_ *sunrpc.Reader, _ error, again, final bool) {
	// Interrupts count only once the server has stopped answering (a
	// previous attempt timed out): see call. GiveUp counts then, or after
	// giveUpGrace.
	var intrC, giveUpC <-chan struct{}
	var grace <-chan time.Time
	if try > 0 {
		intrC, giveUpC = intr.c, rc.giveUp
	} else {
		g := time.NewTimer(giveUpGrace)
		defer g.Stop()
		grace = g.C
	}
	timer := time.NewTimer(time.Until(end))
	defer timer.Stop()
	for {
		select {
		case <-grace:
			giveUpC, grace = rc.giveUp, nil
			continue
		case <-ctx.Done():
			cn.forget(xid)
			return nil, ctx.Err(), false, true
		case <-intrC:
			cn.forget(xid)
			return nil, ErrInterrupted, false, true
		case <-giveUpC:
			cn.forget(xid)
			return nil, fmt.Errorf("%w: %s: client is giving up", ErrTimedOut, rc.addr), false, true
		case <-timer.C:
			// Over TCP a lost reply means a broken connection: drop it so
			// every caller reconnects, as the kernel client does.
			cn.fail(fmt.Errorf("no reply to xid %d within %v", xid, rc.attemptTimeout(try)))
			if !idempotent {
				return nil, fmt.Errorf("%w (timeout after %v)", ErrConnLost, rc.attemptTimeout(try)), false, true
			}
			return nil, fmt.Errorf("nfs: no reply within %v", rc.attemptTimeout(try)), true, false
		case res := <-ch:
			if res.err != nil {
				if !idempotent {
					return nil, fmt.Errorf("%w (%v)", ErrConnLost, res.err), false, true
				}
				return nil, res.err, false, false
			}
			r := sunrpc.NewReader(res.rec)
			rep, err := sunrpc.DecodeReply(r)
			if err != nil {
				return nil, fmt.Errorf("nfs: bad reply header: %w", err), false, true
			}
			if err := rep.Err(); err != nil {
				return nil, err, false, true
			}
			if sink != nil {
				sink.got = res.direct
			}
			return r, nil, false, true
		}
	}
}

// pause waits d between connection attempts; the server is not answering,
// so interrupts and GiveUp end the wait (see call).
func (rc *rpcClient) pause(ctx context.Context, intr interrupt, d time.Duration) error {
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-intr.c:
		return ErrInterrupted
	case <-rc.giveUp:
		return fmt.Errorf("%w: %s: client is giving up", ErrTimedOut, rc.addr)
	case <-t.C:
		return nil
	}
}

// interrupt is the channel set with WithInterrupt (nil: none).
type interrupt struct{ c <-chan struct{} }

type interruptKey struct{}

// WithInterrupt returns a context whose calls give up with ErrInterrupted
// when done is closed, but only while they wait for a server that is not
// answering (unreachable, or silent past a timeout). The FUSE mount passes
// the request's interrupt here: a caller blocked on a hard mount during an
// outage can be killed or interrupted, while signals that arrive during a
// normal call (every Go program gets SIGURG) do not fail it.
func WithInterrupt(ctx context.Context, done <-chan struct{}) context.Context {
	return context.WithValue(ctx, interruptKey{}, interrupt{done})
}

func interruptOf(ctx context.Context) interrupt {
	i, _ := ctx.Value(interruptKey{}).(interrupt)
	return i
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

// stopWaiting makes calls waiting for a silent or unreachable server fail
// now (and later ones as soon as an attempt fails).
func (rc *rpcClient) stopWaiting() { rc.giveMu.Do(func() { close(rc.giveUp) }) }

func (rc *rpcClient) close() {
	rc.stopWaiting()
	rc.mu.Lock()
	rc.closed = true
	cn := rc.cur
	rc.mu.Unlock()
	if cn != nil {
		cn.fail(ErrClosed)
	}
}
