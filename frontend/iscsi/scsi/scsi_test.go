package scsi

import (
	"bytes"
	"context"
	"encoding/binary"
	"testing"

	"github.com/tristore/tristore/blockdev"
	"github.com/tristore/tristore/proto/iscsi"
)

// memDev is an in-memory Device that counts flushes and FUA writes.
type memDev struct {
	b             []byte
	flushes, fuas int
	unmaps        int
}

func (d *memDev) ReadAt(_ context.Context, p []byte, off int64) (int, error) {
	if off+int64(len(p)) > int64(len(d.b)) {
		return 0, blockdev.ErrOutOfRange
	}
	return copy(p, d.b[off:]), nil
}
func (d *memDev) WriteAt(_ context.Context, p []byte, off int64) (int, error) {
	if off+int64(len(p)) > int64(len(d.b)) {
		return 0, blockdev.ErrOutOfRange
	}
	return copy(d.b[off:], p), nil
}
func (d *memDev) WriteAtFUA(ctx context.Context, p []byte, off int64) (int, error) {
	d.fuas++
	return d.WriteAt(ctx, p, off)
}
func (d *memDev) Unmap(_ context.Context, off, n int64) error {
	d.unmaps++
	clear(d.b[off : off+n])
	return nil
}
func (d *memDev) Flush(context.Context) error { d.flushes++; return nil }
func (d *memDev) Size() int64                 { return int64(len(d.b)) }
func (d *memDev) BlockSize() int              { return 512 }
func (d *memDev) Close() error                { return nil }

func newLU() (*LU, *memDev) {
	d := &memDev{b: make([]byte, 1<<20)}
	lu := New(Config{Dev: d, Serial: "0011223344556677", TargetName: "iqn.x:y:z"})
	lu.AddNexus("A")
	lu.AddNexus("B")
	return lu, d
}

func exec(lu *LU, nexus string, cdb []byte, out []byte) *Response {
	return lu.Execute(context.Background(), &Request{CDB: cdb, DataOut: out, ExpectedLen: uint32(len(out)), Nexus: nexus})
}

func senseOf(t *testing.T, r *Response) iscsi.Sense {
	t.Helper()
	s, err := iscsi.ParseSense(r.Sense)
	if err != nil {
		t.Fatalf("status %x without sense: %v", r.Status, err)
	}
	return s
}

func TestWriteCacheAndFUA(t *testing.T) {
	lu, d := newLU()
	exec(lu, "A", iscsi.Write10(0, 1, false), make([]byte, 512))
	exec(lu, "A", iscsi.Write10(0, 1, true), make([]byte, 512))
	if d.fuas != 1 {
		t.Fatalf("FUA writes %d, want 1", d.fuas)
	}
	if r := exec(lu, "A", iscsi.SyncCache10(), nil); r.Status != 0 || d.flushes != 1 {
		t.Fatalf("sync cache: %x flushes %d", r.Status, d.flushes)
	}
	// MODE SELECT turning WCE off makes every write synchronous.
	page := lu.modePage(pageCaching, 0)
	page[2] &^= 0x04
	params := append([]byte{0, 0, 0, 0}, page...)
	if r := exec(lu, "A", []byte{iscsi.ScsiModeSelect6, 0x10, 0, 0, byte(len(params)), 0}, params); r.Status != 0 {
		t.Fatalf("mode select: %v", senseOf(t, r))
	}
	exec(lu, "A", iscsi.Write10(0, 1, false), make([]byte, 512))
	if d.fuas != 2 {
		t.Fatalf("write with WCE=0 was not synchronous")
	}
	// Changing an unchangeable field is refused.
	page[3] = 0xff
	params = append([]byte{0, 0, 0, 0}, page...)
	if r := exec(lu, "A", []byte{iscsi.ScsiModeSelect6, 0x10, 0, 0, byte(len(params)), 0}, params); senseOf(t, r).ASC != iscsi.ASCInvalidFieldInParamList {
		t.Fatalf("bad mode select accepted")
	}
}

func TestCompareAndWriteVerify(t *testing.T) {
	lu, d := newLU()
	a := bytes.Repeat([]byte{'a'}, 512)
	b := bytes.Repeat([]byte{'b'}, 512)
	exec(lu, "A", iscsi.Write10(5, 1, false), a)
	caw := make([]byte, 16)
	caw[0] = iscsi.ScsiCompareAndWrite
	binary.BigEndian.PutUint64(caw[2:], 5)
	caw[13] = 1
	if r := exec(lu, "A", caw, append(append([]byte{}, a...), b...)); r.Status != 0 {
		t.Fatalf("CAW: %v", senseOf(t, r))
	}
	if !bytes.Equal(d.b[5*512:6*512], b) {
		t.Fatal("CAW did not write")
	}
	r := exec(lu, "A", caw, append(append([]byte{}, a...), a...))
	if s := senseOf(t, r); s.Key != iscsi.SenseMiscompare || !s.InfoValid || s.Info != 0 {
		t.Fatalf("miscompare sense %+v", s)
	}
	v := []byte{iscsi.ScsiVerify10, 0x02, 0, 0, 0, 5, 0, 0, 1, 0}
	if r := exec(lu, "A", v, b); r.Status != 0 {
		t.Fatalf("verify equal: %v", senseOf(t, r))
	}
	bad := append([]byte{}, b...)
	bad[100] = 'x'
	if s := senseOf(t, exec(lu, "A", v, bad)); s.Key != iscsi.SenseMiscompare || s.Info != 100 {
		t.Fatalf("verify miscompare %+v", s)
	}
}

