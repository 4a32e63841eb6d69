package iscsi

import (
	"bytes"
	"encoding/hex"
	"errors"
	"io"
	"net"
	"reflect"
	"testing"
)

func TestCRC32CVector(t *testing.T) {
	// RFC 7143 B.4: 32 bytes of zeros -> aa 36 91 8a on the wire.
	var d [4]byte
	putDigest(d[:], CRC32C(make([]byte, 32)))
	if got := hex.EncodeToString(d[:]); got != "aa36918a" {
		t.Fatalf("digest of 32 zero bytes = %s, want aa36918a", got)
	}
	ones := bytes.Repeat([]byte{0xff}, 32)
	putDigest(d[:], CRC32C(ones))
	if got := hex.EncodeToString(d[:]); got != "43aba862" {
		t.Fatalf("digest of 32 0xff bytes = %s, want 43aba862", got)
	}
}

func roundTrip(t *testing.T, p *PDU, o Options) *PDU {
	t.Helper()
	var buf bytes.Buffer
	if err := WritePDU(&buf, p, o); err != nil {
		t.Fatal(err)
	}
	if buf.Len()%4 != 0 {
		t.Fatalf("wire length %d not a multiple of 4", buf.Len())
	}
	q, err := ReadPDU(&buf, o)
	if err != nil {
		t.Fatalf("%s: %v", p.Opcode, err)
	}
	if buf.Len() != 0 {
		t.Fatalf("%d bytes left over", buf.Len())
	}
	q.Raw = [BHSLen]byte{}
	return q
}

