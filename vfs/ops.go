package vfs

import (
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/tristore/tristore/internal/fsjournal"
	"github.com/tristore/tristore/store/inuse"
	"github.com/tristore/tristore/store/newdir"
)

// DirChange carries a directory's attributes around a modifying operation
// (NFS weak cache consistency). Fields are nil when unknown.
type DirChange struct {
	Before, After *Attr
}

func (fs *FS) statPtr(fd int) *Attr {
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil {
		return nil
	}
	a := fs.attrOf(&st)
	return &a
}

// dirOp resolves a directory handle, records its attributes before, and
// fills After when done.
func (fs *FS) dirOp(h Handle) (*obj, DirChange, error) {
	o, err := fs.resolve(h)
	if err != nil {
		return nil, DirChange{}, err
	}
	if !o.isDir() {
		before := fs.attrOf(&o.st)
		o.close()
		return nil, DirChange{Before: &before, After: &before}, unix.ENOTDIR
	}
	before := fs.attrOf(&o.st)
	return o, DirChange{Before: &before}, nil
}

func (fs *FS) finish(o *obj, dc *DirChange) {
	dc.After = fs.statPtr(o.fd)
	o.close()
}

// child stats name in the directory and builds its handle.
func (fs *FS) child(dir *obj, name string) (Handle, Attr, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(dir.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return nil, Attr{}, err
	}
	h, err := fs.handleOf(dir.fd, name, &st, dir.st.Ino, dir.path)
	if err != nil {
		return nil, Attr{}, err
	}
	return h, fs.attrOf(&st), nil
}

// Lookup finds name in directory dir as c. "." is dir itself; ".." is its
// parent, or the export root itself at the root (the export is a closed tree).
// Reserved names do not exist.
func (fs *FS) Lookup(c Cred, dir Handle, name string) (Handle, Attr, *Attr, error) {
	o, err := fs.resolve(dir)
	if err != nil {
		return nil, Attr{}, nil, err
	}
	defer o.close()
	da := fs.attrOf(&o.st)
	if !o.isDir() {
		return nil, Attr{}, &da, unix.ENOTDIR
	}
	switch {
	case name == ".", name == ".." && o.st.Ino == fs.rootIno:
		return dir, da, &da, nil
	case name == "..":
	default:
		if err := checkName(name); err != nil {
			if errors.Is(err, ErrReserved) {
				err = unix.ENOENT
			}
			return nil, Attr{}, &da, err
		}
	}
	var h Handle
	var a Attr
	err = fs.as(c, func() error {
		var err error
		h, a, err = fs.child(o, name)
		return err
	})
	if name == ".." && err == nil && a.FileID == fs.rootIno {
		h = fs.rootFH
	}
	return h, a, &da, err
}

// Readlink returns a symbolic link's target.
func (fs *FS) Readlink(h Handle) (string, Attr, error) {
	o, err := fs.resolve(h)
	if err != nil {
		return "", Attr{}, err
	}
	defer o.close()
	a := fs.attrOf(&o.st)
	if a.Type != TypeSymlink {
		return "", a, unix.EINVAL
	}
	buf := make([]byte, 4096)
	n, err := unix.Readlinkat(o.fd, "", buf)
	if err != nil {
		return "", a, err
	}
	return string(buf[:n]), a, nil
}

// CreateMode is how Create treats an existing name.
type CreateMode int

const (
	CreateUnchecked CreateMode = iota // reuse an existing file (attributes applied)
	CreateGuarded                     // fail with EEXIST if the name exists
	CreateExclusive                   // exactly-once create keyed by a verifier
)

