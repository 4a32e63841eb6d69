// Package inuse is the lock that keeps every view of the data tree from
// replacing, truncating, renaming or deleting a file that is being served
// as a block volume (an iSCSI LUN with a logged-in initiator).
//
// A served volume is written in place through an open descriptor. If any
// view swapped another file in under its name (an S3 PUT is a rename of a
// new file over the key), unlinked it or cut it short, the target would go
// on writing into an orphaned inode and everything written would be gone
// at the next restart. So:
//
//   - a server holds an exclusive "served" lock on the volume file for as
//     long as the LUN is open (Serve); one volume has one server;
//   - every changer (posix Put/Complete/Delete, vfs REMOVE/RENAME/SETATTR
//     size, `tristore volume delete` and shrink) takes a shared "change"
//     lock on the file it is about to replace or remove and holds it
//     across the change (ChangeAt, ChangeFd). It fails at once with
//     store.ErrInUse if the file is served. Changers share, so two S3 PUTs
//     of one key never fail each other; a server that finds a change under
//     way waits for it (bounded by Wait).
//
// The locks are open-file-description locks (fcntl F_OFD_SETLK) on byte 0,
// not flock(2): they conflict between two opens in one process as well as
// between processes, so a server and a changer in one `tristore serve` and
// a `tristore` next to it over the same tree all see each other; and
// F_OFD_GETLK tells a server whether what is in its way is a change (wait)
// or another server (refuse). The server's lock is the write lock because
// a server opens the file read-write anyway, while a changer then needs only
// a read-only open (no write open that would fire inotify's CLOSE_WRITE or
// fail on a busy executable).
//
// Names are resolved to inodes with a check after locking: the lock is on
// an inode, so a locker re-reads the name and starts again if it was
// replaced meanwhile. Once a server holds its lock the name cannot change
// under it by any changer that follows this protocol; a process that does
// not (rm(1) by hand, an older tristore) is not stopped.
//
// File systems without OFD locks get no protection: changers proceed and
// Serve returns its file unlocked.
//
// Which files can be served: the only server is a volume of
// blockdev/filelun, whose file is always DATA/BUCKET/NAME with NAME a
// VolumeName (filelun.ValidName is VolumeName). A changer may therefore
// skip the lock for any other path of the tree (store/posix's Put does,
// for nested keys and every key that is no VolumeName: the lock costs an
// open, a stat, an fcntl and a close per PUT). A new kind of server that
// serves other paths must make such changers lock again.
package inuse

import (
	"errors"
	"fmt"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tristore/tristore/internal/fsjournal"
	"github.com/tristore/tristore/store"
)

// Wait bounds how long a server waits for changes under way to finish;
// a change holds its lock for one rename, unlink or truncate, so this is
// only reached on a badly stalled disk.
var Wait = 5 * time.Second

// ErrBusy wraps store.ErrInUse when changes held the file for longer than Wait.
var ErrBusy = fmt.Errorf("%w: changes to it did not finish", store.ErrInUse)

// ErrServed wraps store.ErrInUse for a second server of one volume.
var ErrServed = fmt.Errorf("%w: already served by another target", store.ErrInUse)

const openFlags = unix.O_RDONLY | unix.O_NOFOLLOW | unix.O_NONBLOCK | unix.O_CLOEXEC

func lockArg(typ int16) *unix.Flock_t {
	return &unix.Flock_t{Type: typ, Whence: 0, Start: 0, Len: 1}
}

// unsupported reports a file system without OFD locks.
func unsupported(err error) bool {
	return errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOLCK) || errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.ENOSYS)
}

func conflict(err error) bool { return errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EACCES) }

// lockChange takes the change lock (F_RDLCK) on fd, failing at once with
// store.ErrInUse when a server holds the file (only a server's write lock
// conflicts with it). It returns false when there are no OFD locks.
func lockChange(fd int) (bool, error) {
	err := unix.FcntlFlock(uintptr(fd), unix.F_OFD_SETLK, lockArg(unix.F_RDLCK))
	switch {
	case err == nil:
		return true, nil
	case unsupported(err):
		return false, nil
	case conflict(err):
		return false, store.ErrInUse
	}
	return false, err
}

// lockServe takes the served lock (F_WRLCK) on fd, opened read-write.
// Changes under way (read locks) are waited out for up to Wait; another
// server fails at once with ErrServed.
func lockServe(fd int) error {
	deadline := time.Now().Add(Wait)
	pause := 200 * time.Microsecond
	for {
		err := unix.FcntlFlock(uintptr(fd), unix.F_OFD_SETLK, lockArg(unix.F_WRLCK))
		switch {
		case err == nil, unsupported(err):
			return nil
		case !conflict(err):
			return err
		}
		lk := lockArg(unix.F_WRLCK)
		if unix.FcntlFlock(uintptr(fd), unix.F_OFD_GETLK, lk) == nil && lk.Type == unix.F_WRLCK {
			return ErrServed
		}
		if time.Now().After(deadline) {
			return ErrBusy
		}
		time.Sleep(pause)
		pause = min(2*pause, 10*time.Millisecond)
	}
}

// Change is a held change lock; Release drops it. A nil *Change
// (nothing was there to lock) is valid and releases nothing.
type Change struct {
	fd       int
	Dev, Ino uint64 // the locked inode
}

// Release drops the lock.
func (c *Change) Release() {
	if c != nil && c.fd >= 0 {
		unix.Close(c.fd)
		c.fd = -1
	}
}

// Retire is for a caller that has removed the locked file's last name
// (unlink, or a rename over it) and made that removal durable (the
// directory fsynced): on a file system without a journal the inode is then
// written as deleted before Release lets it go (internal/fsjournal), so
// that after a power cut it does not still claim blocks given to other
// files. Called before the removal is durable it could make the disk hold
// a name whose inode is deleted.
func (c *Change) Retire() {
	if c != nil && c.fd >= 0 {
		fsjournal.Retire(c.fd)
	}
}

