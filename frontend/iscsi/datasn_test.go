package iscsi

import (
	"bytes"
	"fmt"
	"testing"

	wire "github.com/tristore/tristore/proto/iscsi"
)

// writeWithDataSNs sends WRITE(10) of len(sns) blocks of 512 bytes at lba
// with no immediate data, the data in one Data-Out per block numbered
// sns[i] (unsolicited when the session allows it, else after the R2T),
// and returns the command's status and sense.
func writeWithDataSNs(in *ini, lba uint32, sns []uint32, fill byte) (*result, error) {
	itt := in.nextITT()
	n := len(sns) * 512
	p := &wire.PDU{Opcode: wire.OpSCSICommand, Final: in.p.InitialR2T, Attr: wire.AttrSimple, Write: true, ITT: itt,
		CmdSN: in.cmdSN, ExpectedDataLength: uint32(n), CDB: wire.Write10(lba, uint16(len(sns)), false)}
	in.cmdSN++
	if err := in.send(p); err != nil {
		return nil, err
	}
	ttt := wire.ReservedTag
	if in.p.InitialR2T {
		r, err := in.recv()
		if err != nil {
			return nil, err
		}
		if r.Opcode != wire.OpR2T || r.ExpectedDataLength != uint32(n) {
			return nil, fmt.Errorf("want one R2T for %d bytes, got %v", n, r)
		}
		ttt = r.TTT
	}
	for i, sn := range sns {
		d := &wire.PDU{Opcode: wire.OpDataOut, Final: i == len(sns)-1, ITT: itt, TTT: ttt, DataSN: sn,
			BufferOffset: uint32(i * 512), Data: bytes.Repeat([]byte{fill}, 512)}
		if err := in.send(d); err != nil {
			return nil, err
		}
	}
	for {
		r, err := in.recv()
		if err != nil {
			return nil, err
		}
		switch r.Opcode {
		case wire.OpSCSIResponse:
			res := &result{status: r.Status}
			if len(r.Data) > 0 {
				sb, err := wire.SenseFromSegment(r.Data)
				if err != nil {
					return nil, err
				}
				res.sense, _ = wire.ParseSense(sb)
			}
			return res, nil
		case wire.OpNOPIn:
		default:
			return nil, fmt.Errorf("unexpected %v", r.Opcode)
		}
	}
}

// TestDataSNOutOfOrder: a Data-Out whose DataSN is not the next one of
// its burst (0xffffffff, 27, a repeated 0, 1 before 0), on a one-PDU or
// two-PDU WRITE, unsolicited or after an R2T, ends the command with CHECK
// CONDITION (ABORTED COMMAND, PROTOCOL SERVICE CRC ERROR: RFC 7143 §7.8,
// §7.9) and writes nothing; the connection keeps serving. These are the
// cases of libiscsi's iSCSI.iSCSIdatasn; 0xffffffff used to be answered
// GOOD by that tool's run because the tool's reconnect replayed the write
// with immediate data, which a dropped connection invited.
func TestDataSNOutOfOrder(t *testing.T) {
	tt := startTarget(t, Config{})
	for _, r2t := range []bool{false, true} {
		in, err := dial(t, tt.addr, loginOpts{target: tt.iqn, initialR2T: r2t, isid: 9})
		if err != nil {
			t.Fatal(err)
		}
		old := bytes.Repeat([]byte{0x11}, 1024)
		in.mustCmd(wire.Write10(100, 2, false), old, 0)
		for _, sns := range [][]uint32{{0xffffffff}, {27}, {0, 0}, {1, 0}, {0, 0xffffffff}} {
			name := fmt.Sprintf("r2t=%v datasn=%x", r2t, sns)
			res, err := writeWithDataSNs(in, 100, sns, 0xab)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if res.status != wire.StatusCheckCondition || res.sense.Key != wire.SenseAbortedCommand || res.sense.ASC != 0x4705 {
				t.Fatalf("%s: status 0x%02x sense %+v, want CHECK CONDITION / ABORTED COMMAND / 47h 05h", name, res.status, res.sense)
			}
			if got := in.mustCmd(wire.Read10(100, 2, false), nil, 1024); !bytes.Equal(got[:len(sns)*512], old[:len(sns)*512]) {
				t.Fatalf("%s: the rejected write changed the blocks", name)
			}
		}
		// In order, the same writes succeed on the same connection.
		for _, sns := range [][]uint32{{0}, {0, 1}} {
			res, err := writeWithDataSNs(in, 100, sns, 0xcd)
			if err != nil || res.status != wire.StatusGood {
				t.Fatalf("r2t=%v in-order write %v: %v %+v", r2t, sns, err, res)
			}
		}
		if got := in.mustCmd(wire.Read10(100, 2, false), nil, 1024); !bytes.Equal(got, bytes.Repeat([]byte{0xcd}, 1024)) {
			t.Fatalf("r2t=%v: in-order write not on the LUN", r2t)
		}
	}
}
