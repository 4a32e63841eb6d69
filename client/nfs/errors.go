package nfs

import (
	"errors"
	"net"
	"syscall"

	"github.com/tristore/tristore/proto/nfs3"
)

// Status is an NFS v3 status code (nfsstat3, RFC 1813 section 2.6); it is
// proto/nfs3's type, re-exported so callers need not import the codec. Every
// non-OK status a server returns reaches callers as an *OpError that wraps
// one of the Err* sentinels below, so callers test with errors.Is:
//
//	if errors.Is(err, nfs.ErrNoEnt) { ... }
type Status = nfs3.Status

// The NFS3ERR_* values. They are comparable values, so errors.Is matches
// them through any wrapping.
const (
	ErrPerm        = nfs3.ErrPerm
	ErrNoEnt       = nfs3.ErrNoEnt
	ErrIO          = nfs3.ErrIO
	ErrNXIO        = nfs3.ErrNXIO
	ErrAcces       = nfs3.ErrAcces
	ErrExist       = nfs3.ErrExist
	ErrXDev        = nfs3.ErrXDev
	ErrNoDev       = nfs3.ErrNoDev
	ErrNotDir      = nfs3.ErrNotDir
	ErrIsDir       = nfs3.ErrIsDir
	ErrInval       = nfs3.ErrInval
	ErrFBig        = nfs3.ErrFBig
	ErrNoSpc       = nfs3.ErrNoSpc
	ErrROFS        = nfs3.ErrROFS
	ErrMLink       = nfs3.ErrMLink
	ErrNameTooLong = nfs3.ErrNameTooLong
	ErrNotEmpty    = nfs3.ErrNotEmpty
	ErrDQuot       = nfs3.ErrDQuot
	ErrStale       = nfs3.ErrStale
	ErrRemote      = nfs3.ErrRemote
	ErrBadHandle   = nfs3.ErrBadHandle
	ErrNotSync     = nfs3.ErrNotSync
	ErrBadCookie   = nfs3.ErrBadCookie
	ErrNotSupp     = nfs3.ErrNotSupp
	ErrTooSmall    = nfs3.ErrTooSmall
	ErrServerFault = nfs3.ErrServerFault
	ErrBadType     = nfs3.ErrBadType
	ErrJukebox     = nfs3.ErrJukebox
)

// statusErrno maps a status to the POSIX error a local file system would
// return (used by the FUSE mount). The NFS3ERR numbers come from BSD errno
// values, which differ from Linux's above 35 (NFS3ERR_NOTEMPTY is 66, Linux
// ENOTEMPTY is 39), so the mapping is explicit.
func statusErrno(s Status) syscall.Errno {
	switch s {
	case ErrPerm:
		return syscall.EPERM
	case ErrNoEnt:
		return syscall.ENOENT
	case ErrIO:
		return syscall.EIO
	case ErrNXIO:
		return syscall.ENXIO
	case ErrAcces:
		return syscall.EACCES
	case ErrExist:
		return syscall.EEXIST
	case ErrXDev:
		return syscall.EXDEV
	case ErrNoDev:
		return syscall.ENODEV
	case ErrNotDir:
		return syscall.ENOTDIR
	case ErrIsDir:
		return syscall.EISDIR
	case ErrInval:
		return syscall.EINVAL
	case ErrFBig:
		return syscall.EFBIG
	case ErrNoSpc:
		return syscall.ENOSPC
	case ErrROFS:
		return syscall.EROFS
	case ErrMLink:
		return syscall.EMLINK
	case ErrNameTooLong:
		return syscall.ENAMETOOLONG
	case ErrNotEmpty:
		return syscall.ENOTEMPTY
	case ErrDQuot:
		return syscall.EDQUOT
	case ErrStale, ErrBadHandle:
		return syscall.ESTALE
	case ErrRemote:
		return syscall.EREMOTE
	case ErrNotSync, ErrBadCookie, ErrBadType, ErrTooSmall:
		return syscall.EINVAL
	case ErrNotSupp:
		return syscall.EOPNOTSUPP
	case ErrJukebox:
		return syscall.EAGAIN
	}
	return syscall.EIO
}

// OpError is a failed NFS or MOUNT procedure: which one, and why. Err is a
// Status for NFS3ERR_* replies, a MountStatus for MNT3ERR_*, or a transport
// or RPC-level error.
type OpError struct {
	Op  string // "LOOKUP", "MNT", ...
	Err error
}

func (e *OpError) Error() string { return "nfs " + e.Op + ": " + e.Err.Error() }
func (e *OpError) Unwrap() error { return e.Err }

// MountStatus is a MOUNT v3 status (mountstat3), re-exported from proto/nfs3.
type MountStatus = nfs3.MountStatus

// Transport-level sentinels.
var (
	// ErrClosed: the client was closed.
	ErrClosed = errors.New("nfs: client closed")
	// ErrConnLost: the connection dropped while a non-idempotent call was
	// in flight, so it was not retried (it may or may not have executed).
	ErrConnLost = errors.New("nfs: connection lost during a non-idempotent call")
	// ErrTimedOut: the server did not answer within the soft budget
	// (Options.Timeout, Retries), or GiveUp was called while it was down.
	ErrTimedOut = errors.New("nfs: server not responding, timed out")
	// ErrInterrupted: a call waiting for a server that is down was
	// interrupted (WithInterrupt).
	ErrInterrupted = errors.New("nfs: interrupted while waiting for the server")
	// ErrVerifierChanged: the server restarted between an UNSTABLE WRITE and
	// its COMMIT, so uncommitted data must be sent again.
	ErrVerifierChanged = errors.New("nfs: write verifier changed (server restarted); resend uncommitted data")
)

// ToErrno maps any error from this package to an errno for the FUSE layer.
func ToErrno(err error) syscall.Errno {
	if err == nil {
		return 0
	}
	var st Status
	if errors.As(err, &st) {
		return statusErrno(st)
	}
	switch {
	case errors.Is(err, ErrInterrupted):
		return syscall.EINTR
	case errors.Is(err, ErrClosed):
		return syscall.ENOTCONN
	}
	// A transport failure (refused, reset, unreachable: a net error that
	// wraps an errno) is the server's problem, not a local file's: report
	// EIO, as an NFS mount does, rather than ECONNREFUSED from open(2).
	var ne net.Error
	if errors.As(err, &ne) {
		return syscall.EIO
	}
	var en syscall.Errno
	if errors.As(err, &en) {
		return en
	}
	return syscall.EIO
}
