// Package raid is a blockdev.Device made of member Devices: RAID-0 (striped)
// and RAID-5 (striped with rotated parity, left-symmetric as Linux MD). The
// members can be anything that is a Device (files, iSCSI sessions, another
// array), so iRAID over remote targets and local disk layouts are the same
// code. Every member carries a superblock (superblock.go) so the array
// assembles itself from its members in any order; see docs/raid.md.
package raid

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/tristore/tristore/blockdev"
)

var (
	// ErrArrayFailed is returned once more members have failed than the
	// level tolerates: the array stops rather than return wrong data.
	ErrArrayFailed = errors.New("raid: array failed (too many members lost)")
	// ErrBadSuperblock is a member whose superblock is missing or corrupt.
	ErrBadSuperblock = errors.New("raid: bad superblock")
	// ErrForeign is a member that belongs to another array.
	ErrForeign = errors.New("raid: member belongs to another array")
	// ErrStale is a member whose event counter is behind the others (it
	// failed or was absent while the array changed).
	ErrStale = errors.New("raid: stale member")
	// ErrMismatch is a member whose size or geometry does not fit.
	ErrMismatch = errors.New("raid: member does not match the array")
	// ErrDirtyDegraded refuses to start a RAID-5 that was not shut down
	// cleanly and is missing a member: parity of the regions being written
	// at the crash may be stale, so reconstructing the missing member
	// there could return wrong data (the write hole; see docs/raid.md).
	ErrDirtyDegraded = errors.New("raid: array is dirty and degraded; missing member's data in unsynced regions cannot be trusted")
)

// DefaultChunk is the stripe unit, 64 KiB as in seed 002.
const DefaultChunk = 64 << 10

// maxParallel bounds the member I/Os one request issues at once.
const maxParallel = 16

// stripeLocks is the number of lock shards; a row (stripe) takes the
// shard stripe%stripeLocks so writers to one stripe are serialised.
const stripeLocks = 64

// Array is a RAID volume over member Devices.
type Array struct {
	level      int
	chunk      int64
	n          int
	bs         int
	memberSize int64
	dataOff    int64
	uuid       [16]byte
	devs       []blockdev.Device

	locks [stripeLocks]sync.Mutex

	mu       sync.Mutex // guards the fields below and superblock writes
	failed   []bool
	events   uint64
	stopped  bool
	closed   bool
	rebuild  int   // slot being rebuilt, -1 none
	rebPos   int64 // rows below rebPos are in sync on the rebuild slot
	rebCk    int64 // rows below rebCk are also durable there (the checkpoint)
	region   int64 // member bytes per bitmap bit
	bitmap   []byte
	inflight map[int64]int    // region -> writes in progress
	lastGen  map[int64]uint64 // region -> write generation of last write
	gen      uint64
}

// Level reports the RAID level (0 or 5).
func (a *Array) Level() int { return a.level }

// Chunk reports the stripe unit in bytes.
func (a *Array) Chunk() int { return int(a.chunk) }

// Members reports the member count.
func (a *Array) Members() int { return a.n }

// Status is a snapshot of array state for `tristore raid status`.
type Status struct {
	Level      int
	Chunk      int
	Members    int
	Size       int64
	Events     uint64
	Failed     []int
	Rebuilding int // slot, -1 none
	RebuildPos int64
	DirtyBits  int
	Stopped    bool
}

// Status reports the array state.
func (a *Array) Status() Status {
	a.mu.Lock()
	defer a.mu.Unlock()
	st := Status{Level: a.level, Chunk: int(a.chunk), Members: a.n, Size: a.Size(), Events: a.events,
		Rebuilding: a.rebuild, RebuildPos: a.rebPos * a.chunk, Stopped: a.stopped}
	for i, f := range a.failed {
		if f {
			st.Failed = append(st.Failed, i)
		}
	}
	for _, b := range a.bitmap {
		for ; b != 0; b &= b - 1 {
			st.DirtyBits++
		}
	}
	return st
}

