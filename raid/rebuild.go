package raid

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tristore/tristore/blockdev"
)

// checkpointRows is how many rebuilt rows pass between checkpoints: the new
// member is flushed and the position recorded in every superblock, so a
// restart resumes from there instead of from zero.
const checkpointRows = 64

// Progress reports rebuild progress in member data bytes.
type Progress func(done, total int64)

// SetRebuildRate limits rebuilds (Replace, Resume) to about bytesPerSec
// member bytes written per second; 0 removes the limit. The limit leaves
// bandwidth to the I/O that keeps flowing during an online rebuild.
func (a *Array) SetRebuildRate(bytesPerSec int64) {
	a.mu.Lock()
	a.rate = max(0, bytesPerSec)
	a.mu.Unlock()
}

// Replace puts newDev in failed (or missing) slot idx of a RAID-1/5 and
// rebuilds it online: reads and writes keep flowing, rows below the
// rebuild position are served by the new member, rows above it are still
// degraded. The position is checkpointed in the superblocks so that after
// a restart Assemble + Resume continue from the checkpoint. Everything
// newDev held is overwritten.
func (a *Array) Replace(ctx context.Context, idx int, newDev blockdev.Device, progress Progress) error {
	if a.level == 0 {
		return fmt.Errorf("raid: level %d has no redundancy to rebuild from", a.level)
	}
	a.mu.Lock()
	switch {
	case idx < 0 || idx >= a.n:
		a.mu.Unlock()
		return fmt.Errorf("raid: slot %d out of range (0..%d)", idx, a.n-1)
	case !a.failed[idx]:
		a.mu.Unlock()
		return fmt.Errorf("raid: slot %d is in sync; fail it first", idx)
	case a.rebuild >= 0:
		a.mu.Unlock()
		return fmt.Errorf("raid: slot %d is already being rebuilt", a.rebuild)
	case newDev.Size() < a.dataOff+a.memberSize || a.bs%newDev.BlockSize() != 0:
		a.mu.Unlock()
		return fmt.Errorf("%w: replacement is %d bytes (block %d), need %d (block %d)", ErrMismatch, newDev.Size(), newDev.BlockSize(), a.dataOff+a.memberSize, a.bs)
	}
	a.mu.Unlock()
	if err := a.notLiveMember(ctx, newDev); err != nil {
		return err
	}
	// Everything journaled so far goes in place first: the new member's
	// ring may hold entries from an earlier life in this array, and the
	// checkpoint puts every one of them below the replay threshold.
	if a.jnl != nil {
		if err := a.jnl.checkpoint(ctx); err != nil {
			return err
		}
	}
	a.mu.Lock()
	if old := a.devs[idx]; old != nil {
		_ = old.Close()
	}
	a.devs[idx] = newDev
	a.rebuild, a.rebPos, a.rebCk = idx, 0, 0
	a.events++
	err := a.writeSuperblocks(context.WithoutCancel(ctx), true)
	a.mu.Unlock()
	if err != nil {
		return err
	}
	return a.Resume(ctx, progress)
}