func TestRoundTripAllOpcodes(t *testing.T) {
	cdb := Read16(0x123456789, 77, true)
	pdus := []*PDU{
		{Opcode: OpNOPOut, Immediate: true, Final: true, LUN: 1 << 48, ITT: 9, TTT: ReservedTag, CmdSN: 5, ExpStatSN: 6, Data: []byte("ping")},
		{Opcode: OpSCSICommand, Final: true, Read: true, Attr: AttrSimple, LUN: 0, ITT: 1, ExpectedDataLength: 77 * 512, CmdSN: 2, ExpStatSN: 3, CDB: cdb},
		{Opcode: OpSCSICommand, Final: true, Write: true, ITT: 1, CDB: append(append([]byte{}, cdb...), 1, 2, 3, 4, 5, 6, 7, 8), Data: []byte{1, 2, 3}},
		{Opcode: OpTaskMgmtReq, Immediate: true, Final: true, Function: TMFAbortTask, LUN: 1, ITT: 4, RefTaskTag: 3, CmdSN: 8, ExpStatSN: 9, RefCmdSN: 7, DataSN: 1},
		{Opcode: OpLoginReq, Immediate: true, Final: true, Continue: false, CSG: 1, NSG: 3, VersionMax: 0, VersionMin: 0, ISID: [6]byte{0x80, 1, 2, 3, 4, 5}, TSIH: 0, ITT: 1, CID: 3, CmdSN: 1, ExpStatSN: 0, Data: EncodeText([]KV{{"InitiatorName", "iqn.x"}})},
		{Opcode: OpLoginResp, Final: true, CSG: 1, NSG: 3, ISID: [6]byte{1}, TSIH: 7, ITT: 1, StatSN: 1, ExpCmdSN: 2, MaxCmdSN: 33, StatusClass: 2, StatusDetail: 1},
		{Opcode: OpTextReq, Immediate: true, Final: true, Continue: true, ITT: 2, TTT: ReservedTag, CmdSN: 1, ExpStatSN: 1, Data: []byte("SendTargets=All\x00")},
		{Opcode: OpDataOut, Final: true, LUN: 1, ITT: 3, TTT: 44, ExpStatSN: 9, DataSN: 2, BufferOffset: 8192, Data: bytes.Repeat([]byte{7}, 4097)},
		{Opcode: OpLogoutReq, Immediate: true, Final: true, Reason: LogoutCloseConnection, ITT: 5, CID: 2, CmdSN: 4, ExpStatSN: 5},
		{Opcode: OpSNACKReq, Final: true, SNACKType: 1, ITT: 5, TTT: 6, ExpStatSN: 7, BegRun: 8, RunLength: 9},
		{Opcode: OpNOPIn, Final: true, LUN: 0, ITT: ReservedTag, TTT: 10, StatSN: 1, ExpCmdSN: 2, MaxCmdSN: 3},
		{Opcode: OpSCSIResponse, Final: true, ResidualUnderflow: true, BidiOverflow: true, Response: 0, Status: StatusCheckCondition, ITT: 3, SNACKTag: 0, StatSN: 4, ExpCmdSN: 5, MaxCmdSN: 6, DataSN: 7, BidiResidualCount: 8, ResidualCount: 9, Data: SenseSegment(Sense{Key: SenseIllegalRequest, ASC: ASCLBAOutOfRange}.Marshal())},
		{Opcode: OpTaskMgmtResp, Final: true, Response: TMFRespNoTask, ITT: 4, StatSN: 5, ExpCmdSN: 6, MaxCmdSN: 7},
		{Opcode: OpTextResp, Final: true, ITT: 2, TTT: ReservedTag, StatSN: 1, ExpCmdSN: 2, MaxCmdSN: 3, Data: []byte("TargetName=iqn.y\x00")},
		{Opcode: OpDataIn, Final: true, StatusPresent: true, ResidualOverflow: true, Status: 0, LUN: 0, ITT: 1, TTT: ReservedTag, StatSN: 2, ExpCmdSN: 3, MaxCmdSN: 4, DataSN: 5, BufferOffset: 6, ResidualCount: 7, Data: []byte{1}},
		{Opcode: OpDataIn, Acknowledge: true, ITT: 1, TTT: 3, DataSN: 1, BufferOffset: 8192, Data: []byte{1, 2}},
		{Opcode: OpLogoutResp, Final: true, Response: 0, ITT: 5, StatSN: 6, ExpCmdSN: 7, MaxCmdSN: 8, Time2Wait: 2, Time2Retain: 20},
		{Opcode: OpR2T, Final: true, LUN: 1 << 48, ITT: 1, TTT: 2, StatSN: 3, ExpCmdSN: 4, MaxCmdSN: 5, DataSN: 6, BufferOffset: 7, ExpectedDataLength: 8},
		{Opcode: OpAsyncMsg, Final: true, LUN: 1, ITT: ReservedTag, StatSN: 2, ExpCmdSN: 3, MaxCmdSN: 4, AsyncEvent: 1, AsyncVCode: 0, Param1: 5, Param2: 6, Param3: 7},
		{Opcode: OpReject, Final: true, Reason: RejectProtocolError, ITT: ReservedTag, StatSN: 1, ExpCmdSN: 2, MaxCmdSN: 3, DataSN: 0, Data: make([]byte, 48)},
	}
	for _, o := range []Options{{}, {HeaderDigest: true, DataDigest: true}} {
		for _, p := range pdus {
			q := roundTrip(t, p, o)
			if len(q.Data) == 0 {
				q.Data = nil
			}
			if p.Data != nil && len(p.Data) == 0 {
				p.Data = nil
			}
			if p.Opcode == OpLoginReq && !p.Immediate {
				p.Immediate = true
			}
			if p.Opcode == OpSCSICommand && len(p.CDB) < 16 {
				c := make([]byte, 16)
				copy(c, p.CDB)
				p.CDB = c
			}
			if !reflect.DeepEqual(p, q) {
				t.Errorf("%s (digests %v):\n sent %+v\n got  %+v", p.Opcode, o.HeaderDigest, p, q)
			}
		}
	}
}

