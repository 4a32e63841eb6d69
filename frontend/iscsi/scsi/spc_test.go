package scsi

import (
	"bytes"
	"context"
	"encoding/binary"
	"strings"
	"testing"

	"github.com/tristore/tristore/proto/iscsi"
)

// Table tests for the SPC-4 side of the device server (spc.go, rsoc.go,
// lu.go): each case is a CDB against a fresh memory LU and the status,
// sense key/ASC (and field pointer) or data it must produce.

// wantSense fails unless r is CHECK CONDITION with key and asc.
func wantSense(t *testing.T, what string, r *Response, key uint8, asc uint16) iscsi.Sense {
	t.Helper()
	if r.Status != iscsi.StatusCheckCondition {
		t.Fatalf("%s: status %#x, want CHECK CONDITION %x/%04x", what, r.Status, key, asc)
	}
	s, err := iscsi.ParseSense(r.Sense)
	if err != nil {
		t.Fatalf("%s: sense: %v", what, err)
	}
	if s.Key != key || s.ASC != asc {
		t.Fatalf("%s: sense %x/%04x, want %x/%04x", what, s.Key, s.ASC, key, asc)
	}
	return s
}

func wantGood(t *testing.T, what string, r *Response) []byte {
	t.Helper()
	if r.Status != iscsi.StatusGood {
		s, _ := iscsi.ParseSense(r.Sense)
		t.Fatalf("%s: status %#x sense %x/%04x, want GOOD", what, r.Status, s.Key, s.ASC)
	}
	return r.DataIn
}

func cdb6(op byte, b ...byte) []byte  { return append([]byte{op}, pad(b, 5)...) }
func cdb10(op byte, b ...byte) []byte { return append([]byte{op}, pad(b, 9)...) }
func cdb12(op byte, b ...byte) []byte { return append([]byte{op}, pad(b, 11)...) }
func cdb16b(op byte, b ...byte) []byte {
	return append([]byte{op}, pad(b, 15)...)
}
func pad(b []byte, n int) []byte { return append(append([]byte{}, b...), make([]byte, n-len(b))...) }

func TestInquiry(t *testing.T) {
	lu, _ := newLU()
	std := wantGood(t, "standard", exec(lu, "A", iscsi.Inquiry(false, 0, 255), nil))
	if len(std) != 96 || std[0] != 0 || std[2] != 0x06 || std[7]&0x02 == 0 ||
		string(std[8:16]) != "TRISTORE" || strings.TrimSpace(string(std[16:32])) != "VOLUME" {
		t.Fatalf("standard data % x", std)
	}
	if d := wantGood(t, "alloc 36", exec(lu, "A", iscsi.Inquiry(false, 0, 36), nil)); len(d) != 36 {
		t.Fatalf("allocation length 36 gave %d bytes", len(d))
	}
	pages := wantGood(t, "VPD 0", exec(lu, "A", iscsi.Inquiry(true, 0, 255), nil))
	if !bytes.Equal(pages[4:], []byte{0x00, 0x80, 0x83, 0xb0, 0xb1, 0xb2}) || int(pages[3]) != len(pages)-4 {
		t.Fatalf("supported pages % x", pages)
	}
	// Every listed page is answered, with its own code in byte 1 and a
	// page length that matches.
	for _, p := range pages[4:] {
		d := wantGood(t, "VPD", exec(lu, "A", iscsi.Inquiry(true, p, 1024), nil))
		if d[1] != p || int(binary.BigEndian.Uint16(d[2:]))+4 != len(d) {
			t.Errorf("VPD %#x: header % x, %d bytes", p, d[:4], len(d))
		}
	}
	if d := wantGood(t, "serial", exec(lu, "A", iscsi.Inquiry(true, 0x80, 255), nil)); string(d[4:]) != "0011223344556677" {
		t.Errorf("serial %q", d[4:])
	}
	id := wantGood(t, "device id", exec(lu, "A", iscsi.Inquiry(true, 0x83, 1024), nil))
	if id[4]&0x0f != 0x01 || id[5]&0x0f != 0x03 || id[8]>>4 != 3 || !bytes.Contains(id, []byte("iqn.x:y:z\x00")) ||
		!bytes.Contains(id, []byte("TRISTORE0011223344556677")) {
		t.Errorf("device identification % x", id)
	}
	bl := wantGood(t, "block limits", exec(lu, "A", iscsi.Inquiry(true, 0xb0, 255), nil))
	if bl[5] != maxCompareAndWriteBlocks || binary.BigEndian.Uint32(bl[8:]) != (32<<20)/512 ||
		binary.BigEndian.Uint32(bl[20:]) != maxUnmapBlocks || binary.BigEndian.Uint32(bl[24:]) != maxUnmapDescriptors ||
		binary.BigEndian.Uint64(bl[36:]) != maxWriteSameBlocks {
		t.Errorf("block limits % x", bl)
	}
	lbp := wantGood(t, "provisioning", exec(lu, "A", iscsi.Inquiry(true, 0xb2, 255), nil))
	if lbp[5]&0xe4 != 0xe4 || lbp[6] != 0 { // memDev cannot punch holes: not thin
		t.Errorf("logical block provisioning % x", lbp)
	}
	for _, c := range []struct {
		name string
		cdb  []byte
		ptr  uint16
	}{
		{"unknown VPD page", iscsi.Inquiry(true, 0x99, 255), 2},
		{"page code without EVPD", cdb6(iscsi.ScsiInquiry, 0, 0x80, 0, 255), 2},
		{"CMDDT", cdb6(iscsi.ScsiInquiry, 0x02, 0, 0, 255), 1},
	} {
		s := wantSense(t, c.name, exec(lu, "A", c.cdb, nil), iscsi.SenseIllegalRequest, iscsi.ASCInvalidFieldInCDB)
		if !s.FieldPointerValid || !s.FieldInCDB || s.FieldPointer != c.ptr {
			t.Errorf("%s: field pointer %+v, want CDB byte %d", c.name, s, c.ptr)
		}
	}
}

