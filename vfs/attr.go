package vfs

import (
	"errors"
	"time"

	"golang.org/x/sys/unix"
)

// GetAttr returns the attributes of h (no permission check: as in NFS,
// attributes of a reachable object are visible).
func (fs *FS) GetAttr(h Handle) (Attr, error) {
	o, err := fs.resolve(h)
	if err != nil {
		return Attr{}, err
	}
	defer o.close()
	return fs.attrOf(&o.st), nil
}

// SetTime says how to change a timestamp.
type SetTime struct {
	Set bool      // change it
	Now bool      // to the server's current time (else to T)
	T   time.Time // when !Now
}

// SetAttr lists the attributes to change; nil/unset fields stay.
type SetAttr struct {
	Mode         *uint32
	UID, GID     *uint32
	Size         *uint64
	Atime, Mtime SetTime
}

func (s *SetAttr) empty() bool {
	return s.Mode == nil && s.UID == nil && s.GID == nil && s.Size == nil && !s.Atime.Set && !s.Mtime.Set
}

// Access bits for Access (the same values as NFS v3 and v4 use).
const (
	AccessRead    = 0x01
	AccessLookup  = 0x02
	AccessModify  = 0x04
	AccessExtend  = 0x08
	AccessDelete  = 0x10
	AccessExecute = 0x20
)

// Access reports which of the requested rights c has on h, from the mode
// bits (as the kernel would decide them) and the export's read-only flag.
func (fs *FS) Access(c Cred, h Handle, want uint32) (uint32, Attr, error) {
	o, err := fs.resolve(h)
	if err != nil {
		return 0, Attr{}, err
	}
	defer o.close()
	a := fs.attrOf(&o.st)
	var r, w, x bool
	switch {
	case c.UID == 0 && fs.switchID:
		r, w, x = true, true, a.Mode&0o111 != 0 || a.Type == TypeDir
	default:
		var bits uint32
		switch {
		case c.UID == a.UID:
			bits = a.Mode >> 6
		case c.GID == a.GID || contains(c.Groups, a.GID):
			bits = a.Mode >> 3
		default:
			bits = a.Mode
		}
		r, w, x = bits&4 != 0, bits&2 != 0, bits&1 != 0
	}
	if fs.readOnly {
		w = false
	}
	var got uint32
	if r {
		got |= AccessRead
	}
	if a.Type == TypeDir {
		if x {
			got |= AccessLookup
		}
		if w && x {
			got |= AccessModify | AccessExtend | AccessDelete
		}
	} else {
		if w {
			got |= AccessModify | AccessExtend
		}
		if x {
			got |= AccessExecute
		}
	}
	return got & want, a, nil
}

func contains(s []uint32, v uint32) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}

// ctimeEqual compares a guard time at the precision NFS carries (ns).
func ctimeEqual(a, b time.Time) bool { return a.Unix() == b.Unix() && a.Nanosecond() == b.Nanosecond() }

// SetAttrs changes attributes of h as c. If guard is non-nil the object's
// ctime must equal it (else ErrNotSync). It returns the attributes before and
// after (after is valid even on some errors, for weak cache consistency).
func (fs *FS) SetAttrs(c Cred, h Handle, s SetAttr, guard *time.Time) (before, after Attr, err error) {
	o, err := fs.resolve(h)
	if err != nil {
		return Attr{}, Attr{}, err
	}
	defer o.close()
	before = fs.attrOf(&o.st)
	after = before
	if guard != nil && !ctimeEqual(*guard, before.Ctime) {
		return before, after, ErrNotSync
	}
	if s.empty() {
		return before, after, nil
	}
	if err := fs.writable(); err != nil {
		return before, after, err
	}
	if s.Size != nil && *s.Size != before.Size {
		held, err := holdObj(o) // a served volume keeps its size
		if err != nil {
			return before, after, err
		}
		defer held.Release()
	}
	err = fs.as(c, func() error { return fs.applyAttrs(o, c, s) })
	if err == nil && !fs.async && o.st.Mode&unix.S_IFMT != unix.S_IFLNK {
		err = fsyncObj(o) // SETATTR is durable before the reply (RFC 1813)
	}
	var st unix.Stat_t
	if unix.Fstat(o.fd, &st) == nil {
		after = fs.attrOf(&st)
	}
	return before, after, err
}

