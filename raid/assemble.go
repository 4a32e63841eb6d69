package raid

import (
	"context"
	"errors"
	"fmt"

	"github.com/tristore/tristore/blockdev"
)

// MemberInfo is what one member's superblock says (Examine).
type MemberInfo struct {
	Position int    // in the list given
	Slot     int    // -1 if the superblock is unreadable
	Events   uint64 // its event counter
	Dirty    bool
	Err      string `json:",omitempty"` // why it cannot join, if it cannot
}

// Info describes an array from its members' superblocks without opening it
// (`tristore raid status`): nothing is written.
type Info struct {
	Level, Chunk, Members int
	Size                  int64
	Events                uint64
	Dirty                 bool // not shut down cleanly: assembly replays the journal
	Failed                []int
	Missing               []int // slots no given member holds
	Rebuilding            int
	RebuildPos            int64
	JournalSize           int64
	JournalSeq            uint64
	MemberList            []MemberInfo
}

// plan is the outcome of reading and cross-checking the superblocks.
type plan struct {
	ref  *superblock
	sbs  []*superblock
	devs []blockdev.Device // by slot
}

// examine reads every member's superblock and checks that they form one
// array, naming a bad member by its position in members.
func examine(ctx context.Context, members []blockdev.Device) (*plan, error) {
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
	// The array is the UUID most members carry (ties: the first member's);
	// a member with another UUID belongs to another array.
	count := map[[16]byte]int{}
	for _, sb := range sbs {
		count[sb.UUID]++
	}
	uuid := sbs[0].UUID
	for _, sb := range sbs {
		if count[sb.UUID] > count[uuid] {
			uuid = sb.UUID
		}
	}
	for i, sb := range sbs {
		if sb.UUID != uuid {
			return nil, fmt.Errorf("%w: member %d has array UUID %x, the other members %x", ErrForeign, i, sb.UUID, uuid)
		}
	}
	// The newest superblock describes the array.
	ref := sbs[0]
	for _, sb := range sbs[1:] {
		if sb.Events > ref.Events {
			ref = sb
		}
	}
	p := &plan{ref: ref, sbs: sbs, devs: make([]blockdev.Device, ref.Members)}
	for i, sb := range sbs {
		m := members[i]
		switch {
		case sb.Level != ref.Level || sb.Chunk != ref.Chunk || sb.Members != ref.Members || sb.MemberSize != ref.MemberSize ||
			sb.DataOffset != ref.DataOffset || sb.JournalOff != ref.JournalOff || sb.JournalLen != ref.JournalLen:
			return nil, fmt.Errorf("%w: member %d geometry differs from the array's", ErrMismatch, i)
		case sb.Events < ref.Events && !missedLastUpdate(sb, ref):
			return nil, fmt.Errorf("%w: member %d (slot %d) has event counter %d, array is at %d; it missed changes and must be replaced, not re-added", ErrStale, i, sb.Index, sb.Events, ref.Events)
		case m.Size() < sb.DataOffset+sb.MemberSize:
			return nil, fmt.Errorf("%w: member %d is %d bytes, array needs %d", ErrMismatch, i, m.Size(), sb.DataOffset+sb.MemberSize)
		case ref.BlockSize%m.BlockSize() != 0:
			return nil, fmt.Errorf("%w: member %d block size %d", ErrMismatch, i, m.BlockSize())
		case p.devs[sb.Index] != nil:
			return nil, fmt.Errorf("%w: member %d claims slot %d, already taken by another member (the same device twice?)", ErrMismatch, i, sb.Index)
		case ref.FailedMask&(1<<sb.Index) != 0 && sb.Index != ref.RebuildIdx:
			return nil, fmt.Errorf("%w: member %d (slot %d) is recorded as failed", ErrStale, i, sb.Index)
		}
		p.devs[sb.Index] = m
	}
	return p, nil
}

// missedLastUpdate reports whether sb is behind ref only because a crash
// interrupted the superblock update that produced ref: ref was written
// while the array was open (dirty), is one event ahead, and still counts
// sb's slot as in sync, so the array went on writing to that member and its
// data is current. Anything further behind is stale.
func missedLastUpdate(sb, ref *superblock) bool {
	return ref.Dirty && ref.Events-sb.Events == 1 && ref.FailedMask&(1<<sb.Index) == 0 && sb.Index != ref.RebuildIdx
}

