package posix

import (
	"errors"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/tristore/tristore/internal/fsjournal"
)

// retireBatch is how many removed files of one directory are held open at
// most before that directory is fsynced and they are let go.
const retireBatch = 256

// removeAllRetired is os.RemoveAll for a tree the store drops (an upload's
// directory). On a file system without a journal (internal/fsjournal) a
// removal is not ordered before the reuse of what it frees: a part file's
// inode given to a new directory could still be named in the old upload
// directory after a power cut, and e2fsck, finding the directory named
// twice, may keep the stale name and clear the real one (an acknowledged
// object under it lost; test/powerloss TestKernelScenarios). There every
// removed inode is held open until the removal of its name is durable
// (the directory emptied, then the tree's parent, fsynced) and is written
// as deleted before it is closed (fsjournal.Retire). With a journal it is
// os.RemoveAll.
func (b *Backend) removeAllRetired(dir string) error {
	if !b.noJournal {
		return os.RemoveAll(dir)
	}
	dfd, err := removeTreeHeld(dir, 0)
	if dfd < 0 {
		return err
	}
	defer retireFds([]int{dfd})
	if e := fsyncDir(filepath.Dir(dir)); err == nil {
		err = e
	}
	return err
}

// removeTreeHeld removes dir and everything below it (at most 64 levels),
// holding each removed inode as above, and returns dir's descriptor (the
// caller retires it once dir's parent is fsynced), or -1 if dir could not
// be opened (a missing dir is no error).
func removeTreeHeld(dir string, depth int) (int, error) {
	dfd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		if errors.Is(err, unix.ENOENT) {
			return -1, nil
		}
		return -1, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	ents, err := os.ReadDir(dir)
	var held []int
	flush := func() {
		if len(held) > 0 {
			unix.Fsync(dfd) // the names are gone for good before the inodes go
			retireFds(held)
			held = held[:0]
		}
	}
	for _, e := range ents {
		p := filepath.Join(dir, e.Name())
		if e.IsDir() && depth < 64 {
			sub, serr := removeTreeHeld(p, depth+1)
			if sub >= 0 {
				held = append(held, sub)
			}
			if serr != nil && err == nil {
				err = serr
			}
		} else {
			fd, oerr := unix.Openat(dfd, e.Name(), unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
			if oerr != nil {
				fd, _ = unix.Openat(dfd, e.Name(), unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			}
			if uerr := unix.Unlinkat(dfd, e.Name(), 0); uerr != nil && !errors.Is(uerr, unix.ENOENT) && err == nil {
				err = &os.PathError{Op: "unlink", Path: p, Err: uerr}
			}
			if fd >= 0 {
				held = append(held, fd)
			}
		}
		if len(held) >= retireBatch {
			flush()
		}
	}
	flush()
	if rerr := unix.Rmdir(dir); rerr != nil && !errors.Is(rerr, unix.ENOENT) && err == nil {
		err = &os.PathError{Op: "rmdir", Path: dir, Err: rerr}
	}
	return dfd, err
}

// retireFds writes each held inode as deleted if it is (fsjournal.Retire)
// and closes it.
func retireFds(fds []int) {
	for _, fd := range fds {
		retire(fd)
		unix.Close(fd)
	}
}

// retire is fsjournal.Retire(fd), seen by tests (hookRetire).
func retire(fd int) {
	if hookRetire != nil {
		hookRetire(fd)
	}
	fsjournal.Retire(fd)
}

// hookRetire, set only by tests, runs before every retire of a held
// descriptor.
var hookRetire func(fd int)

// removeFileRetired removes the file p (a failed write's temp, a bucket
// config moved to an xattr); without a journal durably (its directory
// fsynced) and retired before its inode is let go, as dropTemp. removed
// says the removal was done; err is then the fsync's (without a journal),
// else the removal's.
func (b *Backend) removeFileRetired(p string) (removed bool, err error) {
	if !b.noJournal {
		err := os.Remove(p)
		return err == nil, err
	}
	fd, err := unix.Open(p, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		err := os.Remove(p)
		return err == nil, err
	}
	defer unix.Close(fd)
	if err := os.Remove(p); err != nil {
		return false, err
	}
	if err := fsyncDir(filepath.Dir(p)); err != nil {
		return true, err
	}
	retire(fd)
	return true, nil
}

// settleStartup ends the exclusive opener's start-up (scratch files and
// unfinished uploads removed, the incarnation file replaced, the xattr
// probe made and removed) with a syncfs on a file system without a
// journal: what those removals freed is then on disk as free before any
// request can be given it (see removeAllRetired). One syncfs per start;
// with a journal nothing.
func (b *Backend) settleStartup() {
	if !b.noJournal { // decided once at Open
		return
	}
	fd, err := unix.Open(b.root, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	if err := unix.Syncfs(fd); err != nil {
		b.log.Warn("posix store: syncfs after start-up cleanup", "err", err)
	}
}

// dropTemp closes and removes the temp file f of a write that failed. Its
// name may already be on disk (another file's fsync in the directory
// writes the directory) and its inode too (fsynced before a rename that
// then failed), so without a journal the removal is made durable before
// the inode is let go, and the inode is written as deleted (as
// removeAllRetired): otherwise the freed inode, reused as a new directory
// or object, could be named twice after a power cut and e2fsck keep the
// temp name instead of the real one.
func (b *Backend) dropTemp(f *os.File) {
	name := f.Name()
	if !b.noJournal {
		f.Close()
		os.Remove(name)
		return
	}
	if os.Remove(name) == nil {
		fsyncDir(filepath.Dir(name)) // best effort, as the removal itself
		retire(int(f.Fd()))
	}
	f.Close()
}

// holdRemoved opens p (a file or directory about to be removed) to be
// retired once its removal is durable, on a file system without a
// journal; nil elsewhere or when p cannot be opened.
func (b *Backend) holdRemoved(p string) []int {
	if !b.noJournal {
		return nil
	}
	fd, err := unix.Open(p, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	return []int{fd}
}

// closeFds closes held descriptors without retiring them.
func closeFds(fds []int) {
	for _, fd := range fds {
		unix.Close(fd)
	}
}
