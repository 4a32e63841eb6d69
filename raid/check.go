package raid

import (
	"bytes"
	"context"
	"fmt"
)

// syncRow checks one row: RAID-5 parity against the XOR of the data,
// RAID-1 every copy against the lowest in-sync slot's. It reports whether
// they differed; with repair it rewrites parity from the data (RAID-5) or
// the other copies from the lowest slot's (RAID-1). Without per-block
// checksums a single-parity array cannot tell which chunk is wrong, so the
// data (or the first copy) is trusted. The caller holds the row lock.
func (a *Array) syncRow(ctx context.Context, row int64, repair bool) (bool, error) {
	usable, nbad := a.rowState(row)
	if a.level == 5 && nbad > 0 {
		return false, fmt.Errorf("raid: row %d: parity check needs every member (%d missing)", row, nbad)
	}
	var live []int
	for s, u := range usable {
		if u {
			live = append(live, s)
		}
	}
	if len(live) == 0 {
		return false, ErrArrayFailed
	}
	bufs := make([][]byte, a.n)
	if err := a.readCols(ctx, row, 0, a.chunk, live, bufs); err != nil {
		return false, err
	}
	var want []byte
	var targets []int
	if a.level == 1 {
		want = bufs[live[0]]
		for _, s := range live[1:] {
			if !bytes.Equal(bufs[s], want) {
				targets = append(targets, s)
			}
		}
	} else {
		ps := a.paritySlot(row)
		want = make([]byte, a.chunk)
		for s := range a.n {
			if s != ps {
				xorInto(want, bufs[s])
			}
		}
		if !bytes.Equal(want, bufs[ps]) {
			targets = []int{ps}
		}
	}
	if len(targets) == 0 {
		return false, nil
	}
	if repair {
		for _, s := range targets {
			if err := writeFull(ctx, a.devs[s], want, a.moff(row, 0)); err != nil {
				return true, &memberErr{s, err}
			}
		}
	}
	return true, nil
}

// Mismatch is a row whose redundancy disagreed with its data.
type Mismatch struct {
	Row    int64 // stripe number
	Offset int64 // array byte offset of the row
}

// Check scrubs every row of a RAID-1/5 (all members must be in sync) and
// reports the rows whose parity (or copies) do not match the data. With
// repair the redundancy is rewritten from the data; see syncRow.
func (a *Array) Check(ctx context.Context, repair bool) ([]Mismatch, error) {
	if a.level == 0 {
		return nil, fmt.Errorf("raid: check needs redundancy (level %d)", a.level)
	}
	rows := a.memberSize / a.chunk
	var out []Mismatch
	for row := range rows {
		if err := ctx.Err(); err != nil {
			return out, err
		}
		_, nbad := a.rowState(row)
		if nbad > 0 {
			return out, fmt.Errorf("raid: check needs every member in sync (%d missing)", nbad)
		}
		var bad bool
		err := a.retry(ctx, func() error {
			unlock := a.lockRow(row)
			defer unlock()
			var err error
			bad, err = a.syncRow(ctx, row, repair)
			return err
		})
		if err != nil {
			return out, err
		}
		if bad {
			out = append(out, Mismatch{Row: row, Offset: row * a.rowData()})
		}
	}
	if repair && len(out) > 0 {
		return out, a.flushMembers(ctx)
	}
	return out, nil
}
