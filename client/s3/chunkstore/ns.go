package chunkstore

import (
	"context"
	"sort"
	"strings"
	"syscall"
	"time"
)

// The namespace of a KindFS store: inodes with POSIX attributes, directory
// entries and hard links, all in the manifest, so listing a tree never
// touches a chunk. Permission checks are the front end's (FUSE mounts with
// default_permissions); the store keeps the structure consistent.

// Rename flags (renameat2).
const (
	RenameNoReplace = 1
	RenameExchange  = 2
)

// DirEntry is one name in a directory.
type DirEntry struct {
	Name string
	Ino  uint64
	Mode uint32
}

// SetAttr says which attributes to change; nil fields stay.
type SetAttr struct {
	Mode         *uint32 // permission bits only
	UID, GID     *uint32
	Atime, Mtime *int64 // unix nanoseconds
	Size         *int64
}

// Getattr returns ino's attributes (no entries or chunk list).
func (s *Store) Getattr(ino uint64) (Inode, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	in := s.m.Inodes[ino]
	if in == nil {
		return Inode{}, ErrNotExist
	}
	return *attrs(in), nil
}

func checkName(name string) error {
	switch {
	case name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00"):
		return ErrInvalid
	case len(name) > 255:
		return ErrNameTooLong
	}
	return nil
}

// dirLocked returns directory ino; the caller holds s.mu.
func (s *Store) dirLocked(ino uint64) (*Inode, error) {
	d := s.m.Inodes[ino]
	if d == nil {
		return nil, ErrNotExist
	}
	if d.Mode&syscall.S_IFMT != syscall.S_IFDIR {
		return nil, ErrNotDir
	}
	return d, nil
}

// Lookup finds name in directory dir.
func (s *Store) Lookup(dir uint64, name string) (Inode, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, err := s.dirLocked(dir)
	if err != nil {
		return Inode{}, err
	}
	c, ok := d.Ents[name]
	if !ok {
		return Inode{}, ErrNotExist
	}
	return *attrs(s.m.Inodes[c]), nil
}