// notLiveMember refuses a replacement that is an in-sync member of this
// array (the same file or LUN named twice, or arguments in the wrong
// order): rebuilding onto it would overwrite live data.
func (a *Array) notLiveMember(ctx context.Context, d blockdev.Device) error {
	b := make([]byte, SuperblockSize)
	if readFull(ctx, d, b, 0) != nil {
		return nil // unreadable: whatever it held, it is not live data of ours
	}
	sb, err := unmarshalSuperblock(b)
	if err != nil || sb.UUID != a.uuid {
		return nil
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if s := sb.Index; s < a.n && a.devs[s] != nil && !a.failed[s] {
		return fmt.Errorf("%w: the replacement is slot %d of this array, in sync: refusing to overwrite it", ErrMismatch, s)
	}
	return nil
}

// Rebuilding reports the slot being rebuilt (-1 none) and the position.
func (a *Array) Rebuilding() (slot int, pos int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.rebuild, a.rebPos * a.chunk
}

// Resume continues an interrupted rebuild (found by Assemble) from its
// checkpoint; it does nothing if no rebuild is recorded. After the last
// row it verifies every row (parity or copies) before declaring the new
// member in sync.
func (a *Array) Resume(ctx context.Context, progress Progress) error {
	a.mu.Lock()
	idx, start := a.rebuild, a.rebPos
	a.mu.Unlock()
	if idx < 0 {
		return nil
	}
	rows := a.memberSize / a.chunk
	t0 := time.Now()
	for row := start; row < rows; row++ {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := a.retry(ctx, func() error { return a.rebuildRow(ctx, idx, row) }); err != nil {
			return fmt.Errorf("raid: rebuild of slot %d at row %d: %w", idx, row, err)
		}
		if (row+1)%checkpointRows == 0 || row+1 == rows {
			if err := a.checkpoint(ctx, idx, false); err != nil {
				return err
			}
		}
		if progress != nil {
			progress((row+1)*a.chunk, a.memberSize)
		}
		if err := a.throttle(ctx, t0, (row+1-start)*a.chunk); err != nil {
			return err
		}
	}
	if err := a.verifyRebuild(ctx, idx); err != nil {
		return err
	}
	return a.checkpoint(ctx, idx, true)
}

// throttle sleeps until done bytes since t0 are within the rate limit.
func (a *Array) throttle(ctx context.Context, t0 time.Time, done int64) error {
	a.mu.Lock()
	rate := a.rate
	a.mu.Unlock()
	if rate <= 0 {
		return nil
	}
	due := t0.Add(time.Duration(float64(done) / float64(rate) * float64(time.Second)))
	d := time.Until(due)
	if d <= 0 {
		return nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// verifyRebuild reads every row back (from the members, after the
// checkpoint flushed the new one) and checks parity or copies. A row that
// disagrees is rebuilt once more and checked again; if it still disagrees
// the new member is failed and ErrVerify returned.
func (a *Array) verifyRebuild(ctx context.Context, idx int) error {
	rows := a.memberSize / a.chunk
	var bad []int64
	for row := range rows {
		if err := ctx.Err(); err != nil {
			return err
		}
		var diff bool
		err := a.retry(ctx, func() error {
			unlock := a.lockRow(row)
			defer unlock()
			var err error
			if diff, err = a.syncRow(ctx, row, false); err != nil || !diff {
				return err
			}
			if err = a.rebuildRowLocked(ctx, idx, row); err != nil {
				return err
			}
			if err = a.devs[idx].Flush(ctx); err != nil {
				return &memberErr{idx, err}
			}
			diff, err = a.syncRow(ctx, row, false)
			return err
		})
		if err != nil {
			return fmt.Errorf("raid: verify after rebuild of slot %d at row %d: %w", idx, row, err)
		}
		if diff {
			bad = append(bad, row)
		}
	}
	if len(bad) > 0 {
		err := fmt.Errorf("%w: slot %d: %d rows do not read back consistent (first: row %d)", ErrVerify, idx, len(bad), bad[0])
		if ferr := a.fail(ctx, idx, err); ferr != nil {
			return errors.Join(err, ferr)
		}
		return err
	}
	return nil
}

// rebuildRow reconstructs slot idx of one row from the other slots.
func (a *Array) rebuildRow(ctx context.Context, idx int, row int64) error {
	unlock := a.lockRow(row)
	defer unlock()
	if err := a.rebuildRowLocked(ctx, idx, row); err != nil {
		return err
	}
	a.mu.Lock()
	a.rebPos = max(a.rebPos, row+1)
	a.mu.Unlock()
	return nil
}

func (a *Array) rebuildRowLocked(ctx context.Context, idx int, row int64) error {
	a.mu.Lock()
	if a.rebuild != idx {
		a.mu.Unlock()
		return fmt.Errorf("raid: rebuild of slot %d abandoned (replacement failed)", idx)
	}
	a.mu.Unlock()
	usable, _ := a.rowState(row)
	var others []int
	for s := range a.n {
		if s != idx && usable[s] {
			others = append(others, s)
		}
	}
	if a.level == 1 {
		if len(others) == 0 {
			return ErrArrayFailed
		}
		others = others[:1]
	} else if len(others) != a.n-1 {
		return ErrArrayFailed
	}
	bufs := make([][]byte, a.n)
	if err := a.readCols(ctx, row, 0, a.chunk, others, bufs); err != nil {
		return err
	}
	col := bufs[others[0]]
	if a.level == 5 {
		col = make([]byte, a.chunk)
		for _, s := range others {
			xorInto(col, bufs[s])
		}
	}
	if err := writeFull(ctx, a.devs[idx], col, a.moff(row, 0)); err != nil {
		return &memberErr{idx, err}
	}
	return nil
}

// checkpoint makes the rebuilt rows durable on the new member, then records
// the position (or, when done, the slot as in sync) on every member.
func (a *Array) checkpoint(ctx context.Context, idx int, done bool) error {
	a.mu.Lock()
	pos := a.rebPos
	a.mu.Unlock()
	// Recorded even if the caller is giving up: that is what resume needs.
	ctx = context.WithoutCancel(ctx)
	if err := a.devs[idx].Flush(ctx); err != nil {
		if ferr := a.fail(ctx, idx, err); ferr != nil {
			return ferr
		}
		return fmt.Errorf("raid: replacement in slot %d failed: %w", idx, err)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.rebuild != idx {
		return fmt.Errorf("raid: rebuild of slot %d abandoned", idx)
	}
	a.rebCk = pos
	if done {
		a.failed[idx] = false
		a.rebuild, a.rebPos, a.rebCk = -1, 0, 0
		a.events++
	}
	return a.writeSuperblocks(context.WithoutCancel(ctx), true)
}
