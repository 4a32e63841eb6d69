package raid

// The write journal closes the RAID-1/5 write hole (docs/raid.md).
//
// Every member has a ring of JournalSize bytes after its superblock. A write
// to the array becomes a record: for each member it touches, the new bytes
// of that member (data columns and the new parity) with their member
// offsets. The record's part for member s is appended to s's ring, every
// touched ring is flushed, and only then are the bytes written in place:
//
//	WriteAt ─ plan (reads) ─▶ record ─▶ rings: append + flush ─▶ in place ─▶ ack
//	                                   (group commit: one leader
//	                                    writes and flushes for all)
//
// After a crash, Assemble reads the rings and replays, in sequence order,
// every record whose parts are present on all its surviving members. A
// record missing a part on a present member was never complete, so none of
// its bytes were written in place, and it is dropped. A member lost with the
// crash is not needed: the surviving parts carry the new parity, so its
// column reconstructs to the value the record gave it.
//
// Space: a ring fills from offset 0. When a batch does not fit, the leader
// waits for every committed record to finish in place, flushes every
// member and records the next sequence number as the journal checkpoint in
// the superblocks; then the rings start again at 0 (older entries have a
// sequence below the checkpoint and are ignored by replay).
//
// Entry on a member (header padded to the array block size, payload follows):
//
//	0   8  magic "TRIJRNL1"      8  8  sequence
//	16 16  array UUID           32  4  mask of members with a part
//	36  4  this member's slot   40  4  segment count
//	44  4  header bytes         48  8  payload bytes
//	56  4  CRC32C of payload    60  4  CRC32C of the header (this field zero)
//	64 12×n segments: member offset (8), length (4)

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"slices"
	"sync"
)

const jMagic = "TRIJRNL1"

// DefaultJournal is the ring size per member for RAID-1/5 when not given.
const DefaultJournal = 4 << 20

// seg is bytes for one member at a member byte offset.
type seg struct {
	off int64
	p   []byte
}

// jrec is one journaled write: its parts per member slot.
type jrec struct {
	seq   uint64
	parts map[int][]seg
	err   error
	done  bool // written (or failed); guarded by journal.mu
}

func (r *jrec) mask() uint32 {
	var m uint32
	for s := range r.parts {
		m |= 1 << s
	}
	return m
}

type journal struct {
	a         *Array
	off, size int64 // ring position and size on every member

	mu       sync.Mutex
	cond     *sync.Cond
	seq      uint64  // next record sequence
	head     []int64 // bytes used in each ring since the last checkpoint
	queue    []*jrec
	busy     bool // a leader is writing a batch or checkpointing
	applying int  // committed records not yet written in place
	needCk   bool // a batch failed: its entries must be fenced off by a checkpoint
	// counters for Status
	records, batches, checkpoints uint64
}

func newJournal(a *Array, off, size int64, seq uint64) *journal {
	j := &journal{a: a, off: off, size: size, seq: seq, head: make([]int64, a.n)}
	j.cond = sync.NewCond(&j.mu)
	return j
}

// entrySize is the bytes a part takes in a ring.
func (j *journal) entrySize(segs []seg) int64 {
	n := j.hdrSize(len(segs))
	for _, s := range segs {
		n += int64(len(s.p))
	}
	return n
}

func (j *journal) hdrSize(nseg int) int64 {
	bs := int64(j.a.bs)
	return (64 + 12*int64(nseg) + bs - 1) / bs * bs
}

func (j *journal) encode(buf *bytes.Buffer, seq uint64, mask uint32, slot int, segs []seg) {
	hs := j.hdrSize(len(segs))
	h := make([]byte, hs)
	le := binary.LittleEndian
	copy(h, jMagic)
	le.PutUint64(h[8:], seq)
	copy(h[16:32], j.a.uuid[:])
	le.PutUint32(h[32:], mask)
	le.PutUint32(h[36:], uint32(slot))
	le.PutUint32(h[40:], uint32(len(segs)))
	le.PutUint32(h[44:], uint32(hs))
	var pl int64
	crc := uint32(0)
	for i, s := range segs {
		le.PutUint64(h[64+12*i:], uint64(s.off))
		le.PutUint32(h[72+12*i:], uint32(len(s.p)))
		pl += int64(len(s.p))
		crc = crc32.Update(crc, castagnoli, s.p)
	}
	le.PutUint64(h[48:], uint64(pl))
	le.PutUint32(h[56:], crc)
	le.PutUint32(h[60:], hdrCRC(h))
	buf.Write(h)
	for _, s := range segs {
		buf.Write(s.p)
	}
}

func hdrCRC(h []byte) uint32 {
	c := crc32.Update(0, castagnoli, h[:60])
	return crc32.Update(c, castagnoli, h[64:])
}

