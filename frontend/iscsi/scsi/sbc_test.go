package scsi

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"testing"

	"github.com/tristore/tristore/blockdev"
	"github.com/tristore/tristore/proto/iscsi"
	"github.com/tristore/tristore/store"
)

// Table tests for the SBC-3 side (sbc.go): every READ/WRITE size against
// the bounds, VERIFY, WRITE SAME, UNMAP, COMPARE AND WRITE, ORWRITE,
// SYNCHRONIZE CACHE, PRE-FETCH, READ CAPACITY, and device errors turned
// into sense data. The memory LU has 2048 blocks of 512 bytes.

// rwCDB builds a READ/WRITE/VERIFY/WRITE SAME... CDB of any size for lba
// and blocks (6-byte forms take blocks 1..256, 256 encoded as 0).
func rwCDB(op byte, lba uint64, blocks uint32) []byte {
	switch iscsi.CDBLen(op) {
	case 6:
		c := cdb6(op, byte(lba>>16)&0x1f, byte(lba>>8), byte(lba), byte(blocks))
		return c
	case 10:
		c := cdb10(op)
		binary.BigEndian.PutUint32(c[2:], uint32(lba))
		binary.BigEndian.PutUint16(c[7:], uint16(blocks))
		return c
	case 12:
		c := cdb12(op)
		binary.BigEndian.PutUint32(c[2:], uint32(lba))
		binary.BigEndian.PutUint32(c[6:], blocks)
		return c
	}
	c := cdb16b(op)
	binary.BigEndian.PutUint64(c[2:], lba)
	binary.BigEndian.PutUint32(c[10:], blocks)
	return c
}

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i*7) ^ byte(i>>8)
	}
	return b
}

func TestReadWriteAllSizes(t *testing.T) {
	ops := []struct {
		name        string
		read, write byte
	}{
		{"6", iscsi.ScsiRead6, iscsi.ScsiWrite6},
		{"10", iscsi.ScsiRead10, iscsi.ScsiWrite10},
		{"12", iscsi.ScsiRead12, iscsi.ScsiWrite12},
		{"16", iscsi.ScsiRead16, iscsi.ScsiWrite16},
		{"write-and-verify 10", iscsi.ScsiRead10, iscsi.ScsiWriteVerify10},
		{"write-and-verify 12", iscsi.ScsiRead12, iscsi.ScsiWriteVerify12},
		{"write-and-verify 16", iscsi.ScsiRead16, iscsi.ScsiWriteVerify16},
	}
	for _, o := range ops {
		t.Run(o.name, func(t *testing.T) {
			lu, d := newLU()
			for i, c := range []struct {
				lba    uint64
				blocks uint32
				asc    uint16 // 0: GOOD
			}{
				{0, 1, 0},
				{7, 3, 0},
				{2047, 1, 0},                      // the last block
				{2040, 8, 0},                      // up to the end
				{2048, 1, iscsi.ASCLBAOutOfRange}, // one past
				{2041, 8, iscsi.ASCLBAOutOfRange}, // straddles the end
				{1 << 20, 1, iscsi.ASCLBAOutOfRange},
			} {
				if iscsi.CDBLen(o.write) == 6 && c.lba > 0x1fffff {
					continue
				}
				data := pattern(int(c.blocks)*512, byte(i))
				w := exec(lu, "A", rwCDB(o.write, c.lba, c.blocks), data)
				r := exec(lu, "A", rwCDB(o.read, c.lba, c.blocks), nil)
				if c.asc != 0 {
					wantSense(t, fmt.Sprintf("write %d+%d", c.lba, c.blocks), w, iscsi.SenseIllegalRequest, c.asc)
					wantSense(t, fmt.Sprintf("read %d+%d", c.lba, c.blocks), r, iscsi.SenseIllegalRequest, c.asc)
					if w.DataOutLen != int64(len(data)) {
						t.Errorf("refused write reports data-out %d, want %d", w.DataOutLen, len(data))
					}
					continue
				}
				wantGood(t, "write", w)
				if got := wantGood(t, "read", r); !bytes.Equal(got, data) {
					t.Fatalf("read %d+%d differs from what was written", c.lba, c.blocks)
				}
				if !bytes.Equal(d.b[c.lba*512:(c.lba+uint64(c.blocks))*512], data) {
					t.Fatalf("device bytes at %d+%d differ", c.lba, c.blocks)
				}
				r.Release()
			}
			if o.write == iscsi.ScsiWriteVerify10 && d.fuas == 0 {
				t.Error("WRITE AND VERIFY did not write through")
			}
		})
	}
}

