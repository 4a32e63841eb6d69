package iscsi

import (
	"context"
	"fmt"
	"runtime/debug"
	"sync"
	"sync/atomic"

	"github.com/tristore/tristore/frontend/iscsi/scsi"
	wire "github.com/tristore/tristore/proto/iscsi"
)

// task is one SCSI command from arrival to its status.
//
// Data-Out is copied into buf by the connection's reader goroutine (which
// never blocks on a task); the task goroutine waits for each burst to be
// complete, then runs the command. A command whose data never fully
// arrives (connection dropped, abort, protocol error) is never executed,
// so no partial write is ever applied.
type task struct {
	c         *conn
	itt       uint32
	lun       uint64
	cmdSN     uint32
	immediate bool
	cdb       []byte
	read      bool
	write     bool
	edtl      uint32
	buf       []byte // data-out; nil when the data is to be discarded
	// inline: run on the connection's reader goroutine (see
	// runInline); its answers are queued and flushed by the reader.
	inline bool
	here   atomic.Bool // order runs the command now, on the reader (scsiCommand)

	immLen uint32 // immediate data bytes
	// unsol is the unsolicited Data-Out (reserved TTT) expected after the
	// command: unsol.length bytes from immLen.
	unsol burst

	mu      sync.Mutex
	bursts  map[uint32]*burst // solicited bursts by TTT (made by the first R2T)
	r2tSN   uint32
	dataSNs uint32 // R2T + Data-In PDUs sent (ExpDataSN in the response)

	// seqErr: a Data-Out arrived out of DataSN order (RFC 7143 §7.9). Its
	// data was discarded; the task solicits nothing more, waits for the
	// final PDU of every burst and ends with CHECK CONDITION.
	seqErr atomic.Bool

	ctx     context.Context
	cancel  context.CancelFunc
	aborted atomic.Bool
	done    chan struct{}
}

// burst is the data solicited by one R2T, or the unsolicited data.
type burst struct {
	off, length uint32
	got         uint32
	dataSN      uint32
	done        chan struct{}
	closed      bool // done is closed (reader goroutine only)
}

// closedChan is the done channel of a burst that has nothing to wait for.
var closedChan = func() chan struct{} { c := make(chan struct{}); close(c); return c }()

// finish marks the burst complete (its final Data-Out arrived).
func (b *burst) finish() {
	if !b.closed {
		b.closed = true
		close(b.done)
	}
}

// fits reports whether a Data-Out of n bytes at off numbered dataSN is the
// next one of b: in order and inside the burst.
func (b *burst) fits(off, n, dataSN uint32) bool {
	return off == b.off+b.got && b.got+n <= b.length && dataSN == b.dataSN
}

// burstOf returns the burst a Data-Out with TTT ttt belongs to: the
// unsolicited one for the reserved tag, else the R2T's (nil if none). The
// caller holds t.mu.
func (t *task) burstOf(ttt uint32) *burst {
	if ttt == wire.ReservedTag {
		return &t.unsol
	}
	return t.bursts[ttt]
}