func prOut(sa, typ byte, key, sark uint64) ([]byte, []byte) {
	cdb := make([]byte, 10)
	cdb[0] = iscsi.ScsiPersistResOut
	cdb[1] = sa
	cdb[2] = typ
	binary.BigEndian.PutUint32(cdb[5:], 24)
	p := make([]byte, 24)
	binary.BigEndian.PutUint64(p, key)
	binary.BigEndian.PutUint64(p[8:], sark)
	return cdb, p
}

func TestPersistentReservations(t *testing.T) {
	lu, _ := newLU()
	do := func(n string, sa, typ byte, key, sark uint64) uint8 {
		c, p := prOut(sa, typ, key, sark)
		return exec(lu, n, c, p).Status
	}
	if st := do("A", 0, 0, 0, 0xa); st != 0 {
		t.Fatalf("register A: %x", st)
	}
	if st := do("B", 0, 0, 0, 0xb); st != 0 {
		t.Fatalf("register B: %x", st)
	}
	if st := do("A", 1, prWE, 0xa, 0); st != 0 {
		t.Fatalf("reserve: %x", st)
	}
	w := iscsi.Write10(0, 1, false)
	if r := exec(lu, "B", w, make([]byte, 512)); r.Status != iscsi.StatusReservationConflict {
		t.Fatalf("B write under WE: %x", r.Status)
	}
	if r := exec(lu, "B", iscsi.Read10(0, 1, false), nil); r.Status != 0 {
		t.Fatalf("B read under WE: %x", r.Status)
	}
	if st := do("B", 1, prWE, 0xb, 0); st != iscsi.StatusReservationConflict {
		t.Fatalf("B reserve: %x", st)
	}
	// B preempts A.
	if st := do("B", 4, prEA, 0xb, 0xa); st != 0 {
		t.Fatalf("preempt: %x", st)
	}
	if r := exec(lu, "A", iscsi.Read10(0, 1, false), nil); r.Status != iscsi.StatusCheckCondition || senseOf(t, r).Key != iscsi.SenseUnitAttention {
		t.Fatalf("A after preempt should see a unit attention first: %x", r.Status)
	}
	if r := exec(lu, "A", iscsi.Read10(0, 1, false), nil); r.Status != iscsi.StatusReservationConflict {
		t.Fatalf("A read under EA: %x", r.Status)
	}
	in := make([]byte, 10)
	in[0] = iscsi.ScsiPersistResIn
	in[1] = 1
	binary.BigEndian.PutUint16(in[7:], 64)
	r := exec(lu, "A", in, nil)
	if r.Status != 0 || len(r.DataIn) != 24 || binary.BigEndian.Uint64(r.DataIn[8:]) != 0xb || r.DataIn[21] != prEA {
		t.Fatalf("read reservation: %x % x", r.Status, r.DataIn)
	}
	if st := do("B", 3, 0, 0xb, 0); st != 0 {
		t.Fatalf("clear: %x", st)
	}
	if r := exec(lu, "A", iscsi.Write10(0, 1, false), make([]byte, 512)); r.Status != 0 {
		t.Fatalf("write after clear: %x", r.Status)
	}
	// SPC-2 RESERVE(6) from A blocks B until released.
	if r := exec(lu, "A", []byte{iscsi.ScsiReserve6, 0, 0, 0, 0, 0}, nil); r.Status != 0 {
		t.Fatalf("reserve6: %x", r.Status)
	}
	if r := exec(lu, "B", iscsi.TestUnitReady(), nil); r.Status != iscsi.StatusReservationConflict {
		t.Fatalf("B under reserve6: %x", r.Status)
	}
	lu.RemoveNexus("A") // I_T nexus loss releases it
	if r := exec(lu, "B", iscsi.TestUnitReady(), nil); r.Status != 0 {
		t.Fatalf("B after A left: %x", r.Status)
	}
}

func TestReportSupportedOpcodes(t *testing.T) {
	lu, _ := newLU()
	cdb := make([]byte, 12)
	cdb[0], cdb[1] = iscsi.ScsiMaintenanceIn, iscsi.SAReportSupportedOps
	binary.BigEndian.PutUint32(cdb[6:], 8192)
	r := exec(lu, "A", cdb, nil)
	if r.Status != 0 {
		t.Fatalf("status %x", r.Status)
	}
	n := int(binary.BigEndian.Uint32(r.DataIn))
	found := map[byte]bool{}
	for i := 4; i < 4+n; i += 8 {
		found[r.DataIn[i]] = true
	}
	for _, op := range []byte{iscsi.ScsiRead16, iscsi.ScsiWrite16, iscsi.ScsiUnmap, iscsi.ScsiPersistResOut, iscsi.ScsiInquiry} {
		if !found[op] {
			t.Errorf("opcode %02x not reported", op)
		}
	}
}
