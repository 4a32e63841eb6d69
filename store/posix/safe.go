package posix

import (
	"errors"
	"os"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// The tree is shared with NFS and FUSE clients, which can create symlinks,
// FIFOs and device nodes. An object operation must never follow a symlink
// out of the tree (the server may run as root) nor block opening a FIFO, so
// objects and directories are opened with openat2(RESOLVE_NO_SYMLINKS) —
// one system call that refuses a symlink in any component — and with
// O_NONBLOCK until the file is known to be regular. The data root itself is
// resolved with EvalSymlinks at Open so it contains no symlinks. Kernels
// without openat2 (before 5.6) fall back to O_NOFOLLOW on the last component.

var noOpenat2 atomic.Bool

func openat2(path string, flags int, mode uint32) (int, error) {
	flags |= unix.O_CLOEXEC | unix.O_NOFOLLOW
	if !noOpenat2.Load() {
		fd, err := unix.Openat2(unix.AT_FDCWD, path, &unix.OpenHow{Flags: uint64(flags), Mode: uint64(mode), Resolve: unix.RESOLVE_NO_SYMLINKS})
		if !errors.Is(err, unix.ENOSYS) {
			return fd, err
		}
		noOpenat2.Store(true)
	}
	return unix.Open(path, flags, mode)
}

// openRegular opens path (flags as for os.OpenFile) refusing symlinks and
// anything but a regular file (ErrNotRegular), and returns its stat.
func openRegular(path string, flags int, perm os.FileMode) (*os.File, unix.Stat_t, error) {
	var st unix.Stat_t
	fd, err := openat2(path, flags|unix.O_NONBLOCK, uint32(perm.Perm()))
	if err != nil {
		return nil, st, &os.PathError{Op: "open", Path: path, Err: err}
	}
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, st, &os.PathError{Op: "fstat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			return nil, st, &os.PathError{Op: "open", Path: path, Err: unix.EISDIR}
		}
		return nil, st, &os.PathError{Op: "open", Path: path, Err: errNotRegular}
	}
	if err := unix.SetNonblock(fd, false); err != nil {
		unix.Close(fd)
		return nil, st, err
	}
	return os.NewFile(uintptr(fd), path), st, nil
}

var errNotRegular = errors.New("not a regular file")

// openDir opens a directory for reading (or fsync) refusing symlinks.
func openDir(path string) (*os.File, error) {
	fd, err := openat2(path, unix.O_RDONLY|unix.O_DIRECTORY, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: path, Err: err}
	}
	return os.NewFile(uintptr(fd), path), nil
}

// isDirNoSymlinks reports whether path is a directory reached without
// following any symlink; the error says why not.
func isDirNoSymlinks(path string) error {
	fd, err := openat2(path, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		return &os.PathError{Op: "open", Path: path, Err: err}
	}
	unix.Close(fd)
	return nil
}