// scsiCommand handles a SCSI Command PDU on the reader goroutine.
func (c *conn) scsiCommand(p *wire.PDU) error {
	s := c.sess
	prm := &c.params
	imm := uint32(len(p.Data))
	switch {
	case imm > 0 && !p.Write,
		imm > p.ExpectedDataLength,
		imm > 0 && !prm.ImmediateData,
		imm > uint32(prm.FirstBurstLength),
		p.Write && !p.Final && prm.InitialR2T,
		!p.Final && !p.Write,
		p.ITT == wire.ReservedTag:
		return c.reject(p, wire.RejectProtocolError)
	}
	ctx, cancel := context.WithCancel(c.ctx)
	t := &task{c: c, itt: p.ITT, lun: p.LUN, cmdSN: p.CmdSN, immediate: p.Immediate, cdb: p.CDB,
		read: p.Read, write: p.Write, edtl: p.ExpectedDataLength, immLen: imm,
		ctx: ctx, cancel: cancel, done: make(chan struct{}), unsol: burst{off: imm}}
	if p.Write && p.ExpectedDataLength > 0 {
		if p.ExpectedDataLength <= maxTransfer {
			if placed := c.placed; imm > 0 && len(placed) > 0 && &placed[0] == &p.Data[0] {
				t.buf = placed // the immediate data was read into it (placeDataOut)
			} else {
				t.buf = scsi.GetBuf(int(p.ExpectedDataLength))
				copy(t.buf, p.Data)
			}
		}
		if !p.Final {
			first := min(uint32(prm.FirstBurstLength), p.ExpectedDataLength)
			if first > imm {
				t.unsol.length = first - imm
			}
		}
	}
	c.placed = nil
	if t.unsol.length == 0 {
		t.unsol.done, t.unsol.closed = closedChan, true // nothing unsolicited to wait for
	} else {
		t.unsol.done = make(chan struct{})
	}
	if !s.addTask(t) {
		cancel()
		return c.reject(p, wire.RejectTaskInProgress)
	}
	c.tasksMu.Lock()
	if c.stopping {
		c.tasksMu.Unlock()
		s.removeTask(t)
		cancel()
		return errDrop // the connection is being shut down
	}
	c.tasks[t.itt] = t
	lone := len(c.tasks) == 1
	c.taskWG.Add(1)
	c.tasksMu.Unlock()
	t.inline = c.runInline(t, lone)
	t.here.Store(true)
	accepted := s.order(p.CmdSN, p.Immediate, func() {
		if !t.immediate {
			s.begin() // immediate commands take no window slot
		}
		if t.inline && t.here.Load() {
			t.run()
		} else {
			t.inline = false
			go t.run()
		}
	})
	t.here.Store(false)
	if !accepted {
		// Outside the command window: silently ignored (RFC 7143 §4.2.2.1).
		c.unregister(t)
		cancel()
		c.taskWG.Done()
	}
	return nil
}

// runInline decides whether t runs on the reader goroutine instead of a
// goroutine of its own. Profiles of 4 KiB random writes showed the
// hand-offs of a goroutine per command (creation, wake-ups of idle
// threads, the LUN's writer thread, then a write(2) per answer under a
// contended lock) costing about as much CPU as the pwrite itself. Run
// inline, a command costs its own system call and its answer is queued and
// flushed with the others when the reader runs out of input.
//
// Inline are commands with all their data here and either
//   - a plain WRITE while the LU has a write cache (it goes to the page
//     cache and waits for no disk; buffered writes to one file are
//     serialised by the kernel anyway, so nothing that could run in
//     parallel is held up), or
//   - the only command of the connection, with no complete PDU waiting
//     behind it (queue depth 1: nothing else to read meanwhile).
//
// Everything else (reads at depth, FUA writes, SYNCHRONIZE CACHE, anything
// with solicited data) keeps its own goroutine, so a slow command never
// holds up the commands behind it.
func (c *conn) runInline(t *task, lone bool) bool {
	if t.write && t.immLen != t.edtl {
		return false
	}
	if lone && !c.wc.PDUBuffered() {
		return true
	}
	return t.write && t.buf != nil && wire.LUNFromField(t.lun) == 0 && c.sess.tgt.lu.CachedWrite(t.cdb)
}

func (c *conn) unregister(t *task) {
	c.tasksMu.Lock()
	if c.tasks[t.itt] == t {
		delete(c.tasks, t.itt)
	}
	c.tasksMu.Unlock()
	c.sess.removeTask(t)
}

func (c *conn) allTasks() []*task {
	c.tasksMu.Lock()
	defer c.tasksMu.Unlock()
	out := make([]*task, 0, len(c.tasks))
	for _, t := range c.tasks {
		out = append(out, t)
	}
	return out
}