// thinDev is a memDev that can punch holes (so the LU is thin-provisioned)
// and reports provisioning for GET LBA STATUS: the first half mapped.
type thinDev struct{ *memDev }

func (d thinDev) CanPunchHoles() bool { return true }
func (d thinDev) Provisioning(off int64) (bool, int64, error) {
	half := d.Size() / 2
	if off < half {
		return true, half - off, nil
	}
	return false, d.Size() - off, nil
}

func TestThinProvisioningAndLBAStatus(t *testing.T) {
	d := thinDev{&memDev{b: make([]byte, 1<<20)}}
	lu := New(Config{Dev: d})
	lbp := wantGood(t, "provisioning", exec(lu, "A", iscsi.Inquiry(true, 0xb2, 255), nil))
	if lbp[6] != 0x02 {
		t.Fatalf("thin device not reported thin: % x", lbp)
	}
	rc := wantGood(t, "capacity 16", exec(lu, "A", iscsi.ReadCapacity16(32), nil))
	if c, _ := iscsi.ParseCapacity16(rc); !c.LBPME || !c.LBPRZ {
		t.Fatalf("capacity %+v", c)
	}
	gls := cdb16b(iscsi.ScsiServiceActionIn16, iscsi.SAGetLBAStatus)
	binary.BigEndian.PutUint32(gls[10:], 1024)
	st := wantGood(t, "GET LBA STATUS", exec(lu, "A", gls, nil))
	// Two extents: blocks 0..1023 mapped, 1024..2047 deallocated.
	if binary.BigEndian.Uint32(st) != 4+32 || binary.BigEndian.Uint64(st[8:]) != 0 || binary.BigEndian.Uint32(st[16:]) != 1024 || st[20] != 0 ||
		binary.BigEndian.Uint64(st[24:]) != 1024 || binary.BigEndian.Uint32(st[32:]) != 1024 || st[36] != 1 {
		t.Fatalf("lba status % x", st)
	}
	binary.BigEndian.PutUint64(gls[2:], 2048)
	wantSense(t, "GET LBA STATUS past the end", exec(lu, "A", gls, nil), iscsi.SenseIllegalRequest, iscsi.ASCLBAOutOfRange)
}

