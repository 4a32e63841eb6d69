package chunkstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/tristore/tristore/blockdev"
)

// VolumeBlockSize is the logical block size a volume reports.
const VolumeBlockSize = 512

// Volume is a KindVolume store as a block device (blockdev.Device): the
// volume's bytes are the chunks of its one file, so unwritten and
// unmapped ranges are holes that cost no object. SYNCHRONIZE CACHE
// (Flush) uploads the dirty chunks and publishes the manifest; until then
// writes live in the cache and are written back by age, as for files.
type Volume struct {
	st *Store
}

// CreateVolume makes a new volume of size bytes (a multiple of
// VolumeBlockSize) at cfg's bucket and prefix and returns it open; an
// existing store there is an error.
func CreateVolume(ctx context.Context, cfg Config, size int64) (*Volume, error) {
	if size <= 0 || size%VolumeBlockSize != 0 || size > MaxFileSize {
		return nil, fmt.Errorf("chunkstore: volume size %d: want a positive multiple of %d up to %d", size, VolumeBlockSize, int64(MaxFileSize))
	}
	cfg.Create, cfg.Kind, cfg.VolumeSize = true, KindVolume, size
	st, err := Open(ctx, cfg)
	if err != nil {
		return nil, err
	}
	if st.created {
		return &Volume{st: st}, nil
	}
	st.Close(ctx)
	return nil, fmt.Errorf("chunkstore: a volume already exists at s3://%s/%s: %w", cfg.Bucket, cfg.Prefix, ErrExist)
}

// OpenVolume opens an existing volume (taking its lease unless ReadOnly).
func OpenVolume(ctx context.Context, cfg Config) (*Volume, error) {
	cfg.Create, cfg.Kind = false, KindVolume
	st, err := Open(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return &Volume{st: st}, nil
}

// VolumeOf wraps an open KindVolume store.
func VolumeOf(st *Store) (*Volume, error) {
	if st.Kind() != KindVolume {
		return nil, fmt.Errorf("chunkstore: the store is a %s, not a volume", st.Kind())
	}
	return &Volume{st: st}, nil
}

// Store is the volume's chunk store (stats, cache directory).
func (v *Volume) Store() *Store { return v.st }

func (v *Volume) check(p []byte, off int64) error {
	if off < 0 || off+int64(len(p)) > v.Size() {
		return fmt.Errorf("%w: %d bytes at %d on a %d-byte volume", blockdev.ErrOutOfRange, len(p), off, v.Size())
	}
	return nil
}

// ReadAt implements blockdev.Device.
func (v *Volume) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	if err := v.check(p, off); err != nil {
		return 0, err
	}
	n, err := v.st.ReadAt(ctx, VolumeIno, p, off)
	if errors.Is(err, io.EOF) && n == len(p) {
		err = nil
	}
	return n, v.err(err)
}

// WriteAt implements blockdev.Device.
func (v *Volume) WriteAt(ctx context.Context, p []byte, off int64) (int, error) {
	if err := v.check(p, off); err != nil {
		return 0, err
	}
	n, err := v.st.WriteAt(ctx, VolumeIno, p, off)
	return n, v.err(err)
}

// Flush uploads every dirty chunk and publishes: the volume's acknowledged
// writes are then in the bucket.
func (v *Volume) Flush(ctx context.Context) error {
	return v.err(v.st.Flush(ctx, VolumeIno, true))
}

// Unmap makes a range a hole: whole chunks are dropped (their objects go
// at the next publish), partial ones zeroed.
func (v *Volume) Unmap(ctx context.Context, off, n int64) error {
	if off < 0 || n < 0 || off+n > v.Size() {
		return fmt.Errorf("%w: unmap %d at %d", blockdev.ErrOutOfRange, n, off)
	}
	return v.err(v.st.Punch(ctx, VolumeIno, off, n))
}

// WriteZeroes is Unmap: a hole reads as zeros, and keeping zeros
// allocated would only store chunks of zeros, which are holes anyway.
func (v *Volume) WriteZeroes(ctx context.Context, off, n int64) error { return v.Unmap(ctx, off, n) }

// Size implements blockdev.Device.
func (v *Volume) Size() int64 {
	a, err := v.st.Getattr(VolumeIno)
	if err != nil {
		return 0
	}
	return a.Size
}

// BlockSize implements blockdev.Device.
func (v *Volume) BlockSize() int { return VolumeBlockSize }

// Close writes back, publishes and releases the lease.
func (v *Volume) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	return v.err(v.st.Close(ctx))
}

func (v *Volume) err(err error) error {
	if errors.Is(err, ErrClosed) {
		return fmt.Errorf("%w: %w", blockdev.ErrClosed, err)
	}
	return err
}

var (
	_ blockdev.Device   = (*Volume)(nil)
	_ blockdev.Unmapper = (*Volume)(nil)
	_ blockdev.Zeroer   = (*Volume)(nil)
)