// dataOut routes a Data-Out PDU into its task's buffer (reader goroutine).
// Inconsistent offsets or lengths are protocol errors: at ERL 0 the
// connection is dropped and the command is never executed. A DataSN out
// of order where the offset is right is a sequence error (RFC 7143 §7.9:
// the target must treat it as the implied digest error of a lost PDU,
// §7.8): the data is discarded and, at ERL 0, the command is ended with
// CHECK CONDITION once the final PDU of each burst is in; the connection
// and every other command go on.
func (c *conn) dataOut(p *wire.PDU) error {
	c.tasksMu.Lock()
	t := c.tasks[p.ITT]
	c.tasksMu.Unlock()
	if t == nil || !t.write {
		// Data for a command that already ended (aborted, or answered
		// early with an error): discard it.
		return nil
	}
	n := uint32(len(p.Data))
	off := p.BufferOffset
	if uint64(off)+uint64(n) > uint64(t.edtl) {
		c.reject(p, wire.RejectProtocolError)
		return errDrop
	}
	t.mu.Lock()
	b := t.burstOf(p.TTT)
	t.mu.Unlock()
	if b == nil {
		c.reject(p, wire.RejectInvalidPDUField)
		return errDrop
	}
	if t.seqErr.Load() || off == b.off+b.got && b.got+n <= b.length && p.DataSN != b.dataSN {
		t.seqErr.Store(true)
		if p.Final {
			t.endBurst(b, p.TTT)
		}
		return nil
	}
	if !b.fits(off, n, p.DataSN) {
		c.reject(p, wire.RejectProtocolError)
		return errDrop
	}
	t.copyIn(off, p.Data)
	b.got += n
	b.dataSN++
	if p.Final {
		if b.got != b.length {
			c.reject(p, wire.RejectProtocolError)
			return errDrop
		}
		t.endBurst(b, p.TTT)
	}
	return nil
}

// endBurst closes burst b of t (tag ttt) after its final Data-Out.
func (t *task) endBurst(b *burst, ttt uint32) {
	if b != &t.unsol {
		t.mu.Lock()
		delete(t.bursts, ttt)
		t.mu.Unlock()
	}
	b.finish()
}

// copyIn stores Data-Out bytes at off unless placeDataOut already read
// them there.
func (t *task) copyIn(off uint32, data []byte) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.buf == nil || len(data) == 0 || &t.buf[off] == &data[0] {
		return
	}
	copy(t.buf[off:], data)
}