func TestModeSense(t *testing.T) {
	lu, _ := newLU()
	ms6 := func(pc, page, sub byte, dbd bool, alloc byte) []byte {
		b1 := byte(0)
		if dbd {
			b1 = 0x08
		}
		return cdb6(iscsi.ScsiModeSense6, b1, pc<<6|page, sub, alloc)
	}
	ms10 := func(pc, page byte, llbaa bool, alloc uint16) []byte {
		c := cdb10(iscsi.ScsiModeSense10)
		if llbaa {
			c[1] = 0x10
		}
		c[2] = pc<<6 | page
		binary.BigEndian.PutUint16(c[7:], alloc)
		return c
	}
	// MODE SENSE(6), caching page, current values: header, 8-byte block
	// descriptor (2048 blocks of 512), page 8 with WCE set, DPOFUA.
	d := wantGood(t, "sense6 caching", exec(lu, "A", ms6(0, pageCaching, 0, false, 255), nil))
	if int(d[0]) != len(d)-1 || d[2] != 0x10 || d[3] != 8 || binary.BigEndian.Uint32(d[4:]) != 2048 ||
		binary.BigEndian.Uint32(d[8:])&0xffffff != 512 || d[12] != pageCaching || d[14]&0x04 == 0 {
		t.Fatalf("mode sense 6: % x", d)
	}
	// DBD: no block descriptor.
	if d := wantGood(t, "sense6 dbd", exec(lu, "A", ms6(0, pageCaching, 0, true, 255), nil)); d[3] != 0 || d[4] != pageCaching {
		t.Fatalf("mode sense 6 DBD: % x", d)
	}
	// All pages: caching, control, IEC in order; also with subpage 0xff.
	for _, sub := range []byte{0, 0xff} {
		d := wantGood(t, "all pages", exec(lu, "A", ms6(0, pageAll, sub, true, 255), nil))
		if len(d) != 4+20+12+12 || d[4] != pageCaching || d[24] != pageControl || d[36] != pageIEC {
			t.Fatalf("all pages (sub %#x): % x", sub, d)
		}
	}
	// Changeable values: only WCE; default: WCE.
	if d := wantGood(t, "changeable", exec(lu, "A", ms6(1, pageCaching, 0, true, 255), nil)); d[6] != 0x04 || !isZero(d[7:]) {
		t.Fatalf("changeable caching page % x", d)
	}
	if d := wantGood(t, "changeable control", exec(lu, "A", ms6(1, pageControl, 0, true, 255), nil)); !isZero(d[6:]) {
		t.Fatalf("changeable control page % x", d)
	}
	// MODE SENSE(10) with LLBAA: a 16-byte descriptor.
	d = wantGood(t, "sense10 llbaa", exec(lu, "A", ms10(0, pageControl, true, 1024), nil))
	if int(binary.BigEndian.Uint16(d))+2 != len(d) || d[4]&0x01 == 0 || binary.BigEndian.Uint16(d[6:]) != 16 ||
		binary.BigEndian.Uint64(d[8:]) != 2048 || binary.BigEndian.Uint32(d[20:]) != 512 || d[24] != pageControl {
		t.Fatalf("mode sense 10 LLBAA: % x", d)
	}
	d = wantGood(t, "sense10", exec(lu, "A", ms10(2, pageIEC, false, 1024), nil))
	if binary.BigEndian.Uint16(d[6:]) != 8 || d[16] != pageIEC {
		t.Fatalf("mode sense 10: % x", d)
	}
	// Allocation length cuts the data (the header still says the full length).
	if d := wantGood(t, "alloc", exec(lu, "A", ms6(0, pageAll, 0, false, 10), nil)); len(d) != 10 || int(d[0]) != 3+8+44 {
		t.Fatalf("cut: % x", d)
	}
	wantSense(t, "saved values", exec(lu, "A", ms6(3, pageCaching, 0, false, 255), nil), iscsi.SenseIllegalRequest, iscsi.ASCSavingNotSupported)
	wantSense(t, "unknown page", exec(lu, "A", ms6(0, 0x19, 0, false, 255), nil), iscsi.SenseIllegalRequest, iscsi.ASCInvalidFieldInCDB)
	wantSense(t, "subpage", exec(lu, "A", ms6(0, pageCaching, 1, false, 255), nil), iscsi.SenseIllegalRequest, iscsi.ASCInvalidFieldInCDB)
}

