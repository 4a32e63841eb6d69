package iscsi

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tristore/tristore/blockdev/filelun"
	wire "github.com/tristore/tristore/proto/iscsi"
)

func randBytes(n int) []byte {
	b := make([]byte, n)
	rand.Read(b)
	return b
}

func TestNames(t *testing.T) {
	n := TargetName("my.bucket", "disk-1")
	b, v, ok := ParseTargetName(strings.ToUpper(n))
	if !ok || b != "my.bucket" || v != "disk-1" {
		t.Fatalf("%s -> %q %q %v", n, b, v, ok)
	}
	for _, bad := range []string{"iqn.2026-11.io.tristore:b", "iqn.x:b:v", "iqn.2026-11.io.tristore::v", "iqn.2026-11.io.tristore:b:v:w"} {
		if _, _, ok := ParseTargetName(bad); ok {
			t.Errorf("%q parsed", bad)
		}
	}
}

// TestReadWrite checks data integrity through every data path: immediate
// data, unsolicited Data-Out, R2T bursts, multi-PDU Data-In, with and
// without digests, and FUA.
func TestReadWrite(t *testing.T) {
	tt := startTarget(t, Config{})
	for _, o := range []loginOpts{
		{immediate: true, initialR2T: false},
		{immediate: false, initialR2T: true, digests: true, maxBurst: 16384},
		{immediate: true, initialR2T: true, maxRecvLocal: 4096},
	} {
		o.target = tt.iqn
		in, err := dial(t, tt.addr, o)
		if err != nil {
			t.Fatalf("login %+v: %v", o, err)
		}
		for _, size := range []int{512, 4096, 65536 + 512, 1 << 20} {
			data := randBytes(size)
			lba := uint32(size / 512)
			in.mustCmd(wire.Write10(lba, uint16(size/512), size == 4096), data, 0)
			got := in.mustCmd(wire.Read16(uint64(lba), uint32(size/512), false), nil, size)
			if !bytes.Equal(got, data) {
				t.Fatalf("opts %+v size %d: read back differs", o, size)
			}
		}
		in.nc.Close()
	}
}

func TestSCSIBasics(t *testing.T) {
	tt := startTarget(t, Config{})
	in, err := dial(t, tt.addr, loginOpts{target: tt.iqn, immediate: true})
	if err != nil {
		t.Fatal(err)
	}
	inq := in.mustCmd(wire.Inquiry(false, 0, 255), nil, 255)
	if len(inq) != 96 || string(inq[8:16]) != "TRISTORE" {
		t.Fatalf("inquiry %q", inq)
	}
	// Residual: asked for 255, got 96.
	r, err := in.cmd(wire.Inquiry(true, 0x83, 255), nil, 255)
	if err != nil || r.status != 0 || !r.under || int(r.residual) != 255-len(r.data) {
		t.Fatalf("vpd 83: %+v %v", r, err)
	}
	capData := in.mustCmd(wire.ReadCapacity16(32), nil, 32)
	c, _ := wire.ParseCapacity16(capData)
	if c.LastLBA != 16<<20/512-1 || c.BlockSize != 512 {
		t.Fatalf("capacity %+v", c)
	}
	// Errors come back as CHECK CONDITION with the right sense.
	cases := []struct {
		cdb  []byte
		out  []byte
		rlen int
		key  uint8
		asc  uint16
	}{
		{wire.Read16(c.LastLBA, 2, false), nil, 1024, wire.SenseIllegalRequest, wire.ASCLBAOutOfRange},
		{wire.Write16(c.LastLBA+1, 1, false), make([]byte, 512), 0, wire.SenseIllegalRequest, wire.ASCLBAOutOfRange},
		{append([]byte{0xc7}, make([]byte, 15)...), nil, 0, wire.SenseIllegalRequest, wire.ASCInvalidOpcode},
		{wire.Inquiry(true, 0x42, 255), nil, 255, wire.SenseIllegalRequest, wire.ASCInvalidFieldInCDB},
		{wire.ReportLUNs(8), nil, 8, wire.SenseIllegalRequest, wire.ASCInvalidFieldInCDB},
	}
	for _, cs := range cases {
		r, err := in.cmd(cs.cdb, cs.out, cs.rlen)
		if err != nil {
			t.Fatalf("%x: %v", cs.cdb[0], err)
		}
		if r.status != wire.StatusCheckCondition || r.sense.Key != cs.key || r.sense.ASC != cs.asc {
			t.Errorf("cdb %x: status %x sense %v, want key %x asc %04x", cs.cdb[:2], r.status, r.sense, cs.key, cs.asc)
		}
	}
	// UNMAP and WRITE SAME with UNMAP read back as zeros.
	in.mustCmd(wire.Write10(100, 8, false), bytes.Repeat([]byte{0xab}, 4096), 0)
	params := wire.UnmapParams([]wire.UnmapDescriptor{{LBA: 100, Blocks: 4}})
	in.mustCmd(wire.Unmap(uint16(len(params))), params, 0)
	in.mustCmd(wire.WriteSame16(104, 4, true), make([]byte, 512), 0)
	if got := in.mustCmd(wire.Read10(100, 8, false), nil, 4096); !bytes.Equal(got, make([]byte, 4096)) {
		t.Fatalf("unmapped blocks not zero")
	}
	in.mustCmd(wire.SyncCache10(), nil, 0)
	// MODE SENSE caching page tells the truth: WCE=1.
	ms := in.mustCmd([]byte{wire.ScsiModeSense6, 0x08, 0x08, 0, 255, 0}, nil, 255)
	if len(ms) < 4+20 || ms[4] != 0x08 || ms[6]&0x04 == 0 {
		t.Fatalf("caching page % x", ms)
	}
	// Wrong LUN.
	r, err = in.cmd(wire.TestUnitReady(), nil, 0)
	if err != nil || r.status != 0 {
		t.Fatalf("TUR %+v %v", r, err)
	}
}

