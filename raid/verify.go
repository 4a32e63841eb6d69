package raid

import (
	"bytes"
	"context"
	"errors"
	"fmt"
)

// ErrCorrupt is a read whose redundancy disagrees with its data while
// reads are verified (SetVerifyReads): a member returned wrong bytes
// without an error. The read fails rather than return them; `raid check`
// finds every such stripe.
var ErrCorrupt = errors.New("raid: members disagree (a member returned bad data)")

// SetVerifyReads makes every read of a RAID-1/5 with full redundancy check
// it: RAID-5 reads the whole stripe range and checks parity, RAID-1 reads
// every copy. A member that returns garbage without an error then fails the
// read with ErrCorrupt instead of passing wrong data up. It costs a full
// stripe (or every copy) per read, so it is off by default.
func (a *Array) SetVerifyReads(on bool) {
	a.mu.Lock()
	a.verify = on
	a.mu.Unlock()
}

func (a *Array) verifying() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.verify && a.level != 0
}

// readRowVerified reads q at in-row offset in after checking the row's
// redundancy over the range (caller holds the row lock, every slot usable).
func (a *Array) readRowVerified(ctx context.Context, row, in int64, q []byte) error {
	var live []int
	for s := range a.n {
		live = append(live, s)
	}
	if a.level == 1 {
		bufs := make([][]byte, a.n)
		if err := a.readCols(ctx, row, in, in+int64(len(q)), live, bufs); err != nil {
			return err
		}
		// The value most copies hold wins; without a majority the read fails.
		for _, s := range live {
			agree := 0
			for _, o := range live {
				if bytes.Equal(bufs[s], bufs[o]) {
					agree++
				}
			}
			if agree == a.n || (agree*2 > a.n && a.n > 2) {
				copy(q, bufs[s])
				return nil
			}
		}
		return fmt.Errorf("%w: row %d copies differ", ErrCorrupt, row)
	}
	c0, c1 := in/a.chunk, (in+int64(len(q))-1)/a.chunk
	lo, hi := in-c0*a.chunk, in+int64(len(q))-c1*a.chunk
	if c1 > c0 {
		lo, hi = 0, a.chunk
	}
	bufs := make([][]byte, a.n)
	if err := a.readCols(ctx, row, lo, hi, live, bufs); err != nil {
		return err
	}
	x := make([]byte, hi-lo)
	for _, s := range live {
		xorInto(x, bufs[s])
	}
	for _, b := range x {
		if b != 0 {
			return fmt.Errorf("%w: row %d parity does not match the data", ErrCorrupt, row)
		}
	}
	for c := c0; c <= c1; c++ {
		clo, chi := max(in, c*a.chunk), min(in+int64(len(q)), (c+1)*a.chunk)
		s := a.dataSlot(row, int(c))
		copy(q[clo-in:chi-in], bufs[s][clo-c*a.chunk-lo:])
	}
	return nil
}
