package iscsi

import (
	"encoding/binary"
	"errors"
	"sync"
	"testing"

	"github.com/tristore/tristore/blockdev"
	proto "github.com/tristore/tristore/proto/iscsi"
)

func TestGranules(t *testing.T) {
	for _, c := range []struct{ lba, end, gran, align, a, e uint64 }{
		{0, 100, 1, 0, 0, 100},
		{3, 5003, 8, 0, 8, 5000},
		{8, 16, 8, 0, 8, 16},
		{1, 7, 8, 0, 8, 0}, // no whole granule
		{0, 100, 8, 3, 3, 99},
		{5, 100, 8, 3, 11, 99},
	} {
		if a, e := granules(c.lba, c.end, c.gran, c.align); a != c.a || e != c.e {
			t.Errorf("granules(%d,%d,%d,%d) = %d,%d want %d,%d", c.lba, c.end, c.gran, c.align, a, e, c.a, c.e)
		}
	}
}

// blockLimitsPage builds a Block Limits VPD page.
func blockLimitsPage(maxLBA, maxDesc, gran uint32, maxWS uint64) []byte {
	d := make([]byte, 64)
	d[1] = 0xb0
	binary.BigEndian.PutUint16(d[2:], 0x3c)
	binary.BigEndian.PutUint32(d[20:], maxLBA)
	binary.BigEndian.PutUint32(d[24:], maxDesc)
	binary.BigEndian.PutUint32(d[28:], gran)
	binary.BigEndian.PutUint64(d[36:], maxWS)
	return d
}

// TestFakeDiscardHonoursBlockLimits: Discard sends UNMAP only for whole
// granules, never more blocks or descriptors per command than VPD B0h
// allows, later commands starting on a granule; Unmap sends WRITE SAME
// (16) with UNMAP no longer than MaxWriteSameLength; a LUN without LBPME
// refuses both with an error that is blockdev.ErrNotSupported.
func TestFakeDiscardHonoursBlockLimits(t *testing.T) {
	f := newFake(t)
	f.capacity = proto.Capacity{LastLBA: 1<<20 - 1, BlockSize: 512, LBPME: true, LBPRZ: true}
	var mu sync.Mutex
	var unmaps [][]proto.UnmapDescriptor
	var sames [][2]uint64
	good := func(p *proto.PDU) []*proto.PDU {
		return []*proto.PDU{{Opcode: proto.OpSCSIResponse, Final: true, ITT: p.ITT}}
	}
	f.onCmd = func(_ int32, p *proto.PDU) []*proto.PDU {
		switch p.CDB[0] {
		case proto.ScsiInquiry:
			data := blockLimitsPage(1000, 2, 8, 3000)
			return []*proto.PDU{{Opcode: proto.OpDataIn, Final: true, StatusPresent: true, ITT: p.ITT, TTT: proto.ReservedTag, Data: data}}
		case proto.ScsiUnmap:
			ds, err := proto.ParseUnmapParams(p.Data)
			if err != nil {
				t.Errorf("UNMAP parameters: %v", err)
			}
			mu.Lock()
			unmaps = append(unmaps, ds)
			mu.Unlock()
			return good(p)
		case proto.ScsiWriteSame16:
			if p.CDB[1]&0x08 == 0 {
				t.Error("WRITE SAME for Unmap without the UNMAP bit")
			}
			mu.Lock()
			sames = append(sames, [2]uint64{binary.BigEndian.Uint64(p.CDB[2:]), uint64(binary.BigEndian.Uint32(p.CDB[10:]))})
			mu.Unlock()
			return good(p)
		}
		return good(p)
	}
	ctx, s := openFake(t, f)
	if l := s.BlockLimits(); l.MaxUnmapLBACount != 1000 || l.UnmapGranularity != 8 || !s.Thin() {
		t.Fatalf("limits %+v thin %v", l, s.Thin())
	}
	if err := s.Discard(ctx, 3*512, 5000*512); err != nil {
		t.Fatal(err)
	}
	next := uint64(8)
	for i, ds := range unmaps {
		if len(ds) > 2 {
			t.Fatalf("UNMAP %d: %d descriptors, limit 2", i, len(ds))
		}
		var total uint64
		for _, d := range ds {
			if d.LBA != next {
				t.Fatalf("UNMAP %d: descriptor at %d, want %d", i, d.LBA, next)
			}
			next += uint64(d.Blocks)
			total += uint64(d.Blocks)
		}
		if total > 1000 || ds[0].LBA%8 != 0 {
			t.Fatalf("UNMAP %d: %d blocks from %d (limit 1000, granule 8)", i, total, ds[0].LBA)
		}
	}
	if next != 5000 {
		t.Fatalf("UNMAPs covered [8,%d), want [8,5000)", next)
	}
	if err := s.Unmap(ctx, 0, 10000*512); err != nil {
		t.Fatal(err)
	}
	at := uint64(0)
	for _, ws := range sames {
		if ws[0] != at || ws[1] > 3000 {
			t.Fatalf("WRITE SAME %v: want it at %d, at most 3000 blocks", ws, at)
		}
		at += ws[1]
	}
	if at != 10000 {
		t.Fatalf("WRITE SAME covered %d blocks, want 10000", at)
	}

	f2 := newFake(t)
	f2.onCmd = func(_ int32, p *proto.PDU) []*proto.PDU { return good(p) }
	ctx2, s2 := openFake(t, f2)
	for _, err := range []error{s2.Discard(ctx2, 0, 4096), s2.Unmap(ctx2, 0, 4096)} {
		if !errors.Is(err, ErrUnmapUnsupported) || !errors.Is(err, blockdev.ErrNotSupported) {
			t.Fatalf("a LUN without LBPME: %v", err)
		}
	}
}
