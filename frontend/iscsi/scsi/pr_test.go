package scsi

import (
	"encoding/binary"
	"testing"

	"github.com/tristore/tristore/proto/iscsi"
)

// prIn runs PERSISTENT RESERVE IN with service action sa.
func prIn(t *testing.T, lu *LU, nexus string, sa byte) []byte {
	t.Helper()
	c := cdb10(iscsi.ScsiPersistResIn, sa)
	binary.BigEndian.PutUint16(c[7:], 1024)
	return wantGood(t, "PR IN", exec(lu, nexus, c, nil))
}

// TestReservationConflicts: for each persistent reservation type held by
// A (B registered, C not), which of B's and C's reads and writes conflict
// (SPC-4 table 43).
func TestReservationConflicts(t *testing.T) {
	read, write := iscsi.Read10(0, 1, false), iscsi.Write10(0, 1, false)
	for _, c := range []struct {
		name                                string
		typ                                 byte
		bRead, bWrite, cRead, cWrite, aHold bool // true = allowed
	}{
		{"write exclusive", prWE, true, false, true, false, true},
		{"exclusive access", prEA, false, false, false, false, true},
		{"write exclusive, registrants only", prWERO, true, true, true, false, true},
		{"exclusive access, registrants only", prEARO, true, true, false, false, true},
		{"write exclusive, all registrants", prWEAR, true, true, true, false, true},
		{"exclusive access, all registrants", prEAAR, true, true, false, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			lu, _ := newLU()
			lu.AddNexus("C")
			do := func(n string, sa, typ byte, key, sark uint64) *Response {
				cdb, p := prOut(sa, typ, key, sark)
				return exec(lu, n, cdb, p)
			}
			wantGood(t, "register A", do("A", 0, 0, 0, 0xa))
			wantGood(t, "register B", do("B", 6, 0, 0, 0xb)) // REGISTER AND IGNORE EXISTING KEY
			wantGood(t, "reserve", do("A", 1, c.typ, 0xa, 0))
			wantGood(t, "reserve again, same type", do("A", 1, c.typ, 0xa, 0))
			for _, x := range []struct {
				who  string
				cdb  []byte
				ok   bool
				name string
			}{
				{"A", read, true, "A read"}, {"A", write, true, "A write"},
				{"B", read, c.bRead, "B read"}, {"B", write, c.bWrite, "B write"},
				{"C", read, c.cRead, "C read"}, {"C", write, c.cWrite, "C write"},
				{"C", iscsi.Inquiry(false, 0, 36), true, "C inquiry"},
				{"C", iscsi.ReportLUNs(64), true, "C report luns"},
				{"C", iscsi.ReadCapacity10(), true, "C read capacity"},
			} {
				var out []byte
				if x.cdb[0] == iscsi.ScsiWrite10 {
					out = make([]byte, 512)
				}
				r := exec(lu, x.who, x.cdb, out)
				if x.ok && r.Status != 0 || !x.ok && r.Status != iscsi.StatusReservationConflict {
					t.Errorf("%s: status %#x, allowed %v", x.name, r.Status, x.ok)
				}
			}
			// RESERVE(6) under a persistent reservation conflicts, even for registrants.
			if r := exec(lu, "B", cdb6(iscsi.ScsiReserve6), nil); r.Status != iscsi.StatusReservationConflict {
				t.Errorf("RESERVE(6) under a PR: %#x", r.Status)
			}
			res := prIn(t, lu, "C", 1)
			if binary.BigEndian.Uint32(res[4:]) != 16 || res[21]&0x0f != c.typ {
				t.Errorf("READ RESERVATION % x", res)
			}
			if allRegistrants(c.typ) && binary.BigEndian.Uint64(res[8:]) != 0 {
				t.Errorf("all-registrants reservation reports key %x, want 0", binary.BigEndian.Uint64(res[8:]))
			}
			// A release with the wrong type fails; with the right one it works.
			wrong := byte(prWE)
			if c.typ == prWE {
				wrong = prEA
			}
			wantSense(t, "release wrong type", do("A", 2, wrong, 0xa, 0), iscsi.SenseIllegalRequest, ascInvalidRelease)
			if allRegistrants(c.typ) {
				wantGood(t, "B releases an all-registrants reservation", do("B", 2, c.typ, 0xb, 0))
			} else {
				wantGood(t, "B release (not holder) is a no-op", do("B", 2, c.typ, 0xb, 0))
				wantGood(t, "A release", do("A", 2, c.typ, 0xa, 0))
			}
			if r := exec(lu, "C", write, make([]byte, 512)); r.Status != 0 && (r.Status != iscsi.StatusCheckCondition || senseOf(t, r).Key != iscsi.SenseUnitAttention) {
				t.Errorf("C write after release: %#x", r.Status)
			}
		})
	}
}

