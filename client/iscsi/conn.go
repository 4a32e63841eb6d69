package iscsi

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	proto "github.com/tristore/tristore/proto/iscsi"
)

// errConnLost marks a command that did not complete because its
// connection went away; the session logs in again and re-issues it.
var errConnLost = errors.New("iscsi: connection lost")

// ErrProtocol is a target that broke RFC 7143 (the connection is dropped).
var ErrProtocol = errors.New("iscsi: protocol error from target")

// serial number arithmetic (RFC 1982, 32 bits).
func snLT(a, b uint32) bool { return int32(a-b) < 0 }
func snLE(a, b uint32) bool { return a == b || snLT(a, b) }

// conn is one logged-in connection of a session in full feature phase:
// one reader goroutine dispatches every PDU the target sends to the task
// waiting for it, so many commands are in flight at once.
type conn struct {
	pc         *proto.Conn
	w          *batchWriter
	params     proto.Params
	targetKeys []proto.KV
	lun        uint64
	log        *slog.Logger

	sendMu sync.Mutex // CmdSN assignment + sending the command, in order

	mu        sync.Mutex
	cmdSN     uint32
	expCmdSN  uint32
	maxCmdSN  uint32
	expStatSN uint32
	window    chan struct{} // made by a sender waiting for MaxCmdSN to move; closed when it does
	tasks     map[uint32]*task
	nextITT   uint32
	logout    chan *proto.PDU

	lastRecv atomic.Int64 // unix nanoseconds of the last PDU from the target

	dead     chan struct{}
	deadOnce sync.Once
	deadErr  error
	readDone chan struct{}
}

// task is one outstanding command (or TMF/Text/NOP) on a connection.
type task struct {
	itt  uint32
	in   []byte // READ destination
	mu   sync.Mutex
	got  int  // bytes placed into in
	gone bool // abandoned by a cancelled caller: data is dropped
	r2t  chan *proto.PDU
	done chan struct{}
	resp *proto.PDU // final PDU (SCSI Response, Data-In with status, TMF/Text/NOP-In)
	err  error      // Reject etc.
	once sync.Once
}

func newConn(pc *proto.Conn, st *loginState, lun uint64, log *slog.Logger) *conn {
	c := &conn{
		pc: pc, params: st.params, targetKeys: st.targetKeys, lun: lun, log: log,
		cmdSN: st.cmdSN, expCmdSN: st.expCmdSN, maxCmdSN: st.maxCmdSN, expStatSN: st.expStatSN,
		tasks: map[uint32]*task{}, nextITT: 0x1000,
		logout: make(chan *proto.PDU, 1),
		dead:   make(chan struct{}), readDone: make(chan struct{}),
	}
	// Digests start with the first PDU after the final login response;
	// our read limit is what we declared, with slack for targets that
	// count padding.
	wopt := proto.Options{HeaderDigest: st.params.HeaderDigest, DataDigest: st.params.DataDigest}
	pc.SetOptions(
		proto.Options{HeaderDigest: st.params.HeaderDigest, DataDigest: st.params.DataDigest,
			MaxRecvDataSegmentLength: st.params.MaxRecvDataSegmentLengthLocal},
		wopt)
	c.w = &batchWriter{nc: pc.NetConn(), opt: wopt}
	c.lastRecv.Store(time.Now().UnixNano())
	go c.readLoop()
	return c
}

// fail drops the connection; every waiting task sees c.dead.
func (c *conn) fail(err error) {
	c.deadOnce.Do(func() {
		c.mu.Lock()
		c.deadErr = err
		c.mu.Unlock()
		close(c.dead)
		_ = c.pc.Close()
	})
}

// err is why the connection died (nil while it is alive).
func (c *conn) err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.deadErr
}

func (c *conn) isDead() bool {
	select {
	case <-c.dead:
		return true
	default:
		return false
	}
}

