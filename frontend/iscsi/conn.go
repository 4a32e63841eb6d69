package iscsi

import (
	"context"
	"errors"
	"io"
	"net"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	wire "github.com/tristore/tristore/proto/iscsi"
)

// conn is one TCP connection: login, then the full feature phase.
type conn struct {
	srv    *Server
	nc     net.Conn
	wc     *wire.Conn
	sess   *session
	cid    uint16
	params wire.Params
	ctx    context.Context
	cancel context.CancelFunc

	// statSN is the next StatSN; it is read and advanced only under the
	// wire.Conn write lock (see send), so status numbers go out in order.
	statSN uint32

	lastRecv atomic.Int64  // unix nanoseconds of the last PDU received
	pingTTT  atomic.Uint32 // TTT of our outstanding NOP-In ping, 0 if none
	nextTTT  atomic.Uint32

	tasksMu  sync.Mutex
	tasks    map[uint32]*task // tasks of this connection by ITT (Data-Out routing)
	stopping bool             // no new tasks (set before waiting on taskWG from outside the reader)
	taskWG   sync.WaitGroup

	textMu      sync.Mutex
	textPending map[uint32][]byte // continued Text Responses by TTT

	// placed is the buffer placeDataOut read the last write command's
	// immediate data into (reader goroutine only).
	placed []byte

	closeOnce sync.Once
	closed    chan struct{}
}

func newConn(srv *Server, nc net.Conn) *conn {
	ctx, cancel := context.WithCancel(context.Background())
	c := &conn{srv: srv, nc: nc, wc: wire.NewConn(nc), ctx: ctx, cancel: cancel,
		tasks: map[uint32]*task{}, closed: make(chan struct{})}
	c.lastRecv.Store(time.Now().UnixNano())
	return c
}

// serve runs the connection to its end.
func (c *conn) serve() {
	defer c.close()
	log := c.srv.log
	defer func() {
		// A bug triggered by one initiator's input must not take down
		// every other session: log it and drop this connection only.
		if r := recover(); r != nil {
			log.Error("iscsi: internal error; dropping connection", "remote", c.nc.RemoteAddr().String(), "panic", r, "stack", string(debug.Stack()))
		}
	}()
	if err := c.login(); err != nil {
		if !errors.Is(err, io.EOF) {
			log.Debug("iscsi: login ended", "remote", c.nc.RemoteAddr().String(), "err", err)
		}
		return
	}
	log.Debug("iscsi: session up", "initiator", c.sess.initiator, "tsih", c.sess.tsih, "cid", c.cid, "discovery", c.sess.discovery)
	if c.srv.cfg.NopInterval > 0 {
		go c.pinger()
	}
	err := c.readLoop()
	if err != nil && !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
		log.Info("iscsi: connection dropped", "initiator", c.sess.initiator, "remote", c.nc.RemoteAddr().String(), "err", err)
		c.drain()
	}
}

// drain ends a connection we drop for a protocol error gently: commands
// are cancelled, our side is half-closed (FIN) so the initiator reads EOF
// and reconnects, and what it still sends is read and discarded for a
// bounded time. Closing outright would reset the connection under an
// initiator that is still writing Data-Out, which kills initiators that
// do not ignore SIGPIPE (libiscsi's test tool among them).
func (c *conn) drain() {
	c.cancel()
	c.flushOut(drainTime)
	tc, ok := c.nc.(*net.TCPConn)
	if !ok {
		return
	}
	if tc.CloseWrite() != nil {
		return
	}
	tc.SetReadDeadline(time.Now().Add(drainTime))
	io.Copy(io.Discard, io.LimitReader(tc, 64<<20))
}

// drainTime bounds drain.
const drainTime = 5 * time.Second

// startFullFeature switches framing to the negotiated digests and limits.
func (c *conn) startFullFeature() {
	c.wc.SetOptions(
		wire.Options{HeaderDigest: c.params.HeaderDigest, DataDigest: c.params.DataDigest, MaxRecvDataSegmentLength: c.params.MaxRecvDataSegmentLengthLocal},
		wire.Options{HeaderDigest: c.params.HeaderDigest, DataDigest: c.params.DataDigest})
}

// close ends the connection: tasks are cancelled (nothing half-received is
// ever applied), the socket closed and the session told.
func (c *conn) close() {
	c.closeOnce.Do(func() {
		c.cancel()
		c.nc.Close()
		waitTimeout(&c.taskWG, 30*time.Second)
		if c.sess != nil {
			for _, t := range c.allTasks() {
				c.sess.removeTask(t)
			}
			c.sess.removeConn(c)
		}
		close(c.closed)
	})
}