func TestDiscovery(t *testing.T) {
	tt := startTarget(t, Config{})
	in, err := dial(t, tt.addr, loginOpts{})
	if err != nil {
		t.Fatal(err)
	}
	itt := in.nextITT()
	if err := in.send(&wire.PDU{Opcode: wire.OpTextReq, Immediate: true, Final: true, ITT: itt, TTT: wire.ReservedTag,
		CmdSN: in.cmdSN, Data: wire.EncodeText([]wire.KV{{Key: "SendTargets", Value: "All"}})}); err != nil {
		t.Fatal(err)
	}
	r, err := in.recv()
	if err != nil || r.Opcode != wire.OpTextResp {
		t.Fatalf("%v %v", r, err)
	}
	kv, _ := wire.ParseText(r.Data)
	name, _ := wire.Lookup(kv, "TargetName")
	addr, _ := wire.Lookup(kv, "TargetAddress")
	if name != tt.iqn || addr != tt.addr+",1" {
		t.Fatalf("SendTargets: %v", kv)
	}
	// SCSI commands are not allowed in a discovery session.
	if _, err := in.cmd(wire.TestUnitReady(), nil, 0); err == nil || !strings.Contains(err.Error(), "rejected") {
		t.Fatalf("SCSI in discovery: %v", err)
	}
}

func TestCHAP(t *testing.T) {
	ini := wire.CHAPCredentials{User: "alice", Secret: "alice-secret-123"}
	tgt := wire.CHAPCredentials{User: "target", Secret: "target-secret-456"}
	tt := startTarget(t, Config{CHAP: CHAPConfig{Initiator: ini, Target: tgt}})
	if _, err := dial(t, tt.addr, loginOpts{target: tt.iqn, chap: &ini}); err != nil {
		t.Fatalf("one-way CHAP: %v", err)
	}
	in, err := dial(t, tt.addr, loginOpts{target: tt.iqn, chap: &ini, mutual: &tgt, isid: 2})
	if err != nil {
		t.Fatalf("mutual CHAP: %v", err)
	}
	in.mustCmd(wire.TestUnitReady(), nil, 0)
	bad := wire.CHAPCredentials{User: "alice", Secret: "wrong-secret-000"}
	if _, err := dial(t, tt.addr, loginOpts{target: tt.iqn, chap: &bad, isid: 3}); !errors.Is(err, errLoginStatus) || !strings.Contains(err.Error(), "0201") {
		t.Fatalf("bad secret: %v", err)
	}
	if _, err := dial(t, tt.addr, loginOpts{target: tt.iqn, isid: 4}); err == nil {
		t.Fatalf("login without CHAP succeeded")
	}
	if _, err := dial(t, tt.addr, loginOpts{target: "iqn.2026-11.io.tristore:vols:nope", chap: &ini, isid: 5}); err == nil || !strings.Contains(err.Error(), "0203") {
		t.Fatalf("unknown target: %v", err)
	}
	// The good session still works after all those failures.
	in.mustCmd(wire.TestUnitReady(), nil, 0)
}