// LinkAt gives the locked file another name, name in the directory open
// as dirfd: a hard link of this very inode (made through /proc, so not of
// whatever the old name holds by now), for a caller that keeps a file it
// replaces named until the replacement is durable (vfs Rename).
func (c *Change) LinkAt(dirfd int, name string) error {
	if c == nil || c.fd < 0 {
		return unix.EBADF
	}
	return unix.Linkat(unix.AT_FDCWD, fmt.Sprintf("/proc/self/fd/%d", c.fd), dirfd, name, unix.AT_SYMLINK_FOLLOW)
}

// Same reports whether the locked inode is st's.
func (c *Change) Same(st *unix.Stat_t) bool {
	return c != nil && st != nil && uint64(st.Dev) == c.Dev && st.Ino == c.Ino
}

// ChangeAt takes the change lock on the regular file name in directory
// dirfd (unix.AT_FDCWD: name is a path), for a caller about to replace,
// rename, truncate or remove it. When name does not exist or is not a
// regular file there is nothing to protect and it returns (nil, nil).
// It fails with store.ErrInUse while the file is served.
func ChangeAt(dirfd int, name string) (*Change, error) {
	for range 100 {
		var st unix.Stat_t
		if err := unix.Fstatat(dirfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
			if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
				return nil, nil
			}
			return nil, err
		}
		if st.Mode&unix.S_IFMT != unix.S_IFREG {
			return nil, nil
		}
		fd, err := unix.Openat(dirfd, name, openFlags, 0)
		if err != nil {
			switch {
			case errors.Is(err, unix.ENOENT), errors.Is(err, unix.ELOOP):
				continue // replaced meanwhile: look again
			case errors.Is(err, unix.EACCES), errors.Is(err, unix.EPERM):
				// Not root and not readable by us: we cannot have
				// served it either.
				return nil, nil
			}
			return nil, err
		}
		c, err := lockFd(fd)
		if err != nil || c == nil {
			unix.Close(fd)
			return nil, err
		}
		// The lock is on the inode we opened; is it still the one named?
		var now unix.Stat_t
		if unix.Fstatat(dirfd, name, &now, unix.AT_SYMLINK_NOFOLLOW) == nil && c.Same(&now) {
			return c, nil
		}
		c.Release()
	}
	return nil, ErrBusy
}

// lockFd takes the change lock on the regular file open as fd (which it
// then owns); nil, nil when fd is not a regular file or locks are unsupported.
func lockFd(fd int) (*Change, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, nil
	}
	ok, err := lockChange(fd)
	if err != nil || !ok {
		return nil, err
	}
	return &Change{fd: fd, Dev: uint64(st.Dev), Ino: st.Ino}, nil
}

// ChangeFd takes the change lock on the file open as fd (any descriptor,
// O_PATH included: the file is reopened read-only through /proc), for a
// caller that already holds the inode it will truncate. fd stays the
// caller's.
func ChangeFd(fd int) (*Change, error) {
	nfd, err := unix.Open(fmt.Sprintf("/proc/self/fd/%d", fd), openFlags&^unix.O_NOFOLLOW, 0)
	if err != nil {
		if errors.Is(err, unix.EACCES) || errors.Is(err, unix.EPERM) || errors.Is(err, unix.ENXIO) {
			return nil, nil
		}
		return nil, err
	}
	c, err := lockFd(nfd)
	if err != nil || c == nil {
		unix.Close(nfd)
	}
	return c, err
}

// Serve opens the volume file at path read-write and takes the served
// lock on it; the lock lasts until the returned file is closed. It waits
// up to Wait while changes are under way, fails with ErrServed when
// another target serves the file, and makes sure the locked inode is the
// one at path.
func Serve(path string) (*os.File, error) {
	for range 100 {
		fd, err := unix.Open(path, unix.O_RDWR|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, &os.PathError{Op: "open", Path: path, Err: err}
		}
		var st unix.Stat_t
		if err := unix.Fstat(fd, &st); err != nil {
			unix.Close(fd)
			return nil, &os.PathError{Op: "fstat", Path: path, Err: err}
		}
		if st.Mode&unix.S_IFMT != unix.S_IFREG {
			unix.Close(fd)
			return nil, fmt.Errorf("%s: not a regular file", path)
		}
		if err := lockServe(fd); err != nil {
			unix.Close(fd)
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		var now unix.Stat_t
		if unix.Stat(path, &now) == nil && now.Dev == st.Dev && now.Ino == st.Ino {
			return os.NewFile(uintptr(fd), path), nil
		}
		unix.Close(fd) // replaced between open and lock: again
	}
	return nil, fmt.Errorf("%s: %w", path, ErrBusy)
}

// VolumeName reports whether name can be the name of a volume, and so of a
// served file under its bucket: 1-64 characters of a-z, 0-9 and '-', not
// starting with '-' (so that "iqn...:BUCKET:NAME" is a valid iSCSI name).
func VolumeName(name string) bool {
	if len(name) == 0 || len(name) > 64 || name[0] == '-' {
		return false
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// Served reports whether the file at path is being served. It only looks
// (F_OFD_GETLK) and takes no lock, so it is for reporting and for failing
// early; the change lock decides.
func Served(path string) bool {
	fd, err := unix.Open(path, openFlags, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return false
	}
	lk := lockArg(unix.F_RDLCK)
	return unix.FcntlFlock(uintptr(fd), unix.F_OFD_GETLK, lk) == nil && lk.Type == unix.F_WRLCK
}