// Create writes fresh superblocks on members (slot i = members[i]),
// flushes them and returns the open array. chunk 0 means DefaultChunk.
// Every member contributes the smallest member's size.
func Create(ctx context.Context, level, chunk int, members []blockdev.Device) (*Array, error) {
	if chunk == 0 {
		chunk = DefaultChunk
	}
	switch {
	case level != 0 && level != 5:
		return nil, fmt.Errorf("raid: level %d not supported (0 or 5)", level)
	case level == 5 && len(members) < 3:
		return nil, fmt.Errorf("raid: RAID-5 needs at least 3 members, got %d", len(members))
	case len(members) < 1 || len(members) > 32:
		return nil, fmt.Errorf("raid: %d members (1..32)", len(members))
	}
	bs := 0
	for _, m := range members {
		bs = max(bs, m.BlockSize())
	}
	if chunk%bs != 0 || SuperblockSize%bs != 0 {
		return nil, fmt.Errorf("raid: chunk %d is not a multiple of member block size %d", chunk, bs)
	}
	ms := int64(-1)
	for i, m := range members {
		s := m.Size() - DataOffset
		s -= s % int64(chunk)
		if s <= 0 {
			return nil, fmt.Errorf("%w: member %d (%d bytes) too small for chunk %d", ErrMismatch, i, m.Size(), chunk)
		}
		if ms < 0 || s < ms {
			ms = s
		}
	}
	a := &Array{level: level, chunk: int64(chunk), n: len(members), bs: bs, memberSize: ms,
		dataOff: DataOffset, devs: append([]blockdev.Device(nil), members...), failed: make([]bool, len(members)),
		events: 1, rebuild: -1}
	if _, err := io.ReadFull(rand.Reader, a.uuid[:]); err != nil {
		return nil, err
	}
	a.initBitmap(nil)
	if err := a.writeSuperblocks(ctx, true); err != nil {
		return nil, err
	}
	return a, nil
}

func (a *Array) initBitmap(bm []byte) {
	bits := int64(maxBitmapLen * 8)
	r := a.chunk
	for (a.memberSize+r-1)/r > bits {
		r *= 2
	}
	if a.region == 0 {
		a.region = r
	}
	nb := int(((a.memberSize+a.region-1)/a.region + 7) / 8)
	a.bitmap = make([]byte, nb)
	copy(a.bitmap, bm)
	a.inflight = map[int64]int{}
	a.lastGen = map[int64]uint64{}
}

func (a *Array) sbFor(i int, dirty bool) *superblock {
	s := &superblock{Level: a.level, UUID: a.uuid, Chunk: int(a.chunk), Members: a.n, Index: i,
		BlockSize: a.bs, DataOffset: a.dataOff, MemberSize: a.memberSize, Events: a.events, Dirty: dirty,
		RebuildIdx: a.rebuild, RebuildPos: a.rebCk * a.chunk, RegionSize: a.region, Bitmap: a.bitmap}
	for j, f := range a.failed {
		if f {
			s.FailedMask |= 1 << j
		}
	}
	return s
}

// writeSuperblocks writes and flushes the superblock on every live member
// (a.mu held or not yet shared). A member that fails here is marked failed
// and the rest are rewritten, bounded by the member count.
func (a *Array) writeSuperblocks(ctx context.Context, dirty bool) error {
	for range a.n + 1 {
		var mu sync.Mutex
		var bad []int
		live := a.liveSlots()
		err := parallel(ctx, len(live), func(k int) error {
			i := live[k]
			b := a.sbFor(i, dirty).marshal()
			if err := writeFull(ctx, a.devs[i], b, 0); err == nil {
				if err = a.devs[i].Flush(ctx); err == nil {
					return nil
				}
			}
			mu.Lock()
			bad = append(bad, i)
			mu.Unlock()
			return nil
		})
		if err != nil {
			return err
		}
		if len(bad) == 0 {
			return nil
		}
		for _, i := range bad {
			a.failed[i] = true
		}
		a.events++
		if !a.tolerable() {
			a.stopped = true
			return fmt.Errorf("%w: superblock update failed on members %v", ErrArrayFailed, bad)
		}
	}
	return fmt.Errorf("%w: superblock update kept failing", ErrArrayFailed)
}

// liveSlots lists the slots with a present, non-failed member, plus the
// slot being rebuilt (its superblock must follow the array).
func (a *Array) liveSlots() []int {
	var s []int
	for i := range a.n {
		if a.devs[i] != nil && (!a.failed[i] || i == a.rebuild) {
			s = append(s, i)
		}
	}
	return s
}

func (a *Array) nfailed() int {
	c := 0
	for i, f := range a.failed {
		if f && i != a.rebuild {
			c++
		}
	}
	return c
}

func (a *Array) tolerable() bool {
	c := 0
	for _, f := range a.failed {
		if f {
			c++
		}
	}
	if a.level == 0 {
		return c == 0
	}
	return c <= 1
}

