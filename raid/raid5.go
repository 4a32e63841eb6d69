package raid

import (
	"context"
)

// Left-symmetric layout (Linux MD algorithm 2): in row r the parity chunk is
// on slot n-1-(r mod n) and data chunk d follows it cyclically, so
// sequential chunks visit every member before any repeats.
func (a *Array) paritySlot(row int64) int { return a.n - 1 - int(row%int64(a.n)) }
func (a *Array) dataSlot(row int64, d int) int {
	return (a.paritySlot(row) + 1 + d) % a.n
}

// usable reports whether slot s holds valid data for row (a.mu held).
func (a *Array) usableLocked(s int, row int64) bool {
	if a.devs[s] == nil {
		return false
	}
	if !a.failed[s] {
		return true
	}
	return s == a.rebuild && row < a.rebPos
}

// writable reports whether writes for row must also go to slot s: the slot
// being rebuilt receives writes only below the rebuild position (the
// rebuilder reconstructs the rest under the same stripe lock).
func (a *Array) rowState(row int64) (usable []bool, nbad int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	usable = make([]bool, a.n)
	for s := range a.n {
		usable[s] = a.usableLocked(s, row)
		if !usable[s] {
			nbad++
		}
	}
	return usable, nbad
}

func (a *Array) lockRow(row int64) func() {
	m := &a.locks[row%stripeLocks]
	m.Lock()
	return m.Unlock
}

func (a *Array) moff(row int64, in int64) int64 { return a.dataOff + row*a.chunk + in }

// readCols reads [lo,hi) of the given slots in parallel into bufs[slot].
func (a *Array) readCols(ctx context.Context, row, lo, hi int64, slots []int, bufs [][]byte) error {
	return parallel(ctx, len(slots), func(k int) error {
		s := slots[k]
		if bufs[s] == nil {
			bufs[s] = make([]byte, hi-lo)
		}
		if err := readFull(ctx, a.devs[s], bufs[s][:hi-lo], a.moff(row, lo)); err != nil {
			return &memberErr{s, err}
		}
		return nil
	})
}

type colWrite struct {
	slot int
	off  int64 // in-chunk offset
	p    []byte
}

// readRow5 reads q at in-row offset in, reconstructing an unusable slot.
func (a *Array) readRow5(ctx context.Context, row, in int64, q []byte) error {
	unlock := a.lockRow(row)
	defer unlock()
	usable, nbad := a.rowState(row)
	if nbad > 1 {
		return ErrArrayFailed
	}
	if nbad == 0 && a.verifying() {
		return a.readRowVerified(ctx, row, in, q)
	}
	c0, c1 := in/a.chunk, (in+int64(len(q))-1)/a.chunk
	return parallel(ctx, int(c1-c0+1), func(k int) error {
		c := c0 + int64(k)
		lo, hi := max(in, c*a.chunk), min(in+int64(len(q)), (c+1)*a.chunk)
		buf := q[lo-in : hi-in]
		clo, chi := lo-c*a.chunk, hi-c*a.chunk
		s := a.dataSlot(row, int(c))
		if usable[s] {
			if err := readFull(ctx, a.devs[s], buf, a.moff(row, clo)); err != nil {
				return &memberErr{s, err}
			}
			return nil
		}
		// Degraded: data = XOR of every other slot (data and parity).
		var others []int
		for o := range a.n {
			if o != s {
				others = append(others, o)
			}
		}
		bufs := make([][]byte, a.n)
		if err := a.readCols(ctx, row, clo, chi, others, bufs); err != nil {
			return err
		}
		clear(buf)
		for _, o := range others {
			xorInto(buf, bufs[o])
		}
		return nil
	})
}

