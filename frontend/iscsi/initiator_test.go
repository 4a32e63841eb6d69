package iscsi

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/tristore/tristore/blockdev/filelun"
	wire "github.com/tristore/tristore/proto/iscsi"
	"github.com/tristore/tristore/store/posix"
)

// A minimal initiator for the target's tests: enough of RFC 7143 to log
// in (None, CHAP, mutual CHAP, digests), run SCSI commands with
// immediate data, unsolicited Data-Out and R2T, and to send malformed PDUs.

type testTarget struct {
	srv  *Server
	addr string
	st   filelun.Store
	iqn  string
}

func startTarget(t *testing.T, cfg Config) *testTarget {
	t.Helper()
	return startTargetLn(t, cfg, nil)
}

// startTargetLn is startTarget with the listener wrapped by wrap (if not nil).
func startTargetLn(t *testing.T, cfg Config, wrap func(net.Listener) net.Listener) *testTarget {
	t.Helper()
	b, err := posix.Open(t.TempDir(), posix.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := b.CreateBucket(ctx, "vols", ""); err != nil {
		t.Fatal(err)
	}
	st, _ := filelun.AsStore(b)
	if _, err := filelun.Create(ctx, st, "vols", "disk", 16<<20); err != nil {
		t.Fatal(err)
	}
	cfg.Store = b
	srv, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if wrap != nil {
		ln = wrap(ln)
	}
	done := make(chan error, 1)
	sctx, cancel := context.WithCancel(ctx)
	go func() { done <- srv.Serve(sctx, ln) }()
	t.Cleanup(func() {
		cancel()
		srv.Close()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(20 * time.Second):
			t.Errorf("Serve did not return")
		}
	})
	return &testTarget{srv: srv, addr: ln.Addr().String(), st: st, iqn: TargetName("vols", "disk")}
}

type loginOpts struct {
	target       string // "" = discovery
	chap         *wire.CHAPCredentials
	mutual       *wire.CHAPCredentials // expected target credentials
	digests      bool
	immediate    bool
	initialR2T   bool
	maxBurst     int
	isid         byte
	tsih         uint16
	cid          uint16
	wantStatus   uint16 // expected login status (class<<8|detail), 0 = success
	maxRecvLocal int
}

type ini struct {
	t         testing.TB
	nc        net.Conn
	c         *wire.Conn
	cmdSN     uint32
	expStatSN uint32
	maxCmdSN  uint32
	itt       uint32
	tsih      uint16
	isid      [6]byte
	p         wire.Params
}

func dial(t testing.TB, addr string, o loginOpts) (*ini, error) {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		return nil, err
	}
	nc.SetDeadline(time.Now().Add(60 * time.Second))
	in := &ini{t: t, nc: nc, c: wire.NewConn(nc), cmdSN: 1, itt: 1}
	in.isid = [6]byte{0x80, 0, 0, 0, 0, o.isid}
	in.p = wire.DefaultParams()
	in.p.HeaderDigest, in.p.DataDigest = o.digests, o.digests
	in.p.ImmediateData = o.immediate
	in.p.InitialR2T = o.initialR2T
	in.p.MaxRecvDataSegmentLengthLocal = 65536
	if o.maxRecvLocal > 0 {
		in.p.MaxRecvDataSegmentLengthLocal = o.maxRecvLocal
	}
	in.p.MaxBurstLength = 262144
	if o.maxBurst > 0 {
		in.p.MaxBurstLength = o.maxBurst
	}
	in.p.FirstBurstLength = 65536
	in.p.MaxOutstandingR2T = 4
	in.p.MaxConnections = 4
	t.Cleanup(func() { nc.Close() })
	if err := in.login(o); err != nil {
		nc.Close()
		return nil, err
	}
	return in, nil
}

var errLoginStatus = errors.New("login rejected")

func (in *ini) loginPDU(csg, nsg uint8, transit bool, kvs []wire.KV, o loginOpts) ([]wire.KV, *wire.PDU, error) {
	p := &wire.PDU{Opcode: wire.OpLoginReq, Immediate: true, Final: transit, CSG: csg, NSG: nsg, ISID: in.isid,
		TSIH: o.tsih, ITT: 0x1000, CID: o.cid, CmdSN: in.cmdSN, ExpStatSN: in.expStatSN, Data: wire.EncodeText(kvs)}
	if err := in.c.WritePDU(p); err != nil {
		return nil, nil, err
	}
	r, err := in.c.ReadPDU()
	if err != nil {
		return nil, nil, err
	}
	if r.Opcode != wire.OpLoginResp {
		return nil, r, fmt.Errorf("got %s during login", r.Opcode)
	}
	in.expStatSN = r.StatSN + 1
	in.maxCmdSN = r.MaxCmdSN
	if r.StatusClass != 0 {
		return nil, r, fmt.Errorf("%w: status %02x%02x", errLoginStatus, r.StatusClass, r.StatusDetail)
	}
	kv, err := wire.ParseText(r.Data)
	return kv, r, err
}