// TestBadPDUs: malformed input gets Reject or a dropped connection, and
// other sessions keep working.
func TestBadPDUs(t *testing.T) {
	tt := startTarget(t, Config{})
	other, err := dial(t, tt.addr, loginOpts{target: tt.iqn, isid: 9, immediate: true})
	if err != nil {
		t.Fatal(err)
	}
	keep := randBytes(4096)
	other.mustCmd(wire.Write10(0, 8, false), keep, 0)

	// Unknown opcode: Reject, connection stays.
	in, err := dial(t, tt.addr, loginOpts{target: tt.iqn, digests: true})
	if err != nil {
		t.Fatal(err)
	}
	raw := make([]byte, 48)
	raw[0] = 0x1d
	hd := wire.CRC32C(raw)
	in.nc.Write(append(raw, byte(hd), byte(hd>>8), byte(hd>>16), byte(hd>>24)))
	r, err := in.recv()
	if err != nil || r.Opcode != wire.OpReject || r.Reason != wire.RejectCmdNotSupported {
		t.Fatalf("unknown opcode: %v %v", r, err)
	}
	in.mustCmd(wire.TestUnitReady(), nil, 0)

	// Corrupt data digest on a NOP-Out: Reject, connection stays.
	var b bytes.Buffer
	wire.WritePDU(&b, &wire.PDU{Opcode: wire.OpNOPOut, Immediate: true, Final: true, ITT: 77, TTT: wire.ReservedTag,
		CmdSN: in.cmdSN, ExpStatSN: in.expStatSN, Data: []byte("ping")}, wire.Options{HeaderDigest: true, DataDigest: true})
	w := b.Bytes()
	w[len(w)-1] ^= 0xff
	in.nc.Write(w)
	r, err = in.recv()
	if err != nil || r.Opcode != wire.OpReject || r.Reason != wire.RejectDataDigest {
		t.Fatalf("data digest: %v %v", r, err)
	}
	in.mustCmd(wire.TestUnitReady(), nil, 0)

	// Corrupt header digest: the connection is dropped.
	b.Reset()
	wire.WritePDU(&b, &wire.PDU{Opcode: wire.OpNOPOut, Immediate: true, Final: true, ITT: 78, TTT: wire.ReservedTag, CmdSN: in.cmdSN}, wire.Options{HeaderDigest: true, DataDigest: true})
	w = b.Bytes()
	w[49] ^= 0xff
	in.nc.Write(w)
	in.expectClosed(t)

	// Data-Out beyond the expected length: dropped, nothing written.
	in2, err := dial(t, tt.addr, loginOpts{target: tt.iqn, initialR2T: true, isid: 2})
	if err != nil {
		t.Fatal(err)
	}
	itt := in2.nextITT()
	in2.send(&wire.PDU{Opcode: wire.OpSCSICommand, Final: true, Write: true, ITT: itt, CmdSN: in2.cmdSN, ExpectedDataLength: 4096, CDB: wire.Write10(0, 8, false)})
	r, err = in2.recv()
	if err != nil || r.Opcode != wire.OpR2T {
		t.Fatalf("want R2T: %v %v", r, err)
	}
	in2.send(&wire.PDU{Opcode: wire.OpDataOut, Final: true, ITT: itt, TTT: r.TTT, BufferOffset: 2048, Data: make([]byte, 4096)})
	in2.expectClosed(t)

	// Connection dropped mid-write: the partial data is never applied.
	in3, err := dial(t, tt.addr, loginOpts{target: tt.iqn, initialR2T: true, isid: 3})
	if err != nil {
		t.Fatal(err)
	}
	itt = in3.nextITT()
	in3.send(&wire.PDU{Opcode: wire.OpSCSICommand, Final: true, Write: true, ITT: itt, CmdSN: in3.cmdSN, ExpectedDataLength: 4096, CDB: wire.Write10(0, 8, false)})
	r, err = in3.recv()
	if err != nil || r.Opcode != wire.OpR2T {
		t.Fatalf("want R2T: %v %v", r, err)
	}
	in3.send(&wire.PDU{Opcode: wire.OpDataOut, ITT: itt, TTT: r.TTT, BufferOffset: 0, Data: make([]byte, 2048)})
	in3.nc.Close()

	// Data-Out with a wrong DataSN: a sequence error, the command ends with
	// CHECK CONDITION and the connection stays (TestDataSNOutOfOrder).
	in4, err := dial(t, tt.addr, loginOpts{target: tt.iqn, initialR2T: true, isid: 4})
	if err != nil {
		t.Fatal(err)
	}
	itt = in4.nextITT()
	in4.send(&wire.PDU{Opcode: wire.OpSCSICommand, Final: true, Write: true, ITT: itt, CmdSN: in4.cmdSN, ExpectedDataLength: 4096, CDB: wire.Write10(0, 8, false)})
	in4.cmdSN++
	r, _ = in4.recv()
	in4.send(&wire.PDU{Opcode: wire.OpDataOut, Final: true, ITT: itt, TTT: r.TTT, DataSN: 5, Data: make([]byte, 4096)})
	if r, err = in4.recv(); err != nil || r.Opcode != wire.OpSCSIResponse || r.Status != wire.StatusCheckCondition {
		t.Fatalf("wrong DataSN: %v %v", r, err)
	}
	in4.mustCmd(wire.TestUnitReady(), nil, 0)

	// A data segment longer than our MaxRecvDataSegmentLength: Reject
	// (protocol error), then the connection is dropped (the stream is out
	// of step because the segment was not read).
	in6, err := dial(t, tt.addr, loginOpts{target: tt.iqn, isid: 6})
	if err != nil {
		t.Fatal(err)
	}
	long := make([]byte, 48)
	long[0] = 0x40 | byte(wire.OpNOPOut)
	long[1] = 0x80
	long[5], long[6], long[7] = 0x10, 0, 0 // 1 MiB > 256 KiB
	for i := 16; i < 24; i++ {
		long[i] = 0xff
	}
	in6.nc.Write(long)
	r, err = in6.recv()
	if err != nil || r.Opcode != wire.OpReject || r.Reason != wire.RejectProtocolError {
		t.Fatalf("overlong data segment: %v %v", r, err)
	}
	in6.expectClosed(t)

	// Truncated PDU then EOF.
	in5, err := dial(t, tt.addr, loginOpts{target: tt.iqn, isid: 5})
	if err != nil {
		t.Fatal(err)
	}
	in5.nc.Write(make([]byte, 20))
	in5.nc.Close()

	// Garbage instead of a login.
	if nc, err := (&netDialer{}).dial(tt.addr); err == nil {
		nc.Write(bytes.Repeat([]byte{0xff}, 100))
		nc.Close()
	}

	time.Sleep(100 * time.Millisecond)
	if got := other.mustCmd(wire.Read10(0, 8, false), nil, 4096); !bytes.Equal(got, keep) {
		t.Fatalf("block 0 changed by an unacknowledged write")
	}
}