func TestReadWriteFieldsAndLimits(t *testing.T) {
	lu, d := newLU()
	// READ(6)/WRITE(6) with transfer length 0 move 256 blocks.
	data := pattern(256*512, 3)
	wantGood(t, "write6 256", exec(lu, "A", rwCDB(iscsi.ScsiWrite6, 10, 0), data))
	if got := wantGood(t, "read6 256", exec(lu, "A", rwCDB(iscsi.ScsiRead6, 10, 0), nil)); !bytes.Equal(got, data) {
		t.Fatal("256-block READ(6) differs")
	}
	// Zero blocks (10/16) transfer nothing and succeed.
	if got := wantGood(t, "read10 0", exec(lu, "A", iscsi.Read10(5, 0, false), nil)); len(got) != 0 {
		t.Fatalf("zero-length read returned %d bytes", len(got))
	}
	wantGood(t, "write16 0", exec(lu, "A", iscsi.Write16(5, 0, false), nil))
	// Protection information is not supported: RDPROTECT/WRPROTECT != 0.
	c := iscsi.Read10(0, 1, false)
	c[1] |= 0x20
	wantSense(t, "rdprotect", exec(lu, "A", c, nil), iscsi.SenseIllegalRequest, iscsi.ASCInvalidFieldInCDB)
	c = iscsi.Write16(0, 1, false)
	c[1] |= 0x40
	wantSense(t, "wrprotect", exec(lu, "A", c, pattern(512, 0)), iscsi.SenseIllegalRequest, iscsi.ASCInvalidFieldInCDB)
	// Over the transfer limit (MaxTransferBytes): INVALID FIELD IN CDB.
	small := New(Config{Dev: d, MaxTransferBytes: 4096})
	wantSense(t, "read over the limit", exec(small, "A", iscsi.Read10(0, 9, false), nil), iscsi.SenseIllegalRequest, iscsi.ASCInvalidFieldInCDB)
	wantGood(t, "read at the limit", exec(small, "A", iscsi.Read10(0, 8, false), nil))
	// A data-out shorter than the CDB asks: only the whole blocks sent are
	// written, the residual is the transport's; DataOutLen is what the CDB asked.
	before := append([]byte{}, d.b[100*512:104*512]...)
	w := exec(lu, "A", iscsi.Write10(100, 4, false), pattern(512+100, 9))
	wantGood(t, "short data-out", w)
	if w.DataOutLen != 4*512 || !bytes.Equal(d.b[100*512:101*512], pattern(612, 9)[:512]) || !bytes.Equal(d.b[101*512:104*512], before[512:]) {
		t.Fatalf("short data-out wrote the wrong bytes (DataOutLen %d)", w.DataOutLen)
	}
	// FUA goes to WriteAtFUA; a plain write does not.
	f := d.fuas
	wantGood(t, "fua", exec(lu, "A", iscsi.Write10(0, 1, true), pattern(512, 1)))
	wantGood(t, "plain", exec(lu, "A", iscsi.Write10(0, 1, false), pattern(512, 1)))
	if d.fuas != f+1 {
		t.Fatalf("FUA writes %d, want %d", d.fuas, f+1)
	}
}