// ReadDir lists dir sorted by name (a stable order across calls, which
// readdir offsets need).
func (s *Store) ReadDir(dir uint64) ([]DirEntry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	d, err := s.dirLocked(dir)
	if err != nil {
		return nil, err
	}
	out := make([]DirEntry, 0, len(d.Ents))
	for name, c := range d.Ents {
		out = append(out, DirEntry{Name: name, Ino: c, Mode: s.m.Inodes[c].Mode})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// Readlink returns a symlink's target.
func (s *Store) Readlink(ino uint64) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	in := s.m.Inodes[ino]
	if in == nil {
		return "", ErrNotExist
	}
	if in.Mode&syscall.S_IFMT != syscall.S_IFLNK {
		return "", ErrInvalid
	}
	return in.Target, nil
}

// touchDir records a change of directory d's entries; s.mu held.
func (s *Store) touchDir(d *Inode, now int64, nlinkDelta int) error {
	a := attrs(d)
	a.Mtime, a.Ctime = now, now
	a.Nlink = uint32(int(a.Nlink) + nlinkDelta)
	return s.record(&rec{O: "i", I: a})
}

// Create makes a new inode named name in dir: a regular file, directory,
// symlink (target), FIFO, socket or device node (mode's S_IFMT says which).
func (s *Store) Create(dir uint64, name string, mode, rdev, uid, gid uint32, target string) (Inode, error) {
	if err := checkName(name); err != nil {
		return Inode{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.writable(); err != nil {
		return Inode{}, err
	}
	if s.m.Kind != KindFS {
		return Inode{}, ErrInvalid
	}
	d, err := s.dirLocked(dir)
	if err != nil {
		return Inode{}, err
	}
	if d.Nlink == 0 {
		return Inode{}, ErrNotExist // removed directory
	}
	if _, ok := d.Ents[name]; ok {
		return Inode{}, ErrExist
	}
	now := time.Now().UnixNano()
	in := &Inode{Ino: s.m.NextIno, Mode: mode, UID: uid, GID: gid, Nlink: 1, Atime: now, Mtime: now, Ctime: now, Rdev: rdev}
	delta := 0
	switch mode & syscall.S_IFMT {
	case syscall.S_IFDIR:
		in.Nlink, in.Parent = 2, dir
		delta = 1
	case syscall.S_IFLNK:
		in.Target, in.Size = target, int64(len(target))
	case syscall.S_IFREG, syscall.S_IFIFO, syscall.S_IFSOCK, syscall.S_IFCHR, syscall.S_IFBLK:
	default:
		return Inode{}, ErrInvalid
	}
	if err := s.record(&rec{O: "i", I: in}); err != nil {
		return Inode{}, err
	}
	if err := s.record(&rec{O: "l", P: dir, Name: name, N: in.Ino}); err != nil {
		return Inode{}, err
	}
	if err := s.touchDir(d, now, delta); err != nil {
		return Inode{}, err
	}
	return *attrs(s.m.Inodes[in.Ino]), nil
}

// Link adds name in dir for existing non-directory ino (a hard link).
func (s *Store) Link(ino, dir uint64, name string) (Inode, error) {
	if err := checkName(name); err != nil {
		return Inode{}, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.writable(); err != nil {
		return Inode{}, err
	}
	d, err := s.dirLocked(dir)
	if err != nil {
		return Inode{}, err
	}
	in := s.m.Inodes[ino]
	switch {
	case in == nil:
		return Inode{}, ErrNotExist
	case in.Mode&syscall.S_IFMT == syscall.S_IFDIR:
		return Inode{}, ErrIsDir
	case in.Nlink == 0:
		return Inode{}, ErrNotExist
	}
	if _, ok := d.Ents[name]; ok {
		return Inode{}, ErrExist
	}
	now := time.Now().UnixNano()
	a := attrs(in)
	a.Nlink++
	a.Ctime = now
	if err := s.record(&rec{O: "i", I: a}); err != nil {
		return Inode{}, err
	}
	if err := s.record(&rec{O: "l", P: dir, Name: name, N: ino}); err != nil {
		return Inode{}, err
	}
	if err := s.touchDir(d, now, 0); err != nil {
		return Inode{}, err
	}
	return *attrs(s.m.Inodes[ino]), nil
}

// Unlink removes name (not a directory) from dir. The inode goes when its
// last link and last open are gone.
func (s *Store) Unlink(dir uint64, name string) error {
	return s.remove(dir, name, false)
}

// Rmdir removes the empty directory name from dir.
func (s *Store) Rmdir(dir uint64, name string) error {
	return s.remove(dir, name, true)
}

func (s *Store) remove(dir uint64, name string, isDir bool) error {
	s.mu.Lock()
	gone, err := s.removeLocked(dir, name, isDir)
	s.mu.Unlock()
	if err == nil && gone != 0 {
		err = s.removeInode(gone)
	}
	return err
}

// removeLocked drops one link; it returns the inode to delete once its
// links and opens are gone. s.mu held.
func (s *Store) removeLocked(dir uint64, name string, isDir bool) (gone uint64, err error) {
	if err := s.writable(); err != nil {
		return 0, err
	}
	d, err := s.dirLocked(dir)
	if err != nil {
		return 0, err
	}
	c, ok := d.Ents[name]
	if !ok {
		return 0, ErrNotExist
	}
	in := s.m.Inodes[c]
	if err := removable(in, isDir); err != nil {
		return 0, err
	}
	now := time.Now().UnixNano()
	if err := s.record(&rec{O: "u", P: dir, Name: name}); err != nil {
		return 0, err
	}
	delta := 0
	a := attrs(in)
	a.Ctime = now
	if isDir { // removable checked it matches the inode
		a.Nlink = 0
		delta = -1
	} else {
		a.Nlink--
	}
	if err := s.record(&rec{O: "i", I: a}); err != nil {
		return 0, err
	}
	if err := s.touchDir(d, now, delta); err != nil {
		return 0, err
	}
	if a.Nlink == 0 && (s.st[c] == nil || s.st[c].opens == 0) {
		return c, nil
	}
	return 0, nil
}

// removeInode deletes an inode with no links and no opens: its dirty
// files, its record (its chunks become garbage at the next publish).
func (s *Store) removeInode(ino uint64) error {
	s.mu.Lock()
	var idxs []int64
	if st := s.st[ino]; st != nil {
		for idx := range st.dirty {
			idxs = append(idxs, idx)
		}
	}
	s.mu.Unlock()
	for _, idx := range idxs {
		lk := s.chunkLock(ino, idx)
		lk.Lock()
		s.mu.Lock()
		s.dropDirty(ino, idx)
		s.mu.Unlock()
		lk.Unlock()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	in := s.m.Inodes[ino]
	if in == nil || in.Nlink > 0 || (s.st[ino] != nil && s.st[ino].opens > 0) {
		return nil // linked or opened again meanwhile
	}
	if st := s.st[ino]; st != nil && len(st.dirty) > 0 {
		return nil // written meanwhile by an open that has since closed: next release
	}
	delete(s.st, ino)
	return s.record(&rec{O: "d", N: ino})
}

// Open counts an open of ino, so an unlinked file stays until Release.
func (s *Store) Open(ino uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.m.Inodes[ino] == nil {
		return ErrNotExist
	}
	s.istate(ino).opens++
	return nil
}

// Release ends an open; the last one of an unlinked file deletes it.
func (s *Store) Release(ino uint64) error {
	s.mu.Lock()
	st := s.st[ino]
	in := s.m.Inodes[ino]
	gone := false
	if st != nil && st.opens > 0 {
		st.opens--
		gone = st.opens == 0 && in != nil && in.Nlink == 0 && ino != RootIno && ino != VolumeIno
	}
	s.mu.Unlock()
	if gone && !s.cfg.ReadOnly {
		return s.removeInode(ino)
	}
	return nil
}

// Setattr changes attributes; a size change truncates (see Truncate).
func (s *Store) Setattr(ctx context.Context, ino uint64, sa SetAttr) (Inode, error) {
	if sa.Size != nil {
		if err := s.Truncate(ctx, ino, *sa.Size); err != nil {
			return Inode{}, err
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.writable(); err != nil {
		return Inode{}, err
	}
	in := s.m.Inodes[ino]
	if in == nil {
		return Inode{}, ErrNotExist
	}
	if sa.Mode == nil && sa.UID == nil && sa.GID == nil && sa.Atime == nil && sa.Mtime == nil {
		return *attrs(in), nil
	}
	a := attrs(in)
	if sa.Mode != nil {
		a.Mode = a.Mode&syscall.S_IFMT | *sa.Mode&0o7777
	}
	if sa.UID != nil {
		a.UID = *sa.UID
	}
	if sa.GID != nil {
		a.GID = *sa.GID
	}
	if sa.Atime != nil {
		a.Atime = *sa.Atime
	}
	if sa.Mtime != nil {
		a.Mtime = *sa.Mtime
	}
	a.Ctime = time.Now().UnixNano()
	if err := s.record(&rec{O: "i", I: a}); err != nil {
		return Inode{}, err
	}
	return *attrs(s.m.Inodes[ino]), nil
}

// Rename moves odir/oname to ndir/nname like rename(2) and renameat2(2)
// (RenameNoReplace, RenameExchange), atomically in the manifest.
func (s *Store) Rename(odir uint64, oname string, ndir uint64, nname string, flags uint32) error {
	if err := checkName(nname); err != nil {
		return err
	}
	if flags&^(RenameNoReplace|RenameExchange) != 0 || flags == RenameNoReplace|RenameExchange {
		return ErrInvalid
	}
	s.mu.Lock()
	gone, err := s.renameLocked(odir, oname, ndir, nname, flags)
	s.mu.Unlock()
	if err == nil && gone != 0 {
		err = s.removeInode(gone)
	}
	return err
}

func (s *Store) renameLocked(odir uint64, oname string, ndir uint64, nname string, flags uint32) (uint64, error) {
	if err := s.writable(); err != nil {
		return 0, err
	}
	od, err := s.dirLocked(odir)
	if err != nil {
		return 0, err
	}
	nd, err := s.dirLocked(ndir)
	if err != nil {
		return 0, err
	}
	src, ok := od.Ents[oname]
	if !ok {
		return 0, ErrNotExist
	}
	dst, exists := nd.Ents[nname]
	sin := s.m.Inodes[src]
	sdir := sin.Mode&syscall.S_IFMT == syscall.S_IFDIR
	// A directory cannot move below itself.
	if sdir && odir != ndir {
		for p := ndir; ; p = s.m.Inodes[p].Parent {
			if p == src {
				return 0, ErrInvalid
			}
			if p == RootIno || s.m.Inodes[p] == nil || s.m.Inodes[p].Parent == 0 {
				break
			}
		}
	}
	now := time.Now().UnixNano()
	if flags&RenameExchange != 0 {
		if !exists {
			return 0, ErrNotExist
		}
		din := s.m.Inodes[dst]
		ddir := din.Mode&syscall.S_IFMT == syscall.S_IFDIR
		if ddir && odir != ndir {
			for p := odir; ; p = s.m.Inodes[p].Parent {
				if p == dst {
					return 0, ErrInvalid
				}
				if p == RootIno || s.m.Inodes[p] == nil || s.m.Inodes[p].Parent == 0 {
					break
				}
			}
		}
		for _, r := range []*rec{{O: "l", P: ndir, Name: nname, N: src}, {O: "l", P: odir, Name: oname, N: dst}} {
			if err := s.record(r); err != nil {
				return 0, err
			}
		}
		if odir != ndir {
			if err := s.reparent(src, sdir, ndir, now); err != nil {
				return 0, err
			}
			if err := s.reparent(dst, ddir, odir, now); err != nil {
				return 0, err
			}
			delta := 0
			if sdir != ddir {
				delta = 1
				if sdir {
					delta = -1
				}
			}
			if err := s.touchDir(s.m.Inodes[odir], now, delta); err != nil {
				return 0, err
			}
			return 0, s.touchDir(s.m.Inodes[ndir], now, -delta)
		}
		return 0, s.touchDir(od, now, 0)
	}
	var gone uint64
	if exists {
		if dst == src {
			return 0, nil // two links to one file: rename(2) does nothing
		}
		if flags&RenameNoReplace != 0 {
			return 0, ErrExist
		}
		din := s.m.Inodes[dst]
		if err := removable(din, sdir); err != nil {
			return 0, err
		}
		ddir := din.Mode&syscall.S_IFMT == syscall.S_IFDIR
		a := attrs(din)
		a.Ctime = now
		if ddir {
			a.Nlink = 0
			if err := s.touchDir(nd, now, -1); err != nil {
				return 0, err
			}
		} else {
			a.Nlink--
		}
		if err := s.record(&rec{O: "i", I: a}); err != nil {
			return 0, err
		}
		if a.Nlink == 0 && (s.st[dst] == nil || s.st[dst].opens == 0) {
			gone = dst
		}
	}
	if err := s.record(&rec{O: "l", P: ndir, Name: nname, N: src}); err != nil {
		return 0, err
	}
	if err := s.record(&rec{O: "u", P: odir, Name: oname}); err != nil {
		return 0, err
	}
	delta := 0
	if sdir && odir != ndir {
		if err := s.reparent(src, true, ndir, now); err != nil {
			return 0, err
		}
		delta = 1
	} else if err := s.reparent(src, false, ndir, now); err != nil {
		return 0, err
	}
	if odir != ndir {
		if err := s.touchDir(s.m.Inodes[odir], now, -delta); err != nil {
			return 0, err
		}
	}
	return gone, s.touchDir(s.m.Inodes[ndir], now, delta)
}

// reparent records a moved inode's new parent (directories) and ctime.
func (s *Store) reparent(ino uint64, isDir bool, parent uint64, now int64) error {
	a := attrs(s.m.Inodes[ino])
	a.Ctime = now
	if isDir {
		a.Parent = parent
	}
	return s.record(&rec{O: "i", I: a})
}

// StatFS reports the number of inodes and the bytes the files hold.
func (s *Store) StatFS() (files uint64, bytes int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, in := range s.m.Inodes {
		bytes += in.Size
	}
	return uint64(len(s.m.Inodes)), bytes
}

// removable says whether in may be unlinked by an operation that expects a
// directory (dir) or not, as unlink/rmdir and a replacing rename(2) do:
// ENOTDIR, EISDIR, or ENOTEMPTY for a directory with entries.
func removable(in *Inode, dir bool) error {
	isDir := in.Mode&syscall.S_IFMT == syscall.S_IFDIR
	switch {
	case dir && !isDir:
		return ErrNotDir
	case !dir && isDir:
		return ErrIsDir
	case isDir && len(in.Ents) > 0:
		return ErrNotEmpty
	}
	return nil
}