func TestModeSelect(t *testing.T) {
	cachingOff := func(lu *LU) []byte {
		p := lu.modePage(pageCaching, 0)
		p[2] &^= 0x04
		return p
	}
	sel10 := func(params []byte, b1 byte) []byte {
		c := cdb10(iscsi.ScsiModeSelect10, b1)
		binary.BigEndian.PutUint16(c[7:], uint16(len(params)))
		return c
	}
	for _, c := range []struct {
		name   string
		params func(lu *LU) []byte
		b1     byte
		plen   int // -1: len(params)
		key    uint8
		asc    uint16
		wce    bool // WCE after the command
	}{
		{name: "WCE off", params: func(lu *LU) []byte { return append(make([]byte, 8), cachingOff(lu)...) }, b1: 0x10, plen: -1, wce: false},
		{name: "with block descriptor", params: func(lu *LU) []byte {
			bd := make([]byte, 8)
			binary.BigEndian.PutUint32(bd[4:], 512)
			h := make([]byte, 8)
			h[7] = 8
			return append(append(h, bd...), cachingOff(lu)...)
		}, b1: 0x10, plen: -1, wce: false},
		{name: "empty list", params: func(*LU) []byte { return nil }, b1: 0x10, plen: 0, wce: true},
		{name: "SP", params: func(lu *LU) []byte { return append(make([]byte, 8), cachingOff(lu)...) }, b1: 0x11, plen: -1,
			key: iscsi.SenseIllegalRequest, asc: iscsi.ASCInvalidFieldInCDB, wce: true},
		{name: "no PF", params: func(lu *LU) []byte { return append(make([]byte, 8), cachingOff(lu)...) }, b1: 0, plen: -1,
			key: iscsi.SenseIllegalRequest, asc: iscsi.ASCInvalidFieldInCDB, wce: true},
		{name: "short data-out", params: func(lu *LU) []byte { return make([]byte, 8) }, b1: 0x10, plen: 28,
			key: iscsi.SenseIllegalRequest, asc: iscsi.ASCParameterListLength, wce: true},
		{name: "short header", params: func(lu *LU) []byte { return make([]byte, 6) }, b1: 0x10, plen: -1,
			key: iscsi.SenseIllegalRequest, asc: iscsi.ASCParameterListLength, wce: true},
		{name: "wrong block length", params: func(lu *LU) []byte {
			bd := make([]byte, 8)
			binary.BigEndian.PutUint32(bd[4:], 4096)
			h := make([]byte, 8)
			h[7] = 8
			return append(append(h, bd...), cachingOff(lu)...)
		}, b1: 0x10, plen: -1, key: iscsi.SenseIllegalRequest, asc: iscsi.ASCInvalidFieldInParamList, wce: true},
		{name: "unknown page", params: func(lu *LU) []byte { return append(make([]byte, 8), 0x19, 2, 0, 0) }, b1: 0x10, plen: -1,
			key: iscsi.SenseIllegalRequest, asc: iscsi.ASCInvalidFieldInParamList, wce: true},
		{name: "subpage format", params: func(lu *LU) []byte { p := cachingOff(lu); p[0] |= 0x40; return append(make([]byte, 8), p...) },
			b1: 0x10, plen: -1, key: iscsi.SenseIllegalRequest, asc: iscsi.ASCInvalidFieldInParamList, wce: true},
		{name: "truncated page", params: func(lu *LU) []byte { return append(make([]byte, 8), cachingOff(lu)[:10]...) }, b1: 0x10, plen: -1,
			key: iscsi.SenseIllegalRequest, asc: iscsi.ASCParameterListLength, wce: true},
		{name: "unchangeable control field", params: func(lu *LU) []byte {
			p := lu.modePage(pageControl, 0)
			p[3] = 0
			return append(make([]byte, 8), p...)
		}, b1: 0x10, plen: -1, key: iscsi.SenseIllegalRequest, asc: iscsi.ASCInvalidFieldInParamList, wce: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			lu, d := newLU()
			params := c.params(lu)
			cdb := sel10(params, c.b1)
			if c.plen >= 0 {
				binary.BigEndian.PutUint16(cdb[7:], uint16(c.plen))
			}
			r := exec(lu, "A", cdb, params)
			if c.key != 0 {
				wantSense(t, c.name, r, c.key, c.asc)
			} else {
				wantGood(t, c.name, r)
			}
			if lu.wce.Load() != c.wce {
				t.Fatalf("WCE %v, want %v", lu.wce.Load(), c.wce)
			}
			// The caching page and the write path agree with WCE.
			p := wantGood(t, "sense", exec(lu, "A", cdb6(iscsi.ScsiModeSense6, 0x08, pageCaching, 0, 255), nil))
			if (p[6]&0x04 != 0) != c.wce {
				t.Fatalf("mode page WCE bit % x, want %v", p, c.wce)
			}
			exec(lu, "A", iscsi.Write10(0, 1, false), make([]byte, 512))
			if (d.fuas == 1) == c.wce {
				t.Fatalf("a plain write with WCE=%v made %d FUA writes", c.wce, d.fuas)
			}
		})
	}
}