func TestPersistentReserveOut(t *testing.T) {
	lu, _ := newLU()
	lu.AddNexus("C")
	do := func(n string, sa, typ byte, key, sark uint64) *Response {
		cdb, p := prOut(sa, typ, key, sark)
		return exec(lu, n, cdb, p)
	}
	gen := func() uint32 { return binary.BigEndian.Uint32(prIn(t, lu, "A", 0)) }
	keys := func() []uint64 {
		d := prIn(t, lu, "A", 0)
		var ks []uint64
		for i := 8; i < 8+int(binary.BigEndian.Uint32(d[4:])); i += 8 {
			ks = append(ks, binary.BigEndian.Uint64(d[i:]))
		}
		return ks
	}
	wantGood(t, "register A", do("A", 0, 0, 0, 0xa))
	g := gen()
	if r := do("B", 0, 0, 0x99, 0xb); r.Status != iscsi.StatusReservationConflict {
		t.Fatalf("REGISTER with a key while unregistered: %#x", r.Status)
	}
	wantGood(t, "register B", do("B", 0, 0, 0, 0xb))
	wantGood(t, "register C", do("C", 0, 0, 0, 0xc))
	if ks := keys(); len(ks) != 3 || ks[0] != 0xa || ks[1] != 0xb || ks[2] != 0xc || gen() != g+2 {
		t.Fatalf("keys %x generation %d (was %d)", ks, gen(), g)
	}
	if r := do("B", 0, 0, 0x77, 0xbb); r.Status != iscsi.StatusReservationConflict {
		t.Fatalf("REGISTER with the wrong key: %#x", r.Status)
	}
	wantGood(t, "change B's key", do("B", 0, 0, 0xb, 0xbb))
	wantGood(t, "register and ignore", do("B", 6, 0, 0, 0xb))
	// Only the registered key may RESERVE; scope must be LU; type must exist.
	if r := do("C", 1, prWE, 0xdead, 0); r.Status != iscsi.StatusReservationConflict {
		t.Fatalf("RESERVE with the wrong key: %#x", r.Status)
	}
	if r := do("D", 1, prWE, 0, 0); r.Status != iscsi.StatusReservationConflict {
		t.Fatalf("RESERVE unregistered: %#x", r.Status)
	}
	wantSense(t, "bad type", do("A", 1, 2, 0xa, 0), iscsi.SenseIllegalRequest, iscsi.ASCInvalidFieldInCDB)
	wantSense(t, "bad scope", do("A", 1, 0x10|prWE, 0xa, 0), iscsi.SenseIllegalRequest, iscsi.ASCInvalidFieldInCDB)
	wantGood(t, "A reserves WERO", do("A", 1, prWERO, 0xa, 0))
	if r := do("B", 1, prWERO, 0xb, 0); r.Status != iscsi.StatusReservationConflict {
		t.Fatalf("second RESERVE by another registrant: %#x", r.Status)
	}
	// READ FULL STATUS: three registrants, A the holder, transport IDs.
	fs := prIn(t, lu, "C", 3)
	n, holders := 0, 0
	for i := 8; i < 8+int(binary.BigEndian.Uint32(fs[4:])); {
		if fs[i+12]&0x01 != 0 {
			holders++
			if binary.BigEndian.Uint64(fs[i:]) != 0xa || fs[i+13]&0x0f != prWERO {
				t.Fatalf("holder descriptor % x", fs[i:i+24])
			}
		}
		tl := int(binary.BigEndian.Uint32(fs[i+20:]))
		if tl < 24 || fs[i+24] != 0x45 {
			t.Fatalf("transport id % x", fs[i+24:i+24+tl])
		}
		i += 24 + tl
		n++
	}
	if n != 3 || holders != 1 {
		t.Fatalf("full status: %d registrants, %d holders", n, holders)
	}
	caps := prIn(t, lu, "A", 2)
	if binary.BigEndian.Uint16(caps) != 8 || caps[2]&0x01 != 0 || caps[3]&0x80 == 0 {
		t.Fatalf("report capabilities % x (PTPL_C must be 0: APTPL is not supported)", caps)
	}
	// The holder unregistering releases a registrants-only reservation and
	// the other registrants hear about it.
	wantGood(t, "A unregisters", do("A", 0, 0, 0xa, 0))
	wantSense(t, "B hears of the release", exec(lu, "B", iscsi.TestUnitReady(), nil), iscsi.SenseUnitAttention, ascReservationsReleased)
	wantSense(t, "C hears of the release", exec(lu, "C", iscsi.TestUnitReady(), nil), iscsi.SenseUnitAttention, ascReservationsReleased)
	if res := prIn(t, lu, "B", 1); binary.BigEndian.Uint32(res[4:]) != 0 {
		t.Fatalf("reservation survived its holder's unregistration: % x", res)
	}
	// PREEMPT: B reserves EA, C preempts B's key and takes the reservation.
	wantGood(t, "B reserves EA", do("B", 1, prEA, 0xb, 0))
	wantGood(t, "C preempts B", do("C", 4, prEA, 0xc, 0xb))
	wantSense(t, "B is told", exec(lu, "B", iscsi.TestUnitReady(), nil), iscsi.SenseUnitAttention, ascRegistrationsPreempted)
	if r := exec(lu, "B", iscsi.Read10(0, 1, false), nil); r.Status != iscsi.StatusReservationConflict {
		t.Fatalf("B after being preempted: %#x", r.Status)
	}
	if r := do("C", 5, prEA, 0xc, 0x1234); r.Status != iscsi.StatusReservationConflict {
		t.Fatalf("PREEMPT AND ABORT of an unknown key: %#x", r.Status)
	}
	wantSense(t, "preempt with key 0", do("C", 4, prEA, 0xc, 0), iscsi.SenseIllegalRequest, iscsi.ASCInvalidFieldInParamList)
	// CLEAR drops everything.
	wantGood(t, "clear", do("C", 3, 0, 0xc, 0))
	if ks := keys(); len(ks) != 0 {
		t.Fatalf("keys after CLEAR: %x", ks)
	}
	// Malformed requests.
	cdb, p := prOut(0, 0, 0, 1)
	p[20] = 0x01 // APTPL
	wantSense(t, "APTPL", exec(lu, "A", cdb, p), iscsi.SenseIllegalRequest, iscsi.ASCInvalidFieldInParamList)
	p[20] = 0x08 // SPEC_I_PT
	wantSense(t, "SPEC_I_PT", exec(lu, "A", cdb, p), iscsi.SenseIllegalRequest, iscsi.ASCInvalidFieldInParamList)
	wantSense(t, "short list", exec(lu, "A", cdb, p[:20]), iscsi.SenseIllegalRequest, iscsi.ASCParameterListLength)
	cdb, p = prOut(7, 0, 0, 1)
	wantSense(t, "REGISTER AND MOVE", exec(lu, "A", cdb, p), iscsi.SenseIllegalRequest, iscsi.ASCInvalidFieldInCDB)
	cdb, p = prOut(9, 0, 0, 1)
	wantSense(t, "service action 9", exec(lu, "A", cdb, p), iscsi.SenseIllegalRequest, iscsi.ASCInvalidFieldInCDB)
	in := cdb10(iscsi.ScsiPersistResIn, 4)
	binary.BigEndian.PutUint16(in[7:], 64)
	wantSense(t, "PR IN service action 4", exec(lu, "A", in, nil), iscsi.SenseIllegalRequest, iscsi.ASCInvalidFieldInCDB)
}

