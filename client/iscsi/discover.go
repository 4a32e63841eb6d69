package iscsi

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	proto "github.com/tristore/tristore/proto/iscsi"
)

// Target is one entry of a SendTargets answer.
type Target struct {
	Name      string   `json:"name"`
	Addresses []string `json:"addresses"` // host:port,tpgt as the target reported them
}

// Discover opens a discovery session on cfg.Portal (with cfg's CHAP and
// digests), asks SendTargets=All and logs out.
func Discover(ctx context.Context, cfg Config) ([]Target, error) {
	cfg = cfg.withDefaults()
	pc, st, err := dialLogin(ctx, &cfg, newISID(), true)
	if err != nil {
		return nil, err
	}
	c := newConn(pc, st, 0, slog.Default())
	defer func() {
		lctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = c.logoutAndClose(lctx)
	}()
	kvs, err := c.text(ctx, []proto.KV{{Key: "SendTargets", Value: "All"}})
	if err != nil {
		return nil, err
	}
	var out []Target
	for _, kv := range kvs {
		switch kv.Key {
		case "TargetName":
			out = append(out, Target{Name: kv.Value})
		case "TargetAddress":
			if len(out) == 0 {
				return nil, fmt.Errorf("%w: TargetAddress before any TargetName", ErrProtocol)
			}
			out[len(out)-1].Addresses = append(out[len(out)-1].Addresses, kv.Value)
		}
	}
	return out, nil
}

// text runs one Text Request/Response exchange, following continuations
// (C bit with a Target Transfer Tag) up to a bounded size.
func (c *conn) text(ctx context.Context, keys []proto.KV) ([]proto.KV, error) {
	var acc proto.TextAccumulator
	acc.Max = 1 << 20
	ttt := proto.ReservedTag
	data := proto.EncodeText(keys)
	for i := 0; i < 64; i++ {
		t := c.newTask(nil, false)
		p := &proto.PDU{Opcode: proto.OpTextReq, Final: true, ITT: t.itt, TTT: ttt, Data: data}
		if err := c.sendCommand(ctx, p); err != nil {
			c.finish(t, nil, err)
			return nil, err
		}
		select {
		case <-t.done:
		case <-c.dead:
			return nil, fmt.Errorf("iscsi: text exchange: %w", errConnLost)
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		if t.err != nil {
			return nil, t.err
		}
		r := t.resp
		if r.Opcode != proto.OpTextResp {
			return nil, fmt.Errorf("%w: %s in answer to a Text Request", ErrProtocol, r.Opcode)
		}
		if err := acc.Add(r.Data); err != nil {
			return nil, err
		}
		if !r.Continue && r.Final {
			return acc.Take()
		}
		ttt, data = r.TTT, nil
	}
	return nil, fmt.Errorf("%w: text response did not end", ErrProtocol)
}