func TestReportLUNsAndOtherSPC(t *testing.T) {
	lu, _ := newLU()
	d := wantGood(t, "report luns", exec(lu, "A", iscsi.ReportLUNs(64), nil))
	if luns, err := iscsi.ParseReportLUNs(d); err != nil || len(luns) != 1 || luns[0] != 0 {
		t.Fatalf("report luns % x: %v %v", d, luns, err)
	}
	for _, c := range []struct {
		name     string
		cdb      []byte
		key      uint8
		asc      uint16
		wantData []byte
	}{
		{name: "report luns alloc 8", cdb: iscsi.ReportLUNs(8), key: iscsi.SenseIllegalRequest, asc: iscsi.ASCInvalidFieldInCDB},
		{name: "report luns select 3", cdb: cdb12(iscsi.ScsiReportLUNs, 0, 3, 0, 0, 0, 0, 0, 0, 64), key: iscsi.SenseIllegalRequest, asc: iscsi.ASCInvalidFieldInCDB},
		{name: "test unit ready", cdb: iscsi.TestUnitReady()},
		{name: "start", cdb: cdb6(iscsi.ScsiStartStopUnit, 0, 0, 0, 1)},
		{name: "power condition", cdb: cdb6(iscsi.ScsiStartStopUnit, 0, 0, 0, 0x10), key: iscsi.SenseIllegalRequest, asc: iscsi.ASCInvalidFieldInCDB},
		{name: "prevent", cdb: cdb6(iscsi.ScsiPreventAllow, 0, 0, 0, 1)},
		{name: "request sense, nothing pending", cdb: cdb6(iscsi.ScsiRequestSense, 0, 0, 0, 18),
			wantData: iscsi.Sense{Key: iscsi.SenseNoSense}.Marshal()},
		{name: "read defect data 10", cdb: cdb10(0x37, 0, 0x1d, 0, 0, 0, 0, 0, 4), wantData: []byte{0, 0x1d, 0, 0}},
		{name: "read defect data 12", cdb: cdb12(0xb7, 0x0d, 0, 0, 0, 0, 0, 0, 0, 8), wantData: []byte{0, 0x0d, 0, 0, 0, 0, 0, 0}},
		{name: "unsupported opcode", cdb: cdb6(0x04), key: iscsi.SenseIllegalRequest, asc: iscsi.ASCInvalidOpcode},
		{name: "unsupported 16-byte opcode", cdb: cdb16b(0x9f), key: iscsi.SenseIllegalRequest, asc: iscsi.ASCInvalidOpcode},
		{name: "vendor opcode", cdb: cdb6(0xc0), key: iscsi.SenseIllegalRequest, asc: iscsi.ASCInvalidOpcode},
		{name: "empty CDB", cdb: []byte{}, key: iscsi.SenseIllegalRequest, asc: iscsi.ASCInvalidOpcode},
		{name: "CDB shorter than its group", cdb: []byte{iscsi.ScsiRead10, 0, 0}, key: iscsi.SenseIllegalRequest, asc: iscsi.ASCInvalidFieldInCDB},
		{name: "read capacity 10 PMI", cdb: cdb10(iscsi.ScsiReadCapacity10, 0, 0, 0, 0, 0, 0, 0, 1), key: iscsi.SenseIllegalRequest, asc: iscsi.ASCInvalidFieldInCDB},
		{name: "service action in 16 unknown", cdb: cdb16b(iscsi.ScsiServiceActionIn16, 0x11), key: iscsi.SenseIllegalRequest, asc: iscsi.ASCInvalidFieldInCDB},
	} {
		r := exec(lu, "A", c.cdb, nil)
		if c.key != 0 {
			wantSense(t, c.name, r, c.key, c.asc)
			continue
		}
		d := wantGood(t, c.name, r)
		if c.wantData != nil && !bytes.Equal(d, c.wantData) {
			t.Errorf("%s: data % x, want % x", c.name, d, c.wantData)
		}
	}
}