func TestReadCapacity(t *testing.T) {
	lu, _ := newLU()
	c10, err := iscsi.ParseCapacity10(wantGood(t, "rc10", exec(lu, "A", iscsi.ReadCapacity10(), nil)))
	if err != nil || c10.LastLBA != 2047 || c10.BlockSize != 512 {
		t.Fatalf("capacity 10 %+v %v", c10, err)
	}
	d := wantGood(t, "rc16", exec(lu, "A", iscsi.ReadCapacity16(32), nil))
	c16, err := iscsi.ParseCapacity16(d)
	if err != nil || len(d) != 32 || c16.LastLBA != 2047 || c16.BlockSize != 512 || c16.LBPME || !c16.LBPRZ {
		t.Fatalf("capacity 16 %+v %v", c16, err)
	}
	if d := wantGood(t, "rc16 alloc 12", exec(lu, "A", iscsi.ReadCapacity16(12), nil)); len(d) != 12 {
		t.Fatalf("allocation length 12 gave %d bytes", len(d))
	}
	// A device past 2^32 blocks: READ CAPACITY(10) says 0xffffffff, (16) the truth.
	big := New(Config{Dev: &sizedDev{size: 3 << 40}})
	c10, _ = iscsi.ParseCapacity10(wantGood(t, "big rc10", exec(big, "A", iscsi.ReadCapacity10(), nil)))
	c16, _ = iscsi.ParseCapacity16(wantGood(t, "big rc16", exec(big, "A", iscsi.ReadCapacity16(32), nil)))
	if c10.LastLBA != 0xffffffff || c16.LastLBA != (3<<40)/512-1 {
		t.Fatalf("big device: rc10 %+v rc16 %+v", c10, c16)
	}
}

// sizedDev is a device of any size that holds no data (reads zeros).
type sizedDev struct{ size int64 }

func (d *sizedDev) ReadAt(_ context.Context, p []byte, off int64) (int, error) {
	clear(p)
	return len(p), nil
}
func (d *sizedDev) WriteAt(_ context.Context, p []byte, off int64) (int, error) { return len(p), nil }
func (d *sizedDev) Flush(context.Context) error                                 { return nil }
func (d *sizedDev) Size() int64                                                 { return d.size }
func (d *sizedDev) BlockSize() int                                              { return 512 }
func (d *sizedDev) Close() error                                                { return nil }

func TestVerify(t *testing.T) {
	lu, _ := newLU()
	data := pattern(4*512, 5)
	wantGood(t, "write", exec(lu, "A", iscsi.Write10(20, 4, false), data))
	verify := func(op byte, lba uint64, blocks uint32, bytchk byte) []byte {
		c := rwCDB(op, lba, blocks)
		c[1] |= bytchk << 1
		return c
	}
	bad := append([]byte{}, data...)
	bad[3*512+17] ^= 0xff
	oneBlock := data[:512]
	for _, op := range []byte{iscsi.ScsiVerify10, iscsi.ScsiVerify12, iscsi.ScsiVerify16} {
		for _, c := range []struct {
			name   string
			cdb    []byte
			out    []byte
			key    uint8
			asc    uint16
			info   uint32
			outLen int64
		}{
			{name: "medium only", cdb: verify(op, 20, 4, 0), outLen: 0},
			{name: "byte compare equal", cdb: verify(op, 20, 4, 1), out: data, outLen: 2048},
			{name: "byte compare differs", cdb: verify(op, 20, 4, 1), out: bad, key: iscsi.SenseMiscompare, asc: iscsi.ASCMiscompareDuringVerify, info: 3*512 + 17, outLen: 2048},
			{name: "one block against each", cdb: verify(op, 20, 1, 3), out: oneBlock, outLen: 512},
			{name: "one block differs from block 2", cdb: verify(op, 20, 2, 3), out: oneBlock, key: iscsi.SenseMiscompare, asc: iscsi.ASCMiscompareDuringVerify, info: 512, outLen: 512},
			{name: "BYTCHK 2", cdb: verify(op, 20, 1, 2), key: iscsi.SenseIllegalRequest, asc: iscsi.ASCInvalidFieldInCDB, outLen: -1},
			{name: "data-out length mismatch", cdb: verify(op, 20, 4, 1), out: data[:1024], key: iscsi.SenseIllegalRequest, asc: ascInvalidFieldInIU, outLen: 2048},
			{name: "past the end", cdb: verify(op, 2047, 2, 0), key: iscsi.SenseIllegalRequest, asc: iscsi.ASCLBAOutOfRange, outLen: 0},
		} {
			what := fmt.Sprintf("VERIFY %#x %s", op, c.name)
			r := exec(lu, "A", c.cdb, c.out)
			if r.DataOutLen != c.outLen {
				t.Errorf("%s: DataOutLen %d, want %d", what, r.DataOutLen, c.outLen)
			}
			if c.key == 0 {
				wantGood(t, what, r)
				continue
			}
			s := wantSense(t, what, r, c.key, c.asc)
			if c.key == iscsi.SenseMiscompare && (!s.InfoValid || s.Info != c.info) {
				t.Errorf("%s: miscompare at %d (valid %v), want %d", what, s.Info, s.InfoValid, c.info)
			}
		}
	}
}

