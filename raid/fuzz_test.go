package raid

import (
	"bytes"
	"testing"
)

// FuzzSuperblock: any bytes either fail to parse or parse to a superblock
// that marshals back to the same bytes (the reserved areas are zero).
func FuzzSuperblock(f *testing.F) {
	sb := &superblock{Level: 5, Chunk: 4096, Members: 3, Index: 1, BlockSize: 512, DataOffset: memOff,
		MemberSize: 8 * 4096, Events: 7, Dirty: true, FailedMask: 4, RebuildIdx: -1, JournalOff: SuperblockSize,
		JournalLen: jT, JournalCk: 9}
	f.Add(sb.marshal())
	f.Add(make([]byte, SuperblockSize))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := unmarshalSuperblock(b)
		if err != nil {
			return
		}
		if got := s.marshal(); !bytes.Equal(got, b[:SuperblockSize]) {
			t.Fatalf("parsed superblock does not marshal back to its bytes")
		}
	})
}

// FuzzJournalScan: a ring of any bytes (a member returning garbage) never
// makes scan panic, and every entry it accepts lies inside the member's
// data area with increasing sequence numbers at or above the checkpoint.
func FuzzJournalScan(f *testing.F) {
	_, ds := mems(3, memOff+8*chunkT)
	a, err := testCreate(f.Context(), 5, ds)
	if err != nil {
		f.Fatal(err)
	}
	var good bytes.Buffer
	a.jnl.encode(&good, 5, 3, 0, []seg{{a.dataOff, make([]byte, 512)}, {a.dataOff + 4096, bytes.Repeat([]byte{1}, 1024)}})
	a.jnl.encode(&good, 6, 1, 0, []seg{{a.dataOff + 512, make([]byte, 512)}})
	if n := len(a.jnl.scan(good.Bytes(), 0, 5)); n != 2 {
		f.Fatalf("scan of two good entries found %d", n)
	}
	if n := len(a.jnl.scan(good.Bytes(), 0, 6)); n != 0 {
		f.Fatalf("scan stops at the first entry below the checkpoint, found %d", n)
	}
	f.Add(good.Bytes(), uint64(5))
	f.Add(good.Bytes()[:700], uint64(0))
	f.Add(make([]byte, 4096), uint64(0))
	f.Fuzz(func(t *testing.T, ring []byte, ck uint64) {
		parts := a.jnl.scan(ring, 0, ck)
		for seq, p := range parts {
			if seq < ck || p.mask&1 == 0 {
				t.Fatalf("accepted seq %d (checkpoint %d) mask %b", seq, ck, p.mask)
			}
			for _, s := range p.segs {
				if s.off < a.dataOff || s.off+int64(len(s.p)) > a.dataOff+a.memberSize {
					t.Fatalf("segment %d+%d outside the data area", s.off, len(s.p))
				}
			}
		}
	})
}