func (c *conn) newTask(in []byte, wantR2T bool) *task {
	t := &task{in: in, done: make(chan struct{})}
	if wantR2T {
		t.r2t = make(chan *proto.PDU, 8)
	}
	c.mu.Lock()
	for {
		c.nextITT++
		if c.nextITT == proto.ReservedTag {
			c.nextITT = 0x1000
		}
		if _, busy := c.tasks[c.nextITT]; !busy {
			break
		}
	}
	t.itt = c.nextITT
	c.tasks[t.itt] = t
	c.mu.Unlock()
	return t
}

func (c *conn) lookup(itt uint32) *task {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.tasks[itt]
}

func (c *conn) finish(t *task, resp *proto.PDU, err error) {
	c.mu.Lock()
	if c.tasks[t.itt] == t {
		delete(c.tasks, t.itt)
	}
	c.mu.Unlock()
	t.once.Do(func() {
		t.resp, t.err = resp, err
		close(t.done)
	})
}

// updateSN takes ExpCmdSN/MaxCmdSN and StatSN from a target PDU.
func (c *conn) updateSN(p *proto.PDU) {
	c.mu.Lock()
	defer c.mu.Unlock()
	status := false
	switch p.Opcode {
	case proto.OpSCSIResponse, proto.OpTaskMgmtResp, proto.OpTextResp, proto.OpLogoutResp:
		status = true
	case proto.OpDataIn:
		status = p.StatusPresent
	case proto.OpNOPIn:
		status = p.ITT != proto.ReservedTag
	}
	if status && snLE(c.expStatSN, p.StatSN) {
		c.expStatSN = p.StatSN + 1
	}
	// MaxCmdSN < ExpCmdSN-1 is a closed window signal we ignore; a
	// smaller MaxCmdSN than we know is stale (PDUs can overtake).
	if snLT(p.MaxCmdSN+1, p.ExpCmdSN) {
		return
	}
	if snLT(c.expCmdSN, p.ExpCmdSN) {
		c.expCmdSN = p.ExpCmdSN
	}
	if snLT(c.maxCmdSN, p.MaxCmdSN) {
		c.maxCmdSN = p.MaxCmdSN
		if c.window != nil { // someone waits for the window to open
			close(c.window)
			c.window = nil
		}
	}
}

func (c *conn) readLoop() {
	defer close(c.readDone)
	// held is the task whose buffer the codec is reading a Data-In
	// segment straight into (no allocation, no copy). Its mutex is held
	// from the placement until the PDU is dispatched, so a caller that
	// gives up on the task (abandon, lost connection) waits for that one
	// read to finish and never gets its buffer written afterwards.
	var held *task
	place := func(p *proto.PDU, n int) []byte {
		if p.Opcode != proto.OpDataIn {
			return nil
		}
		t := c.lookup(p.ITT)
		if t == nil {
			return nil
		}
		t.mu.Lock()
		off := int(p.BufferOffset)
		if t.gone || off < 0 || off+n > len(t.in) {
			t.mu.Unlock()
			return nil // dispatch drops it or reports the protocol error
		}
		held = t
		return t.in[off : off+n]
	}
	for {
		p, err := c.pc.ReadPDUPlaced(place)
		h := held
		held = nil
		if err != nil {
			if h != nil {
				h.mu.Unlock()
			}
			c.fail(fmt.Errorf("%w: %v", errConnLost, err))
			return
		}
		if h != nil {
			h.got += len(p.Data)
			h.mu.Unlock()
			p.Data = nil // already in place
		}
		c.lastRecv.Store(time.Now().UnixNano())
		c.updateSN(p)
		if err := c.dispatch(p); err != nil {
			c.log.Warn("iscsi: dropping connection", "err", err)
			c.fail(fmt.Errorf("%w: %v", errConnLost, err))
			return
		}
	}
}