// shutdown closes the connection after in-flight tasks finish (at most d).
func (c *conn) shutdown(d time.Duration) {
	c.tasksMu.Lock()
	c.stopping = true // taskWG.Add must not race with the Wait below
	c.tasksMu.Unlock()
	if d > 0 {
		waitTimeout(&c.taskWG, d)
	}
	c.cancel()
	c.flushOut(5 * time.Second)
	c.nc.Close()
}

func (c *conn) waitClosed(d time.Duration) {
	select {
	case <-c.closed:
	case <-time.After(d):
	}
}

func waitTimeout(wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}

const writeTimeout = 60 * time.Second

// send writes a target PDU, filling StatSN/ExpCmdSN/MaxCmdSN at write
// time. status says whether the PDU carries status (and so consumes a
// StatSN); other PDUs carry the current StatSN without advancing it.
func (c *conn) send(p *wire.PDU, status bool) error {
	return c.sendPDU(p, status, false)
}

// sendPDU is send; with queue the PDU is only queued (numbered in order)
// and goes out with the next flush: the reader queues the answers of the
// commands it runs itself and flushes them together before it waits for
// more input (readLoop).
func (c *conn) sendPDU(p *wire.PDU, status, queue bool) error {
	c.nc.SetWriteDeadline(time.Now().Add(writeTimeout))
	prepare := func(p *wire.PDU) {
		if c.sess != nil {
			p.ExpCmdSN, p.MaxCmdSN = c.sess.sn()
		}
		switch {
		case status:
			p.StatSN = c.statSN
			c.statSN++
		case p.Opcode != wire.OpDataIn:
			p.StatSN = c.statSN // R2T, NOP-In ping: current value, not consumed
		}
	}
	var err error
	if queue {
		err = c.wc.QueuePDUFunc(p, prepare)
	} else {
		err = c.wc.WritePDUFunc(p, prepare)
	}
	if err != nil {
		c.nc.Close() // a failed write leaves the stream unusable
	}
	return err
}

// flushOut writes what the reader queued, waiting at most d for a flush
// in progress: used before the connection is closed or half-closed, so
// that answers already given (a Logout Response, a Reject, a task
// management response) are not cut off.
func (c *conn) flushOut(d time.Duration) {
	c.nc.SetWriteDeadline(time.Now().Add(d))
	c.wc.Drain()
}

// reject answers a PDU with Reject, quoting its header.
func (c *conn) reject(p *wire.PDU, reason uint8) error {
	r := &wire.PDU{Opcode: wire.OpReject, Final: true, Reason: reason, ITT: wire.ReservedTag, Data: append([]byte(nil), p.Raw[:]...)}
	return c.send(r, true)
}

// readLoop reads PDUs until the connection ends or a protocol error
// requires dropping it (RFC 7143 §7: at ErrorRecoveryLevel 0 only this
// connection is dropped; other connections and sessions are unaffected).
func (c *conn) readLoop() error {
	for {
		c.placed = nil
		p, err := c.wc.ReadPDUPlaced(c.placeDataOut)
		c.lastRecv.Store(time.Now().UnixNano())
		switch {
		case err == nil:
		case errors.Is(err, wire.ErrUnknownOpcode), errors.Is(err, wire.ErrBadAHS):
			// The PDU was read completely: answer and keep going.
			if err := c.reject(p, wire.RejectCmdNotSupported); err != nil {
				return err
			}
			continue
		case errors.Is(err, wire.ErrDataDigest):
			// Header valid, payload corrupt: Reject (RFC 7143 §7.8). A
			// command or Data-Out cannot be completed at ERL 0, so the
			// connection is then dropped; other PDUs are just discarded.
			c.reject(p, wire.RejectDataDigest)
			if p.Opcode == wire.OpSCSICommand || p.Opcode == wire.OpDataOut {
				return err
			}
			continue
		case errors.Is(err, wire.ErrDataTooLong):
			// The data segment was not read: the stream is out of step.
			c.reject(p, wire.RejectProtocolError)
			return err
		default:
			return err // EOF, header digest error, truncated PDU
		}
		if err := c.dispatch(p); err != nil {
			return err
		}
		// Answers queued by commands run on this goroutine go out
		// together, once no complete PDU is waiting to be handled.
		if !c.wc.PDUBuffered() {
			if err := c.wc.Flush(); err != nil {
				c.nc.Close()
				return err
			}
		}
	}
}

// errDrop is returned by handlers that must end the connection.
var errDrop = errors.New("iscsi: protocol error, dropping connection")