// applyAttrs applies s to the resolved object (running as the caller).
func (fs *FS) applyAttrs(o *obj, c Cred, s SetAttr) error {
	isLink := o.st.Mode&unix.S_IFMT == unix.S_IFLNK
	if s.UID != nil || s.GID != nil {
		uid, gid := -1, -1
		if s.UID != nil {
			uid = int(*s.UID)
		}
		if s.GID != nil {
			gid = int(*s.GID)
		}
		if err := unix.Fchownat(o.fd, "", uid, gid, unix.AT_EMPTY_PATH); err != nil {
			return err
		}
	}
	if s.Mode != nil && !isLink {
		if err := unix.Chmod(o.procPath(), *s.Mode&0o7777); err != nil {
			return err
		}
	}
	if s.Size != nil {
		if o.isDir() {
			return unix.EISDIR
		}
		if o.st.Mode&unix.S_IFMT != unix.S_IFREG {
			return unix.EINVAL
		}
		err := unix.Truncate(o.procPath(), int64(*s.Size))
		if errors.Is(err, unix.EACCES) && c.UID == o.st.Uid {
			// Owner override, as knfsd: the owner may have created the
			// file read-only and still holds it open on the client.
			err = fs.as(Cred{}, func() error { return unix.Truncate(o.procPath(), int64(*s.Size)) })
		}
		if err != nil {
			return err
		}
	}
	if s.Atime.Set || s.Mtime.Set {
		ts := []unix.Timespec{{Nsec: unix.UTIME_OMIT}, {Nsec: unix.UTIME_OMIT}}
		for i, t := range []SetTime{s.Atime, s.Mtime} {
			switch {
			case !t.Set:
			case t.Now:
				ts[i] = unix.Timespec{Nsec: unix.UTIME_NOW}
			default:
				ts[i] = unix.NsecToTimespec(t.T.UnixNano())
			}
		}
		if err := setTimes(o, isLink, ts); err != nil {
			return err
		}
	}
	return nil
}

// setTimes sets atime/mtime of the resolved object. A symbolic link's own
// times are set (utimensat with AT_SYMLINK_NOFOLLOW, what `touch -h`,
// `tar x` and `rsync -a` ask for); following it through /proc would change
// the target instead. Its O_PATH descriptor is used with AT_EMPTY_PATH
// (Linux 5.8+); older kernels refuse that with EINVAL, and then the link is
// named by its path.
func setTimes(o *obj, isLink bool, ts []unix.Timespec) error {
	if !isLink {
		return unix.UtimesNanoAt(unix.AT_FDCWD, o.procPath(), ts, 0)
	}
	err := unix.UtimesNanoAt(o.fd, "", ts, unix.AT_EMPTY_PATH|unix.AT_SYMLINK_NOFOLLOW)
	if errors.Is(err, unix.EINVAL) && o.path != "" {
		err = unix.UtimesNanoAt(unix.AT_FDCWD, o.path, ts, unix.AT_SYMLINK_NOFOLLOW)
	}
	return err
}

// FSStat describes the file system of an export.
type FSStat struct {
	TotalBytes, FreeBytes, AvailBytes uint64
	TotalFiles, FreeFiles, AvailFiles uint64
}

// StatFS returns space and inode figures from statfs(2).
func (fs *FS) StatFS(h Handle) (FSStat, Attr, error) {
	o, err := fs.resolve(h)
	if err != nil {
		return FSStat{}, Attr{}, err
	}
	defer o.close()
	var s unix.Statfs_t
	if err := unix.Fstatfs(o.fd, &s); err != nil {
		return FSStat{}, Attr{}, err
	}
	bs := uint64(s.Bsize)
	return FSStat{
		TotalBytes: s.Blocks * bs, FreeBytes: s.Bfree * bs, AvailBytes: s.Bavail * bs,
		TotalFiles: s.Files, FreeFiles: s.Ffree, AvailFiles: s.Ffree,
	}, fs.attrOf(&o.st), nil
}
