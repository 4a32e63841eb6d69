// Package raid is a blockdev.Device made of member Devices: RAID-0 (striped),
// RAID-1 (mirrored) and RAID-5 (striped with rotated parity, left-symmetric
// as Linux MD). The members can be anything that is a Device (files, iSCSI
// sessions, another array), so iRAID over remote targets and local disk
// layouts are the same code. Every member carries a superblock
// (superblock.go) so the array assembles itself from its members in any
// order, and RAID-1/5 writes go through a journal (journal.go) so a crash
// between data and parity writes cannot return wrong data; see docs/raid.md.
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
	// ErrDirtyDegraded refuses to start an array without a journal that
	// was not shut down cleanly and is missing a member: its parity may not
	// match the data where writes were in flight, so the missing member
	// cannot be reconstructed reliably there (the write hole).
	ErrDirtyDegraded = errors.New("raid: array without a journal is dirty and degraded; the missing member's data cannot be trusted")
	// ErrVerify is a rebuild whose final verify pass found rows that do not
	// read back consistent: the new member is left out of the array.
	ErrVerify = errors.New("raid: rebuild verify failed")
)

// DefaultChunk is the stripe unit, 64 KiB as in seed 002.
const DefaultChunk = 64 << 10

// maxParallel bounds the member I/Os one request issues at once.
const maxParallel = 16

// stripeLocks is the number of lock shards; a row (stripe) takes the
// shard stripe%stripeLocks so writers to one stripe are serialised.
const stripeLocks = 64

// maxRowsPerRecord bounds the rows one journal record covers (and so the
// row locks one write holds at once).
const maxRowsPerRecord = 16

// Options configure Create.
type Options struct {
	Level int // 0, 1 or 5
	Chunk int // stripe unit in bytes; 0 = DefaultChunk
	// Journal is the journal ring per member (RAID-1/5); 0 = DefaultJournal.
	Journal int64
	// NoJournal leaves the RAID-1/5 write hole open for speed (no journal
	// write and flush per write): after a crash the whole array's parity is
	// recomputed, and a crash with a member missing is refused
	// (ErrDirtyDegraded).
	NoJournal bool
	// UseSmallest lets members of different sizes form an array, each
	// contributing the smallest one's size; without it Create refuses them.
	UseSmallest bool
}

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
	jnl        *journal // nil for RAID-0
	rowsPerRec int64

	locks [stripeLocks]sync.Mutex

	mu       sync.Mutex // guards the fields below and superblock writes
	failed   []bool
	events   uint64
	stopped  bool
	closed   bool
	rebuild  int    // slot being rebuilt, -1 none
	rebPos   int64  // rows below rebPos are in sync on the rebuild slot
	rebCk    int64  // rows below rebCk are also durable there (the checkpoint)
	jck      uint64 // journal checkpoint sequence (superblock)
	rate     int64  // rebuild rate limit in bytes/s, 0 = none
	replayed replayStats
	rr       uint64 // RAID-1 read round robin
	verify   bool   // SetVerifyReads
}

// Level reports the RAID level (0, 1 or 5).
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
	Stopped    bool
	// Journal (RAID-1/5): ring bytes per member, checkpoint sequence, and
	// what Assemble replayed (complete records) or dropped (torn ones).
	JournalSize     int64
	JournalSeq      uint64
	JournalReplayed int
	JournalDropped  int
	// Since open: records committed, batches written (group commit puts
	// concurrent writers' records in one batch), ring checkpoints.
	JournalRecords, JournalBatches, JournalCheckpoints uint64
}

