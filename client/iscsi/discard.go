package iscsi

import (
	"context"
	"errors"
	"fmt"

	"github.com/tristore/tristore/blockdev"
	proto "github.com/tristore/tristore/proto/iscsi"
)

// ErrUnmapUnsupported is returned by Unmap and Discard when the LUN does
// not deallocate blocks (LBPME clear in READ CAPACITY (16), UNMAP not
// implemented per the Block Limits page, or the command refused).
var ErrUnmapUnsupported = fmt.Errorf("iscsi: the LUN does not deallocate blocks: %w", blockdev.ErrNotSupported)

// errNoWriteSame: the LUN refused WRITE SAME (16) as unknown.
var errNoWriteSame = errors.New("iscsi: WRITE SAME (16) not supported")

// Defaults when the Block Limits page does not say (a conservative 32 MiB
// of 512-byte blocks per command).
const (
	defaultMaxUnmapBlocks     = 1 << 16
	defaultMaxWriteSameBlocks = 1 << 16
)

// readBlockLimits reads the Block Limits VPD page (B0h); a LUN without one
// gets the zero value, and the defaults above apply.
func (s *Session) readBlockLimits(ctx context.Context) proto.BlockLimits {
	buf := make([]byte, 64)
	r, err := s.Do(ctx, &Command{CDB: proto.Inquiry(true, 0xb0, uint16(len(buf))), In: buf})
	if err != nil || r.Err() != nil {
		return proto.BlockLimits{}
	}
	l, err := proto.ParseBlockLimits(buf[:min(r.N, len(buf))])
	if err != nil {
		return proto.BlockLimits{}
	}
	return l
}

// BlockLimits is the Block Limits VPD data read at Open.
func (s *Session) BlockLimits() proto.BlockLimits { return s.limits }

// Thin reports whether the LUN deallocates blocks (LBPME): Unmap and
// Discard can free space on the target.
func (s *Session) Thin() bool { return s.capacity.LBPME }

func (s *Session) checkRange(off, n int64) error {
	if s.blockSize == 0 {
		return errors.New("iscsi: session was not opened on a LUN (use Open)")
	}
	bs := int64(s.blockSize)
	if off%bs != 0 || n%bs != 0 {
		return blockdev.ErrMisaligned
	}
	if off < 0 || n < 0 || off+n > s.size {
		return blockdev.ErrOutOfRange
	}
	return nil
}

// unmapGeometry returns, in blocks, the most one UNMAP may name, the most
// descriptors, and the granule size and alignment, from VPD B0h; ok is
// false when the LUN says it has no UNMAP.
func (s *Session) unmapGeometry() (maxLBA, maxDesc, gran, align uint64, ok bool) {
	l := s.limits
	if !s.capacity.LBPME {
		return 0, 0, 0, 0, false
	}
	if !l.UnmapReported {
		return defaultMaxUnmapBlocks, 1, 1, 0, true
	}
	if l.MaxUnmapLBACount == 0 || l.MaxUnmapDescriptors == 0 {
		return 0, 0, 0, 0, false
	}
	gran = max(1, uint64(l.UnmapGranularity))
	if l.UnmapAlignmentValid {
		align = uint64(l.UnmapAlignment) % gran
	}
	return uint64(l.MaxUnmapLBACount), uint64(l.MaxUnmapDescriptors), gran, align, true
}

// granules returns the whole unmap granules [a, e) (in blocks) inside the
// blocks [lba, end); a >= e when there is none.
func granules(lba, end, gran, align uint64) (a, e uint64) {
	up := func(x uint64) uint64 {
		if x <= align {
			return align
		}
		if r := (x - align) % gran; r != 0 {
			return x + gran - r
		}
		return x
	}
	down := func(x uint64) uint64 {
		if x < align {
			return 0
		}
		return x - (x-align)%gran
	}
	return up(lba), down(end)
}

// Discard asks the target to deallocate the whole unmap granules inside
// [off, off+n) with UNMAP. It is advisory, as a block layer discard is:
// blocks outside whole granules are left alone, and what the range reads
// afterwards is the target's choice (Unmap is the call that guarantees
// zeros). Commands respect the Block Limits page: at most
// MaxUnmapLBACount blocks and MaxUnmapDescriptors descriptors each, and
// after the first they start on a granule.
func (s *Session) Discard(ctx context.Context, off, n int64) error {
	if err := s.checkRange(off, n); err != nil {
		return err
	}
	maxLBA, maxDesc, gran, align, ok := s.unmapGeometry()
	if !ok {
		return ErrUnmapUnsupported
	}
	bs := uint64(s.blockSize)
	a, e := granules(uint64(off)/bs, uint64(off+n)/bs, gran, align)
	for a < e {
		total := min(e-a, maxLBA, maxDesc*0xffffffff)
		if total < e-a && total >= gran {
			total -= total % gran // the next command starts on a granule
		}
		var ds []proto.UnmapDescriptor
		for lba, left := a, total; left > 0; {
			b := min(left, 0xffffffff)
			ds = append(ds, proto.UnmapDescriptor{LBA: lba, Blocks: uint32(b)})
			lba += b
			left -= b
		}
		params := proto.UnmapParams(ds)
		r, err := s.Do(ctx, &Command{CDB: proto.Unmap(uint16(len(params))), Out: params})
		if err != nil {
			return err
		}
		if err := r.Err(); err != nil {
			if unsupported(err) {
				return ErrUnmapUnsupported
			}
			return fmt.Errorf("iscsi: UNMAP [%d,+%d) blocks: %w", a, total, err)
		}
		a += total
	}
	return nil
}