// commit makes rec durable in the rings of its members. The caller holds
// the row locks of every row rec touches (so sequence order is the order
// of writes to any one row) and, when commit succeeds, must write rec in
// place and then call applied. Commit waits for the record to be written
// whatever ctx says: a record half handed to the members must not be
// abandoned while its rows are locked.
func (j *journal) commit(ctx context.Context, rec *jrec) error {
	j.mu.Lock()
	defer j.mu.Unlock()
	rec.seq = j.seq
	j.seq++
	j.queue = append(j.queue, rec)
	// Whoever finds no leader leads one batch (which holds the head of the
	// queue, so every turn makes progress), then hands over: a leader must
	// not wait for its own record to be applied (a checkpoint would).
	for !rec.done {
		if j.busy {
			j.cond.Wait()
			continue
		}
		j.busy = true
		batch, err := j.takeBatch(ctx)
		if err != nil {
			for _, r := range j.queue {
				r.err, r.done = err, true
			}
			j.queue = nil
		} else {
			j.mu.Unlock()
			err = j.writeBatch(ctx, batch)
			j.mu.Lock()
			j.batches++
			if err != nil {
				j.needCk = true
			} else {
				j.applying += len(batch)
				j.records += uint64(len(batch))
			}
			for _, r := range batch {
				r.err, r.done = err, true
			}
		}
		j.busy = false
		j.cond.Broadcast()
	}
	return rec.err
}

// takeBatch removes from the queue the longest prefix that fits in the
// rings, checkpointing first when it must (j.mu held, j.busy ours).
func (j *journal) takeBatch(ctx context.Context) ([]*jrec, error) {
	fits := func(k int) bool {
		need := make([]int64, j.a.n)
		for _, r := range j.queue[:k] {
			for s, segs := range r.parts {
				need[s] += j.entrySize(segs)
			}
		}
		for s, n := range need {
			if j.head[s]+n > j.size {
				return false
			}
		}
		return true
	}
	if j.needCk || !fits(1) {
		if err := j.checkpointLocked(ctx); err != nil {
			return nil, err
		}
		if !fits(1) {
			return nil, fmt.Errorf("raid: journal record larger than the %d-byte journal", j.size)
		}
	}
	k := 1
	for k < len(j.queue) && fits(k+1) {
		k++
	}
	batch := j.queue[:k:k]
	j.queue = slices.Clone(j.queue[k:])
	return batch, nil
}

// writeBatch appends the batch's parts to each member's ring and flushes
// the rings it wrote (j.mu not held; j.busy ours, so heads are stable).
func (j *journal) writeBatch(ctx context.Context, batch []*jrec) error {
	ctx = context.WithoutCancel(ctx)
	bufs := make([]*bytes.Buffer, j.a.n)
	for _, r := range batch {
		m := r.mask()
		for s := range j.a.n {
			if segs, ok := r.parts[s]; ok {
				if bufs[s] == nil {
					bufs[s] = new(bytes.Buffer)
				}
				j.encode(bufs[s], r.seq, m, s, segs)
			}
		}
	}
	var slots []int
	for s, b := range bufs {
		if b != nil {
			slots = append(slots, s)
		}
	}
	err := parallel(ctx, len(slots), func(k int) error {
		s := slots[k]
		d := j.a.devs[s]
		if d == nil {
			return &memberErr{s, errors.New("member absent")}
		}
		if err := writeFull(ctx, d, bufs[s].Bytes(), j.off+j.head[s]); err != nil {
			return &memberErr{s, err}
		}
		if err := d.Flush(ctx); err != nil {
			return &memberErr{s, err}
		}
		return nil
	})
	// Space is consumed even when a member failed: some rings hold the
	// entries, and the checkpoint that follows a failure fences them off.
	j.mu.Lock()
	for _, s := range slots {
		j.head[s] += int64(bufs[s].Len())
	}
	j.mu.Unlock()
	var me *memberErr
	if errors.As(err, &me) {
		return me
	}
	return err
}

// applied ends a committed record's in-place phase.
func (j *journal) applied() {
	j.mu.Lock()
	j.applying--
	if j.applying == 0 {
		j.cond.Broadcast()
	}
	j.mu.Unlock()
}

// checkpoint empties the rings (Close, Replace, Fail): it waits for the
// leader's role, then checkpoints.
func (j *journal) checkpoint(ctx context.Context) error {
	j.mu.Lock()
	for j.busy {
		j.cond.Wait()
	}
	j.busy = true
	err := j.checkpointLocked(ctx)
	j.busy = false
	j.cond.Broadcast()
	j.mu.Unlock()
	return err
}