func (c *conn) dispatch(p *proto.PDU) error {
	switch p.Opcode {
	case proto.OpDataIn:
		t := c.lookup(p.ITT)
		if t == nil {
			return nil // task abandoned and aborted
		}
		t.mu.Lock()
		if !t.gone && len(p.Data) > 0 {
			end := int(p.BufferOffset) + len(p.Data)
			if end > len(t.in) || end < 0 {
				t.mu.Unlock()
				return fmt.Errorf("%w: Data-In [%d,%d) beyond the %d-byte buffer", ErrProtocol, p.BufferOffset, end, len(t.in))
			}
			copy(t.in[p.BufferOffset:], p.Data)
			t.got += len(p.Data)
		}
		t.mu.Unlock()
		if p.StatusPresent {
			c.finish(t, p, nil)
		}
	case proto.OpSCSIResponse, proto.OpTaskMgmtResp, proto.OpTextResp:
		if t := c.lookup(p.ITT); t != nil {
			c.finish(t, p, nil)
		}
	case proto.OpR2T:
		t := c.lookup(p.ITT)
		if t == nil || t.r2t == nil {
			return nil
		}
		select {
		case t.r2t <- p:
		default:
			return fmt.Errorf("%w: more outstanding R2Ts than negotiated", ErrProtocol)
		}
	case proto.OpNOPIn:
		if p.TTT != proto.ReservedTag {
			// The target pings us: answer with a NOP-Out echoing its tag
			// (off the reader goroutine so a full socket cannot stall reads).
			go c.nopReply(p)
		} else if p.ITT != proto.ReservedTag {
			if t := c.lookup(p.ITT); t != nil {
				c.finish(t, p, nil)
			}
		}
	case proto.OpReject:
		if len(p.Data) >= proto.BHSLen {
			itt := uint32(p.Data[16])<<24 | uint32(p.Data[17])<<16 | uint32(p.Data[18])<<8 | uint32(p.Data[19])
			if t := c.lookup(itt); t != nil {
				c.finish(t, nil, fmt.Errorf("%w: target rejected our PDU (reason 0x%02x)", ErrProtocol, p.Reason))
			}
		}
	case proto.OpAsyncMsg:
		switch p.AsyncEvent {
		case 1: // target requests logout: log in again elsewhere in time
			return fmt.Errorf("target requested logout (async event 1)")
		case 2, 3: // target will drop the connection / session
			return fmt.Errorf("target is dropping the connection (async event %d)", p.AsyncEvent)
		}
	case proto.OpLogoutResp:
		select {
		case c.logout <- p:
		default:
		}
	default:
		return fmt.Errorf("%w: unexpected %s", ErrProtocol, p.Opcode)
	}
	return nil
}

func (c *conn) nopReply(in *proto.PDU) {
	c.mu.Lock()
	out := &proto.PDU{Opcode: proto.OpNOPOut, Immediate: true, Final: true, LUN: in.LUN,
		ITT: proto.ReservedTag, TTT: in.TTT, CmdSN: c.cmdSN, ExpStatSN: c.expStatSN}
	c.mu.Unlock()
	if err := c.w.write(out); err != nil {
		c.fail(fmt.Errorf("%w: NOP-Out: %v", errConnLost, err))
	}
}

// sendCommand assigns the next CmdSN (waiting for the target's command
// window) and sends p. Immediate PDUs carry CmdSN without using it up.
func (c *conn) sendCommand(ctx context.Context, p *proto.PDU) error {
	c.sendMu.Lock()
	defer c.sendMu.Unlock()
	for i := 0; ; i++ {
		c.mu.Lock()
		if p.Immediate || snLE(c.cmdSN, c.maxCmdSN) {
			p.CmdSN = c.cmdSN
			if !p.Immediate {
				c.cmdSN++
			}
			p.ExpStatSN = c.expStatSN
			c.mu.Unlock()
			break
		}
		if c.window == nil {
			c.window = make(chan struct{})
		}
		w := c.window
		c.mu.Unlock()
		select {
		case <-w:
		case <-c.dead:
			return errConnLost
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Second):
			// the window may also open via a NOP-In we answered; re-check
		}
	}
	if err := c.w.write(p); err != nil {
		c.fail(fmt.Errorf("%w: %v", errConnLost, err))
		return errConnLost
	}
	return nil
}

