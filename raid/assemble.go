package raid

import (
	"context"
	"errors"
	"fmt"

	"github.com/tristore/tristore/blockdev"
)

// Assemble reads the superblock of every given member and opens the array
// they form, whatever their order. A RAID-5 may be assembled with one
// member missing (degraded). It refuses a corrupt superblock, a member of
// another array, a member whose event counter is behind the newest (it was
// failed or absent while the array changed), duplicate slots and members
// smaller than the recorded size, naming the member (its position in
// members). If the array was not shut down cleanly, the parity of every
// region in the write-intent bitmap is recomputed before it returns.
func Assemble(ctx context.Context, members []blockdev.Device) (*Array, error) {
	if len(members) == 0 {
		return nil, errors.New("raid: no members")
	}
	sbs := make([]*superblock, len(members))
	for i, m := range members {
		b := make([]byte, SuperblockSize)
		if err := readFull(ctx, m, b, 0); err != nil {
			return nil, fmt.Errorf("raid: member %d: reading superblock: %w", i, err)
		}
		sb, err := unmarshalSuperblock(b)
		if err != nil {
			return nil, fmt.Errorf("raid: member %d: %w", i, err)
		}
		sbs[i] = sb
	}
	// The newest superblock describes the array.
	ref := sbs[0]
	for _, sb := range sbs[1:] {
		if sb.UUID != ref.UUID {
			continue
		}
		if sb.Events > ref.Events {
			ref = sb
		}
	}
	byUUID := 0
	for i, sb := range sbs {
		if sb.UUID != sbs[0].UUID {
			return nil, fmt.Errorf("%w: member %d has array UUID %x, member 0 has %x", ErrForeign, i, sb.UUID, sbs[0].UUID)
		}
		byUUID++
	}
	_ = byUUID
	a := &Array{level: ref.Level, chunk: int64(ref.Chunk), n: ref.Members, bs: ref.BlockSize,
		memberSize: ref.MemberSize, dataOff: ref.DataOffset, uuid: ref.UUID, events: ref.Events,
		devs: make([]blockdev.Device, ref.Members), failed: make([]bool, ref.Members),
		rebuild: ref.RebuildIdx, region: ref.RegionSize}
	if a.rebuild >= 0 {
		a.rebPos = ref.RebuildPos / a.chunk
		a.rebCk = a.rebPos
	}
	for i, sb := range sbs {
		m := members[i]
		switch {
		case sb.Events < ref.Events:
			return nil, fmt.Errorf("%w: member %d (slot %d) has event counter %d, array is at %d; it missed changes and must be replaced, not re-added", ErrStale, i, sb.Index, sb.Events, ref.Events)
		case sb.Level != ref.Level || sb.Chunk != ref.Chunk || sb.Members != ref.Members || sb.MemberSize != ref.MemberSize || sb.DataOffset != ref.DataOffset:
			return nil, fmt.Errorf("%w: member %d geometry differs from the array's", ErrMismatch, i)
		case m.Size() < sb.DataOffset+sb.MemberSize:
			return nil, fmt.Errorf("%w: member %d is %d bytes, array needs %d", ErrMismatch, i, m.Size(), sb.DataOffset+sb.MemberSize)
		case ref.BlockSize%m.BlockSize() != 0:
			return nil, fmt.Errorf("%w: member %d block size %d", ErrMismatch, i, m.BlockSize())
		case a.devs[sb.Index] != nil:
			return nil, fmt.Errorf("%w: member %d claims slot %d, already taken", ErrMismatch, i, sb.Index)
		case ref.FailedMask&(1<<sb.Index) != 0 && sb.Index != ref.RebuildIdx:
			return nil, fmt.Errorf("%w: member %d (slot %d) is recorded as failed", ErrStale, i, sb.Index)
		}
		a.devs[sb.Index] = m
	}
	for s := range a.n {
		if a.devs[s] == nil || ref.FailedMask&(1<<s) != 0 {
			a.failed[s] = true
		}
		if a.devs[s] == nil && ref.FailedMask&(1<<s) == 0 {
			// Started without this member: bump the generation so that if it
			// comes back after degraded writes it is refused as stale.
			a.events++
		}
	}
	if a.rebuild >= 0 && a.devs[a.rebuild] == nil {
		a.rebuild, a.rebPos, a.rebCk = -1, 0, 0
	}
	if !a.tolerable() {
		return nil, fmt.Errorf("%w: %d of %d members present", ErrArrayFailed, len(members), a.n)
	}
	a.initBitmap(ref.Bitmap)
	if a.level == 5 && ref.Dirty {
		if err := a.resync(ctx); err != nil {
			return nil, err
		}
	}
	if err := a.writeSuperblocks(ctx, true); err != nil {
		return nil, err
	}
	return a, nil
}

// resync recomputes parity for every row of every region marked in the
// write-intent bitmap, then clears the bitmap. A degraded array with
// dirty regions is refused: the missing member's data there would be
// reconstructed from parity that may not match (the write hole).
func (a *Array) resync(ctx context.Context) error {
	var regions []int64
	for r := range int64(len(a.bitmap) * 8) {
		if a.bitmap[r/8]&(1<<(r%8)) != 0 {
			regions = append(regions, r)
		}
	}
	if len(regions) == 0 {
		return nil
	}
	if a.nfailed() > 0 {
		return fmt.Errorf("%w (%d dirty regions)", ErrDirtyDegraded, len(regions))
	}
	rows := a.memberSize / a.chunk
	if a.rebuild >= 0 {
		// Rows past the rebuild checkpoint are degraded on the new member.
		for _, r := range regions {
			if (r+1)*a.region/a.chunk > a.rebPos {
				return fmt.Errorf("%w (region %d beyond the rebuild checkpoint)", ErrDirtyDegraded, r)
			}
		}
	}
	for _, r := range regions {
		for row := r * a.region / a.chunk; row < min(rows, (r+1)*a.region/a.chunk); row++ {
			if _, err := a.syncRow(ctx, row, true); err != nil {
				return fmt.Errorf("raid: resync row %d: %w", row, err)
			}
		}
	}
	for _, s := range a.liveSlots() {
		if err := a.devs[s].Flush(ctx); err != nil {
			return fmt.Errorf("raid: resync: member slot %d: %w", s, err)
		}
	}
	clear(a.bitmap)
	return nil
}