// Status reports the array state.
func (a *Array) Status() Status {
	var rec, bat, ck uint64
	if a.jnl != nil {
		a.jnl.mu.Lock()
		rec, bat, ck = a.jnl.records, a.jnl.batches, a.jnl.checkpoints
		a.jnl.mu.Unlock()
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	st := Status{Level: a.level, Chunk: int(a.chunk), Members: a.n, Size: a.Size(), Events: a.events,
		Rebuilding: a.rebuild, RebuildPos: a.rebPos * a.chunk, Stopped: a.stopped, JournalSeq: a.jck,
		JournalReplayed: a.replayed.Replayed, JournalDropped: a.replayed.Dropped,
		JournalRecords: rec, JournalBatches: bat, JournalCheckpoints: ck}
	if a.jnl != nil {
		st.JournalSize = a.jnl.size
	}
	for i, f := range a.failed {
		if f {
			st.Failed = append(st.Failed, i)
		}
	}
	return st
}

// Create writes fresh superblocks on members (slot i = members[i]) with the
// default journal, flushes them and returns the open array. chunk 0 means
// DefaultChunk. Members must be the same size (see Options.UseSmallest).
func Create(ctx context.Context, level, chunk int, members []blockdev.Device) (*Array, error) {
	return CreateWith(ctx, Options{Level: level, Chunk: chunk}, members)
}

// CreateWith is Create with every option.
func CreateWith(ctx context.Context, o Options, members []blockdev.Device) (*Array, error) {
	chunk := o.Chunk
	if chunk == 0 {
		chunk = DefaultChunk
	}
	level := o.Level
	switch {
	case level != 0 && level != 1 && level != 5:
		return nil, fmt.Errorf("raid: level %d not supported (0, 1 or 5)", level)
	case level == 5 && len(members) < 3:
		return nil, fmt.Errorf("raid: RAID-5 needs at least 3 members, got %d", len(members))
	case level == 1 && len(members) < 2:
		return nil, fmt.Errorf("raid: RAID-1 needs at least 2 members, got %d", len(members))
	case len(members) < 1 || len(members) > 32:
		return nil, fmt.Errorf("raid: %d members (1..32)", len(members))
	case chunk <= 0:
		return nil, fmt.Errorf("raid: chunk %d", chunk)
	}
	bs := 0
	for _, m := range members {
		bs = max(bs, m.BlockSize())
	}
	if chunk%bs != 0 || SuperblockSize%bs != 0 {
		return nil, fmt.Errorf("raid: chunk %d is not a multiple of member block size %d", chunk, bs)
	}
	dataOff, jlen := int64(DataOffset), int64(0)
	if level != 0 && !o.NoJournal {
		jlen = o.Journal
		if jlen == 0 {
			jlen = DefaultJournal
		}
		jlen = (jlen + SuperblockSize - 1) / SuperblockSize * SuperblockSize
		if min := 4 * (int64(chunk) + SuperblockSize); jlen < min {
			return nil, fmt.Errorf("raid: journal %d bytes is below the minimum %d for chunk %d", jlen, min, chunk)
		}
		dataOff += jlen
	}
	ms := int64(-1)
	for i, m := range members {
		s := m.Size() - dataOff
		s -= s % int64(chunk)
		if s <= 0 {
			return nil, fmt.Errorf("%w: member %d (%d bytes) too small for chunk %d and %d bytes of superblock and journal", ErrMismatch, i, m.Size(), chunk, dataOff)
		}
		if ms >= 0 && s != ms && !o.UseSmallest {
			return nil, fmt.Errorf("%w: member %d holds %d data bytes, member 0 holds %d; members must be the same size (or allow the smallest to set the size)", ErrMismatch, i, s, ms)
		}
		if ms < 0 || s < ms {
			ms = s
		}
	}
	a := &Array{level: level, chunk: int64(chunk), n: len(members), bs: bs, memberSize: ms,
		dataOff: dataOff, devs: append([]blockdev.Device(nil), members...), failed: make([]bool, len(members)),
		events: 1, rebuild: -1}
	if _, err := io.ReadFull(rand.Reader, a.uuid[:]); err != nil {
		return nil, err
	}
	a.initJournal(jlen, 1)
	a.jck = 1
	if err := a.writeSuperblocks(ctx, true); err != nil {
		return nil, err
	}
	return a, nil
}

// initJournal sets up the journal (RAID-1/5) with ring size jlen and
// next sequence seq.
func (a *Array) initJournal(jlen int64, seq uint64) {
	a.rowsPerRec = 1
	if a.level == 0 || jlen == 0 {
		return
	}
	a.jnl = newJournal(a, SuperblockSize, jlen, seq)
	a.rowsPerRec = max(1, min(maxRowsPerRecord, (jlen/4)/(a.chunk+int64(a.bs))))
}

func (a *Array) sbFor(i int, dirty bool) *superblock {
	s := &superblock{Level: a.level, UUID: a.uuid, Chunk: int(a.chunk), Members: a.n, Index: i,
		BlockSize: a.bs, DataOffset: a.dataOff, MemberSize: a.memberSize, Events: a.events, Dirty: dirty,
		RebuildIdx: a.rebuild, RebuildPos: a.rebCk * a.chunk, JournalCk: a.jck}
	if a.jnl != nil {
		s.JournalOff, s.JournalLen = a.jnl.off, a.jnl.size
	}
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
	switch a.level {
	case 0:
		return c == 0
	case 1:
		return c < a.n
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
	switch a.level {
	case 1:
		return a.memberSize
	case 5:
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
	switch a.level {
	case 1:
		return a.chunk
	case 5:
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
// op runs again (now degraded), at most n+1 times for newly failed members.
// A failure on a member already marked failed is someone else's stale plan
// (a journal batch fails as a whole: a record planned before the member was
// marked shares it with records planned after), so it costs a try of its
// own budget (staleTries) instead: with many groups of one request in
// flight, n+1 tries in all could be used up by the other groups' stale
// records while this group's own plan was already degraded.
func (a *Array) retry(ctx context.Context, op func() error) error {
	const staleTries = 64
	var last error
	fresh, stale := 0, 0
	for fresh <= a.n && stale < staleTries {
		err := op()
		var me *memberErr
		if err == nil || !errors.As(err, &me) {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		a.mu.Lock()
		known := a.failed[me.slot] && me.slot != a.rebuild
		a.mu.Unlock()
		if known {
			stale++
		} else {
			fresh++
		}
		if ferr := a.fail(ctx, me.slot, me.err); ferr != nil {
			return ferr
		}
		last = err
	}
	return fmt.Errorf("%w: still failing after %d tries: %v", ErrArrayFailed, fresh+stale, last)
}

// ReadAt reads p at off, reconstructing a failed member's data from parity
// (RAID-5) or reading another copy (RAID-1).
func (a *Array) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	if err := a.check(p, off); err != nil {
		return 0, err
	}
	if len(p) == 0 {
		return 0, nil
	}
	err := a.forRows(ctx, p, off, func(row, in int64, q []byte) error {
		switch a.level {
		case 1:
			return a.readRow1(ctx, row, in, q)
		case 5:
			return a.readRow5(ctx, row, in, q)
		}
		return a.ioRow0(ctx, row, in, q, false)
	})
	if err != nil {
		return 0, err
	}
	return len(p), nil
}

// WriteAt writes p at off. RAID-1/5 writes are durable in the journal
// before they reach their place on the members, so WriteAt returns only
// after the data is durable.
func (a *Array) WriteAt(ctx context.Context, p []byte, off int64) (int, error) {
	if err := a.check(p, off); err != nil {
		return 0, err
	}
	if len(p) == 0 {
		return 0, nil
	}
	var err error
	if a.level != 0 {
		err = a.writeRedundant(ctx, p, off)
	} else {
		err = a.forRows(ctx, p, off, func(row, in int64, q []byte) error {
			return a.ioRow0(ctx, row, in, q, true)
		})
	}
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

// flushMembers flushes every live member in parallel; a member whose
// flush fails is marked failed (ErrArrayFailed if that is one too many).
func (a *Array) flushMembers(ctx context.Context) error {
	a.mu.Lock()
	live := a.liveSlots()
	a.mu.Unlock()
	var ferr error
	var fmu sync.Mutex
	_ = parallel(context.WithoutCancel(ctx), len(live), func(k int) error {
		if err := a.devs[live[k]].Flush(ctx); err != nil {
			if ctx.Err() != nil {
				return nil // the caller gave up; the member did nothing wrong
			}
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
	return ctx.Err()
}

// Flush flushes every member in parallel. A journaled array has nothing to
// do: every acknowledged write is already durable in the journal.
func (a *Array) Flush(ctx context.Context) error {
	a.mu.Lock()
	closed, stopped := a.closed, a.stopped
	a.mu.Unlock()
	switch {
	case closed:
		return blockdev.ErrClosed
	case stopped:
		return ErrArrayFailed
	case a.jnl != nil:
		return ctx.Err()
	}
	return a.flushMembers(ctx)
}

// Fail marks member slot failed by hand (`tristore raid fail`): the event
// counter is bumped and the survivors record it; the member must then be
// replaced. Failing the last redundancy is refused.
func (a *Array) Fail(ctx context.Context, slot int) error {
	a.mu.Lock()
	switch {
	case slot < 0 || slot >= a.n:
		a.mu.Unlock()
		return fmt.Errorf("raid: slot %d out of range (0..%d)", slot, a.n-1)
	case a.failed[slot] && slot != a.rebuild:
		a.mu.Unlock()
		return fmt.Errorf("raid: slot %d is already failed", slot)
	}
	a.failed[slot] = true
	ok := a.tolerable()
	a.failed[slot] = false
	a.mu.Unlock()
	if !ok {
		return fmt.Errorf("raid: failing slot %d would stop the array (level %d has no redundancy left)", slot, a.level)
	}
	if a.jnl != nil {
		// Make everything in place durable first, so no journal entry needs
		// the member's part (it may come back later as a replacement).
		if err := a.jnl.checkpoint(ctx); err != nil {
			return err
		}
	}
	return a.fail(ctx, slot, errors.New("failed by request"))
}

// Close flushes, records a clean shutdown on every member and closes them.
func (a *Array) Close() error {
	ctx := context.Background()
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return blockdev.ErrClosed
	}
	stopped := a.stopped
	a.mu.Unlock()
	var err error
	if !stopped {
		if a.jnl != nil {
			err = a.jnl.checkpoint(ctx)
		} else {
			err = a.flushMembers(ctx)
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
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