// sendData sends out[off:off+n] as Data-Out PDUs no larger than the
// target's MaxRecvDataSegmentLength, answering one R2T (or the
// unsolicited burst when ttt is reserved).
func (c *conn) sendData(t *task, out []byte, off, n int, ttt uint32) error {
	if off < 0 || n < 0 || off+n > len(out) {
		return fmt.Errorf("%w: R2T for [%d,%d) beyond the %d-byte write", ErrProtocol, off, off+n, len(out))
	}
	seg := c.params.MaxRecvDataSegmentLengthPeer
	var sn uint32
	for pos := off; pos < off+n; pos += seg {
		l := min(seg, off+n-pos)
		c.mu.Lock()
		exp := c.expStatSN
		c.mu.Unlock()
		p := &proto.PDU{Opcode: proto.OpDataOut, Final: pos+l == off+n, LUN: c.lun, ITT: t.itt, TTT: ttt,
			ExpStatSN: exp, DataSN: sn, BufferOffset: uint32(pos), Data: out[pos : pos+l]}
		sn++
		if err := c.w.write(p); err != nil {
			c.fail(fmt.Errorf("%w: %v", errConnLost, err))
			return errConnLost
		}
	}
	return nil
}

// abandon stops a cancelled task from touching the caller's buffer and
// asks the target to abort it (ABORT TASK); the reply is not awaited.
func (c *conn) abandon(t *task, cmdSN uint32) {
	t.mu.Lock()
	t.gone = true
	t.mu.Unlock()
	go func() {
		tm := c.newTask(nil, false)
		p := &proto.PDU{Opcode: proto.OpTaskMgmtReq, Immediate: true, Final: true, Function: proto.TMFAbortTask,
			LUN: c.lun, ITT: tm.itt, RefTaskTag: t.itt, RefCmdSN: cmdSN}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c.sendCommand(ctx, p); err != nil {
			c.finish(tm, nil, err)
			return
		}
		select {
		case <-tm.done:
		case <-c.dead:
		case <-ctx.Done():
		}
		c.finish(tm, nil, nil)
		c.finish(t, nil, context.Canceled)
	}()
}

// logoutAndClose logs the session out (reason: close the session) and
// closes the connection; bounded by ctx.
func (c *conn) logoutAndClose(ctx context.Context) error {
	defer c.fail(errors.New("closed"))
	if c.isDead() {
		return nil
	}
	p := &proto.PDU{Opcode: proto.OpLogoutReq, Immediate: true, Final: true, Reason: proto.LogoutCloseSession,
		ITT: proto.ReservedTag - 1}
	if err := c.sendCommand(ctx, p); err != nil {
		return err
	}
	select {
	case r := <-c.logout:
		if r.Response != proto.LogoutRespSuccess {
			return fmt.Errorf("iscsi: logout refused (response %d)", r.Response)
		}
		return nil
	case <-c.dead:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("iscsi: logout: %w", ctx.Err())
	}
}

// pinger probes a silent target with NOP-Out (ITT set, so the target must
// answer with NOP-In) and drops the connection when even that goes
// unanswered; the session then logs in again and re-issues its commands.
func (c *conn) pinger(interval, timeout time.Duration) {
	tick := time.NewTicker(min(interval, timeout) / 2)
	defer tick.Stop()
	var sent time.Time
	for {
		select {
		case <-c.dead:
			return
		case <-tick.C:
		}
		last := time.Unix(0, c.lastRecv.Load())
		switch {
		case !sent.IsZero() && last.After(sent):
			sent = time.Time{} // answered (or other traffic arrived)
		case !sent.IsZero() && time.Since(sent) > timeout:
			c.fail(fmt.Errorf("%w: no answer to NOP-Out for %v", errConnLost, timeout))
			return
		case sent.IsZero() && time.Since(last) > interval:
			t := c.newTask(nil, false)
			p := &proto.PDU{Opcode: proto.OpNOPOut, Immediate: true, Final: true, LUN: c.lun, ITT: t.itt, TTT: proto.ReservedTag}
			ctx, cancel := context.WithTimeout(context.Background(), timeout)
			err := c.sendCommand(ctx, p)
			cancel()
			if err != nil {
				c.finish(t, nil, err)
				return
			}
			sent = time.Now()
			go func() {
				select {
				case <-t.done:
				case <-c.dead:
				case <-time.After(2 * timeout):
					c.finish(t, nil, errConnLost)
				}
			}()
		}
	}
}