func TestReadPDUErrors(t *testing.T) {
	p := &PDU{Opcode: OpNOPOut, Final: true, ITT: 1, TTT: ReservedTag, Data: []byte("hello")}
	o := Options{HeaderDigest: true, DataDigest: true}
	var buf bytes.Buffer
	if err := WritePDU(&buf, p, o); err != nil {
		t.Fatal(err)
	}
	wire := buf.Bytes()

	bad := append([]byte{}, wire...)
	bad[20] ^= 1
	if _, err := ReadPDU(bytes.NewReader(bad), o); !errors.Is(err, ErrHeaderDigest) {
		t.Errorf("corrupt header: %v", err)
	}
	bad = append([]byte{}, wire...)
	bad[BHSLen+4] ^= 1
	q, err := ReadPDU(bytes.NewReader(bad), o)
	if !errors.Is(err, ErrDataDigest) || q == nil || q.ITT != 1 {
		t.Errorf("corrupt data: %v %v", q, err)
	}
	if _, err := ReadPDU(bytes.NewReader(wire[:30]), o); err != io.ErrUnexpectedEOF {
		t.Errorf("truncated header: %v", err)
	}
	if _, err := ReadPDU(bytes.NewReader(wire[:len(wire)-3]), o); err != io.ErrUnexpectedEOF {
		t.Errorf("truncated data: %v", err)
	}
	if _, err := ReadPDU(bytes.NewReader(nil), o); err != io.EOF {
		t.Errorf("empty: %v", err)
	}
	if _, err := ReadPDU(bytes.NewReader(wire), Options{HeaderDigest: true, DataDigest: true, MaxRecvDataSegmentLength: 4}); !errors.Is(err, ErrDataTooLong) {
		t.Errorf("too long: %v", err)
	}
	unk := make([]byte, 48)
	unk[0] = 0x1c
	q, err = ReadPDU(bytes.NewReader(unk), Options{})
	if !errors.Is(err, ErrUnknownOpcode) || q == nil || q.Raw[0] != 0x1c {
		t.Errorf("unknown opcode: %v %v", q, err)
	}
}

func TestText(t *testing.T) {
	kvs := []KV{{"HeaderDigest", "None,CRC32C"}, {"TargetName", "iqn.2026-11.io.tristore:b.v"}, {"X", ""}}
	got, err := ParseText(append(EncodeText(kvs), 0, 0))
	if err != nil || !reflect.DeepEqual(got, kvs) {
		t.Fatalf("%v %v", got, err)
	}
	for _, bad := range []string{"novalue\x00", "=v\x00", string(bytes.Repeat([]byte{'k'}, 64)) + "=v\x00"} {
		if _, err := ParseText([]byte(bad)); !errors.Is(err, ErrBadText) {
			t.Errorf("%q: %v", bad, err)
		}
	}
}

