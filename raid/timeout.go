package raid

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/tristore/tristore/blockdev"
)

// ErrTimeout is a member I/O that did not finish within the member timeout.
var ErrTimeout = errors.New("raid: member I/O timed out")

// WithTimeout wraps a member so that every I/O returns within d: one that
// takes longer fails with ErrTimeout, and the array marks the member
// failed, as for any other member error. The I/O itself is left to finish
// (or not) in the background on a private buffer, so a member that ignores
// its context cannot hold the array, and a late completion cannot touch the
// caller's buffer; by then the member is failed and will be rebuilt whole.
// d <= 0 returns dev unchanged.
func WithTimeout(dev blockdev.Device, d time.Duration) blockdev.Device {
	if d <= 0 {
		return dev
	}
	return &timeoutDev{Device: dev, d: d}
}

type timeoutDev struct {
	blockdev.Device
	d time.Duration
}

type ioResult struct {
	n   int
	err error
}

func (t *timeoutDev) run(ctx context.Context, what string, fn func(ctx context.Context) ioResult) ioResult {
	ctx, cancel := context.WithTimeout(ctx, t.d)
	done := make(chan ioResult, 1)
	go func() {
		defer cancel()
		done <- fn(ctx)
	}()
	timer := time.NewTimer(t.d)
	defer timer.Stop()
	select {
	case r := <-done:
		return r
	case <-timer.C:
		return ioResult{0, fmt.Errorf("%w: %s after %v", ErrTimeout, what, t.d)}
	}
}

func (t *timeoutDev) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	buf := make([]byte, len(p))
	r := t.run(ctx, "read", func(ctx context.Context) ioResult {
		n, err := t.Device.ReadAt(ctx, buf, off)
		return ioResult{n, err}
	})
	if r.n > 0 {
		copy(p, buf[:r.n])
	}
	return r.n, r.err
}

func (t *timeoutDev) WriteAt(ctx context.Context, p []byte, off int64) (int, error) {
	buf := append([]byte(nil), p...)
	r := t.run(ctx, "write", func(ctx context.Context) ioResult {
		n, err := t.Device.WriteAt(ctx, buf, off)
		return ioResult{n, err}
	})
	return r.n, r.err
}

func (t *timeoutDev) Flush(ctx context.Context) error {
	return t.run(ctx, "flush", func(ctx context.Context) ioResult {
		return ioResult{0, t.Device.Flush(ctx)}
	}).err
}

var _ blockdev.Device = (*timeoutDev)(nil)
