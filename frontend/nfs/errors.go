package nfs

import (
	"errors"
	"syscall"
	"time"

	"github.com/tristore/tristore/proto/nfs3"
	"github.com/tristore/tristore/store"
	"github.com/tristore/tristore/vfs"
)

// statusOf is the one place where file-system, vfs and store errors become
// NFS v3 status codes.
func statusOf(err error) nfs3.Status {
	if err == nil {
		return nfs3.OK
	}
	switch {
	case errors.Is(err, vfs.ErrStale):
		return nfs3.ErrStale
	case errors.Is(err, vfs.ErrBadHandle):
		return nfs3.ErrBadHandle
	case errors.Is(err, vfs.ErrInvalidName), errors.Is(err, vfs.ErrReserved):
		// RFC 1813 lists ACCES (not INVAL) among the errors of the name
		// operations; knfsd answers names with '/' the same way.
		return nfs3.ErrAcces
	case errors.Is(err, vfs.ErrNotSupp), errors.Is(err, store.ErrNotSupported):
		return nfs3.ErrNotSupp
	case errors.Is(err, vfs.ErrNotSync):
		return nfs3.ErrNotSync
	case errors.Is(err, vfs.ErrReadOnly), errors.Is(err, store.ErrReadOnly):
		return nfs3.ErrROFS
	case errors.Is(err, vfs.ErrBadCookie):
		return nfs3.ErrBadCookie
	case errors.Is(err, store.ErrNoSpace):
		return nfs3.ErrNoSpc
	case errors.Is(err, store.ErrInUse):
		// REMOVE, RENAME or a size change of a served block volume.
		// ACCES, not JUKEBOX: JUKEBOX means "busy for a moment, retry",
		// and a client (the Linux kernel's, ours) would retry for as
		// long as the volume stays served, hanging rm(1) for hours
		// instead of telling the user. ACCES fails the call at once.
		return nfs3.ErrAcces
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		switch errno {
		case syscall.EPERM:
			return nfs3.ErrPerm
		case syscall.ENOENT:
			return nfs3.ErrNoEnt
		case syscall.ENXIO:
			return nfs3.ErrNXIO
		case syscall.EACCES:
			return nfs3.ErrAcces
		case syscall.EEXIST:
			return nfs3.ErrExist
		case syscall.EXDEV:
			return nfs3.ErrXDev
		case syscall.ENODEV:
			return nfs3.ErrNoDev
		case syscall.ENOTDIR:
			return nfs3.ErrNotDir
		case syscall.EISDIR:
			return nfs3.ErrIsDir
		case syscall.EINVAL, syscall.ELOOP:
			return nfs3.ErrInval
		case syscall.EFBIG:
			return nfs3.ErrFBig
		case syscall.ENOSPC:
			return nfs3.ErrNoSpc
		case syscall.EROFS:
			return nfs3.ErrROFS
		case syscall.EMLINK:
			return nfs3.ErrMLink
		case syscall.ENAMETOOLONG:
			return nfs3.ErrNameTooLong
		case syscall.ENOTEMPTY:
			return nfs3.ErrNotEmpty
		case syscall.EDQUOT:
			return nfs3.ErrDQuot
		case syscall.ESTALE:
			return nfs3.ErrStale
		case syscall.EOPNOTSUPP:
			return nfs3.ErrNotSupp
		case syscall.EAGAIN, syscall.EBUSY:
			return nfs3.ErrJukebox
		}
	}
	return nfs3.ErrIO
}

func nfsTime(t time.Time) nfs3.Time {
	return nfs3.Time{Sec: uint32(t.Unix()), Nsec: uint32(t.Nanosecond())}
}

func fromNFSTime(t nfs3.Time) time.Time { return time.Unix(int64(t.Sec), int64(t.Nsec)) }

var ftypes = [...]nfs3.FileType{
	vfs.TypeRegular: nfs3.TypeReg, vfs.TypeDir: nfs3.TypeDir, vfs.TypeBlock: nfs3.TypeBlk,
	vfs.TypeChar: nfs3.TypeChr, vfs.TypeSymlink: nfs3.TypeLnk, vfs.TypeSocket: nfs3.TypeSock, vfs.TypeFIFO: nfs3.TypeFifo,
}

func fattr(a *vfs.Attr) *nfs3.Fattr {
	if a == nil {
		return nil
	}
	t := nfs3.TypeReg
	if int(a.Type) < len(ftypes) && ftypes[a.Type] != 0 {
		t = ftypes[a.Type]
	}
	return &nfs3.Fattr{
		Type: t, Mode: a.Mode, Nlink: a.Nlink, UID: a.UID, GID: a.GID,
		Size: a.Size, Used: a.Used, Rdev: nfs3.SpecData{Major: a.RdevMajor, Minor: a.RdevMinor},
		FSID: a.FSID, FileID: a.FileID,
		Atime: nfsTime(a.Atime), Mtime: nfsTime(a.Mtime), Ctime: nfsTime(a.Ctime),
	}
}

func postOp(a *vfs.Attr) nfs3.PostOpAttr { return nfs3.PostOpAttr{Attr: fattr(a)} }

func preOp(a *vfs.Attr) nfs3.PreOpAttr {
	if a == nil {
		return nfs3.PreOpAttr{}
	}
	return nfs3.PreOpAttr{Attr: &nfs3.WccAttr{Size: a.Size, Mtime: nfsTime(a.Mtime), Ctime: nfsTime(a.Ctime)}}
}

func wcc(before, after *vfs.Attr) nfs3.WccData {
	return nfs3.WccData{Before: preOp(before), After: postOp(after)}
}

func dirWcc(d vfs.DirChange) nfs3.WccData { return wcc(d.Before, d.After) }

// sattr converts NFS sattr3 to vfs.SetAttr.
func sattr(s *nfs3.Sattr) vfs.SetAttr {
	v := vfs.SetAttr{Mode: s.Mode, UID: s.UID, GID: s.GID, Size: s.Size}
	conv := func(t nfs3.SetTime) vfs.SetTime {
		switch t.How {
		case nfs3.SetToServerTime:
			return vfs.SetTime{Set: true, Now: true}
		case nfs3.SetToClientTime:
			return vfs.SetTime{Set: true, T: fromNFSTime(t.Time)}
		}
		return vfs.SetTime{}
	}
	v.Atime, v.Mtime = conv(s.Atime), conv(s.Mtime)
	return v
}
