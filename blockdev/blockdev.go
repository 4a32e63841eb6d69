// Package blockdev defines a block device: a file LUN over the store, an
// iSCSI initiator session, a RAID member and a RAID volume are all Devices,
// so they stack (iRAID is a Device over iSCSI Devices).
package blockdev

import (
	"context"
	"errors"
)

var (
	// ErrOutOfRange is returned for I/O beyond Size().
	ErrOutOfRange = errors.New("blockdev: I/O out of range")
	// ErrMisaligned is returned for I/O not aligned to BlockSize().
	ErrMisaligned = errors.New("blockdev: misaligned I/O")
	// ErrClosed is returned after Close.
	ErrClosed = errors.New("blockdev: device closed")
	// ErrNotSupported is an optional operation (Unmap, WriteZeroes) the
	// device below cannot do, e.g. UNMAP on a LUN that is not thin.
	ErrNotSupported = errors.New("blockdev: operation not supported by the device")
)

// Device is a fixed-size array of blocks. Offsets and lengths are in bytes
// and must be multiples of BlockSize(). Implementations are safe for
// concurrent use (many commands in flight).
type Device interface {
	ReadAt(ctx context.Context, p []byte, off int64) (int, error)
	WriteAt(ctx context.Context, p []byte, off int64) (int, error)
	// Flush makes every completed write durable (SYNCHRONIZE CACHE).
	Flush(ctx context.Context) error
	Size() int64
	BlockSize() int
	Close() error
}

// Unmapper deallocates a range (SCSI UNMAP); later reads return zeros.
// It fails with an error wrapping ErrNotSupported when the device cannot.
type Unmapper interface {
	Unmap(ctx context.Context, off, n int64) error
}

// Zeroer writes zeros over a range without sending a buffer of them (SCSI
// WRITE SAME); the range stays allocated.
type Zeroer interface {
	WriteZeroes(ctx context.Context, off, n int64) error
}

// FUAWriter writes with Force Unit Access: the data is durable when it returns.
type FUAWriter interface {
	WriteAtFUA(ctx context.Context, p []byte, off int64) (int, error)
}
