package raid

import (
	"context"
	"slices"
)

// writeRedundant writes p at off on a RAID-1/5: the request is cut into
// groups of at most rowsPerRec rows; each group is planned under its row
// locks, committed to the journal as one record (if there is a journal)
// and then written in place. Groups run in parallel; a member failure
// re-plans the group degraded.
func (a *Array) writeRedundant(ctx context.Context, p []byte, off int64) error {
	rd := a.rowData()
	first, last := off/rd, (off+int64(len(p))-1)/rd
	g := a.rowsPerRec
	groups := (last - first + g) / g
	end := off + int64(len(p))
	return parallel(ctx, int(groups), func(k int) error {
		r0 := first + int64(k)*g
		r1 := min(last, r0+g-1)
		lo, hi := max(off, r0*rd), min(end, (r1+1)*rd)
		return a.retry(ctx, func() error { return a.writeGroup(ctx, r0, r1, lo, p[lo-off:hi-off]) })
	})
}

// lockRows takes the stripe locks of rows r0..r1 in shard order (so two
// groups never wait for each other crosswise) and returns the unlock.
func (a *Array) lockRows(r0, r1 int64) func() {
	var shards []int
	for r := r0; r <= r1; r++ {
		shards = append(shards, int(r%stripeLocks))
	}
	slices.Sort(shards)
	shards = slices.Compact(shards)
	for _, s := range shards {
		a.locks[s].Lock()
	}
	return func() {
		for _, s := range shards {
			a.locks[s].Unlock()
		}
	}
}

// writeGroup writes q (array bytes from array offset lo) over rows r0..r1.
func (a *Array) writeGroup(ctx context.Context, r0, r1, lo int64, q []byte) error {
	unlock := a.lockRows(r0, r1)
	defer unlock()
	rd := a.rowData()
	plans := make([][]colWrite, r1-r0+1)
	err := parallel(ctx, len(plans), func(k int) error {
		row := r0 + int64(k)
		l, h := max(lo, row*rd), min(lo+int64(len(q)), (row+1)*rd)
		var err error
		if a.level == 1 {
			plans[k], err = a.planRow1(row, l-row*rd, q[l-lo:h-lo])
		} else {
			plans[k], err = a.planRow5(ctx, row, l-row*rd, q[l-lo:h-lo])
		}
		return err
	})
	if err != nil {
		return err
	}
	rec := &jrec{parts: map[int][]seg{}}
	for k, ws := range plans {
		row := r0 + int64(k)
		for _, w := range ws {
			rec.parts[w.slot] = append(rec.parts[w.slot], seg{a.moff(row, w.off), w.p})
		}
	}
	if a.jnl != nil {
		if err := a.jnl.commit(ctx, rec); err != nil {
			return err
		}
		defer a.jnl.applied()
	}
	// The record is durable: its in-place writes must all be issued even if
	// ctx ends now, or the row would be left half written until a replay.
	wctx := context.WithoutCancel(ctx)
	var slots []int
	for s := range rec.parts {
		slots = append(slots, s)
	}
	return parallel(wctx, len(slots), func(k int) error {
		s := slots[k]
		for _, sg := range rec.parts[s] {
			if err := writeFull(wctx, a.devs[s], sg.p, sg.off); err != nil {
				return &memberErr{s, err}
			}
		}
		return nil
	})
}

// readRow1 reads q at in-row offset in from one in-sync copy, taking turns
// between the copies.
func (a *Array) readRow1(ctx context.Context, row, in int64, q []byte) error {
	unlock := a.lockRow(row)
	defer unlock()
	usable, nbad := a.rowState(row)
	if nbad == a.n {
		return ErrArrayFailed
	}
	if nbad == 0 && a.verifying() {
		return a.readRowVerified(ctx, row, in, q)
	}
	a.mu.Lock()
	a.rr++
	start := int(a.rr % uint64(a.n))
	a.mu.Unlock()
	for k := range a.n {
		s := (start + k) % a.n
		if usable[s] {
			if err := readFull(ctx, a.devs[s], q, a.moff(row, in)); err != nil {
				return &memberErr{s, err}
			}
			return nil
		}
	}
	return ErrArrayFailed
}

// planRow1 writes q to every in-sync copy.
func (a *Array) planRow1(row, in int64, q []byte) ([]colWrite, error) {
	usable, nbad := a.rowState(row)
	if nbad == a.n {
		return nil, ErrArrayFailed
	}
	var ws []colWrite
	for s, u := range usable {
		if u {
			ws = append(ws, colWrite{s, in, q})
		}
	}
	return ws, nil
}
