package vfs

import (
	"errors"

	"golang.org/x/sys/unix"
)

// Inodes made ahead of time for CreateFile.
//
// Making a file allocates an inode, and on ext4 that is a search of the
// parent's inode bitmap for a free bit. Without a journal (the benchmark
// disk) the search skips, one inode read at a time, every free inode
// deleted in the last ~30 s (recently_deleted in fs/ext4/ialloc.c), so
// right after a batch of removals each create walks past all of them: in
// the NFS create benchmark that walk was a third of the server's CPU and
// sat between the CREATE call and its reply
// (docs/bench/profiles/nfs-create-*.txt). The allocation need not be
// there: the pool keeps a few unnamed, empty regular files (O_TMPFILE in
// the export root), made in the background, and CreateFile gives one the
// caller's owner, mode and the current times and then its name with
// linkat(2). What a client sees, and what a crash can leave, is the same as
// for a file made by open(O_CREAT): the new name becomes durable by the
// same directory fsync, and an unnamed file left in the pool by a crash
// holds no data (ext4 and XFS free such orphans at mount; fsck does on an
// ext4 without a journal, where a named one needs its own fsync,
// newinode.go).

// tmpPoolSize is how many unnamed files an export keeps ready.
const tmpPoolSize = 16

type tmpPool struct {
	dirfd int
	fds   chan int      // O_RDWR descriptors of unnamed empty files
	kick  chan struct{} // wakes the refill goroutine
	stop  chan struct{}
	done  chan struct{}
}

// newTmpPool returns a filled pool making its files in dirfd, or nil if
// the file system cannot make unnamed files (O_TMPFILE) there.
func newTmpPool(dirfd int) *tmpPool {
	p := &tmpPool{dirfd: dirfd, fds: make(chan int, tmpPoolSize), kick: make(chan struct{}, 1),
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

// make makes one unnamed file, unless the directory has a default ACL (the
// file would inherit the root's ACL, not its eventual directory's).
func (p *tmpPool) make() (int, error) {
	if hasDefaultACL(p.dirfd) {
		return -1, unix.ENOTSUP
	}
	return unix.Openat(p.dirfd, ".", unix.O_TMPFILE|unix.O_RDWR|unix.O_CLOEXEC, 0o600)
}

func (p *tmpPool) fill() {
	for len(p.fds) < cap(p.fds) {
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

func (p *tmpPool) run() {
	defer close(p.done)
	for {
		select {
		case <-p.stop:
			return
		case <-p.kick:
			p.fill()
		}
	}
}

// take returns an unnamed file's descriptor, or -1 if the pool is empty
// (or nil). Either way the pool is refilled in the background.
func (p *tmpPool) take() int {
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

func (p *tmpPool) close() {
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

// hasDefaultACL reports whether the directory fd (O_PATH is enough) has a
// default POSIX ACL, which a file made in it would inherit.
func hasDefaultACL(fd int) bool {
	n, err := unix.Getxattr(fdPath(fd), "system.posix_acl_default", nil)
	if err != nil {
		return !errors.Is(err, unix.ENODATA) && !errors.Is(err, unix.ENOTSUP)
	}
	return n > 0
}

// CreateFile is Create for NFS CREATE and OPEN: a new file that asks for no
// attribute but its mode (or a size of 0) gets an inode from the pool;
// anything else, an existing name, and every failure before the name is
// made go to Create, which answers as it always did.
func (fs *FS) CreateFile(c Cred, dir Handle, name string, mode CreateMode, s SetAttr, verf [8]byte) (h Handle, a Attr, dc DirChange, err error) {
	rest := s
	rest.Mode = nil
	if rest.Size != nil && *rest.Size == 0 {
		rest.Size = nil
	}
	if fs.pool == nil || mode == CreateExclusive || !rest.empty() || fs.writable() != nil || checkNewName(name) != nil {
		return fs.Create(c, dir, name, mode, s, verf)
	}
	var o *obj
	if o, dc, err = fs.dirOp(dir); err != nil {
		return fs.Create(c, dir, name, mode, s, verf)
	}
	fd := -1
	if !hasDefaultACL(o.fd) {
		fd = fs.pool.take()
	}
	if fd < 0 {
		o.close()
		return fs.Create(c, dir, name, mode, s, verf)
	}
	defer unix.Close(fd)
	perm := uint32(0o644)
	if s.Mode != nil {
		perm = *s.Mode & 0o7777
	}
	var named bool
	named, h, a, err = fs.nameTmp(c, o, fd, name, perm)
	if !named {
		o.close()
		return fs.Create(c, dir, name, mode, s, verf)
	}
	defer fs.finish(o, &dc)
	// As in Create: the directory's fsync makes the new name durable with
	// the inode's type, mode and owner (set before the link, in earlier
	// journal transactions than the entry's, which the fsync commits too);
	// without a journal the inode needs its own fsync (newinode.go).
	return h, a, dc, fs.commitNewFile(err, o, fd)
}

// nameTmp gives the unnamed file fd what open(O_CREAT) by c in o would
// have: owner c (group o's when o is set-group-ID), mode perm, the current
// times; then links it as name. named is false if nothing was named (the
// caller falls back to Create); err is from after the name was made.
func (fs *FS) nameTmp(c Cred, o *obj, fd int, name string, perm uint32) (named bool, h Handle, a Attr, err error) {
	uid, gid := -1, int(c.GID)
	if fs.switchID {
		uid = int(c.UID)
	} else {
		gid = unix.Getegid()
	}
	if o.st.Mode&unix.S_ISGID != 0 {
		gid = int(o.st.Gid)
	}
	if unix.Fchown(fd, uid, gid) != nil || unix.UtimesNanoAt(unix.AT_FDCWD, fdPath(fd), nil, 0) != nil {
		return false, nil, Attr{}, nil
	}
	err = fs.as(c, func() error {
		// As the caller: chmod drops set-group-ID for a caller outside the
		// group, and linkat checks the caller may write the directory.
		if err := unix.Fchmod(fd, perm); err != nil {
			return err
		}
		if err := unix.Linkat(unix.AT_FDCWD, fdPath(fd), o.fd, name, unix.AT_SYMLINK_FOLLOW); err != nil {
			return err
		}
		named = true
		h, a, err = fs.child(o, name)
		return err
	})
	return named, h, a, err
}