// planRow5 returns the member writes that put q at in-row offset in and
// keep parity consistent (the caller holds the row lock). Full rows are
// written without reading; partial rows use read-modify-write or
// reconstruct-write, whichever reads fewer bytes; a degraded row always
// reconstructs from the surviving slots.
func (a *Array) planRow5(ctx context.Context, row, in int64, q []byte) ([]colWrite, error) {
	usable, nbad := a.rowState(row)
	if nbad > 1 {
		return nil, ErrArrayFailed
	}
	nd := a.n - 1
	ps := a.paritySlot(row)
	c0, c1 := in/a.chunk, (in+int64(len(q))-1)/a.chunk
	lo, hi := in-c0*a.chunk, in+int64(len(q))-c1*a.chunk
	if c1 > c0 {
		lo, hi = 0, a.chunk
	}
	span := hi - lo
	// ov[d] is the new data of chunk d within [lo,hi): offset and bytes.
	type ov struct {
		off int64
		p   []byte
	}
	ovs := make([]*ov, nd)
	for c := c0; c <= c1; c++ {
		clo, chi := max(in, c*a.chunk), min(in+int64(len(q)), (c+1)*a.chunk)
		ovs[c] = &ov{clo - c*a.chunk, q[clo-in : chi-in]}
	}
	full := func(d int) bool { return ovs[d] != nil && ovs[d].off == lo && int64(len(ovs[d].p)) == span }

	var ws []colWrite
	for d, o := range ovs {
		if o != nil && usable[a.dataSlot(row, d)] {
			ws = append(ws, colWrite{a.dataSlot(row, d), o.off, o.p})
		}
	}
	parity := make([]byte, span)

	rmw, rcw := span, int64(0)
	for d, o := range ovs {
		if o != nil {
			rmw += int64(len(o.p))
		}
		if !full(d) {
			rcw += span
		}
	}
	switch {
	case nbad == 0 && rmw < rcw:
		// Read-modify-write: P' = P ^ old ^ new over each touched range.
		bufs := make([][]byte, a.n)
		if err := a.readCols(ctx, row, lo, hi, []int{ps}, bufs); err != nil {
			return nil, err
		}
		copy(parity, bufs[ps])
		old := make([][]byte, nd)
		var touched []int
		for d, o := range ovs {
			if o != nil {
				touched = append(touched, d)
				old[d] = make([]byte, len(o.p))
			}
		}
		if err := parallel(ctx, len(touched), func(k int) error {
			d := touched[k]
			s := a.dataSlot(row, d)
			if err := readFull(ctx, a.devs[s], old[d], a.moff(row, ovs[d].off)); err != nil {
				return &memberErr{s, err}
			}
			return nil
		}); err != nil {
			return nil, err
		}
		for _, d := range touched {
			o := ovs[d]
			xorInto(parity[o.off-lo:], old[d])
			xorInto(parity[o.off-lo:], o.p)
		}
	default:
		// Reconstruct-write (also the full-stripe and degraded path): build
		// every data column over [lo,hi) and XOR them.
		bufs := make([][]byte, a.n)
		var need []int
		for d := range nd {
			s := a.dataSlot(row, d)
			if !full(d) && usable[s] {
				need = append(need, s)
			}
		}
		missing := -1
		for s := range a.n {
			if !usable[s] {
				missing = s
			}
		}
		if missing >= 0 && missing != ps {
			// Reconstruct the missing data column from all survivors.
			// Every surviving slot's old contents are needed, including
			// columns this write replaces entirely.
			md := (missing - ps - 1 + a.n) % a.n
			if !full(md) {
				need = need[:0]
				for s := range a.n {
					if s != missing {
						need = append(need, s)
					}
				}
			}
		}
		if err := a.readCols(ctx, row, lo, hi, need, bufs); err != nil {
			return nil, err
		}
		if missing >= 0 && missing != ps {
			md := (missing - ps - 1 + a.n) % a.n
			if !full(md) {
				col := make([]byte, span)
				for s := range a.n {
					if s != missing {
						xorInto(col, bufs[s])
					}
				}
				bufs[missing] = col
			}
		}
		for d := range nd {
			s := a.dataSlot(row, d)
			col := bufs[s]
			if col == nil {
				col = make([]byte, span)
			}
			if o := ovs[d]; o != nil {
				copy(col[o.off-lo:], o.p)
			}
			xorInto(parity, col)
		}
	}
	if usable[ps] {
		ws = append(ws, colWrite{ps, lo, parity})
	}
	return ws, nil
}
