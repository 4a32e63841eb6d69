package vfs

import (
	"path/filepath"

	"github.com/tristore/tristore/store/inodepool"
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
// there: the pool (store/inodepool) keeps a few unnamed, empty regular
// files (O_TMPFILE in the export root), made in the background, and
// CreateFile gives one the caller's owner, mode and the current times and
// then its name with linkat(2). What a client sees, and what a crash can
// leave, is the same as for a file made by open(O_CREAT): the new name
// becomes durable by the same directory fsync, and an unnamed file left in
// the pool by a crash holds no data (ext4 and XFS free such orphans at
// mount; fsck does on an ext4 without a journal, where a named one needs
// its own fsync, newinode.go).

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
	if !inodepool.HasDefaultACL(o.fd) {
		fd = fs.pool.Take()
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
	if err == nil {
		fs.seedWrite(c, h, fd, filepath.Join(o.path, name)) // for the WRITE and COMMIT that follow
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
		if err := inodepool.Link(fd, o.fd, name); err != nil {
			return err
		}
		named = true
		h, a, err = fs.child(o, name)
		return err
	})
	return named, h, a, err
}