func TestNegotiate(t *testing.T) {
	tgt := DefaultParams()
	tgt.MaxRecvDataSegmentLengthLocal = 262144
	tgt.MaxBurstLength = 1 << 20
	tgt.FirstBurstLength = 1 << 20
	tgt.InitialR2T = false
	ini := DefaultParams()
	ini.HeaderDigest, ini.DataDigest = true, false
	ini.MaxRecvDataSegmentLengthLocal = 65536
	ini.ImmediateData = false
	ini.InitialR2T = false
	ini.MaxOutstandingR2T = 8
	ini.FirstBurstLength, ini.MaxBurstLength = 131072, 524288
	for _, kv := range ini.Offer() {
		ans, err := tgt.Negotiate(kv.Key, kv.Value)
		if err != nil {
			t.Fatalf("%s: %v", kv.Key, err)
		}
		if err := ini.Apply(kv.Key, ans); err != nil {
			t.Fatalf("apply %s=%s: %v", kv.Key, ans, err)
		}
	}
	for _, p := range []Params{tgt, ini} {
		if !p.HeaderDigest || p.DataDigest || p.ImmediateData || p.InitialR2T || p.MaxOutstandingR2T != 1 ||
			p.FirstBurstLength != 131072 || p.MaxBurstLength != 524288 || p.ErrorRecoveryLevel != 0 {
			t.Errorf("negotiated %+v", p)
		}
	}
	if tgt.MaxRecvDataSegmentLengthPeer != 65536 || ini.MaxRecvDataSegmentLengthPeer != 262144 {
		t.Errorf("MRDSL: target sees %d, initiator sees %d", tgt.MaxRecvDataSegmentLengthPeer, ini.MaxRecvDataSegmentLengthPeer)
	}
	if v, _ := tgt.Negotiate("FooBar", "1"); v != ValueNotUnderstood {
		t.Errorf("unknown key -> %q", v)
	}
	if v, err := tgt.Negotiate("MaxBurstLength", "12"); v != ValueReject || err == nil {
		t.Errorf("out of range -> %q %v", v, err)
	}
	if v, err := tgt.Negotiate("HeaderDigest", "MD5"); v != ValueReject || err == nil {
		t.Errorf("bad digest -> %q %v", v, err)
	}
}

func TestCHAP(t *testing.T) {
	// RFC 1994 style: MD5(id || secret || challenge).
	r := CHAPResponse(1, "secret", []byte{1, 2, 3})
	if !CHAPVerify(1, "secret", []byte{1, 2, 3}, r) || CHAPVerify(2, "secret", []byte{1, 2, 3}, r) || CHAPVerify(1, "Secret", []byte{1, 2, 3}, r) {
		t.Fatal("verify")
	}
	for _, s := range []string{EncodeBinary([]byte{0xde, 0xad}), "0XDEAD", "0b3q0="} {
		b, err := DecodeBinary(s)
		if err != nil || !bytes.Equal(b, []byte{0xde, 0xad}) {
			t.Errorf("%s -> %x %v", s, b, err)
		}
	}
	for _, s := range []string{"", "dead", "0xzz", "0b!!"} {
		if _, err := DecodeBinary(s); err == nil {
			t.Errorf("%q decoded", s)
		}
	}
}

func TestCDB(t *testing.T) {
	cases := []struct {
		cdb  []byte
		want RW
	}{
		{Read10(100, 8, true), RW{Op: ScsiRead10, LBA: 100, Blocks: 8, FUA: true}},
		{Write16(1<<40, 65536, false), RW{Op: ScsiWrite16, LBA: 1 << 40, Blocks: 65536}},
		{[]byte{ScsiRead6, 0x1f, 0xff, 0xff, 0, 0}, RW{Op: ScsiRead6, LBA: 0x1fffff, Blocks: 256}},
		{WriteSame16(5, 6, true), RW{Op: ScsiWriteSame16, LBA: 5, Blocks: 6, Unmap: true}},
		{[]byte{ScsiVerify10, 0x02, 0, 0, 0, 9, 0, 0, 1, 0}, RW{Op: ScsiVerify10, LBA: 9, Blocks: 1, BytChk: 1}},
		{[]byte{ScsiSyncCache10, 0x02, 0, 0, 0, 0, 0, 0, 0, 0}, RW{Op: ScsiSyncCache10, Immed: true}},
	}
	for _, c := range cases {
		got, err := ParseRW(c.cdb)
		if err != nil || got != c.want {
			t.Errorf("% x: %+v %v, want %+v", c.cdb, got, err, c.want)
		}
	}
	if _, err := ParseRW([]byte{ScsiRead16, 0, 0}); !errors.Is(err, ErrCDB) {
		t.Errorf("short: %v", err)
	}
	if _, err := ParseRW(Inquiry(false, 0, 96)); !errors.Is(err, ErrCDB) {
		t.Errorf("not block: %v", err)
	}
	ds := []UnmapDescriptor{{1, 2}, {1 << 33, 9}}
	got, err := ParseUnmapParams(UnmapParams(ds))
	if err != nil || !reflect.DeepEqual(got, ds) {
		t.Errorf("unmap %v %v", got, err)
	}
	c := Capacity{LastLBA: 1<<32 + 5, BlockSize: 512, LBPME: true, LBPRZ: true}
	if c2, _ := ParseCapacity16(c.Marshal16()); c2 != c {
		t.Errorf("cap16 %+v", c2)
	}
	if c10, _ := ParseCapacity10(c.Marshal10()); c10.LastLBA != 0xffffffff {
		t.Errorf("cap10 %+v", c10)
	}
	for _, l := range []uint16{0, 1, 255, 256, 1000} {
		if LUNFromField(LUNToField(l)) != l {
			t.Errorf("lun %d", l)
		}
	}
	s := Sense{Key: SenseIllegalRequest, ASC: ASCInvalidFieldInCDB, InfoValid: true, Info: 7}
	if s2, err := ParseSense(s.Marshal()); err != nil || s2.Key != s.Key || s2.ASC != s.ASC || s2.Info != 7 {
		t.Errorf("sense %+v %v", s2, err)
	}
}