func TestNoSuchLUNAndTooLarge(t *testing.T) {
	d := NoSuchLUN(&Request{CDB: iscsi.Inquiry(false, 0, 255)})
	if d.Status != 0 || d.DataIn[0] != 0x7f {
		t.Fatalf("INQUIRY of a missing LUN: %x % x", d.Status, d.DataIn)
	}
	if r := NoSuchLUN(&Request{CDB: iscsi.ReportLUNs(64)}); r.Status != 0 || len(r.DataIn) != 16 {
		t.Fatalf("REPORT LUNS on a missing LUN: %x % x", r.Status, r.DataIn)
	}
	wantSense(t, "read of a missing LUN", NoSuchLUN(&Request{CDB: iscsi.Read10(0, 1, false)}), iscsi.SenseIllegalRequest, iscsi.ASCLUNNotSupported)
	wantSense(t, "empty CDB to a missing LUN", NoSuchLUN(&Request{}), iscsi.SenseIllegalRequest, iscsi.ASCLUNNotSupported)
	wantSense(t, "too large", TooLarge(), iscsi.SenseIllegalRequest, iscsi.ASCInvalidFieldInCDB)
}

func TestUnitAttentions(t *testing.T) {
	lu, d := newLU()
	lu.Reset("A", false) // LOGICAL UNIT RESET from A: B gets 29/03
	wantGood(t, "A after its own reset", exec(lu, "A", iscsi.TestUnitReady(), nil))
	wantGood(t, "INQUIRY is not held up by a UA", exec(lu, "B", iscsi.Inquiry(false, 0, 36), nil))
	wantSense(t, "B after reset", exec(lu, "B", iscsi.TestUnitReady(), nil), iscsi.SenseUnitAttention, 0x2903)
	wantGood(t, "B again", exec(lu, "B", iscsi.TestUnitReady(), nil))
	// A target reset: 29/02, reported by REQUEST SENSE (fixed and descriptor format) and cleared by it.
	lu.Reset("", true)
	s := wantGood(t, "request sense", exec(lu, "B", cdb6(iscsi.ScsiRequestSense, 0, 0, 0, 252), nil))
	if ps, err := iscsi.ParseSense(s); err != nil || ps.Key != iscsi.SenseUnitAttention || ps.ASC != 0x2902 {
		t.Fatalf("request sense % x: %+v %v", s, ps, err)
	}
	wantGood(t, "B after request sense", exec(lu, "B", iscsi.TestUnitReady(), nil))
	s = wantGood(t, "request sense desc", exec(lu, "A", cdb6(iscsi.ScsiRequestSense, 1, 0, 0, 252), nil))
	if s[0] != 0x72 || s[1] != iscsi.SenseUnitAttention || s[2] != 0x29 || s[3] != 0x02 {
		t.Fatalf("descriptor sense % x", s)
	}
	// A resized device: CAPACITY DATA HAS CHANGED for every nexus, once.
	d.b = append(d.b, make([]byte, 1<<20)...)
	for _, n := range []string{"A", "B"} {
		wantSense(t, "resize "+n, exec(lu, n, iscsi.Read10(0, 1, false), nil), iscsi.SenseUnitAttention, iscsi.ASCCapacityDataChanged)
		wantGood(t, "after resize "+n, exec(lu, n, iscsi.Read10(0, 1, false), nil))
	}
	rc := wantGood(t, "new capacity", exec(lu, "A", iscsi.ReadCapacity10(), nil))
	if c, _ := iscsi.ParseCapacity10(rc); c.LastLBA != 4095 {
		t.Fatalf("capacity after resize %+v", c)
	}
	// At most 8 unit attentions queue per nexus; a removed nexus gets none.
	for range 20 {
		lu.AddUA("", iscsi.Sense{Key: iscsi.SenseUnitAttention, ASC: iscsi.ASCParametersChanged})
	}
	n := 0
	for exec(lu, "A", iscsi.TestUnitReady(), nil).Status != 0 && n < 50 {
		n++
	}
	if n != 8 {
		t.Fatalf("%d unit attentions queued, want 8", n)
	}
	lu.RemoveNexus("B")
	lu.AddUA("", iscsi.Sense{Key: iscsi.SenseUnitAttention, ASC: iscsi.ASCParametersChanged})
	if _, ok := lu.popUA("B"); ok {
		t.Fatal("a removed nexus got a unit attention")
	}
	if lu.Device() != d {
		t.Fatal("Device()")
	}
}