// unsupported reports ILLEGAL REQUEST for an unknown opcode or a CDB field
// the LUN does not take: the command (or that use of it) is not there.
func unsupported(err error) bool {
	var cc *proto.CheckConditionError
	return errors.As(err, &cc) && cc.Sense.Key == proto.SenseIllegalRequest &&
		(cc.Sense.ASC == proto.ASCInvalidOpcode || cc.Sense.ASC == proto.ASCInvalidFieldInCDB)
}

// Unmap deallocates [off, off+n) so that it reads back as zeros (the
// blockdev.Unmapper contract, and what fallocate PUNCH_HOLE promises):
// WRITE SAME (16) of a zero block with the UNMAP bit, which SBC defines as
// "deallocate if you can, and read back zeros either way". A LUN without
// WRITE SAME but with LBPRZ (unmapped blocks read as zeros) gets UNMAP for
// the whole granules and zeros written around them.
func (s *Session) Unmap(ctx context.Context, off, n int64) error {
	if err := s.checkRange(off, n); err != nil {
		return err
	}
	if !s.capacity.LBPME {
		return ErrUnmapUnsupported
	}
	err := s.writeSame(ctx, off, n, true)
	if !errors.Is(err, errNoWriteSame) {
		return err
	}
	_, _, gran, align, ok := s.unmapGeometry()
	if !ok || !s.capacity.LBPRZ {
		return ErrUnmapUnsupported
	}
	bs := uint64(s.blockSize)
	a, e := granules(uint64(off)/bs, uint64(off+n)/bs, gran, align)
	if a >= e {
		return s.writeZeroBuffers(ctx, off, n)
	}
	if err := s.Discard(ctx, int64(a*bs), int64((e-a)*bs)); err != nil {
		return err
	}
	if err := s.writeZeroBuffers(ctx, off, int64(a*bs)-off); err != nil {
		return err
	}
	return s.writeZeroBuffers(ctx, int64(e*bs), off+n-int64(e*bs))
}

// WriteZeroes writes zeros over [off, off+n) and keeps it allocated (fallocate
// ZERO_RANGE): WRITE SAME (16) of a zero block, or plain zero writes on a
// LUN without WRITE SAME.
func (s *Session) WriteZeroes(ctx context.Context, off, n int64) error {
	if err := s.checkRange(off, n); err != nil {
		return err
	}
	err := s.writeSame(ctx, off, n, false)
	if errors.Is(err, errNoWriteSame) {
		return s.writeZeroBuffers(ctx, off, n)
	}
	return err
}

// writeSame sends WRITE SAME (16) of one zero block over [off, off+n) in
// pieces no longer than the Block Limits page's MaxWriteSameLength.
func (s *Session) writeSame(ctx context.Context, off, n int64, unmap bool) error {
	bs := uint64(s.blockSize)
	step := s.limits.MaxWriteSameLength
	if step == 0 {
		step = defaultMaxWriteSameBlocks
	}
	step = min(step, 0xffffffff)
	zero := make([]byte, bs)
	for lba, end := uint64(off)/bs, uint64(off+n)/bs; lba < end; {
		cnt := min(end-lba, step)
		r, err := s.Do(ctx, &Command{CDB: proto.WriteSame16(lba, uint32(cnt), unmap), Out: zero})
		if err != nil {
			return err
		}
		if err := r.Err(); err != nil {
			if unsupported(err) {
				return errNoWriteSame
			}
			return fmt.Errorf("iscsi: WRITE SAME [%d,+%d) blocks: %w", lba, cnt, err)
		}
		lba += cnt
	}
	return nil
}

// writeZeroBuffers writes zeros with plain WRITEs, 1 MiB at a time.
func (s *Session) writeZeroBuffers(ctx context.Context, off, n int64) error {
	if n <= 0 {
		return nil
	}
	zero := make([]byte, min(n, 1<<20))
	for done := int64(0); done < n; {
		c := min(int64(len(zero)), n-done)
		if _, err := s.WriteAt(ctx, zero[:c], off+done); err != nil {
			return err
		}
		done += c
	}
	return nil
}