func (in *ini) login(o loginOpts) error {
	base := []wire.KV{{Key: "InitiatorName", Value: "iqn.2026-11.test:ini"}}
	if o.target == "" {
		base = append(base, wire.KV{Key: "SessionType", Value: "Discovery"})
	} else {
		base = append(base, wire.KV{Key: "TargetName", Value: o.target})
	}
	if o.chap != nil {
		kv, _, err := in.loginPDU(0, 1, false, append(base, wire.KV{Key: "AuthMethod", Value: "CHAP,None"}), o)
		if err != nil {
			return err
		}
		if v, _ := wire.Lookup(kv, "AuthMethod"); v != "CHAP" {
			return fmt.Errorf("AuthMethod answer %q", v)
		}
		kv, _, err = in.loginPDU(0, 1, false, []wire.KV{{Key: "CHAP_A", Value: "5"}}, o)
		if err != nil {
			return err
		}
		idS, _ := wire.Lookup(kv, "CHAP_I")
		cS, _ := wire.Lookup(kv, "CHAP_C")
		var id int
		fmt.Sscan(idS, &id)
		chal, err := wire.DecodeBinary(cS)
		if err != nil {
			return err
		}
		resp := []wire.KV{{Key: "CHAP_N", Value: o.chap.User},
			{Key: "CHAP_R", Value: wire.EncodeBinary(wire.CHAPResponse(byte(id), o.chap.Secret, chal))}}
		myChal := []byte("0123456789abcdef")
		if o.mutual != nil {
			resp = append(resp, wire.KV{Key: "CHAP_I", Value: "77"}, wire.KV{Key: "CHAP_C", Value: wire.EncodeBinary(myChal)})
		}
		kv, r, err := in.loginPDU(0, 1, true, resp, o)
		if err != nil {
			return err
		}
		if o.mutual != nil {
			n, _ := wire.Lookup(kv, "CHAP_N")
			rs, _ := wire.Lookup(kv, "CHAP_R")
			rb, _ := wire.DecodeBinary(rs)
			if n != o.mutual.User || !wire.CHAPVerify(77, o.mutual.Secret, myChal, rb) {
				return fmt.Errorf("target failed mutual CHAP: %q %q", n, rs)
			}
		}
		if !r.Final {
			return fmt.Errorf("target did not let us leave the security stage")
		}
		base = nil
	}
	kv, r, err := in.loginPDU(1, 3, true, append(base, in.p.Offer()...), o)
	if err != nil {
		return err
	}
	for _, k := range kv {
		if err := in.p.Apply(k.Key, k.Value); err != nil {
			return fmt.Errorf("apply %s=%s: %v", k.Key, k.Value, err)
		}
	}
	if !r.Final || r.NSG != 3 {
		return fmt.Errorf("no transit to full feature phase")
	}
	in.tsih = r.TSIH
	in.c.SetOptions(wire.Options{HeaderDigest: in.p.HeaderDigest, DataDigest: in.p.DataDigest},
		wire.Options{HeaderDigest: in.p.HeaderDigest, DataDigest: in.p.DataDigest})
	return nil
}

// result is the outcome of a SCSI command.
type result struct {
	status   uint8
	sense    wire.Sense
	data     []byte
	residual uint32
	under    bool
	over     bool
}

func (in *ini) nextITT() uint32 { in.itt++; return in.itt }

// send writes a PDU, filling CmdSN/ExpStatSN for commands.
func (in *ini) send(p *wire.PDU) error {
	p.ExpStatSN = in.expStatSN
	return in.c.WritePDU(p)
}

// recv reads the next PDU and tracks StatSN.
func (in *ini) recv() (*wire.PDU, error) {
	p, err := in.c.ReadPDU()
	if err != nil {
		return p, err
	}
	switch p.Opcode {
	case wire.OpSCSIResponse, wire.OpNOPIn, wire.OpTextResp, wire.OpTaskMgmtResp, wire.OpLogoutResp, wire.OpReject:
		if p.ITT != wire.ReservedTag || p.Opcode == wire.OpReject {
			in.expStatSN = p.StatSN + 1
		}
	case wire.OpDataIn:
		if p.StatusPresent {
			in.expStatSN = p.StatSN + 1
		}
	}
	if p.MaxCmdSN != 0 {
		in.maxCmdSN = p.MaxCmdSN
	}
	return p, nil
}

