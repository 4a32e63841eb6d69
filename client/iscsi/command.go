package iscsi

import (
	"context"
	"errors"
	"fmt"
	"time"

	proto "github.com/tristore/tristore/proto/iscsi"
)

// Command is one SCSI command for Session.Do.
type Command struct {
	CDB []byte
	// In receives data from the target (READ-like); its length is the
	// expected transfer length.
	In []byte
	// Out is sent to the target (WRITE-like).
	Out []byte
}

// Result is a completed SCSI command.
type Result struct {
	Status   uint8
	Sense    []byte // raw sense data on CHECK CONDITION
	Residual uint32
	Under    bool // residual underflow: fewer bytes moved than expected
	Over     bool
	N        int // bytes received into In
}

// Err turns a non-GOOD status into an error (CheckConditionError for
// CHECK CONDITION).
func (r *Result) Err() error {
	switch r.Status {
	case proto.StatusGood, proto.StatusConditionMet:
		return nil
	case proto.StatusCheckCondition:
		s, err := proto.ParseSense(r.Sense)
		if err != nil {
			return fmt.Errorf("scsi: check condition with unreadable sense: %v", err)
		}
		return &proto.CheckConditionError{Sense: s}
	}
	return fmt.Errorf("scsi: status 0x%02x", r.Status)
}

// exec runs one command on this connection: the SCSI Command PDU with
// immediate data, the unsolicited Data-Out burst (InitialR2T=No), then
// Data-Out for each R2T, until the status arrives.
func (c *conn) exec(ctx context.Context, cmd *Command) (*Result, error) {
	if len(cmd.In) > 0 && len(cmd.Out) > 0 {
		return nil, errors.New("iscsi: bidirectional commands are not supported")
	}
	write := len(cmd.Out) > 0
	t := c.newTask(cmd.In, write)
	p := &proto.PDU{
		Opcode: proto.OpSCSICommand, Final: true, Attr: proto.AttrSimple, LUN: c.lun, ITT: t.itt,
		Read: len(cmd.In) > 0, Write: write, CDB: cmd.CDB,
		ExpectedDataLength: uint32(len(cmd.In) + len(cmd.Out)),
	}
	var imm, unsol int
	if write {
		if !c.params.InitialR2T {
			unsol = min(len(cmd.Out), c.params.FirstBurstLength)
		}
		if c.params.ImmediateData {
			imm = min(len(cmd.Out), c.params.FirstBurstLength, c.params.MaxRecvDataSegmentLengthPeer)
			unsol = max(unsol, imm)
		}
		p.Data = cmd.Out[:imm]
		p.Final = unsol == imm // F=1: no unsolicited Data-Out follows
	}
	if err := c.sendCommand(ctx, p); err != nil {
		c.finish(t, nil, err)
		return nil, err
	}
	cmdSN := p.CmdSN
	if unsol > imm {
		if err := c.sendData(t, cmd.Out, imm, unsol-imm, proto.ReservedTag); err != nil {
			return nil, err
		}
	}
	for {
		select {
		case r2t := <-t.r2t:
			if err := c.sendData(t, cmd.Out, int(r2t.BufferOffset), int(r2t.ExpectedDataLength), r2t.TTT); err != nil {
				if errors.Is(err, ErrProtocol) {
					c.fail(fmt.Errorf("%w: %v", errConnLost, err))
				}
				return nil, err
			}
		case <-t.done:
			return c.result(t, cmd)
		case <-c.dead:
			select {
			case <-t.done:
				return c.result(t, cmd)
			default:
			}
			t.mu.Lock()
			t.gone = true // the old reader must not write into a retried buffer
			t.mu.Unlock()
			return nil, errConnLost
		case <-ctx.Done():
			c.abandon(t, cmdSN)
			return nil, ctx.Err()
		}
	}
}

func (c *conn) result(t *task, cmd *Command) (*Result, error) {
	if t.err != nil {
		return nil, t.err
	}
	p := t.resp
	if p == nil {
		return nil, errConnLost
	}
	r := &Result{Status: p.Status, Residual: p.ResidualCount, Under: p.ResidualUnderflow, Over: p.ResidualOverflow}
	t.mu.Lock()
	r.N = t.got
	t.mu.Unlock()
	if p.Opcode == proto.OpSCSIResponse {
		if p.Response != proto.RespCompleted {
			return nil, fmt.Errorf("iscsi: target failure (response 0x%02x) for CDB opcode 0x%02x", p.Response, cmd.CDB[0])
		}
		if p.Status == proto.StatusCheckCondition && len(p.Data) > 0 {
			s, err := proto.SenseFromSegment(p.Data)
			if err == nil {
				r.Sense = append([]byte(nil), s...)
			}
		}
	}
	return r, nil
}

// Do runs cmd on the session: it waits for a queue-depth slot, and
// re-issues the command after a lost connection (once logged in again;
// ErrUnavailable if that takes longer than Config.ReplacementTimeout),
// after UNIT ATTENTION (reported once after a new login) and after
// BUSY/TASK SET FULL, a bounded number of times.
func (s *Session) Do(ctx context.Context, cmd *Command) (*Result, error) {
	select {
	case s.slots <- struct{}{}:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	defer func() { <-s.slots }()
	var lastErr error
	for attempt := 0; attempt < 10; attempt++ {
		c, err := s.current(ctx)
		if err != nil {
			return nil, err
		}
		r, err := c.exec(ctx, cmd)
		if errors.Is(err, errConnLost) {
			lastErr = err
			s.connLost(c, err) // current waits for the new login (bounded)
			continue
		}
		if err != nil {
			return nil, err
		}
		switch r.Status {
		case proto.StatusCheckCondition:
			if se, perr := proto.ParseSense(r.Sense); perr == nil && se.Key == proto.SenseUnitAttention {
				lastErr = r.Err()
				continue
			}
		case proto.StatusBusy, proto.StatusTaskSetFull:
			lastErr = r.Err()
			select {
			case <-time.After(time.Duration(attempt+1) * 20 * time.Millisecond):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			continue
		}
		return r, nil
	}
	return nil, fmt.Errorf("iscsi: command 0x%02x did not complete after 10 attempts: %w", cmd.CDB[0], lastErr)
}
