package posix

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/tristore/tristore/store"
)

// OpenFile gives random access to the object's file itself (block volumes,
// file protocols). Writes change the object in place; its ETag is
// recomputed lazily because the size/mtime in its record no longer match.
func (b *Backend) OpenFile(ctx context.Context, bucket, key string, flag int, perm os.FileMode) (store.File, error) {
	loc, err := b.check(bucket, key)
	if err != nil {
		return nil, err
	}
	if err := b.bucketExists(bucket); err != nil {
		return nil, err
	}
	p := loc.plain
	if p == "" || isDirAt(p) || flag&os.O_CREATE == 0 && !isRegularAt(p) && isRegularAt(loc.hidden) {
		// Random access to an existing object of the hidden area works
		// (its record names the key); new files (volumes) are made only
		// at plain paths, where the other views see them.
		if flag&os.O_CREATE == 0 || isRegularAt(loc.hidden) {
			return b.openHiddenFile(loc, flag, perm)
		}
		if p == "" {
			return nil, fmt.Errorf("%w: %q has no plain path; files opened for random access are made only at plain paths", store.ErrInvalidKey, key)
		}
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
	f, _, err := openRegular(p, flag, perm)
	if err != nil {
		if errors.Is(err, os.ErrExist) {
			return nil, err
		}
		return nil, b.missing(err, bucket, key)
	}
	if flag&os.O_CREATE != 0 {
		// The new name must be durable before the caller reports the
		// object made (`volume create` did not fsync the bucket directory
		// when the registry lived in a sidecar: a power cut lost the
		// volume). The file's content is the caller's to Sync.
		err := fsyncDir(dirOf(p))
		if err == nil {
			err = syncMade(changed)
		}
		if err != nil {
			f.Close()
			return nil, err
		}
	}
	fl := &file{f: f, b: b, path: p}
	if flag&os.O_TRUNC != 0 {
		fl.changed()
	}
	return fl, nil
}

// openHiddenFile opens the existing hidden object of loc (never creates).
func (b *Backend) openHiddenFile(loc keyLoc, flag int, perm os.FileMode) (store.File, error) {
	f, st, err := openRegular(loc.hidden, flag&^(os.O_CREATE|os.O_EXCL), perm)
	if err != nil {
		return nil, b.missing(err, loc.bucket, loc.key)
	}
	if rec := b.readRecord(loc.hidden, f, st.Ino); rec == nil || rec.Key != loc.key {
		f.Close()
		return nil, b.missing(os.ErrNotExist, loc.bucket, loc.key)
	}
	fl := &file{f: f, b: b, path: loc.hidden}
	if flag&os.O_TRUNC != 0 {
		fl.changed()
	}
	return fl, nil
}

func dirOf(p string) string {
	if i := strings.LastIndexByte(p, os.PathSeparator); i > 0 {
		return p[:i]
	}
	return p
}

// file is a store.File over an *os.File. Besides the size/mtime check,
// writes through it mark the object's ETag stale explicitly (on the first
// change and again on Sync and Close), because a write landing in the same
// clock tick as the last hash may leave size and mtime unchanged.
type file struct {
	f     *os.File
	b     *Backend
	path  string
	dirty atomic.Bool
}

func (f *file) ReadAt(p []byte, off int64) (int, error) { return f.f.ReadAt(p, off) }

// changed is called before every modification.
func (f *file) changed() {
	if !f.dirty.Swap(true) {
		f.invalidate()
	}
}

// invalidate clears the stored ETag, keeping the rest of the metadata.
func (f *file) invalidate() {
	var st unix.Stat_t
	if unix.Fstat(int(f.f.Fd()), &st) != nil {
		return
	}
	unlock := f.b.lockSidecar(f.path)
	defer unlock()
	rec := f.b.readRecord(f.path, f.f, st.Ino)
	if rec == nil || rec.ETag == "" {
		return
	}
	rec.ETag, rec.Parts = "", nil
	f.b.writeRecord(f.path, f.f, &st, rec, false)
}

func (f *file) WriteAt(p []byte, off int64) (int, error) {
	f.changed()
	n, err := f.f.WriteAt(p, off)
	return n, fsErr(err)
}

func (f *file) Sync() error {
	err := fsErr(f.f.Sync())
	if f.dirty.Swap(false) {
		f.invalidate()
	}
	return err
}

func (f *file) Truncate(size int64) error {
	f.changed()
	return fsErr(f.f.Truncate(size))
}

func (f *file) Size() (int64, error) {
	fi, err := f.f.Stat()
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

func (f *file) Close() error {
	if f.dirty.Swap(false) {
		f.invalidate()
	}
	return f.f.Close()
}

// PunchHole deallocates [off, off+n) keeping the file size; the range then
// reads as zeros.
func (f *file) PunchHole(off, n int64) error {
	if n <= 0 {
		return nil
	}
	f.changed()
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