// placeDataOut is the connection's wire.Placer: a Data-Out that dataOut
// will accept is read straight into its command's buffer (no copy, no
// allocation). It only checks; dataOut then does the bookkeeping. Anything
// it declines is read into a fresh buffer and judged by dataOut as usual.
//
// It also reads a write command's immediate data straight into a buffer
// of the command's full length (c.placed), which scsiCommand then takes as
// the task's buffer.
func (c *conn) placeDataOut(p *wire.PDU, n int) []byte {
	if p.Opcode == wire.OpSCSICommand {
		if !p.Write || p.ExpectedDataLength > maxTransfer || uint32(n) > p.ExpectedDataLength {
			return nil
		}
		c.placed = scsi.GetBuf(int(p.ExpectedDataLength))
		return c.placed[:n]
	}
	if p.Opcode != wire.OpDataOut {
		return nil
	}
	c.tasksMu.Lock()
	t := c.tasks[p.ITT]
	c.tasksMu.Unlock()
	if t == nil || !t.write {
		return nil
	}
	off, un := p.BufferOffset, uint32(n)
	if uint64(off)+uint64(un) > uint64(t.edtl) {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.buf == nil || t.seqErr.Load() {
		return nil
	}
	if b := t.burstOf(p.TTT); b == nil || !b.fits(off, un, p.DataSN) {
		return nil
	}
	return t.buf[off : off+un]
}

func (c *conn) newTTT() uint32 {
	for {
		v := c.nextTTT.Add(1) & 0x7fffffff // ping TTTs have the top bit set
		if v != 0 {
			return v
		}
	}
}

// run executes the task: collect data-out, execute, answer.
func (t *task) run() {
	c := t.c
	defer func() {
		t.cancel()
		close(t.done)
		c.taskWG.Done()
	}()
	defer func() {
		if r := recover(); r != nil {
			c.srv.log.Error("iscsi: internal error in a command; dropping connection", "cdb", fmt.Sprintf("% x", t.cdb), "panic", r, "stack", string(debug.Stack()))
			c.nc.Close()
		}
	}()
	// A transfer larger than we accept (t.buf == nil) is answered at once
	// without soliciting its data; stray Data-Out for it is discarded.
	if t.write && t.edtl > 0 && t.buf != nil && !t.collect() {
		c.unregister(t)
		t.endWindow()
		return
	}
	var resp *scsi.Response
	if t.seqErr.Load() {
		resp = dataSequenceError(t.edtl)
	} else {
		resp = t.execute()
	}
	// Every Data-Out of this task has arrived (collect saw the last burst
	// complete), so nothing reads into buf any more. On the early-return
	// paths above buf is left to the garbage collector instead.
	t.mu.Lock()
	buf := t.buf
	t.buf = nil
	t.mu.Unlock()
	if buf != nil {
		scsi.PutBuf(buf)
	}
	c.unregister(t)
	t.endWindow()
	defer resp.Release()
	if t.aborted.Load() || t.ctx.Err() != nil {
		return // aborted tasks get no response (the TMF answers for them)
	}
	t.respond(resp)
}

// collect waits for the unsolicited data and solicits the rest with R2Ts,
// up to MaxOutstandingR2T at a time. It returns false if the task was
// aborted or the connection ended first.
func (t *task) collect() bool {
	c := t.c
	if t.unsol.length == 0 && t.immLen >= t.edtl {
		// All the data came with the command (the cached 4 KiB writes
		// the reader runs): nothing to wait for. Checked apart, because
		// the select below makes the context allocate its Done channel,
		// 3 % of the target's CPU in the QD 32 random-write profile
		// (docs/bench/profiles/iscsi-randwrite-drop-after.top.txt).
		return t.ctx.Err() == nil
	}
	select {
	case <-t.unsol.done:
	case <-t.ctx.Done():
		return false
	}
	next := t.immLen + t.unsol.length
	maxOut := max(1, c.params.MaxOutstandingR2T)
	maxBurst := uint32(max(512, c.params.MaxBurstLength))
	var queue []*burst
	// After a sequence error nothing more is solicited, but the bursts
	// already asked for are waited for (RFC 7143 §7.8: all data first).
	for next < t.edtl && !t.seqErr.Load() || len(queue) > 0 {
		for len(queue) < maxOut && next < t.edtl && !t.seqErr.Load() {
			l := min(maxBurst, t.edtl-next)
			ttt := c.newTTT()
			b := &burst{off: next, length: l, done: make(chan struct{})}
			t.mu.Lock()
			if t.bursts == nil {
				t.bursts = map[uint32]*burst{}
			}
			t.bursts[ttt] = b
			sn := t.r2tSN
			t.r2tSN++
			t.dataSNs++
			t.mu.Unlock()
			r2t := &wire.PDU{Opcode: wire.OpR2T, Final: true, LUN: t.lun, ITT: t.itt, TTT: ttt,
				DataSN: sn, BufferOffset: next, ExpectedDataLength: l}
			if err := c.send(r2t, false); err != nil {
				return false
			}
			queue = append(queue, b)
			next += l
		}
		select {
		case <-queue[0].done:
			queue = queue[1:]
		case <-t.ctx.Done():
			return false
		}
	}
	return true
}

// dataSequenceError ends a write whose Data-Out PDUs came out of DataSN
// order: CHECK CONDITION, ABORTED COMMAND, PROTOCOL SERVICE CRC ERROR
// (RFC 7143 §7.8 b and §11.4.7.2). Nothing of it was written.
func dataSequenceError(edtl uint32) *scsi.Response {
	return &scsi.Response{Status: wire.StatusCheckCondition, DataOutLen: int64(edtl),
		Sense: wire.Sense{Key: wire.SenseAbortedCommand, ASC: 0x4705}.Marshal()}
}

// execute runs the CDB on the LU, handling LUNs that do not exist.
func (t *task) execute() *scsi.Response {
	s := t.c.sess
	req := &scsi.Request{CDB: t.cdb, ExpectedLen: t.edtl, Nexus: s.nexus}
	if t.write {
		req.DataOut = t.buf
		if t.buf == nil && t.edtl > 0 {
			return scsi.TooLarge()
		}
	}
	if wire.LUNFromField(t.lun) != 0 {
		return scsi.NoSuchLUN(req)
	}
	return s.tgt.lu.Execute(t.ctx, req)
}

// respond sends Data-In (if any) and the status. Status rides in the last
// Data-In PDU when the command succeeded without sense data (RFC 7143
// §11.7.4); otherwise a SCSI Response follows.
func (t *task) respond(r *scsi.Response) {
	c := t.c
	data := r.DataIn
	var overflow, underflow bool
	var residual uint32
	if len(data) > 0 || t.read {
		if uint64(len(data)) > uint64(t.edtl) {
			overflow, residual = true, uint32(len(data))-t.edtl
			data = data[:t.edtl]
		} else if uint32(len(data)) < t.edtl {
			underflow, residual = true, t.edtl-uint32(len(data))
		}
	} else if r.DataOutLen >= 0 {
		if r.DataOutLen > int64(t.edtl) {
			overflow, residual = true, uint32(min(r.DataOutLen-int64(t.edtl), 0xffffffff))
		} else if r.DataOutLen < int64(t.edtl) {
			underflow, residual = true, t.edtl-uint32(r.DataOutLen)
		}
	} else if t.edtl > 0 {
		underflow, residual = true, t.edtl
	}
	statusInData := r.Status == wire.StatusGood && len(r.Sense) == 0 && len(data) > 0
	if len(data) > 0 {
		seg := max(512, c.params.MaxRecvDataSegmentLengthPeer)
		burst := max(seg, c.params.MaxBurstLength)
		var dataSN uint32
		for off := 0; off < len(data); {
			n := min(seg, len(data)-off)
			// A sequence (between F bits) may not exceed MaxBurstLength.
			inBurst := off % burst
			n = min(n, burst-inBurst)
			last := off+n == len(data)
			p := &wire.PDU{Opcode: wire.OpDataIn, LUN: t.lun, ITT: t.itt, TTT: wire.ReservedTag,
				DataSN: dataSN, BufferOffset: uint32(off), Data: data[off : off+n]}
			p.Final = last || (off+n)%burst == 0
			if last && statusInData {
				p.StatusPresent = true
				p.Status = r.Status
				p.ResidualOverflow, p.ResidualUnderflow, p.ResidualCount = overflow, underflow, residual
			}
			if err := c.sendPDU(p, p.StatusPresent, t.inline); err != nil {
				return
			}
			dataSN++
			off += n
		}
		t.mu.Lock()
		t.dataSNs += dataSN
		t.mu.Unlock()
		if statusInData {
			return
		}
	}
	resp := &wire.PDU{Opcode: wire.OpSCSIResponse, Final: true, ITT: t.itt, Response: wire.RespCompleted,
		Status: r.Status, ResidualOverflow: overflow, ResidualUnderflow: underflow, ResidualCount: residual}
	t.mu.Lock()
	resp.DataSN = t.dataSNs
	t.mu.Unlock()
	if len(r.Sense) > 0 {
		resp.Data = wire.SenseSegment(r.Sense)
	}
	c.sendPDU(resp, true, t.inline)
}

func (t *task) endWindow() {
	if !t.immediate {
		t.c.sess.end()
	}
}

// abort stops a task; it will send no response.
func (t *task) abort() {
	t.aborted.Store(true)
	t.cancel()
}