func TestWriteSame(t *testing.T) {
	ws10 := func(lba uint32, blocks uint16, flags byte) []byte {
		c := rwCDB(iscsi.ScsiWriteSame10, uint64(lba), uint32(blocks))
		c[1] |= flags
		return c
	}
	ws16 := func(lba uint64, blocks uint32, flags byte) []byte {
		c := iscsi.WriteSame16(lba, blocks, false)
		c[1] |= flags
		return c
	}
	blk := pattern(512, 42)
	for _, c := range []struct {
		name    string
		cdb     []byte
		out     []byte
		asc     uint16 // 0: GOOD
		unmaps  int
		wantBlk []byte // content of blocks 30..37 afterwards (nil: unchecked)
	}{
		{name: "10: pattern", cdb: ws10(30, 8, 0), out: blk, wantBlk: bytes.Repeat(blk, 8)},
		{name: "16: pattern", cdb: ws16(30, 8, 0), out: blk, wantBlk: bytes.Repeat(blk, 8)},
		{name: "16: zeros with UNMAP", cdb: ws16(30, 8, 0x08), out: make([]byte, 512), unmaps: 1, wantBlk: make([]byte, 8*512)},
		{name: "16: NDOB with UNMAP", cdb: ws16(30, 8, 0x09), unmaps: 1, wantBlk: make([]byte, 8*512)},
		{name: "16: non-zero with UNMAP writes", cdb: ws16(30, 8, 0x08), out: blk, wantBlk: bytes.Repeat(blk, 8)},
		{name: "zero blocks (WSNZ)", cdb: ws16(30, 0, 0), out: blk, asc: iscsi.ASCInvalidFieldInCDB},
		{name: "anchor", cdb: ws16(30, 8, 0x18), out: make([]byte, 512), asc: iscsi.ASCInvalidFieldInCDB},
		{name: "over the limit", cdb: ws16(0, maxWriteSameBlocks+1, 0), out: blk, asc: iscsi.ASCInvalidFieldInCDB},
		{name: "past the end", cdb: ws16(2047, 2, 0), out: blk, asc: iscsi.ASCLBAOutOfRange},
		{name: "two blocks of data-out", cdb: ws16(30, 8, 0), out: append(blk, blk...), asc: ascInvalidFieldInIU},
	} {
		t.Run(c.name, func(t *testing.T) {
			lu, d := newLU()
			copy(d.b[30*512:], pattern(8*512, 1))
			r := exec(lu, "A", c.cdb, c.out)
			if c.asc != 0 {
				wantSense(t, c.name, r, iscsi.SenseIllegalRequest, c.asc)
				return
			}
			wantGood(t, c.name, r)
			if d.unmaps != c.unmaps {
				t.Errorf("unmaps %d, want %d", d.unmaps, c.unmaps)
			}
			if !bytes.Equal(d.b[30*512:38*512], c.wantBlk) {
				t.Errorf("blocks 30..37 hold the wrong data")
			}
			if !bytes.Equal(d.b[29*512:30*512], make([]byte, 512)) || !bytes.Equal(d.b[38*512:39*512], make([]byte, 512)) {
				t.Errorf("WRITE SAME wrote outside its range")
			}
		})
	}
	// With the write cache off, WRITE SAME is flushed before GOOD.
	lu, d := newLU()
	lu.wce.Store(false)
	wantGood(t, "wce off", exec(lu, "A", ws16(0, 4, 0), blk))
	if d.flushes != 1 {
		t.Fatalf("WRITE SAME with WCE=0 flushed %d times", d.flushes)
	}
}