func (c *conn) dispatch(p *wire.PDU) error {
	s := c.sess
	switch p.Opcode {
	case wire.OpSCSICommand:
		if s.discovery {
			return c.reject(p, wire.RejectProtocolError)
		}
		return c.scsiCommand(p)
	case wire.OpDataOut:
		return c.dataOut(p)
	case wire.OpNOPOut:
		return c.nopOut(p)
	case wire.OpTextReq:
		return c.textRequest(p)
	case wire.OpTaskMgmtReq:
		if s.discovery {
			return c.reject(p, wire.RejectProtocolError)
		}
		return c.taskMgmt(p)
	case wire.OpLogoutReq:
		return c.logout(p)
	case wire.OpSNACKReq:
		// SNACK needs ErrorRecoveryLevel > 0, which we never negotiate.
		return c.reject(p, wire.RejectProtocolError)
	default:
		// Login in full feature phase, or a target opcode sent by an initiator.
		return c.reject(p, wire.RejectProtocolError)
	}
}

func (c *conn) nopOut(p *wire.PDU) error {
	if p.ITT == wire.ReservedTag {
		// Answer to our ping (TTT echoed) or a plain CmdSN update: no reply.
		if p.TTT != wire.ReservedTag {
			c.pingTTT.CompareAndSwap(p.TTT, 0)
		}
		if !p.Immediate {
			return c.reject(p, wire.RejectProtocolError) // RFC: ITT reserved requires I=1
		}
		return nil
	}
	// A send error closes the socket, which ends the read loop.
	c.sess.order(p.CmdSN, p.Immediate, func() {
		r := &wire.PDU{Opcode: wire.OpNOPIn, Final: true, LUN: p.LUN, ITT: p.ITT, TTT: wire.ReservedTag, Data: p.Data}
		if len(r.Data) > c.params.MaxRecvDataSegmentLengthPeer {
			r.Data = r.Data[:c.params.MaxRecvDataSegmentLengthPeer]
		}
		c.send(r, true)
	})
	return nil
}

// pinger sends NOP-In pings on an idle connection and drops it when the
// initiator stops answering (liveness in the target-to-initiator direction).
func (c *conn) pinger() {
	interval, timeout := c.srv.cfg.NopInterval, c.srv.cfg.NopTimeout
	t := time.NewTicker(interval / 2)
	defer t.Stop()
	var sentAt time.Time
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
		}
		if ttt := c.pingTTT.Load(); ttt != 0 {
			if time.Since(sentAt) > timeout {
				c.srv.log.Info("iscsi: initiator did not answer NOP-In; dropping connection", "initiator", c.sess.initiator)
				c.nc.Close()
				return
			}
			continue
		}
		if time.Since(time.Unix(0, c.lastRecv.Load())) < interval {
			continue
		}
		ttt := c.nextTTT.Add(1)
		if ttt == wire.ReservedTag || ttt == 0 {
			ttt = c.nextTTT.Add(2)
		}
		ttt |= 0x80000000 // keep ping TTTs apart from R2T TTTs
		c.pingTTT.Store(ttt)
		sentAt = time.Now()
		if err := c.send(&wire.PDU{Opcode: wire.OpNOPIn, Final: true, ITT: wire.ReservedTag, TTT: ttt}, false); err != nil {
			return
		}
	}
}

func (c *conn) logout(p *wire.PDU) error {
	s := c.sess
	resp := &wire.PDU{Opcode: wire.OpLogoutResp, Final: true, ITT: p.ITT, Response: wire.LogoutRespSuccess}
	var targets []*conn
	switch p.Reason {
	case wire.LogoutCloseSession:
		targets = s.connections()
	case wire.LogoutCloseConnection:
		if p.CID == c.cid {
			targets = []*conn{c}
		} else {
			for _, o := range s.connections() {
				if o.cid == p.CID {
					targets = []*conn{o}
				}
			}
			if targets == nil {
				resp.Response = wire.LogoutRespCIDNotFound
			}
		}
	default:
		resp.Response = wire.LogoutRespNoRecovery // connection recovery needs ERL 2
	}
	s.order(p.CmdSN, p.Immediate, func() {})
	// Let in-flight commands of the closing connections finish first.
	for _, o := range targets {
		if o == c {
			waitTimeout(&c.taskWG, 30*time.Second)
		}
	}
	if err := c.send(resp, true); err != nil {
		return err
	}
	c.flushOut(writeTimeout)
	closingSelf := false
	for _, o := range targets {
		if o == c {
			closingSelf = true
		} else {
			o.shutdown(30 * time.Second)
		}
	}
	if closingSelf {
		return io.EOF
	}
	return nil
}