func TestReserve6(t *testing.T) {
	lu, _ := newLU()
	wantGood(t, "A reserves", exec(lu, "A", cdb6(iscsi.ScsiReserve6), nil))
	wantGood(t, "A reserves again", exec(lu, "A", cdb6(iscsi.ScsiReserve6), nil))
	for _, c := range []struct {
		name string
		cdb  []byte
		ok   bool
	}{
		{"B read", iscsi.Read10(0, 1, false), false},
		{"B reserve", cdb6(iscsi.ScsiReserve6), false},
		{"B inquiry", iscsi.Inquiry(false, 0, 36), true},
		{"B request sense", cdb6(iscsi.ScsiRequestSense, 0, 0, 0, 18), true},
		{"B release (not the holder: no effect)", cdb6(iscsi.ScsiRelease6), true},
		{"B still conflicts", iscsi.TestUnitReady(), false},
	} {
		r := exec(lu, "B", c.cdb, nil)
		if c.ok && r.Status != 0 || !c.ok && r.Status != iscsi.StatusReservationConflict {
			t.Fatalf("%s: %#x", c.name, r.Status)
		}
	}
	wantSense(t, "third-party reserve", exec(lu, "A", cdb6(iscsi.ScsiReserve6, 0x01), nil), iscsi.SenseIllegalRequest, iscsi.ASCInvalidFieldInCDB)
	wantGood(t, "A releases", exec(lu, "A", cdb6(iscsi.ScsiRelease6), nil))
	wantGood(t, "B after release", exec(lu, "B", iscsi.TestUnitReady(), nil))
	// A reset releases a RESERVE(6) (but B first hears of the reset).
	wantGood(t, "B reserves", exec(lu, "B", cdb6(iscsi.ScsiReserve6), nil))
	lu.Reset("B", false)
	wantSense(t, "A hears of the reset", exec(lu, "A", iscsi.TestUnitReady(), nil), iscsi.SenseUnitAttention, 0x2903)
	wantGood(t, "A after the reset", exec(lu, "A", iscsi.TestUnitReady(), nil))
	// A PR RESERVE while another nexus holds RESERVE(6) conflicts.
	wantGood(t, "B reserves again", exec(lu, "B", cdb6(iscsi.ScsiReserve6), nil))
	cdb, p := prOut(0, 0, 0, 0xa)
	if r := exec(lu, "A", cdb, p); r.Status != iscsi.StatusReservationConflict {
		t.Fatalf("PERSISTENT RESERVE OUT under another nexus's RESERVE(6): %#x", r.Status)
	}
	lu.RemoveNexus("B") // nexus loss releases it
	wantGood(t, "register after B left", exec(lu, "A", cdb, p))
}
