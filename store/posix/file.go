package posix

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/tristore/tristore/store"
)

// OpenFile gives random access to the object's file itself (block volumes,
// file protocols). Writes change the object in place; its ETag is
// recomputed lazily because the size/mtime in its record no longer match.
func (b *Backend) OpenFile(ctx context.Context, bucket, key string, flag int, perm os.FileMode) (store.File, error) {
	p, err := b.check(bucket, key)
	if err != nil {
		return nil, err
	}
	if err := b.bucketExists(bucket); err != nil {
		return nil, err
	}
	if fi, err := os.Lstat(p); err == nil && fi.IsDir() {
		return nil, fmt.Errorf("%w: %s is a prefix of other keys", store.ErrKeyConflict, key)
	}
	var changed []string
	if flag&os.O_CREATE != 0 {
		c, err := mkdirParents(b.bucketPath(bucket), dirOf(p))
		if err != nil {
			return nil, err
		}
		changed = c
	}
	f, err := os.OpenFile(p, flag|unix.O_NOFOLLOW, perm)
	if err != nil {
		if errors.Is(err, os.ErrExist) {
			return nil, err
		}
		return nil, b.missing(err, bucket, key)
	}
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		f.Close()
		return nil, fmt.Errorf("%w: %s/%s is not a regular file", store.ErrNoSuchKey, bucket, key)
	}
	for _, d := range changed {
		if err := fsyncDir(d); err != nil {
			f.Close()
			return nil, err
		}
	}
	return &file{f: f}, nil
}

func dirOf(p string) string {
	if i := strings.LastIndexByte(p, os.PathSeparator); i > 0 {
		return p[:i]
	}
	return p
}

// file is a store.File over an *os.File.
type file struct{ f *os.File }

func (f *file) ReadAt(p []byte, off int64) (int, error) { return f.f.ReadAt(p, off) }

func (f *file) WriteAt(p []byte, off int64) (int, error) {
	n, err := f.f.WriteAt(p, off)
	return n, fsErr(err)
}

func (f *file) Sync() error { return fsErr(f.f.Sync()) }

func (f *file) Truncate(size int64) error { return fsErr(f.f.Truncate(size)) }

func (f *file) Size() (int64, error) {
	fi, err := f.f.Stat()
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

func (f *file) Close() error { return f.f.Close() }

// PunchHole deallocates [off, off+n) keeping the file size; the range then
// reads as zeros.
func (f *file) PunchHole(off, n int64) error {
	if n <= 0 {
		return nil
	}
	err := unix.Fallocate(int(f.f.Fd()), unix.FALLOC_FL_PUNCH_HOLE|unix.FALLOC_FL_KEEP_SIZE, off, n)
	if errors.Is(err, unix.EOPNOTSUPP) {
		return fmt.Errorf("%w: punch hole: %v", store.ErrNotSupported, err)
	}
	return fsErr(err)
}

var (
	_ store.Filer       = (*Backend)(nil)
	_ store.File        = (*file)(nil)
	_ store.HolePuncher = (*file)(nil)
)
