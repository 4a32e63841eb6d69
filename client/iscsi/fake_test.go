package iscsi

import (
	"context"
	"errors"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	proto "github.com/tristore/tristore/proto/iscsi"
)

// fakeTarget is a minimal misbehaving target for the initiator's error
// paths: it logs anyone in (AuthMethod None), answers TEST UNIT READY and
// READ CAPACITY, and hands every other SCSI command to onCmd, whose PDUs
// it sends with the sequence numbers filled in.
type fakeTarget struct {
	ln     net.Listener
	logins atomic.Int32
	nopOut chan uint32 // TTTs of NOP-Outs received
	// onCmd answers a SCSI command on connection number conn (1-based).
	onCmd func(conn int32, cmd *proto.PDU) []*proto.PDU
	// afterLogin runs once a connection is in full feature phase.
	afterLogin func(conn int32, send func(*proto.PDU))
	// capacity answers READ CAPACITY (16) (default: 2048 blocks of 512).
	capacity proto.Capacity
	wg       sync.WaitGroup
}

func newFake(t *testing.T) *fakeTarget {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeTarget{ln: ln, nopOut: make(chan uint32, 16)}
	var conns sync.Map
	f.wg.Add(1)
	go func() {
		defer f.wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Store(nc, true)
			f.wg.Add(1)
			go func() { defer f.wg.Done(); defer nc.Close(); f.serve(nc) }()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		conns.Range(func(k, _ any) bool { k.(net.Conn).Close(); return true })
		f.wg.Wait()
	})
	return f
}

func (f *fakeTarget) serve(nc net.Conn) {
	pc := proto.NewConn(nc)
	var statSN, expCmdSN uint32 = 1, 0
	var mu sync.Mutex
	send := func(p *proto.PDU) {
		mu.Lock()
		defer mu.Unlock()
		p.StatSN, p.ExpCmdSN, p.MaxCmdSN = statSN, expCmdSN, expCmdSN+16
		if p.Opcode != proto.OpR2T && !(p.Opcode == proto.OpDataIn && !p.StatusPresent) &&
			!(p.Opcode == proto.OpNOPIn && p.ITT == proto.ReservedTag) {
			statSN++
		}
		_ = pc.WritePDU(p)
	}
	params := proto.DefaultParams()
	for i := 0; i < 8; i++ { // login
		req, err := pc.ReadPDU()
		if err != nil || req.Opcode != proto.OpLoginReq {
			return
		}
		expCmdSN = req.CmdSN
		kvs, _ := proto.ParseText(req.Data)
		var out []proto.KV
		for _, kv := range kvs {
			switch {
			case kv.Key == "AuthMethod":
				out = append(out, proto.KV{Key: "AuthMethod", Value: "None"})
			case proto.IsOperationalKey(kv.Key):
				v, _ := params.Negotiate(kv.Key, kv.Value)
				out = append(out, proto.KV{Key: kv.Key, Value: v})
			}
		}
		resp := &proto.PDU{Opcode: proto.OpLoginResp, Final: req.Final, CSG: req.CSG, NSG: req.NSG,
			ISID: req.ISID, TSIH: 7, ITT: req.ITT, Data: proto.EncodeText(out)}
		send(resp)
		if req.Final && req.NSG == proto.StageFullFeature {
			break
		}
	}
	n := f.logins.Add(1)
	pc.SetOptions(proto.Options{MaxRecvDataSegmentLength: params.MaxRecvDataSegmentLengthLocal}, proto.Options{})
	if f.afterLogin != nil {
		f.afterLogin(n, send)
	}
	for {
		p, err := pc.ReadPDU()
		if err != nil {
			return
		}
		if !p.Immediate && (p.Opcode == proto.OpSCSICommand || p.Opcode == proto.OpTextReq) {
			mu.Lock()
			expCmdSN = p.CmdSN + 1
			mu.Unlock()
		}
		switch p.Opcode {
		case proto.OpNOPOut:
			if p.TTT != proto.ReservedTag {
				f.nopOut <- p.TTT
			} else if p.ITT != proto.ReservedTag {
				send(&proto.PDU{Opcode: proto.OpNOPIn, Final: true, ITT: p.ITT, TTT: proto.ReservedTag})
			}
		case proto.OpLogoutReq:
			send(&proto.PDU{Opcode: proto.OpLogoutResp, Final: true, ITT: p.ITT})
			return
		case proto.OpSCSICommand:
			switch p.CDB[0] {
			case proto.ScsiTestUnitReady:
				send(&proto.PDU{Opcode: proto.OpSCSIResponse, Final: true, ITT: p.ITT})
			case proto.ScsiServiceActionIn16:
				c := f.capacity
				if c.BlockSize == 0 {
					c = proto.Capacity{LastLBA: 2047, BlockSize: 512}
				}
				data := c.Marshal16()
				send(&proto.PDU{Opcode: proto.OpDataIn, Final: true, StatusPresent: true, ITT: p.ITT, TTT: proto.ReservedTag, Data: data})
			default:
				for _, r := range f.onCmd(n, p) {
					send(r)
				}
			}
		}
	}
}