// TestQueueDepth keeps many commands in flight on one session and checks
// the CmdSN window.
func TestQueueDepth(t *testing.T) {
	tt := startTarget(t, Config{QueueDepth: 32})
	in, err := dial(t, tt.addr, loginOpts{target: tt.iqn, immediate: true})
	if err != nil {
		t.Fatal(err)
	}
	if w := in.maxCmdSN - in.cmdSN + 1; w != 32 {
		t.Fatalf("window %d, want 32", w)
	}
	const n = 32
	want := map[uint32][]byte{}
	for i := 0; i < n; i++ {
		d := randBytes(4096)
		itt := in.nextITT()
		want[itt] = d
		if err := in.send(&wire.PDU{Opcode: wire.OpSCSICommand, Final: true, Write: true, ITT: itt, CmdSN: in.cmdSN,
			ExpectedDataLength: 4096, CDB: wire.Write10(uint32(8*i), 8, false), Data: d}); err != nil {
			t.Fatal(err)
		}
		in.cmdSN++
	}
	for i := 0; i < n; i++ {
		r, err := in.recv()
		if err != nil || r.Opcode != wire.OpSCSIResponse || r.Status != 0 {
			t.Fatalf("response %d: %v %v", i, r, err)
		}
	}
	for i := 0; i < n; i++ {
		itt := in.nextITT()
		in.send(&wire.PDU{Opcode: wire.OpSCSICommand, Final: true, Read: true, ITT: itt, CmdSN: in.cmdSN,
			ExpectedDataLength: 4096, CDB: wire.Read10(uint32(8*i), 8, false)})
		in.cmdSN++
		want[itt] = want[uint32(2+i)]
	}
	got := map[uint32][]byte{}
	for len(got) < n {
		r, err := in.recv()
		if err != nil || r.Opcode != wire.OpDataIn {
			t.Fatalf("%v %v", r, err)
		}
		got[r.ITT] = append(got[r.ITT], r.Data...)
	}
	for itt, d := range got {
		if !bytes.Equal(d, want[itt]) {
			t.Fatalf("itt %d: wrong data", itt)
		}
	}
	if w := in.maxCmdSN - in.cmdSN + 1; w != 32 {
		t.Fatalf("window after completion %d, want 32", w)
	}
}