// checkpointLocked waits until every committed record is in place,
// flushes every member, records the first sequence not yet in place as the
// journal checkpoint on every member and resets the rings (j.mu held,
// released while waiting and doing I/O; j.busy ours).
func (j *journal) checkpointLocked(ctx context.Context) error {
	// Other writers' records wait on this checkpoint: one caller giving up
	// must not fail it for them.
	ctx = context.WithoutCancel(ctx)
	for j.applying > 0 {
		j.cond.Wait()
	}
	ck := j.seq
	if len(j.queue) > 0 {
		ck = j.queue[0].seq
	}
	j.mu.Unlock()
	err := j.a.flushMembers(ctx)
	if err == nil {
		a := j.a
		a.mu.Lock()
		a.jck = ck
		err = a.writeSuperblocks(context.WithoutCancel(ctx), true)
		a.mu.Unlock()
	}
	j.mu.Lock()
	if err != nil {
		return err
	}
	clear(j.head)
	j.needCk = false
	j.checkpoints++
	return nil
}

// replayStats reports what Assemble found in the journal.
type replayStats struct {
	Replayed, Dropped int
}

// parsedPart is one entry read back from a ring.
type parsedPart struct {
	mask uint32
	segs []seg
}

// scan parses member slot s's ring from the start: entries of this array
// with strictly increasing sequence numbers at or above ck, stopping at the
// first that is torn, foreign or older.
func (j *journal) scan(ring []byte, slot int, ck uint64) map[uint64]parsedPart {
	out := map[uint64]parsedPart{}
	le := binary.LittleEndian
	pos := int64(0)
	last := uint64(0)
	for pos+64 <= int64(len(ring)) {
		h := ring[pos:]
		if string(h[:8]) != jMagic || !bytes.Equal(h[16:32], j.a.uuid[:]) {
			break
		}
		seq, mask := le.Uint64(h[8:]), le.Uint32(h[32:])
		nseg, hs, pl := int64(le.Uint32(h[40:])), int64(le.Uint32(h[44:])), int64(le.Uint64(h[48:]))
		if seq < ck || (last != 0 && seq <= last) || int(le.Uint32(h[36:])) != slot || mask&(1<<slot) == 0 ||
			hs != j.hdrSize(int(nseg)) || pos+hs+pl > int64(len(ring)) || pl < 0 {
			break
		}
		if hdrCRC(h[:hs]) != le.Uint32(h[60:]) {
			break
		}
		payload := h[hs : hs+pl]
		if crc32.Checksum(payload, castagnoli) != le.Uint32(h[56:]) {
			break
		}
		var segs []seg
		var at int64
		ok := true
		for i := range nseg {
			off, n := int64(le.Uint64(h[64+12*i:])), int64(le.Uint32(h[72+12*i:]))
			if at+n > pl || off < j.a.dataOff || off+n > j.a.dataOff+j.a.memberSize {
				ok = false
				break
			}
			segs = append(segs, seg{off, payload[at : at+n]})
			at += n
		}
		if !ok || at != pl {
			break
		}
		out[seq] = parsedPart{mask, segs}
		last = seq
		pos += hs + pl
	}
	return out
}

// replay reads every present member's ring and writes in place every
// complete record with sequence >= ck, in order; then flushes. It returns
// the next free sequence number (Assemble; nothing else runs yet).
func (j *journal) replay(ctx context.Context, ck uint64) (uint64, replayStats, error) {
	var st replayStats
	a := j.a
	present := a.liveSlots()
	parts := make([]map[uint64]parsedPart, a.n)
	for _, s := range present {
		ring := make([]byte, j.size)
		if err := readFull(ctx, a.devs[s], ring, j.off); err != nil {
			return 0, st, fmt.Errorf("raid: slot %d: reading journal: %w", s, err)
		}
		parts[s] = j.scan(ring, s, ck)
	}
	seqs := map[uint64]bool{}
	for _, s := range present {
		for q := range parts[s] {
			seqs[q] = true
		}
	}
	order := make([]uint64, 0, len(seqs))
	for q := range seqs {
		order = append(order, q)
	}
	slices.Sort(order)
	next := ck
	isPresent := make([]bool, a.n)
	for _, s := range present {
		isPresent[s] = true
	}
	for _, q := range order {
		next = max(next, q+1)
		var mask uint32
		complete, first := true, true
		for _, s := range present {
			p, ok := parts[s][q]
			if !ok {
				continue
			}
			if first {
				mask, first = p.mask, false
			} else if p.mask != mask {
				complete = false
			}
		}
		for s := range a.n {
			if mask&(1<<s) != 0 && isPresent[s] {
				if _, ok := parts[s][q]; !ok {
					complete = false
				}
			}
		}
		if !complete {
			st.Dropped++
			continue
		}
		for _, s := range present {
			for _, sg := range parts[s][q].segs {
				if err := writeFull(ctx, a.devs[s], sg.p, sg.off); err != nil {
					return 0, st, fmt.Errorf("raid: slot %d: journal replay: %w", s, err)
				}
			}
		}
		st.Replayed++
	}
	if err := a.flushMembers(ctx); err != nil {
		return 0, st, err
	}
	return next, st, nil
}