// TestConnVectored checks that large PDUs (sent with writev) frame the
// same as small ones, with and without digests.
func TestConnVectored(t *testing.T) {
	for _, o := range []Options{{}, {HeaderDigest: true, DataDigest: true}} {
		a, b := net.Pipe()
		ca, cb := NewConn(a), NewConn(b)
		ca.SetOptions(o, o)
		o2 := o
		o2.MaxRecvDataSegmentLength = 1 << 20
		cb.SetOptions(o2, o)
		data := bytes.Repeat([]byte{1, 2, 3}, 100001) // not a multiple of 4
		p := &PDU{Opcode: OpDataIn, Final: true, ITT: 5, DataSN: 3, BufferOffset: 7, Data: data}
		go func() { ca.WritePDU(p); ca.WritePDU(&PDU{Opcode: OpNOPIn, Final: true, ITT: 6}) }()
		q, err := cb.ReadPDU()
		if err != nil || !bytes.Equal(q.Data, data) || q.ITT != 5 || q.BufferOffset != 7 {
			t.Fatalf("digests %v: %v %v", o.HeaderDigest, q, err)
		}
		if q, err = cb.ReadPDU(); err != nil || q.ITT != 6 {
			t.Fatalf("following PDU: %v %v", q, err)
		}
		a.Close()
		b.Close()
	}
}

func TestReadPlaced(t *testing.T) {
	o := Options{HeaderDigest: true, DataDigest: true}
	var b bytes.Buffer
	data := []byte("seven b") // padded to 8 on the wire
	WritePDU(&b, &PDU{Opcode: OpDataOut, Final: true, ITT: 3, BufferOffset: 2, Data: data}, o)
	wire := append([]byte(nil), b.Bytes()...)
	dst := make([]byte, 20)
	p, err := readPDU(bytes.NewReader(wire), o, func(p *PDU, n int) []byte { return dst[p.BufferOffset : int(p.BufferOffset)+n] })
	if err != nil || string(dst[2:9]) != "seven b" || &p.Data[0] != &dst[2] {
		t.Fatalf("placed read: %v %q", err, dst)
	}
	wire[len(wire)-6] ^= 1 // payload byte
	if _, err := readPDU(bytes.NewReader(wire), o, func(p *PDU, n int) []byte { return dst[:n] }); !errors.Is(err, ErrDataDigest) {
		t.Fatalf("corrupt placed data: %v", err)
	}
	// A placer that declines gets an allocated buffer.
	wire[len(wire)-6] ^= 1
	if p, err := readPDU(bytes.NewReader(wire), o, func(*PDU, int) []byte { return nil }); err != nil || string(p.Data) != "seven b" {
		t.Fatalf("declined: %v", err)
	}
}