// fail marks slot i failed after err, bumps the event counter and records
// it on the surviving members. It returns ErrArrayFailed (wrapping err)
// if the array can no longer serve data.
func (a *Array) fail(ctx context.Context, i int, err error) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.stopped {
		return fmt.Errorf("%w: %v", ErrArrayFailed, err)
	}
	if a.failed[i] && i != a.rebuild {
		return nil
	}
	if i == a.rebuild {
		// The replacement died: abandon the rebuild, the slot stays failed.
		a.rebuild, a.rebPos, a.rebCk = -1, 0, 0
	}
	a.failed[i] = true
	a.events++
	if !a.tolerable() {
		a.stopped = true
		return fmt.Errorf("%w: member %d failed: %v", ErrArrayFailed, i, err)
	}
	if werr := a.writeSuperblocks(context.WithoutCancel(ctx), true); werr != nil {
		return werr
	}
	return nil
}

// memberErr is an I/O error from one member.
type memberErr struct {
	slot int
	err  error
}

func (e *memberErr) Error() string { return fmt.Sprintf("raid: member %d: %v", e.slot, e.err) }
func (e *memberErr) Unwrap() error { return e.err }

func readFull(ctx context.Context, d blockdev.Device, p []byte, off int64) error {
	n, err := d.ReadAt(ctx, p, off)
	if err == nil && n != len(p) {
		err = fmt.Errorf("short read: %d of %d bytes: %w", n, len(p), io.ErrUnexpectedEOF)
	}
	return err
}

func writeFull(ctx context.Context, d blockdev.Device, p []byte, off int64) error {
	n, err := d.WriteAt(ctx, p, off)
	if err == nil && n != len(p) {
		err = fmt.Errorf("short write: %d of %d bytes: %w", n, len(p), io.ErrShortWrite)
	}
	return err
}