func TestUnmap(t *testing.T) {
	params := func(ds ...iscsi.UnmapDescriptor) []byte { return iscsi.UnmapParams(ds) }
	many := make([]iscsi.UnmapDescriptor, maxUnmapDescriptors+1)
	for i := range many {
		many[i] = iscsi.UnmapDescriptor{LBA: uint64(i), Blocks: 1}
	}
	for _, c := range []struct {
		name   string
		cdb    []byte
		out    []byte
		asc    uint16
		unmaps int
	}{
		{name: "two ranges", out: params(iscsi.UnmapDescriptor{LBA: 1, Blocks: 2}, iscsi.UnmapDescriptor{LBA: 2040, Blocks: 8}), unmaps: 2},
		{name: "zero-block descriptor", out: params(iscsi.UnmapDescriptor{LBA: 5, Blocks: 0}), unmaps: 0},
		{name: "empty parameter list", out: nil, unmaps: 0},
		{name: "anchor", cdb: cdb10(iscsi.ScsiUnmap, 0x01, 0, 0, 0, 0, 0, 0, 24), out: params(iscsi.UnmapDescriptor{LBA: 1, Blocks: 1}), asc: iscsi.ASCInvalidFieldInCDB},
		{name: "past the end", out: params(iscsi.UnmapDescriptor{LBA: 2047, Blocks: 2}), asc: iscsi.ASCLBAOutOfRange},
		{name: "too many descriptors", out: params(many...), asc: iscsi.ASCInvalidFieldInParamList},
		{name: "short list", cdb: iscsi.Unmap(6), out: make([]byte, 6), asc: iscsi.ASCParameterListLength},
		{name: "bad descriptor length", out: func() []byte { p := params(iscsi.UnmapDescriptor{LBA: 1, Blocks: 1}); p[3] = 15; return p }(), asc: iscsi.ASCParameterListLength},
		{name: "data-out shorter than the CDB says", cdb: iscsi.Unmap(40), out: params(iscsi.UnmapDescriptor{LBA: 1, Blocks: 1}), asc: ascInvalidFieldInIU},
	} {
		t.Run(c.name, func(t *testing.T) {
			lu, d := newLU()
			cdb := c.cdb
			if cdb == nil {
				cdb = iscsi.Unmap(uint16(len(c.out)))
			}
			r := exec(lu, "A", cdb, c.out)
			if c.asc != 0 {
				wantSense(t, c.name, r, iscsi.SenseIllegalRequest, c.asc)
				if d.unmaps != 0 {
					t.Fatal("a refused UNMAP unmapped something")
				}
				return
			}
			wantGood(t, c.name, r)
			if d.unmaps != c.unmaps {
				t.Fatalf("unmaps %d, want %d", d.unmaps, c.unmaps)
			}
		})
	}
	// Over the per-descriptor block limit.
	lu := New(Config{Dev: &sizedDev{size: (maxUnmapBlocks + 8) * 512}}) // the limit is checked before the device is asked
	wantSense(t, "over the block limit", exec(lu, "A", iscsi.Unmap(24), iscsi.UnmapParams([]iscsi.UnmapDescriptor{{LBA: 0, Blocks: maxUnmapBlocks + 1}})),
		iscsi.SenseIllegalRequest, iscsi.ASCInvalidFieldInParamList)
	// A device that cannot unmap: UNMAP is not supported.
	plain := New(Config{Dev: &sizedDev{size: 1 << 20}})
	wantSense(t, "no unmapper", exec(plain, "A", iscsi.Unmap(24), iscsi.UnmapParams([]iscsi.UnmapDescriptor{{LBA: 0, Blocks: 1}})),
		iscsi.SenseIllegalRequest, iscsi.ASCInvalidOpcode)
}

