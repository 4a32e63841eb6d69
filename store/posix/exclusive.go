package posix

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/tristore/tristore/store"
)

// PutIfAbsent stores an object like Put, but only if key is absent. The
// body goes to a temp file as for Put (fsync, then publish, then fsync of
// the directory); the publish is a rename that refuses an existing target,
// so the existence test and the publish are one atomic step in the kernel
// and of many racing writers exactly one wins. Losers get
// store.ErrPreconditionFailed and their temp file is removed.
func (b *Backend) PutIfAbsent(ctx context.Context, bucket, key string, r io.Reader, size int64, meta store.ObjectMeta) (store.ObjectInfo, error) {
	// Fail fast (before reading the body) when the key is already there;
	// the rename below decides races.
	if err := b.keyExists(bucket, key); err != nil {
		return store.ObjectInfo{}, err
	}
	return b.put(ctx, bucket, key, r, size, meta, true)
}

// CompleteMultipartIfAbsent is CompleteMultipart publishing with the same
// no-replace rename as PutIfAbsent. A loser keeps its upload.
func (b *Backend) CompleteMultipartIfAbsent(ctx context.Context, bucket, key, uploadID string, parts []store.CompletePart) (store.ObjectInfo, error) {
	if err := b.keyExists(bucket, key); err != nil {
		return store.ObjectInfo{}, err
	}
	return b.complete(ctx, bucket, key, uploadID, parts, true)
}

// keyExists returns ErrPreconditionFailed when key has an object, plain
// or hidden (and the check's error for an invalid bucket or key).
func (b *Backend) keyExists(bucket, key string) error {
	loc, err := b.check(bucket, key)
	if err != nil {
		return err
	}
	if loc.plain != "" && isRegularAt(loc.plain) || isRegularAt(loc.hidden) {
		return fmt.Errorf("%w: %s/%s exists", store.ErrPreconditionFailed, bucket, key)
	}
	return nil
}

// existsErr reports an existing target: ErrKeyConflict for a directory (a
// prefix of other keys), ErrPreconditionFailed for anything else, nil when
// nothing is there.
func existsErr(target string) error {
	fi, err := os.Lstat(target)
	switch {
	case err == nil && fi.IsDir():
		return fmt.Errorf("%w: %s is a prefix of other keys", store.ErrKeyConflict, target)
	case err == nil:
		return fmt.Errorf("%w: %s exists", store.ErrPreconditionFailed, target)
	case errors.Is(err, os.ErrNotExist):
		return nil
	}
	return fsErr(err)
}

// renameNoReplace moves oldpath to newpath unless newpath exists (EEXIST).
// It uses renameat2(RENAME_NOREPLACE); on file systems without that flag
// (EINVAL/ENOSYS/ENOTSUP) it falls back to link(2), which also refuses an
// existing name atomically, then unlinks the temp name. A crash between
// the two leaves a temp file, which Open's start-up cleanup removes.
func renameNoReplace(oldpath, newpath string) error {
	err := unix.Renameat2(unix.AT_FDCWD, oldpath, unix.AT_FDCWD, newpath, unix.RENAME_NOREPLACE)
	if err == nil {
		return nil
	}
	if !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOSYS) && !errors.Is(err, syscall.ENOTSUP) {
		return &os.LinkError{Op: "renameat2", Old: oldpath, New: newpath, Err: err}
	}
	if err := unix.Link(oldpath, newpath); err != nil {
		return &os.LinkError{Op: "link", Old: oldpath, New: newpath, Err: err}
	}
	// Published; a temp name left behind is only garbage for start-up cleanup.
	os.Remove(oldpath)
	return nil
}

var (
	_ store.ExclusivePutter    = (*Backend)(nil)
	_ store.ExclusiveCompleter = (*Backend)(nil)
)