// cmd runs one SCSI command synchronously.
func (in *ini) cmd(cdb []byte, out []byte, readLen int) (*result, error) {
	itt := in.nextITT()
	p := &wire.PDU{Opcode: wire.OpSCSICommand, Final: true, Attr: wire.AttrSimple, ITT: itt, CmdSN: in.cmdSN, CDB: cdb}
	in.cmdSN++
	if readLen > 0 {
		p.Read = true
		p.ExpectedDataLength = uint32(readLen)
	}
	var sent int
	if out != nil {
		p.Write = true
		p.ExpectedDataLength = uint32(len(out))
		if in.p.ImmediateData {
			sent = min(len(out), in.p.FirstBurstLength, in.p.MaxRecvDataSegmentLengthPeer)
			p.Data = out[:sent]
		}
		if !in.p.InitialR2T && sent < min(len(out), in.p.FirstBurstLength) {
			p.Final = false
		}
	}
	if err := in.send(p); err != nil {
		return nil, err
	}
	if out != nil && !p.Final {
		// Unsolicited Data-Out up to FirstBurstLength.
		end := min(len(out), in.p.FirstBurstLength)
		var sn uint32
		for sent < end {
			n := min(end-sent, in.p.MaxRecvDataSegmentLengthPeer)
			d := &wire.PDU{Opcode: wire.OpDataOut, ITT: itt, TTT: wire.ReservedTag, DataSN: sn, BufferOffset: uint32(sent), Data: out[sent : sent+n]}
			sent += n
			sn++
			d.Final = sent == end
			if err := in.send(d); err != nil {
				return nil, err
			}
		}
	}
	res := &result{}
	if readLen > 0 {
		res.data = make([]byte, 0, readLen)
	}
	for {
		r, err := in.recv()
		if err != nil {
			return nil, err
		}
		switch r.Opcode {
		case wire.OpR2T:
			off, l := int(r.BufferOffset), int(r.ExpectedDataLength)
			var sn uint32
			for done := 0; done < l; {
				n := min(l-done, in.p.MaxRecvDataSegmentLengthPeer)
				d := &wire.PDU{Opcode: wire.OpDataOut, ITT: itt, TTT: r.TTT, DataSN: sn, BufferOffset: uint32(off + done), Data: out[off+done : off+done+n]}
				done += n
				sn++
				d.Final = done == l
				if err := in.send(d); err != nil {
					return nil, err
				}
			}
		case wire.OpDataIn:
			if int(r.BufferOffset) != len(res.data) {
				return nil, fmt.Errorf("Data-In offset %d, have %d", r.BufferOffset, len(res.data))
			}
			res.data = append(res.data, r.Data...)
			if r.StatusPresent {
				res.status, res.residual, res.under, res.over = r.Status, r.ResidualCount, r.ResidualUnderflow, r.ResidualOverflow
				return res, nil
			}
		case wire.OpSCSIResponse:
			res.status, res.residual, res.under, res.over = r.Status, r.ResidualCount, r.ResidualUnderflow, r.ResidualOverflow
			if len(r.Data) > 0 {
				sb, err := wire.SenseFromSegment(r.Data)
				if err != nil {
					return nil, err
				}
				res.sense, _ = wire.ParseSense(sb)
			}
			return res, nil
		case wire.OpNOPIn:
			if r.TTT != wire.ReservedTag {
				in.send(&wire.PDU{Opcode: wire.OpNOPOut, Immediate: true, Final: true, ITT: wire.ReservedTag, TTT: r.TTT, CmdSN: in.cmdSN})
			}
		case wire.OpReject:
			return nil, fmt.Errorf("rejected: reason 0x%02x", r.Reason)
		default:
			return nil, fmt.Errorf("unexpected %s", r.Opcode)
		}
	}
}

// mustCmd runs a command that must succeed with GOOD status.
func (in *ini) mustCmd(cdb []byte, out []byte, readLen int) []byte {
	in.t.Helper()
	r, err := in.cmd(cdb, out, readLen)
	if err != nil {
		in.t.Fatalf("command %02x: %v", cdb[0], err)
	}
	if r.status != wire.StatusGood {
		in.t.Fatalf("command %02x: status 0x%02x %v", cdb[0], r.status, r.sense)
	}
	return r.data
}

// expectClosed waits until the target closes the connection.
func (in *ini) expectClosed(t testing.TB) {
	t.Helper()
	in.nc.SetReadDeadline(time.Now().Add(20 * time.Second))
	for i := 0; i < 100; i++ {
		_, err := in.c.ReadPDU()
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatalf("target did not drop the connection")
			}
			if err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, net.ErrClosed) || err != nil {
				return
			}
		}
	}
	t.Fatalf("target kept sending PDUs instead of dropping the connection")
}

type netDialer struct{}

func (netDialer) dial(addr string) (net.Conn, error) {
	return net.DialTimeout("tcp", addr, 5*time.Second)
}