func TestCompareAndWriteAndOrWrite(t *testing.T) {
	caw := func(lba uint64, blocks byte, fua bool) []byte {
		c := cdb16b(iscsi.ScsiCompareAndWrite)
		binary.BigEndian.PutUint64(c[2:], lba)
		c[13] = blocks
		if fua {
			c[1] = 0x08
		}
		return c
	}
	lu, d := newLU()
	a, b := pattern(1024, 1), pattern(1024, 2)
	copy(d.b[50*512:], a)
	f := d.fuas
	wantGood(t, "caw equal", exec(lu, "A", caw(50, 2, true), append(append([]byte{}, a...), b...)))
	if !bytes.Equal(d.b[50*512:52*512], b) || d.fuas != f+1 {
		t.Fatalf("CAW did not write (FUA %d)", d.fuas-f)
	}
	s := wantSense(t, "caw miscompare", exec(lu, "A", caw(50, 2, false), append(append([]byte{}, a...), a...)),
		iscsi.SenseMiscompare, iscsi.ASCMiscompareDuringVerify)
	if !s.InfoValid || int(s.Info) != firstDiff(a, b) || !bytes.Equal(d.b[50*512:52*512], b) {
		t.Fatalf("miscompare %+v, or the medium changed", s)
	}
	wantSense(t, "caw wrong data length", exec(lu, "A", caw(50, 2, false), a), iscsi.SenseIllegalRequest, iscsi.ASCInvalidFieldInCDB)
	wantSense(t, "caw past the end", exec(lu, "A", caw(2047, 2, false), make([]byte, 2048)), iscsi.SenseIllegalRequest, iscsi.ASCLBAOutOfRange)
	wantGood(t, "caw 0 blocks", exec(lu, "A", caw(50, 0, false), nil))
	// ORWRITE(16): medium |= data.
	copy(d.b[60*512:], bytes.Repeat([]byte{0x0f}, 512))
	wantGood(t, "orwrite", exec(lu, "A", rwCDB(iscsi.ScsiOrwrite16, 60, 1), bytes.Repeat([]byte{0xf0}, 512)))
	if !bytes.Equal(d.b[60*512:61*512], bytes.Repeat([]byte{0xff}, 512)) {
		t.Fatal("ORWRITE did not OR")
	}
	wantSense(t, "orwrite past the end", exec(lu, "A", rwCDB(iscsi.ScsiOrwrite16, 2048, 1), make([]byte, 512)), iscsi.SenseIllegalRequest, iscsi.ASCLBAOutOfRange)
	wantSense(t, "orwrite short data-out", exec(lu, "A", rwCDB(iscsi.ScsiOrwrite16, 60, 2), make([]byte, 512)), iscsi.SenseIllegalRequest, ascInvalidFieldInIU)
	wantGood(t, "orwrite 0 blocks", exec(lu, "A", rwCDB(iscsi.ScsiOrwrite16, 60, 0), nil))
}