func TestReportSupportedOpcodesOptions(t *testing.T) {
	lu, _ := newLU()
	rsoc := func(opts, op byte, sa uint16, rctd bool) []byte {
		c := cdb12(iscsi.ScsiMaintenanceIn, iscsi.SAReportSupportedOps, opts, op)
		if rctd {
			c[2] |= 0x80
		}
		binary.BigEndian.PutUint16(c[4:], sa)
		binary.BigEndian.PutUint32(c[6:], 1<<16)
		return c
	}
	// All commands with timeouts: 8-byte descriptors each followed by a
	// 12-byte timeouts descriptor; every reported opcode is executable.
	d := wantGood(t, "all+rctd", exec(lu, "A", rsoc(0, 0, 0, true), nil))
	if int(binary.BigEndian.Uint32(d))+4 != len(d) || (len(d)-4)%20 != 0 {
		t.Fatalf("all commands with RCTD: %d bytes", len(d))
	}
	for i := 4; i < len(d); i += 20 {
		if d[i+5]&0x02 == 0 || int(binary.BigEndian.Uint16(d[i+6:])) != iscsi.CDBLen(d[i]) {
			t.Fatalf("descriptor % x", d[i:i+20])
		}
		if _, ok := handlers[d[i]]; !ok {
			t.Fatalf("reported opcode %#x has no handler", d[i])
		}
	}
	for _, c := range []struct {
		name    string
		cdb     []byte
		support byte // 0x01 not supported, 0x03 supported; 0: error expected
		usage   int
	}{
		{"READ(10)", rsoc(1, iscsi.ScsiRead10, 0, false), 3, 10},
		{"WRITE(16) with timeouts", rsoc(1, iscsi.ScsiWrite16, 0, true), 3, 16},
		{"opcode 0x04", rsoc(1, 0x04, 0, false), 1, 0},
		{"READ CAPACITY(16) by service action", rsoc(2, iscsi.ScsiServiceActionIn16, iscsi.SAReadCapacity16, false), 3, 16},
		{"unknown service action", rsoc(2, iscsi.ScsiServiceActionIn16, 0x1f, false), 1, 0},
		{"service action form for an opcode without", rsoc(2, iscsi.ScsiRead10, 0, false), 0, 0},
		{"plain form for an opcode with service actions", rsoc(1, iscsi.ScsiPersistResIn, 0, false), 0, 0},
		{"bad reporting option", rsoc(5, 0, 0, false), 0, 0},
	} {
		r := exec(lu, "A", c.cdb, nil)
		if c.support == 0 {
			wantSense(t, c.name, r, iscsi.SenseIllegalRequest, iscsi.ASCInvalidFieldInCDB)
			continue
		}
		d := wantGood(t, c.name, r)
		if d[1]&0x07 != c.support || int(binary.BigEndian.Uint16(d[2:])) != c.usage {
			t.Errorf("%s: % x", c.name, d)
		}
		if c.usage > 0 && d[4] != c.cdb[3] {
			t.Errorf("%s: usage map starts with %#x", c.name, d[4])
		}
	}
	bad := rsoc(0, 0, 0, false)
	bad[1] = 0x0b
	wantSense(t, "other MAINTENANCE IN action", exec(lu, "A", bad, nil), iscsi.SenseIllegalRequest, iscsi.ASCInvalidFieldInCDB)
	_ = context.Background
}