// Create makes a regular file. For CreateExclusive the 8-byte verifier is
// kept in the file's atime and mtime seconds (as Linux knfsd does), so a
// retransmitted CREATE finds its own file and succeeds; the client then sets
// the real times with SETATTR.
func (fs *FS) Create(c Cred, dir Handle, name string, mode CreateMode, s SetAttr, verf [8]byte) (h Handle, a Attr, dc DirChange, err error) {
	if err := fs.writable(); err != nil {
		return nil, Attr{}, DirChange{}, err
	}
	var o *obj
	o, dc, err = fs.dirOp(dir)
	if err != nil {
		return nil, Attr{}, dc, err
	}
	defer fs.finish(o, &dc)
	if err := checkNewName(name); err != nil {
		return nil, Attr{}, dc, err
	}
	perm := uint32(0o644)
	if s.Mode != nil {
		perm = *s.Mode & 0o7777
	}
	if mode == CreateUnchecked && s.Size != nil {
		// An existing file would be truncated: not a served volume.
		held, err := holdName(o.fd, name)
		if err != nil {
			return nil, Attr{}, dc, err
		}
		defer held.Release()
	}
	newFd := -1 // the new file, when this call made it
	s2 := s     // the attributes left to apply to a new file after its mode
	err = fs.as(c, func() error {
		fd, err := unix.Openat(o.fd, name, unix.O_CREAT|unix.O_EXCL|unix.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, perm)
		if errors.Is(err, unix.EEXIST) {
			switch mode {
			case CreateGuarded:
				return err
			case CreateExclusive:
				var st unix.Stat_t
				if e := unix.Fstatat(o.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); e != nil {
					return e
				}
				if st.Mode&unix.S_IFMT != unix.S_IFREG ||
					uint32(st.Atim.Sec) != binary.BigEndian.Uint32(verf[0:4]) ||
					uint32(st.Mtim.Sec) != binary.BigEndian.Uint32(verf[4:8]) {
					return unix.EEXIST
				}
				h, a, err = fs.child(o, name)
				return err
			}
			// Unchecked: the existing file gets the requested attributes
			// (typically size 0), as a local open(O_CREAT|O_TRUNC) would.
			var st unix.Stat_t
			if e := unix.Fstatat(o.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW); e != nil {
				return e
			}
			if st.Mode&unix.S_IFMT == unix.S_IFDIR {
				return unix.EISDIR
			}
			fd, err := unix.Openat(o.fd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				return err
			}
			eo := &obj{fd: fd, st: st}
			defer eo.close()
			s2 := s
			s2.Mode = nil // an existing file keeps its mode
			if err := fs.applyAttrs(eo, c, s2); err != nil {
				return err
			}
			h, a, err = fs.child(o, name)
			return err
		}
		if err != nil {
			return err
		}
		// Undo the umask and apply what was asked; on failure remove the
		// half-made file so a retry starts clean.
		ferr := unix.Fchmod(fd, perm)
		if ferr == nil && mode == CreateExclusive {
			ts := []unix.Timespec{
				{Sec: int64(binary.BigEndian.Uint32(verf[0:4]))},
				{Sec: int64(binary.BigEndian.Uint32(verf[4:8]))},
			}
			ferr = unix.UtimesNanoAt(unix.AT_FDCWD, fdPath(fd), ts, 0)
		}
		s2.Mode = nil
		if s2.Size != nil && *s2.Size == 0 {
			// Already empty; a truncate would only make ext4 flush
			// the file on the next close (auto_da_alloc).
			s2.Size = nil
		}
		if ferr == nil && mode != CreateExclusive && !s2.empty() {
			pfd, err := unix.Openat(o.fd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			if err != nil {
				ferr = err
			} else {
				no := &obj{fd: pfd}
				unix.Fstat(pfd, &no.st)
				ferr = fs.applyAttrs(no, c, s2)
				no.close()
			}
		}
		if ferr != nil {
			unix.Close(fd)
			unix.Unlinkat(o.fd, name, 0)
			return ferr
		}
		// Kept open for the durability sync below: the usual CREATE (a
		// mode, nothing else) costs no second open of the new file.
		newFd = fd
		h, a, err = fs.child(o, name)
		return err
	})
	if newFd >= 0 {
		defer unix.Close(newFd)
		// A new empty file with only its mode set needs no fsync of its
		// own on a journaling file system: the directory's fsync
		// (commitMeta) makes the name durable together with the inode's
		// type, mode and owner, which ext4 and XFS journal in the same
		// transaction as the entry (the power-loss model,
		// internal/powerloss, holds exactly that and nothing more).
		// Without a journal it does need it (newinode.go). Times (the
		// EXCLUSIVE verifier lives in them), owner changes and a size
		// always do.
		if err == nil && !fs.async && (mode == CreateExclusive || !s2.empty()) {
			err = unix.Fsync(newFd)
			return h, a, dc, fs.commitMeta(err, o, "")
		}
		return h, a, dc, fs.commitNewFile(err, o, newFd)
	}
	return h, a, dc, fs.commitMeta(err, o, name)
}

// Mkdir makes a directory.
func (fs *FS) Mkdir(c Cred, dir Handle, name string, s SetAttr) (h Handle, a Attr, dc DirChange, err error) {
	if err := fs.writable(); err != nil {
		return nil, Attr{}, DirChange{}, err
	}
	var o *obj
	o, dc, err = fs.dirOp(dir)
	if err != nil {
		return nil, Attr{}, dc, err
	}
	defer fs.finish(o, &dc)
	if err := checkNewName(name); err != nil {
		return nil, Attr{}, dc, err
	}
	perm := uint32(0o755)
	if s.Mode != nil {
		perm = *s.Mode & 0o7777
	}
	err = fs.as(c, func() error {
		// Until commitMeta has fsynced o, the new directory's name is not
		// durable: registered, so that an S3 PUT putting an object in it
		// meanwhile makes it durable before its own reply (an async
		// export promises nothing of the kind and registers nothing).
		made := func(bool) {}
		if !fs.async {
			if p := pathOf(o); p != "" {
				made = newdir.Register(filepath.Join(p, name))
			}
		}
		err := unix.Mkdirat(o.fd, name, perm)
		made(err == nil)
		if err != nil {
			return err
		}
		fd, err := unix.Openat(o.fd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err == nil {
			no := &obj{fd: fd}
			unix.Fstat(fd, &no.st)
			err = unix.Chmod(no.procPath(), perm)
			if err == nil {
				s2 := s
				s2.Mode = nil
				err = fs.applyAttrs(no, c, s2)
			}
			no.close()
		}
		if err != nil {
			unix.Unlinkat(o.fd, name, unix.AT_REMOVEDIR)
			return err
		}
		h, a, err = fs.child(o, name)
		return err
	})
	return h, a, dc, fs.commitMeta(err, o, name)
}

// Symlink makes a symbolic link name -> target.
func (fs *FS) Symlink(c Cred, dir Handle, name, target string, s SetAttr) (h Handle, a Attr, dc DirChange, err error) {
	if err := fs.writable(); err != nil {
		return nil, Attr{}, DirChange{}, err
	}
	var o *obj
	o, dc, err = fs.dirOp(dir)
	if err != nil {
		return nil, Attr{}, dc, err
	}
	defer fs.finish(o, &dc)
	if err := checkNewName(name); err != nil {
		return nil, Attr{}, dc, err
	}
	if target == "" || len(target) > 4095 || containsNUL(target) {
		return nil, Attr{}, dc, ErrInvalidName
	}
	err = fs.as(c, func() error {
		if err := unix.Symlinkat(target, o.fd, name); err != nil {
			return err
		}
		var err error
		h, a, err = fs.child(o, name)
		return err
	})
	if err == nil && !fs.async {
		err = fs.syncNewSpecial(o) // no journal: the new inode (newinode.go)
	}
	return h, a, dc, fs.commitMeta(err, o, "")
}

// Mknod makes a FIFO, a socket or a device node. The store's other views
// never block on these: S3 listings show regular files only and the posix
// store opens with O_NONBLOCK until it knows an object is regular.
func (fs *FS) Mknod(c Cred, dir Handle, name string, typ FileType, major, minor uint32, s SetAttr) (h Handle, a Attr, dc DirChange, err error) {
	if err := fs.writable(); err != nil {
		return nil, Attr{}, DirChange{}, err
	}
	var kind uint32
	switch typ {
	case TypeFIFO:
		kind = unix.S_IFIFO
	case TypeSocket:
		kind = unix.S_IFSOCK
	case TypeChar:
		kind = unix.S_IFCHR
	case TypeBlock:
		kind = unix.S_IFBLK
	default:
		return nil, Attr{}, DirChange{}, unix.EINVAL
	}
	var o *obj
	o, dc, err = fs.dirOp(dir)
	if err != nil {
		return nil, Attr{}, dc, err
	}
	defer fs.finish(o, &dc)
	if err := checkNewName(name); err != nil {
		return nil, Attr{}, dc, err
	}
	perm := uint32(0o644)
	if s.Mode != nil {
		perm = *s.Mode & 0o7777
	}
	err = fs.as(c, func() error {
		if err := unix.Mknodat(o.fd, name, kind|perm, int(unix.Mkdev(major, minor))); err != nil {
			return err
		}
		// The umask applied to mknodat: set the mode asked for, then the rest.
		fd, err := unix.Openat(o.fd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err == nil {
			no := &obj{fd: fd}
			unix.Fstat(fd, &no.st)
			err = unix.Fchmodat(o.fd, name, perm, 0)
			if err == nil {
				s2 := s
				s2.Mode = nil
				err = fs.applyAttrs(no, c, s2)
			}
			no.close()
		}
		if err != nil {
			unix.Unlinkat(o.fd, name, 0)
			return err
		}
		h, a, err = fs.child(o, name)
		return err
	})
	if err == nil && !fs.async {
		err = fs.syncNewSpecial(o) // no journal: the new inode (newinode.go)
	}
	return h, a, dc, fs.commitMeta(err, o, name)
}

func containsNUL(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == 0 {
			return true
		}
	}
	return false
}

// Remove unlinks a non-directory.
func (fs *FS) Remove(c Cred, dir Handle, name string) (DirChange, error) {
	return fs.unlink(c, dir, name, 0)
}

// Rmdir removes an empty directory.
func (fs *FS) Rmdir(c Cred, dir Handle, name string) (DirChange, error) {
	return fs.unlink(c, dir, name, unix.AT_REMOVEDIR)
}

func (fs *FS) unlink(c Cred, dir Handle, name string, flags int) (dc DirChange, err error) {
	if err := fs.writable(); err != nil {
		return DirChange{}, err
	}
	var o *obj
	o, dc, err = fs.dirOp(dir)
	if err != nil {
		return dc, err
	}
	defer fs.finish(o, &dc)
	if err := checkName(name); err != nil {
		switch {
		case errors.Is(err, ErrReserved):
			err = unix.ENOENT
		case name == ".":
			err = unix.EINVAL
		case name == "..":
			err = unix.ENOTEMPTY
		}
		return dc, err
	}
	var held *inuse.Change
	if flags == 0 {
		if held, err = holdName(o.fd, name); err != nil { // a served volume is not removed
			return dc, err
		}
		defer held.Release()
	} else if !fs.async && !fs.dirSyncKeepsInodes {
		// No journal: the removed directory's inode stays ours until the
		// removal is durable, so it cannot be given to a new file under
		// the old name meanwhile; then it is written as deleted (below).
		if dfd, e := unix.Openat(o.fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0); e == nil {
			defer unix.Close(dfd)
			defer func() {
				if err == nil {
					fsjournal.Retire(dfd)
				}
			}()
		}
	}
	var st unix.Stat_t
	haveSt := (fs.index != nil || !fs.files.empty()) && unix.Fstatat(o.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil
	err = fs.as(c, func() error { return unix.Unlinkat(o.fd, name, flags) })
	if err == nil && haveSt && st.Nlink <= 1 {
		fs.files.dropIno(st.Ino) // not kept open by the READ cache
	}
	if err == nil && haveSt && fs.index != nil && (st.Nlink <= 1 || flags == unix.AT_REMOVEDIR) {
		fs.index.forget(st.Ino) // the inode is gone; a reused number must not inherit the entry
	}
	if errors.Is(err, unix.EISDIR) && flags == 0 {
		// unlink(2) on a directory is EISDIR on Linux; RFC 1813 REMOVE
		// of a directory is also answered with ISDIR (or NOTSUPP) by knfsd.
		return dc, unix.EISDIR
	}
	if err = fs.commitMeta(err, o, ""); err == nil && !fs.async && !fs.dirSyncKeepsInodes {
		held.Retire() // the removed file, once its removal is durable (inuse)
	}
	return dc, err
}

// Rename moves fromName in fromDir to toName in toDir atomically
// (rename(2)); both directories must belong to this export.
func (fs *FS) Rename(c Cred, fromDir Handle, fromName string, toDir Handle, toName string) (from, to DirChange, err error) {
	if err := fs.writable(); err != nil {
		return DirChange{}, DirChange{}, err
	}
	var fo, to0 *obj
	fo, from, err = fs.dirOp(fromDir)
	if err != nil {
		return from, DirChange{}, err
	}
	defer fs.finish(fo, &from)
	to0, to, err = fs.dirOp(toDir)
	if err != nil {
		return from, to, err
	}
	defer fs.finish(to0, &to)
	if err := checkName(fromName); err != nil {
		if errors.Is(err, ErrReserved) {
			err = unix.ENOENT
		} else if fromName == "." || fromName == ".." {
			err = unix.EINVAL
		}
		return from, to, err
	}
	if err := checkName(toName); err != nil {
		if toName == "." || toName == ".." {
			err = unix.EINVAL
		}
		return from, to, err
	}
	// A served volume is neither moved away nor replaced.
	src, err := holdName(fo.fd, fromName)
	if err != nil {
		return from, to, err
	}
	defer src.Release()
	var tst unix.Stat_t
	var dst *inuse.Change
	if src == nil || unix.Fstatat(to0.fd, toName, &tst, unix.AT_SYMLINK_NOFOLLOW) != nil || !src.Same(&tst) {
		// (Renaming a file onto another link of itself changes nothing.)
		if dst, err = holdName(to0.fd, toName); err != nil {
			return from, to, err
		}
		defer dst.Release()
	}
	// No journal: the file replaced keeps a second name until the rename
	// is durable (keepReplaced).
	keep := fs.keepReplaced(dst, to0)
	renamed := false
	err = fs.as(c, func() error {
		if err := unix.Renameat(fo.fd, fromName, to0.fd, toName); err != nil {
			return err
		}
		renamed = true
		if dst != nil && tst.Ino != 0 && !fs.files.empty() {
			fs.files.dropIno(tst.Ino) // the replaced file: not kept open by the READ cache
		}
		if fs.index != nil {
			var st unix.Stat_t
			if unix.Fstatat(to0.fd, toName, &st, unix.AT_SYMLINK_NOFOLLOW) == nil {
				fs.index.record(st.Ino, to0.st.Ino, toName, generation(to0.fd, toName, &st))
			}
		}
		return nil
	})
	if err == nil && to0.st.Ino != fo.st.Ino {
		fs.noteMove(to0, toName) // before the commit, so the hint is durable before the reply
		err = fs.commitMeta(nil, to0, "")
		if faultSkip("nfs-rename-src") {
			return from, to, err
		}
	}
	err = fs.commitMeta(err, fo, "")
	if keep != "" && (err == nil || !renamed) {
		// Its other name goes for good before the inode can be freed;
		// after a failed commit it stays (the store's start-up walk
		// removes it).
		if unix.Unlinkat(to0.fd, keep, 0) == nil && err == nil {
			err = fsyncObj(to0)
		}
	}
	if err == nil && !fs.async && !fs.dirSyncKeepsInodes {
		dst.Retire() // the replaced file, once the rename is durable (inuse)
	}
	return from, to, err
}

// keepReplaced, on a file system without a journal, links the file a
// RENAME is about to replace (dst, held) under a new reserved name in
// to's directory and returns that name ("" when there is nothing to do or
// the link failed). A rename over a file drops the old inode's link count
// to 0 in its inode table block at once, and any other file's fsync can
// write that block before the commit writes the directory: after a power
// cut the target's old name would point at a deleted inode and e2fsck
// would clear it, losing the file a RENAME in flight was replacing (old or
// new were allowed). With the second name the count stays at 1 until the
// rename is durable. The name is hidden (ReservedPrefix) and, if a crash
// leaves it, removed by the store's start-up walk of stale temp names
// (store/posix tempfiles.go: a name without an incarnation is stale).
func (fs *FS) keepReplaced(dst *inuse.Change, to *obj) string {
	if dst == nil || fs.async || fs.dirSyncKeepsInodes {
		return ""
	}
	var r [8]byte
	rand.Read(r[:])
	name := ReservedPrefix + "-tmp-" + hex.EncodeToString(r[:])
	if dst.LinkAt(to.fd, name) != nil {
		return ""
	}
	return name
}

// Link makes a hard link to h as name in dir.
func (fs *FS) Link(c Cred, h Handle, dir Handle, name string) (a Attr, dc DirChange, err error) {
	if err := fs.writable(); err != nil {
		return Attr{}, DirChange{}, err
	}
	src, err := fs.resolve(h)
	if err != nil {
		return Attr{}, DirChange{}, err
	}
	defer src.close()
	var o *obj
	o, dc, err = fs.dirOp(dir)
	if err != nil {
		return fs.attrOf(&src.st), dc, err
	}
	defer fs.finish(o, &dc)
	if src.isDir() {
		return fs.attrOf(&src.st), dc, unix.EISDIR
	}
	if err := checkNewName(name); err != nil {
		return fs.attrOf(&src.st), dc, err
	}
	// linkat(AT_EMPTY_PATH) needs CAP_DAC_READ_SEARCH, which the caller's
	// identity lacks; following the /proc magic link needs nothing more
	// than link(2) would.
	err = fs.as(c, func() error {
		return unix.Linkat(unix.AT_FDCWD, src.procPath(), o.fd, name, unix.AT_SYMLINK_FOLLOW)
	})
	a = fs.attrOf(&src.st)
	var st unix.Stat_t
	if unix.Fstat(src.fd, &st) == nil {
		a = fs.attrOf(&st)
	}
	return a, dc, fs.commitMeta(err, o, name)
}

// commitMeta makes a successful namespace change durable before the reply,
// as RFC 1813 requires of every modifying operation except an UNSTABLE
// WRITE (knfsd's "sync" export default): it fsyncs the directory and, if
// child is not "", the child itself (skipped for symlinks and special
// files). With Options.Async it does nothing. An fsync error is returned.
func (fs *FS) commitMeta(err error, dir *obj, child string) error {
	if err != nil || fs.async {
		return err
	}
	if child != "" {
		if fd, e := unix.Openat(dir.fd, child, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0); e == nil {
			var st unix.Stat_t
			if unix.Fstat(fd, &st) == nil && (st.Mode&unix.S_IFMT == unix.S_IFREG || st.Mode&unix.S_IFMT == unix.S_IFDIR) {
				err = unix.Fsync(fd)
			}
			unix.Close(fd)
			if err != nil {
				return err
			}
		}
	}
	return fs.commitMetaVia(dir, func() error { return fsyncObj(dir) })
}

// commitMetaVia is commitMeta's directory part, with syncDir making dir's
// entries durable (an fsync of dir, or one that also does it, see
// commitNewFile).
func (fs *FS) commitMetaVia(dir *obj, syncDir func() error) error {
	if faultSkip("nfs-dir") {
		return nil
	}
	// Directories made and not yet durable (store/newdir): those whose
	// name is in dir are settled by this fsync; those on dir's path made
	// by another writer (an S3 PUT's new prefix) get their parents
	// fsynced too, so this reply cannot be lost with one of them.
	if hookDirFsync != nil {
		hookDirFsync(pathOf(dir))
	}
	var dirPath string
	var settle []newdir.Settling
	if newdir.Pending() {
		dirPath = pathOf(dir)
		if dirPath != "" {
			settle = newdir.SettleBegin(dirPath)
		}
	}
	if err := syncDir(); err != nil {
		return err
	}
	newdir.SettleEnd(settle)
	if dirPath != "" {
		for _, p := range newdir.UnsettledParents(dirPath) {
			if err := fsyncPath(p); err != nil {
				return err
			}
		}
	}
	return nil
}

// hookDirFsync, nil in production, runs in commitMeta just before the
// directory's fsync, with its path (newdir_test.go holds an NFS MKDIR
// there; a hold inside the file system would also hold the directory's
// inode lock, and with it the other view's lookups).
var hookDirFsync func(dir string)

// pathOf is the path of o's directory now ("" if it has none: removed).
func pathOf(o *obj) string {
	p, err := os.Readlink(o.procPath())
	if err != nil || !filepath.IsAbs(p) || strings.HasSuffix(p, " (deleted)") {
		return ""
	}
	return p
}

// fsyncObj fsyncs a resolved object through a fresh read-only descriptor
// (its own descriptor is O_PATH, which cannot be synced).
func fsyncObj(o *obj) error {
	if m := o.st.Mode & unix.S_IFMT; m != unix.S_IFREG && m != unix.S_IFDIR {
		return nil
	}
	fd, err := unix.Open(o.procPath(), unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Fsync(fd)
}