func TestTaskManagement(t *testing.T) {
	tt := startTarget(t, Config{})
	in, err := dial(t, tt.addr, loginOpts{target: tt.iqn, initialR2T: true})
	if err != nil {
		t.Fatal(err)
	}
	// A write waiting for its data is aborted: no SCSI response, TMF complete.
	itt := in.nextITT()
	in.send(&wire.PDU{Opcode: wire.OpSCSICommand, Final: true, Write: true, ITT: itt, CmdSN: in.cmdSN, ExpectedDataLength: 4096, CDB: wire.Write10(0, 8, false)})
	in.cmdSN++
	r, err := in.recv()
	if err != nil || r.Opcode != wire.OpR2T {
		t.Fatalf("want R2T: %v %v", r, err)
	}
	tmf := in.nextITT()
	in.send(&wire.PDU{Opcode: wire.OpTaskMgmtReq, Immediate: true, Final: true, Function: wire.TMFAbortTask, ITT: tmf, RefTaskTag: itt, CmdSN: in.cmdSN, RefCmdSN: in.cmdSN - 1})
	r, err = in.recv()
	if err != nil || r.Opcode != wire.OpTaskMgmtResp || r.ITT != tmf || r.Response != wire.TMFRespComplete {
		t.Fatalf("abort: %v %v", r, err)
	}
	// The task is gone: aborting again says so.
	in.send(&wire.PDU{Opcode: wire.OpTaskMgmtReq, Immediate: true, Final: true, Function: wire.TMFAbortTask, ITT: in.nextITT(), RefTaskTag: itt, CmdSN: in.cmdSN})
	if r, err = in.recv(); err != nil || r.Response != wire.TMFRespNoTask {
		t.Fatalf("abort again: %v %v", r, err)
	}
	for _, f := range []uint8{wire.TMFAbortTaskSet, wire.TMFLogicalUnitReset, wire.TMFTargetWarmReset} {
		in.send(&wire.PDU{Opcode: wire.OpTaskMgmtReq, Immediate: true, Final: true, Function: f, ITT: in.nextITT(), RefTaskTag: wire.ReservedTag, CmdSN: in.cmdSN})
		if r, err = in.recv(); err != nil || r.Opcode != wire.OpTaskMgmtResp || r.Response != wire.TMFRespComplete {
			t.Fatalf("tmf %d: %v %v", f, r, err)
		}
	}
	in.mustCmd(wire.TestUnitReady(), nil, 0)
	// NOP-Out ping echoes its data.
	in.send(&wire.PDU{Opcode: wire.OpNOPOut, Immediate: true, Final: true, ITT: in.nextITT(), TTT: wire.ReservedTag, CmdSN: in.cmdSN, Data: []byte("hello")})
	if r, err = in.recv(); err != nil || r.Opcode != wire.OpNOPIn || string(r.Data) != "hello" {
		t.Fatalf("nop: %v %v", r, err)
	}
	// Logout.
	in.send(&wire.PDU{Opcode: wire.OpLogoutReq, Immediate: true, Final: true, Reason: wire.LogoutCloseSession, ITT: in.nextITT(), CmdSN: in.cmdSN})
	if r, err = in.recv(); err != nil || r.Opcode != wire.OpLogoutResp || r.Response != 0 {
		t.Fatalf("logout: %v %v", r, err)
	}
	in.expectClosed(t)
}