func TestSyncCacheAndPrefetch(t *testing.T) {
	lu, d := newLU()
	for _, c := range []struct {
		name    string
		cdb     []byte
		status  uint8
		asc     uint16
		flushes int
	}{
		{"sync 10 whole", iscsi.SyncCache10(), 0, 0, 1},
		{"sync 16 range", iscsi.SyncCache16(100, 10), 0, 0, 1},
		{"sync 16 to the end", iscsi.SyncCache16(2000, 0), 0, 0, 1},
		{"sync 16 past the end", iscsi.SyncCache16(2048, 1), iscsi.StatusCheckCondition, iscsi.ASCLBAOutOfRange, 0},
		{"sync 10 immed", func() []byte { c := iscsi.SyncCache10(); c[1] = 0x02; return c }(), 0, 0, 1},
		{"prefetch 10", rwCDB(iscsi.ScsiPrefetch10, 0, 8), iscsi.StatusConditionMet, 0, 0},
		{"prefetch 16", rwCDB(iscsi.ScsiPrefetch16, 2040, 8), iscsi.StatusConditionMet, 0, 0},
		{"prefetch past the end", rwCDB(iscsi.ScsiPrefetch16, 2040, 9), iscsi.StatusCheckCondition, iscsi.ASCLBAOutOfRange, 0},
	} {
		before := d.flushes
		r := exec(lu, "A", c.cdb, nil)
		if r.Status != c.status {
			t.Fatalf("%s: status %#x, want %#x", c.name, r.Status, c.status)
		}
		if c.asc != 0 {
			wantSense(t, c.name, r, iscsi.SenseIllegalRequest, c.asc)
		}
		if d.flushes-before != c.flushes {
			t.Fatalf("%s: %d flushes, want %d", c.name, d.flushes-before, c.flushes)
		}
	}
}

// failDev is a memDev whose operations fail with err when armed.
type failDev struct {
	memDev
	readErr, writeErr, flushErr, unmapErr error
}

func (d *failDev) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	if d.readErr != nil {
		return 0, d.readErr
	}
	return d.memDev.ReadAt(ctx, p, off)
}
func (d *failDev) WriteAt(ctx context.Context, p []byte, off int64) (int, error) {
	if d.writeErr != nil {
		return 0, d.writeErr
	}
	return d.memDev.WriteAt(ctx, p, off)
}
func (d *failDev) WriteAtFUA(ctx context.Context, p []byte, off int64) (int, error) {
	if d.writeErr != nil {
		return 0, d.writeErr
	}
	return d.memDev.WriteAt(ctx, p, off)
}
func (d *failDev) Flush(ctx context.Context) error {
	if d.flushErr != nil {
		return d.flushErr
	}
	return nil
}
func (d *failDev) Unmap(ctx context.Context, off, n int64) error {
	if d.unmapErr != nil {
		return d.unmapErr
	}
	return d.memDev.Unmap(ctx, off, n)
}