// Examine reads the members' superblocks and reports the array they form
// without writing anything. It fails for the same reasons Assemble does.
func Examine(ctx context.Context, members []blockdev.Device) (Info, error) {
	p, err := examine(ctx, members)
	if err != nil {
		return Info{}, err
	}
	r := p.ref
	in := Info{Level: r.Level, Chunk: r.Chunk, Members: r.Members, Events: r.Events, Rebuilding: r.RebuildIdx,
		RebuildPos: r.RebuildPos, JournalSize: r.JournalLen, JournalSeq: r.JournalCk}
	switch r.Level {
	case 0:
		in.Size = int64(r.Members) * r.MemberSize
	case 1:
		in.Size = r.MemberSize
	case 5:
		in.Size = int64(r.Members-1) * r.MemberSize
	}
	for i, sb := range p.sbs {
		in.Dirty = in.Dirty || sb.Dirty
		in.MemberList = append(in.MemberList, MemberInfo{Position: i, Slot: sb.Index, Events: sb.Events, Dirty: sb.Dirty})
	}
	for s := range r.Members {
		if r.FailedMask&(1<<s) != 0 {
			in.Failed = append(in.Failed, s)
		} else if p.devs[s] == nil {
			in.Missing = append(in.Missing, s)
		}
	}
	return in, nil
}

// Assemble reads the superblock of every given member and opens the array
// they form, whatever their order. A RAID-5 may be assembled with one
// member missing, a RAID-1 with all but one (degraded). It refuses a
// corrupt superblock, a member of another array, a member whose event
// counter is behind the newest (it was failed or absent while the array
// changed), duplicate slots and members smaller than the recorded size,
// naming the member (its position in members). If the array was not shut
// down cleanly, the journal is replayed before it returns (journal.go).
func Assemble(ctx context.Context, members []blockdev.Device) (*Array, error) {
	p, err := examine(ctx, members)
	if err != nil {
		return nil, err
	}
	ref := p.ref
	a := &Array{level: ref.Level, chunk: int64(ref.Chunk), n: ref.Members, bs: ref.BlockSize,
		memberSize: ref.MemberSize, dataOff: ref.DataOffset, uuid: ref.UUID, events: ref.Events,
		devs: p.devs, failed: make([]bool, ref.Members), rebuild: ref.RebuildIdx}
	if a.rebuild >= 0 {
		a.rebPos = ref.RebuildPos / a.chunk
		a.rebCk = a.rebPos
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
	// The journal checkpoint is the highest any member recorded: a crash
	// while the superblocks were being rewritten leaves some behind, and
	// everything below the newest was in place before it was written.
	ck := uint64(0)
	for _, sb := range p.sbs {
		ck = max(ck, sb.JournalCk)
	}
	a.jck = ck
	dirty := false
	for _, sb := range p.sbs {
		dirty = dirty || sb.Dirty
	}
	a.initJournal(ref.JournalLen, ck)
	if a.level != 0 && a.jnl == nil && dirty {
		if err := a.resyncAll(ctx); err != nil {
			return nil, err
		}
	}
	if a.jnl != nil {
		a.jnl.off = ref.JournalOff
		if dirty && !skipReplay {
			next, st, err := a.jnl.replay(ctx, ck)
			if err != nil {
				return nil, err
			}
			a.replayed = st
			a.jnl.seq = next
			a.jck = next
		}
	}
	if err := a.writeSuperblocks(ctx, true); err != nil {
		return nil, err
	}
	return a, nil
}

// resyncAll recomputes the redundancy of every row of an array without a
// journal after a crash. With a member missing that cannot be done right,
// so it is refused.
func (a *Array) resyncAll(ctx context.Context) error {
	if a.nfailed() > 0 || a.rebuild >= 0 {
		return ErrDirtyDegraded
	}
	for row := range a.memberSize / a.chunk {
		if _, err := a.syncRow(ctx, row, true); err != nil {
			return fmt.Errorf("raid: resync row %d: %w", row, err)
		}
	}
	return a.flushMembers(ctx)
}

// skipReplay is set by the tests that show the journal is what keeps the
// data right (they must fail without it).
var skipReplay bool
