package iscsi

import (
	"time"

	wire "github.com/tristore/tristore/proto/iscsi"
)

// taskMgmt handles Task Management Function Requests. Aborted tasks send
// no response of their own; the TMF response is sent after they have
// stopped (RFC 7143 §4.2.3.3 ordering simplified for ERL 0).
func (c *conn) taskMgmt(p *wire.PDU) error {
	s := c.sess
	s.order(p.CmdSN, p.Immediate, func() {
		go c.runTMF(p)
	})
	return nil
}

const tmfWait = 30 * time.Second

func (c *conn) runTMF(p *wire.PDU) {
	s := c.sess
	resp := &wire.PDU{Opcode: wire.OpTaskMgmtResp, Final: true, ITT: p.ITT, Response: wire.TMFRespComplete}
	lunOK := wire.LUNFromField(p.LUN) == 0
	abortAll := func(ts []*task) {
		for _, t := range ts {
			t.abort()
		}
		deadline := time.After(tmfWait)
		for _, t := range ts {
			select {
			case <-t.done:
			case <-deadline:
				return
			}
		}
	}
	switch p.Function {
	case wire.TMFAbortTask:
		if !lunOK {
			resp.Response = wire.TMFRespNoLUN
			break
		}
		t := s.findTask(p.RefTaskTag)
		if t == nil || t.lun != p.LUN {
			// Already completed (or never received): libiscsi and tgt
			// expect "task does not exist" here.
			resp.Response = wire.TMFRespNoTask
			break
		}
		abortAll([]*task{t})
	case wire.TMFAbortTaskSet, wire.TMFClearTaskSet:
		if !lunOK {
			resp.Response = wire.TMFRespNoLUN
			break
		}
		abortAll(s.tasksWhere(func(t *task) bool { return t.lun == p.LUN }))
		if p.Function == wire.TMFClearTaskSet {
			c.abortOtherSessions(false)
		}
	case wire.TMFLogicalUnitReset:
		if !lunOK {
			resp.Response = wire.TMFRespNoLUN
			break
		}
		abortAll(s.tasksWhere(func(t *task) bool { return true }))
		c.abortOtherSessions(false)
		s.tgt.lu.Reset(s.nexus, false)
	case wire.TMFTargetWarmReset, wire.TMFTargetColdReset:
		abortAll(s.tasksWhere(func(t *task) bool { return true }))
		c.abortOtherSessions(false)
		s.tgt.lu.Reset(s.nexus, true)
		if p.Function == wire.TMFTargetColdReset {
			// Cold reset also drops every connection, after the response.
			c.send(resp, true)
			c.abortOtherSessions(true)
			c.shutdown(0)
			return
		}
	case wire.TMFClearACA:
		resp.Response = wire.TMFRespNotSupported
	case wire.TMFTaskReassign:
		resp.Response = wire.TMFRespNoReassign // needs ErrorRecoveryLevel 2
	default:
		resp.Response = wire.TMFRespRejected
	}
	c.send(resp, true)
}

// abortOtherSessions aborts the tasks of every other session on the same
// target (and, with drop, closes their connections).
func (c *conn) abortOtherSessions(drop bool) {
	srv, me := c.srv, c.sess
	srv.mu.Lock()
	var others []*session
	for _, s := range srv.sessions {
		if s != me && s.tgt != nil && me.tgt != nil && s.tgt.name == me.tgt.name {
			others = append(others, s)
		}
	}
	srv.mu.Unlock()
	for _, s := range others {
		for _, t := range s.tasksWhere(func(*task) bool { return true }) {
			t.abort()
		}
		if drop {
			for _, oc := range s.connections() {
				oc.shutdown(0)
			}
		}
	}
}