// TestDeviceErrors: device errors become the sense data sense.go
// promises, for reads and for every command that writes (a failed write
// is a WRITE ERROR, never an UNRECOVERED READ ERROR).
func TestDeviceErrors(t *testing.T) {
	eio := errors.New("input/output error")
	blk := pattern(512, 7)
	for _, c := range []struct {
		name string
		err  error
		key  uint8
		asc  uint16
	}{
		{"no space", store.ErrNoSpace, iscsi.SenseDataProtect, iscsi.ASCSpaceAllocationFailed},
		{"read-only", store.ErrReadOnly, iscsi.SenseDataProtect, iscsi.ASCWriteProtected},
		{"closed", blockdev.ErrClosed, iscsi.SenseNotReady, iscsi.ASCMediumNotPresent},
		{"cancelled", context.Canceled, iscsi.SenseAbortedCommand, iscsi.ASCNone},
		{"out of range", blockdev.ErrOutOfRange, iscsi.SenseIllegalRequest, iscsi.ASCLBAOutOfRange},
		{"misaligned", blockdev.ErrMisaligned, iscsi.SenseIllegalRequest, iscsi.ASCInvalidFieldInCDB},
		{"I/O error", eio, iscsi.SenseMediumError, 0}, // ASC depends on read or write
	} {
		writeASC, readASC := c.asc, c.asc
		if c.err == eio {
			writeASC, readASC = iscsi.ASCWriteError, iscsi.ASCUnrecoveredReadError
		}
		writes := []struct {
			name string
			cdb  []byte
			out  []byte
			arm  func(d *failDev)
		}{
			{"WRITE(10)", iscsi.Write10(0, 1, false), blk, func(d *failDev) { d.writeErr = c.err }},
			{"WRITE(16) FUA", iscsi.Write16(0, 1, true), blk, func(d *failDev) { d.writeErr = c.err }},
			{"WRITE SAME(16)", iscsi.WriteSame16(0, 4, false), blk, func(d *failDev) { d.writeErr = c.err }},
			{"WRITE SAME(16) UNMAP", iscsi.WriteSame16(0, 4, true), make([]byte, 512), func(d *failDev) { d.unmapErr = c.err }},
			{"UNMAP", iscsi.Unmap(24), iscsi.UnmapParams([]iscsi.UnmapDescriptor{{LBA: 0, Blocks: 1}}), func(d *failDev) { d.unmapErr = c.err }},
			{"COMPARE AND WRITE", func() []byte { c := cdb16b(iscsi.ScsiCompareAndWrite); c[13] = 1; return c }(), make([]byte, 1024), func(d *failDev) { d.writeErr = c.err }},
			{"ORWRITE(16)", rwCDB(iscsi.ScsiOrwrite16, 0, 1), blk, func(d *failDev) { d.writeErr = c.err }},
			{"SYNCHRONIZE CACHE", iscsi.SyncCache10(), nil, func(d *failDev) { d.flushErr = c.err }},
		}
		for _, w := range writes {
			d := &failDev{memDev: memDev{b: make([]byte, 1<<20)}}
			lu := New(Config{Dev: d})
			w.arm(d)
			wantSense(t, c.name+": "+w.name, exec(lu, "A", w.cdb, w.out), c.key, writeASC)
		}
		for _, r := range []struct {
			name string
			cdb  []byte
			out  []byte
		}{
			{"READ(10)", iscsi.Read10(0, 1, false), nil},
			{"VERIFY(16)", rwCDB(iscsi.ScsiVerify16, 0, 1), nil},
			{"COMPARE AND WRITE's read", func() []byte { c := cdb16b(iscsi.ScsiCompareAndWrite); c[13] = 1; return c }(), make([]byte, 1024)},
		} {
			d := &failDev{memDev: memDev{b: make([]byte, 1<<20)}}
			lu := New(Config{Dev: d})
			d.readErr = c.err
			wantSense(t, c.name+": "+r.name, exec(lu, "A", r.cdb, r.out), c.key, readASC)
		}
	}
}

// flushCounter is a device without WriteAtFUA that counts flushes.
type flushCounter struct {
	sizedDev
	flushes int
}

func (d *flushCounter) Flush(context.Context) error { d.flushes++; return nil }

// TestFUAWithoutFUAWriter: on a device without WriteAtFUA, a FUA write (or
// any write with WCE=0) is a write followed by Flush before GOOD.
func TestFUAWithoutFUAWriter(t *testing.T) {
	d := &flushCounter{sizedDev: sizedDev{size: 1 << 20}}
	lu := New(Config{Dev: d})
	wantGood(t, "plain", exec(lu, "A", iscsi.Write10(0, 1, false), make([]byte, 512)))
	wantGood(t, "fua", exec(lu, "A", iscsi.Write10(0, 1, true), make([]byte, 512)))
	lu.wce.Store(false)
	wantGood(t, "wce off", exec(lu, "A", iscsi.Write16(0, 1, false), make([]byte, 512)))
	if d.flushes != 2 {
		t.Fatalf("flushes %d, want 2 (FUA, WCE=0)", d.flushes)
	}
}
