package iscsi

import (
	"net"
	"strconv"
	"strings"

	wire "github.com/tristore/tristore/proto/iscsi"
)

// textRequest answers Text Requests: SendTargets (discovery) and, in any
// session, keys we do not renegotiate in full feature phase, which get
// NotUnderstood/Reject. Long answers are split over several Text Responses
// with the C bit, continued when the initiator sends an empty Text Request
// with our Target Transfer Tag (RFC 7143 §11.10).
func (c *conn) textRequest(p *wire.PDU) error {
	s := c.sess
	var answer []byte
	if p.TTT != wire.ReservedTag {
		c.textMu.Lock()
		pending, ok := c.textPending[p.TTT]
		delete(c.textPending, p.TTT)
		c.textMu.Unlock()
		if !ok {
			return c.reject(p, wire.RejectInvalidPDUField)
		}
		answer = pending
	} else {
		if p.Continue {
			// Multi-PDU requests are not needed for the keys we accept.
			return c.reject(p, wire.RejectProtocolError)
		}
		kvs, err := wire.ParseText(p.Data)
		if err != nil {
			return c.reject(p, wire.RejectProtocolError)
		}
		var out []wire.KV
		for _, kv := range kvs {
			if kv.Key == "SendTargets" {
				out = append(out, c.sendTargets(kv.Value)...)
				continue
			}
			out = append(out, wire.KV{Key: kv.Key, Value: wire.ValueNotUnderstood})
		}
		answer = wire.EncodeText(out)
	}
	var reply func()
	reply = func() {
		r := &wire.PDU{Opcode: wire.OpTextResp, Final: true, LUN: p.LUN, ITT: p.ITT, TTT: wire.ReservedTag}
		limit := max(512, c.params.MaxRecvDataSegmentLengthPeer)
		if len(answer) > limit {
			r.Final, r.Continue = false, true
			r.TTT = c.newTTT()
			c.textMu.Lock()
			if c.textPending == nil {
				c.textPending = map[uint32][]byte{}
			}
			if len(c.textPending) > 16 {
				clear(c.textPending) // abandoned continuations
			}
			c.textPending[r.TTT] = answer[limit:]
			c.textMu.Unlock()
			r.Data = answer[:limit]
		} else {
			r.Data = answer
		}
		c.send(r, true)
	}
	s.order(p.CmdSN, p.Immediate, reply)
	return nil
}

// sendTargets lists targets with this connection's portal as address.
// In a normal session only the session's own target is reported.
func (c *conn) sendTargets(which string) []wire.KV {
	s := c.sess
	var names []string
	switch {
	case s.discovery && which == "All":
		all, err := c.srv.listTargets(c.ctx)
		if err != nil {
			c.srv.log.Warn("iscsi: listing volumes for SendTargets", "err", err)
		}
		names = all
	case s.discovery:
		if _, _, ok := ParseTargetName(which); ok {
			all, _ := c.srv.listTargets(c.ctx)
			for _, n := range all {
				if strings.EqualFold(n, which) {
					names = append(names, n)
				}
			}
		}
	default:
		if which == "" || which == "All" || strings.EqualFold(which, s.tgt.name) {
			names = []string{s.tgt.name}
		}
	}
	addr := c.nc.LocalAddr().String()
	if ta, ok := c.nc.LocalAddr().(*net.TCPAddr); ok {
		addr = net.JoinHostPort(ta.IP.String(), strconv.Itoa(ta.Port))
	}
	var out []wire.KV
	for _, n := range names {
		out = append(out, wire.KV{Key: "TargetName", Value: n}, wire.KV{Key: "TargetAddress", Value: addr + ",1"})
	}
	return out
}