// parallel runs fn(0..k-1) with at most maxParallel at once and returns
// the first error.
func parallel(ctx context.Context, k int, fn func(int) error) error {
	if k == 1 {
		return fn(0)
	}
	sem := make(chan struct{}, maxParallel)
	errs := make([]error, k)
	var wg sync.WaitGroup
	for i := range k {
		if err := ctx.Err(); err != nil {
			errs[i] = err
			break
		}
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			errs[i] = fn(i)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Size is the array's data capacity.
func (a *Array) Size() int64 {
	if a.level == 5 {
		return int64(a.n-1) * a.memberSize
	}
	return int64(a.n) * a.memberSize
}

// BlockSize is the largest member block size.
func (a *Array) BlockSize() int { return a.bs }

func (a *Array) check(p []byte, off int64) error {
	a.mu.Lock()
	closed, stopped := a.closed, a.stopped
	a.mu.Unlock()
	switch {
	case closed:
		return blockdev.ErrClosed
	case stopped:
		return ErrArrayFailed
	case off < 0 || off+int64(len(p)) > a.Size():
		return blockdev.ErrOutOfRange
	case off%int64(a.bs) != 0 || len(p)%a.bs != 0:
		return blockdev.ErrMisaligned
	}
	return nil
}

// rowData is the data bytes in one row (stripe) of the array.
func (a *Array) rowData() int64 {
	if a.level == 5 {
		return int64(a.n-1) * a.chunk
	}
	return int64(a.n) * a.chunk
}

// forRows splits [off, off+len(p)) into rows and runs fn on each in
// parallel (bounded).
func (a *Array) forRows(ctx context.Context, p []byte, off int64, fn func(row, in int64, q []byte) error) error {
	rd := a.rowData()
	first, last := off/rd, (off+int64(len(p))-1)/rd
	return parallel(ctx, int(last-first+1), func(k int) error {
		row := first + int64(k)
		lo, hi := max(off, row*rd), min(off+int64(len(p)), (row+1)*rd)
		return a.retry(ctx, func() error { return fn(row, lo-row*rd, p[lo-off:hi-off]) })
	})
}

// retry runs op; when it fails on a member, the member is marked failed and
// op runs again (now degraded), at most n+1 times.
func (a *Array) retry(ctx context.Context, op func() error) error {
	for range a.n + 1 {
		err := op()
		var me *memberErr
		if err == nil || !errors.As(err, &me) {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if ferr := a.fail(ctx, me.slot, me.err); ferr != nil {
			return ferr
		}
	}
	return ErrArrayFailed
}

// ReadAt reads p at off, reconstructing a failed member's data from parity.
func (a *Array) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	if err := a.check(p, off); err != nil {
		return 0, err
	}
	if len(p) == 0 {
		return 0, nil
	}
	err := a.forRows(ctx, p, off, func(row, in int64, q []byte) error {
		if a.level == 5 {
			return a.readRow5(ctx, row, in, q)
		}
		return a.ioRow0(ctx, row, in, q, false)
	})
	if err != nil {
		return 0, err
	}
	return len(p), nil
}

// WriteAt writes p at off. Before any RAID-5 data reaches a member, the
// write-intent bit of its region is set and durable on every member.
func (a *Array) WriteAt(ctx context.Context, p []byte, off int64) (int, error) {
	if err := a.check(p, off); err != nil {
		return 0, err
	}
	if len(p) == 0 {
		return 0, nil
	}
	if a.level == 5 {
		rd := a.rowData()
		r0, r1 := (off/rd)*a.chunk/a.region, ((off+int64(len(p))-1)/rd)*a.chunk/a.region
		if err := a.markDirty(ctx, r0, r1); err != nil {
			return 0, err
		}
		defer a.endWrite(r0, r1)
	}
	err := a.forRows(ctx, p, off, func(row, in int64, q []byte) error {
		if a.level == 5 {
			return a.writeRow5(ctx, row, in, q)
		}
		return a.ioRow0(ctx, row, in, q, true)
	})
	if err != nil {
		return 0, err
	}
	return len(p), nil
}

// ioRow0 reads or writes part of one RAID-0 row.
func (a *Array) ioRow0(ctx context.Context, row, in int64, q []byte, write bool) error {
	c0, c1 := in/a.chunk, (in+int64(len(q))-1)/a.chunk
	return parallel(ctx, int(c1-c0+1), func(k int) error {
		c := c0 + int64(k)
		lo, hi := max(in, c*a.chunk), min(in+int64(len(q)), (c+1)*a.chunk)
		slot := int(c)
		moff := a.dataOff + row*a.chunk + lo - c*a.chunk
		buf := q[lo-in : hi-in]
		var err error
		if write {
			err = writeFull(ctx, a.devs[slot], buf, moff)
		} else {
			err = readFull(ctx, a.devs[slot], buf, moff)
		}
		if err != nil {
			return &memberErr{slot, err}
		}
		return nil
	})
}

// markDirty sets bitmap bits r0..r1 (persisting them first if new) and
// counts the write in flight.
func (a *Array) markDirty(ctx context.Context, r0, r1 int64) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	changed := false
	a.gen++
	for r := r0; r <= r1; r++ {
		a.inflight[r]++
		a.lastGen[r] = a.gen
		if a.bitmap[r/8]&(1<<(r%8)) == 0 {
			a.bitmap[r/8] |= 1 << (r % 8)
			changed = true
		}
	}
	if changed {
		if err := a.writeSuperblocks(context.WithoutCancel(ctx), true); err != nil {
			for r := r0; r <= r1; r++ {
				a.inflight[r]--
			}
			return err
		}
	}
	return nil
}

func (a *Array) endWrite(r0, r1 int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for r := r0; r <= r1; r++ {
		a.inflight[r]--
	}
}

// Flush flushes every member in parallel, then clears the write-intent
// bits of regions with no write since the flush began.
func (a *Array) Flush(ctx context.Context) error {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return blockdev.ErrClosed
	}
	if a.stopped {
		a.mu.Unlock()
		return ErrArrayFailed
	}
	startGen := a.gen
	live := a.liveSlots()
	a.mu.Unlock()
	var ferr error
	var fmu sync.Mutex
	_ = parallel(ctx, len(live), func(k int) error {
		if err := a.devs[live[k]].Flush(ctx); err != nil {
			if e := a.fail(ctx, live[k], err); e != nil {
				fmu.Lock()
				ferr = e
				fmu.Unlock()
			}
		}
		return nil
	})
	if ferr != nil {
		return ferr
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	if a.level != 5 {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	changed := false
	for r := range int64(len(a.bitmap) * 8) {
		if a.bitmap[r/8]&(1<<(r%8)) != 0 && a.inflight[r] == 0 && a.lastGen[r] <= startGen {
			a.bitmap[r/8] &^= 1 << (r % 8)
			delete(a.lastGen, r)
			delete(a.inflight, r)
			changed = true
		}
	}
	if changed {
		return a.writeSuperblocks(context.WithoutCancel(ctx), true)
	}
	return nil
}

// Close flushes, records a clean shutdown on every member and closes them.
func (a *Array) Close() error {
	ctx := context.Background()
	err := a.Flush(ctx)
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return blockdev.ErrClosed
	}
	a.closed = true
	if err == nil && !a.stopped {
		err = a.writeSuperblocks(ctx, false)
	}
	for _, d := range a.devs {
		if d != nil {
			err = errors.Join(err, d.Close())
		}
	}
	return err
}

var _ blockdev.Device = (*Array)(nil)