func fakeCfg(f *fakeTarget) Config {
	return Config{Portal: f.ln.Addr().String(), Target: "iqn.2026-11.org.example:fake", ReplacementTimeout: 2 * time.Second, PingInterval: -1}
}

// openFake opens a session to f under a one-minute context; both end
// with the test.
func openFake(t *testing.T, f *fakeTarget) (context.Context, *Session) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	s, err := Open(ctx, fakeCfg(f))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return ctx, s
}

func readGood(p *proto.PDU, fill byte) []*proto.PDU {
	n := int(p.ExpectedDataLength)
	data := []byte(strings.Repeat(string([]byte{fill}), n))
	return []*proto.PDU{{Opcode: proto.OpDataIn, Final: true, StatusPresent: true, ITT: p.ITT, TTT: proto.ReservedTag, Data: data}}
}

func TestFakeBadDataInOffset(t *testing.T) {
	f := newFake(t)
	f.onCmd = func(_ int32, p *proto.PDU) []*proto.PDU {
		return []*proto.PDU{{Opcode: proto.OpDataIn, Final: true, StatusPresent: true, ITT: p.ITT, TTT: proto.ReservedTag,
			BufferOffset: 1 << 20, Data: make([]byte, 512)}}
	}
	ctx, s := openFake(t, f)
	start := time.Now()
	if _, err := s.ReadAt(ctx, make([]byte, 512), 0); err == nil {
		t.Fatal("a Data-In beyond the buffer was accepted")
	}
	if time.Since(start) > 30*time.Second {
		t.Fatal("giving up took too long")
	}
}

func TestFakeRejectAndNOPIn(t *testing.T) {
	f := newFake(t)
	f.afterLogin = func(_ int32, send func(*proto.PDU)) {
		send(&proto.PDU{Opcode: proto.OpNOPIn, Final: true, ITT: proto.ReservedTag, TTT: 0x1234})
	}
	f.onCmd = func(_ int32, p *proto.PDU) []*proto.PDU {
		if p.CDB[0] == proto.ScsiWrite10 {
			return []*proto.PDU{{Opcode: proto.OpReject, Final: true, Reason: proto.RejectCmdNotSupported, ITT: proto.ReservedTag, Data: p.Raw[:]}}
		}
		return readGood(p, 0x5a)
	}
	ctx, s := openFake(t, f)
	select {
	case ttt := <-f.nopOut:
		if ttt != 0x1234 {
			t.Fatalf("NOP-Out echoed TTT 0x%x", ttt)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no NOP-Out answer to the target's NOP-In")
	}
	if _, err := s.WriteAt(ctx, make([]byte, 512), 0); !errors.Is(err, ErrProtocol) || !strings.Contains(err.Error(), "rejected") {
		t.Fatalf("rejected write: %v", err)
	}
	buf := make([]byte, 1024)
	if _, err := s.ReadAt(ctx, buf, 512); err != nil || buf[0] != 0x5a || buf[1023] != 0x5a {
		t.Fatalf("read after a reject: %v", err)
	}
}

// TestFakeAsyncLogout: the target asks for a logout (async event 1) with
// a command outstanding; the initiator logs in again and the command
// completes on the new connection.
func TestFakeAsyncLogout(t *testing.T) {
	f := newFake(t)
	f.onCmd = func(conn int32, p *proto.PDU) []*proto.PDU {
		if conn == 1 {
			return []*proto.PDU{{Opcode: proto.OpAsyncMsg, Final: true, ITT: proto.ReservedTag, AsyncEvent: 1, Param3: 0}}
		}
		return readGood(p, 0x77)
	}
	ctx, s := openFake(t, f)
	buf := make([]byte, 4096)
	if _, err := s.ReadAt(ctx, buf, 0); err != nil || buf[0] != 0x77 {
		t.Fatalf("read across a target-requested logout: %v", err)
	}
	if s.Reconnects() != 1 || f.logins.Load() != 2 {
		t.Fatalf("reconnects %d, logins %d", s.Reconnects(), f.logins.Load())
	}
}