// TestNopInLiveness: the target pings an idle initiator and drops it when
// the pings go unanswered.
func TestNopInLiveness(t *testing.T) {
	tt := startTarget(t, Config{NopInterval: 200 * time.Millisecond, NopTimeout: 500 * time.Millisecond})
	in, err := dial(t, tt.addr, loginOpts{target: tt.iqn})
	if err != nil {
		t.Fatal(err)
	}
	r, err := in.recv()
	if err != nil || r.Opcode != wire.OpNOPIn || r.TTT == wire.ReservedTag {
		t.Fatalf("want ping: %v %v", r, err)
	}
	in.expectClosed(t) // we never answer
}

// TestCapacityChange: growing a served volume raises a unit attention.
func TestCapacityChange(t *testing.T) {
	old := filelun.SizePollInterval
	filelun.SizePollInterval = 20 * time.Millisecond
	defer func() { filelun.SizePollInterval = old }()
	tt := startTarget(t, Config{})
	in, err := dial(t, tt.addr, loginOpts{target: tt.iqn})
	if err != nil {
		t.Fatal(err)
	}
	in.mustCmd(wire.TestUnitReady(), nil, 0)
	if _, err := filelun.Resize(context.Background(), tt.st, "vols", "disk", 32<<20); err != nil {
		t.Fatal(err)
	}
	if _, err := filelun.Resize(context.Background(), tt.st, "vols", "disk", 8<<20); !errors.Is(err, filelun.ErrInUse) {
		t.Fatalf("shrink under a live target: %v", err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		r, err := in.cmd(wire.TestUnitReady(), nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		if r.status == wire.StatusCheckCondition {
			if r.sense.Key != wire.SenseUnitAttention || r.sense.ASC != wire.ASCCapacityDataChanged {
				t.Fatalf("sense %v", r.sense)
			}
			c, _ := wire.ParseCapacity16(in.mustCmd(wire.ReadCapacity16(32), nil, 32))
			if c.LastLBA != 32<<20/512-1 {
				t.Fatalf("capacity %+v", c)
			}
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatal("no CAPACITY DATA HAS CHANGED unit attention")
}

// TestMultiConnection: a second connection joins the session (same ISID
// and TSIH); commands on either connection share one CmdSN sequence.
func TestMultiConnection(t *testing.T) {
	tt := startTarget(t, Config{})
	a, err := dial(t, tt.addr, loginOpts{target: tt.iqn, immediate: true, isid: 7})
	if err != nil {
		t.Fatal(err)
	}
	b, err := dial(t, tt.addr, loginOpts{target: tt.iqn, immediate: true, isid: 7, tsih: a.tsih, cid: 1})
	if err != nil {
		t.Fatalf("second connection: %v", err)
	}
	if b.tsih != a.tsih {
		t.Fatalf("joined TSIH %d, want %d", b.tsih, a.tsih)
	}
	data := randBytes(8192)
	b.cmdSN = a.cmdSN
	a.mustCmd(wire.Write10(0, 16, false), data, 0)
	b.cmdSN = a.cmdSN
	if got := b.mustCmd(wire.Read10(0, 16, false), nil, 8192); !bytes.Equal(got, data) {
		t.Fatal("read on the second connection differs")
	}
	a.cmdSN = b.cmdSN
	a.mustCmd(wire.TestUnitReady(), nil, 0)
	// A wrong TSIH is refused.
	if _, err := dial(t, tt.addr, loginOpts{target: tt.iqn, isid: 8, tsih: a.tsih + 100, cid: 1}); err == nil || !strings.Contains(err.Error(), "020a") {
		t.Fatalf("bad TSIH: %v", err)
	}
	// Session reinstatement: a new leading login with the same ISID replaces the old session.
	c, err := dial(t, tt.addr, loginOpts{target: tt.iqn, isid: 7})
	if err != nil {
		t.Fatal(err)
	}
	c.mustCmd(wire.TestUnitReady(), nil, 0)
	a.expectClosed(t)
}

// TestPerTargetCHAP: a CHAP file gives one target its own secret while
// others (and discovery) follow the default.
func TestPerTargetCHAP(t *testing.T) {
	path := t.TempDir() + "/chap"
	iqn := TargetName("vols", "disk")
	os.WriteFile(path, []byte("# per-target secrets\n"+strings.ToUpper(iqn)+"  bob bob-secret-1234  tgt tgt-secret-5678\n"), 0o600)
	per, err := LoadCHAPFile(path)
	if err != nil {
		t.Fatal(err)
	}
	tt := startTarget(t, Config{PerTarget: per})
	bob := wire.CHAPCredentials{User: "bob", Secret: "bob-secret-1234"}
	tgt := wire.CHAPCredentials{User: "tgt", Secret: "tgt-secret-5678"}
	if _, err := dial(t, tt.addr, loginOpts{target: tt.iqn}); err == nil {
		t.Fatal("login without CHAP to a CHAP target succeeded")
	}
	if _, err := dial(t, tt.addr, loginOpts{target: tt.iqn, chap: &bob, mutual: &tgt, isid: 1}); err != nil {
		t.Fatalf("per-target mutual CHAP: %v", err)
	}
	if _, err := dial(t, tt.addr, loginOpts{isid: 2}); err != nil {
		t.Fatalf("discovery without CHAP: %v", err)
	}
	os.WriteFile(path, []byte("iqn.x only-two-fields\n"), 0o600)
	if _, err := LoadCHAPFile(path); err == nil {
		t.Fatal("malformed CHAP file accepted")
	}
}

// TestRandomPDUs sends a bounded stream of random (but well-framed) PDUs
// after login; whatever the target does with them, it must keep serving
// another session, and it must not crash.
func TestRandomPDUs(t *testing.T) {
	tt := startTarget(t, Config{})
	good, err := dial(t, tt.addr, loginOpts{target: tt.iqn, isid: 1, immediate: true})
	if err != nil {
		t.Fatal(err)
	}
	ops := []wire.Opcode{wire.OpNOPOut, wire.OpSCSICommand, wire.OpTaskMgmtReq, wire.OpTextReq, wire.OpDataOut,
		wire.OpSNACKReq, wire.OpLoginReq, wire.OpNOPIn, 0x1e}
	seed := randBytes(4096)
	pos := 0
	next := func(n int) []byte {
		if pos+n > len(seed) {
			pos = 0
		}
		b := seed[pos : pos+n]
		pos += n
		return b
	}
	for round := 0; round < 8; round++ {
		in, err := dial(t, tt.addr, loginOpts{target: tt.iqn, isid: byte(10 + round), immediate: true})
		if err != nil {
			t.Fatal(err)
		}
		for i := 0; i < 40; i++ {
			raw := append([]byte(nil), next(48)...)
			raw[0] = byte(ops[int(raw[0])%len(ops)]) | raw[0]&0x40
			raw[4] = 0                   // no AHS
			raw[5], raw[6] = 0, raw[6]&1 // data segment < 512 bytes
			dl := int(raw[6])<<8 | int(raw[7])
			if raw[0]&0x3f == byte(wire.OpTaskMgmtReq) && raw[1]&0x7f == wire.TMFTargetColdReset {
				raw[1] = 0x80 | wire.TMFAbortTaskSet // a cold reset legitimately drops every session
			}
			if raw[0]&0x3f == byte(wire.OpSCSICommand) {
				raw[32] = []byte{wire.ScsiRead10, wire.ScsiWrite10, wire.ScsiInquiry, wire.ScsiModeSelect6,
					wire.ScsiPersistResOut, wire.ScsiUnmap, wire.ScsiCompareAndWrite, wire.ScsiMaintenanceIn}[raw[32]%8]
			}
			pdu := append(raw, next(dl)...)
			for len(pdu)%4 != 0 {
				pdu = append(pdu, 0)
			}
			in.nc.SetWriteDeadline(time.Now().Add(5 * time.Second))
			if _, err := in.nc.Write(pdu); err != nil {
				break // the target dropped us: fine
			}
		}
		in.nc.Close()
		// Random resets legitimately leave unit attentions for the good
		// session; it must see them and then work normally.
		ok := false
		for try := 0; try < 8 && !ok; try++ {
			r, err := good.cmd(wire.TestUnitReady(), nil, 0)
			if err != nil {
				t.Fatalf("good session broken: %v", err)
			}
			switch {
			case r.status == wire.StatusGood:
				ok = true
			case r.status == wire.StatusCheckCondition && r.sense.Key == wire.SenseUnitAttention:
			default:
				t.Fatalf("good session: status %x %v", r.status, r.sense)
			}
		}
		if !ok {
			t.Fatal("good session never got GOOD again")
		}
	}
	got := good.mustCmd(wire.Inquiry(false, 0, 96), nil, 96)
	if string(got[8:16]) != "TRISTORE" {
		t.Fatal("target stopped answering correctly")
	}
}

// TestTooLargeTransfer: a write beyond the Block Limits maximum is refused
// without soliciting 64 MiB of data.
func TestTooLargeTransfer(t *testing.T) {
	tt := startTarget(t, Config{})
	in, err := dial(t, tt.addr, loginOpts{target: tt.iqn, initialR2T: true})
	if err != nil {
		t.Fatal(err)
	}
	itt := in.nextITT()
	in.send(&wire.PDU{Opcode: wire.OpSCSICommand, Final: true, Write: true, ITT: itt, CmdSN: in.cmdSN,
		ExpectedDataLength: 64 << 20, CDB: wire.Write16(0, 131072, false)})
	in.cmdSN++
	r, err := in.recv()
	if err != nil || r.Opcode != wire.OpSCSIResponse || r.Status != wire.StatusCheckCondition {
		t.Fatalf("want CHECK CONDITION, got %v %v", r, err)
	}
	in.mustCmd(wire.TestUnitReady(), nil, 0)
}

// TestManySessions runs sessions in parallel, each writing and verifying
// its own region, with a mix of digests and burst settings.
func TestManySessions(t *testing.T) {
	tt := startTarget(t, Config{})
	const n = 8
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		go func() {
			in, err := dial(t, tt.addr, loginOpts{target: tt.iqn, isid: byte(20 + i), immediate: i%2 == 0,
				initialR2T: i%3 == 0, digests: i%4 == 1, maxBurst: 8192 << (i % 4)})
			if err != nil {
				errs <- err
				return
			}
			defer in.nc.Close()
			base := uint32(i) * 2048 // 1 MiB per session
			for k := 0; k < 8; k++ {
				data := randBytes(128 << 10)
				lba := base + uint32(k)*256
				r, err := in.cmd(wire.Write10(lba, 256, k%3 == 0), data, 0)
				if err != nil || r.status != 0 {
					errs <- fmt.Errorf("session %d write: %v %+v", i, err, r)
					return
				}
				r, err = in.cmd(wire.Read10(lba, 256, false), nil, len(data))
				if err != nil || r.status != 0 || !bytes.Equal(r.data, data) {
					errs <- fmt.Errorf("session %d read back differs: %v", i, err)
					return
				}
			}
			errs <- nil
		}()
	}
	for i := 0; i < n; i++ {
		select {
		case err := <-errs:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(2 * time.Minute):
			t.Fatal("sessions did not finish")
		}
	}
}
