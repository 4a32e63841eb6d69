// Package inodepool keeps a few unnamed, empty regular files (O_TMPFILE)
// ready, so that making a new file on the request path needs no inode
// allocation.
//
// Why: making a file allocates an inode, and on ext4 that is a search of
// an inode bitmap for a free bit. Without a journal (this project's
// benchmark disk) the search skips, one inode-table read at a time, every
// free inode deleted in the last ~30 s (recently_deleted in
// fs/ext4/ialloc.c), so right after a batch of removals or overwrites each
// create walks past all of them. In the NFS create benchmark that walk was
// a third of the server's CPU (docs/bench/profiles/nfs-create-*.txt). With
// a pool the walk still happens, but in the background, between requests
// or while a request waits for its fsync. (The S3 store tried it too, in
// 0d06cc4: a serial 4 KiB PUT that overwrites keys spends a quarter of its
// CPU in that walk, docs/bench/profiles/s3-put4k-p1-before.txt, but no
// PUT row got faster, so it was taken out again.)
//
// A pooled file is linked into the tree by its user (linkat(2) of the
// /proc/self/fd link) and must then be given what open(O_CREAT) would have
// given it: current times, and the owner and mode the caller wants. A file
// left in the pool by a crash was never named and holds no data; ext4 and
// XFS free such orphans at mount, and fsck does on an ext4 without a
// journal.
package inodepool

import (
	"errors"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// Size is how many unnamed files a pool keeps ready.
const Size = 16

// Pool makes unnamed files in one directory. The zero value is not usable;
// a nil *Pool is an empty pool (Take returns -1, Close does nothing).
type Pool struct {
	dirfd int
	perm  uint32        // mode asked of O_TMPFILE (the umask applies)
	quiet time.Duration // NewQuiet: refill only after this long without a Take
	fds   chan int      // O_RDWR descriptors of unnamed empty files
	kick  chan struct{} // wakes the refill goroutine
	stop  chan struct{}
	done  chan struct{}
}

// New returns a filled pool making its files with mode perm (less the
// umask, as for open(O_CREAT)) in the directory dirfd (which the caller
// keeps open until Close), or nil if the file system cannot
// make unnamed files there, or the directory has a default ACL (a pooled
// file would inherit it, not its eventual directory's ACL).
func New(dirfd int, perm uint32) *Pool { return NewQuiet(dirfd, perm, 0) }

// NewQuiet is New for a pool whose refill waits until no file has been
// taken for quiet (while more than a quarter of Size is still ready), so
// that the files are made between a caller's requests instead of during
// the request that took one: a file made while the taker writes into and
// names the one it took (same directory, the other core) made that
// request take about twice as long (the first write into a chunk of the
// cloud file system's cache, 152 against 215 us median in-process,
// docs/bench/profiles/cloudfs-write-wait.txt). Below a quarter it
// refills at once, as New does, so a burst of takes does not empty it.
func NewQuiet(dirfd int, perm uint32, quiet time.Duration) *Pool {
	p := &Pool{dirfd: dirfd, perm: perm, quiet: quiet, fds: make(chan int, Size), kick: make(chan struct{}, 1),
		stop: make(chan struct{}), done: make(chan struct{})}
	fd, err := p.make()
	if err != nil {
		return nil
	}
	p.fds <- fd
	p.fill()
	go p.run()
	return p
}

func (p *Pool) make() (int, error) {
	if HasDefaultACL(p.dirfd) {
		return -1, unix.ENOTSUP
	}
	return unix.Openat(p.dirfd, ".", unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, p.perm)
}

func (p *Pool) fill() {
	for len(p.fds) < cap(p.fds) {
		if p.quiet > 0 && len(p.kick) > 0 && !p.low() {
			return // taken from meanwhile: wait for quiet again (run)
		}
		fd, err := p.make()
		if err != nil {
			return
		}
		select {
		case p.fds <- fd:
		default:
			unix.Close(fd)
			return
		}
	}
}

func (p *Pool) run() {
	defer close(p.done)
	for {
		select {
		case <-p.stop:
			return
		case <-p.kick:
			if !p.waitQuiet() {
				return
			}
			p.fill()
		}
	}
}

// low: at most a quarter of the pool is ready.
func (p *Pool) low() bool { return len(p.fds) <= cap(p.fds)/4 }

// waitQuiet waits until nothing was taken for p.quiet or the pool is
// low; false when the pool is closed meanwhile.
func (p *Pool) waitQuiet() bool {
	for p.quiet > 0 && !p.low() {
		t := time.NewTimer(p.quiet)
		select {
		case <-p.stop:
			t.Stop()
			return false
		case <-p.kick: // taken again: the quiet starts over
			t.Stop()
		case <-t.C:
			return true
		}
	}
	return true
}

// Take returns an unnamed file's descriptor (O_RDWR, the pool's mode,
// owned by the process, empty), or -1 if the pool is empty or nil. Either way the
// pool is refilled in the background. The caller owns the descriptor.
func (p *Pool) Take() int {
	if p == nil {
		return -1
	}
	fd := -1
	select {
	case fd = <-p.fds:
	default:
	}
	select {
	case p.kick <- struct{}{}:
	default:
	}
	return fd
}

// Ready is how many unnamed files the pool holds now (0 for a nil pool).
func (p *Pool) Ready() int {
	if p == nil {
		return 0
	}
	return len(p.fds)
}

// Close stops the refill and closes the files still pooled (the kernel
// frees them: they have no name).
func (p *Pool) Close() {
	if p == nil {
		return
	}
	close(p.stop)
	<-p.done
	for {
		select {
		case fd := <-p.fds:
			unix.Close(fd)
		default:
			return
		}
	}
}

// Link gives the unnamed file fd the name name in the directory dirfd,
// without following symlinks in name (it must be a single component).
func Link(fd, dirfd int, name string) error {
	return unix.Linkat(unix.AT_FDCWD, fdPath(fd), dirfd, name, unix.AT_SYMLINK_FOLLOW)
}

// fdPath is the /proc magic link of descriptor fd of this process.
func fdPath(fd int) string { return "/proc/self/fd/" + strconv.Itoa(fd) }

// HasDefaultACL reports whether the directory fd (O_PATH is enough) has a
// default POSIX ACL, which a file made in it would inherit.
func HasDefaultACL(fd int) bool {
	n, err := unix.Getxattr(fdPath(fd), "system.posix_acl_default", nil)
	if err != nil {
		return !errors.Is(err, unix.ENODATA) && !errors.Is(err, unix.ENOTSUP)
	}
	return n > 0
}
