package vfs

import (
	"golang.org/x/sys/unix"

	"github.com/tristore/tristore/store"
	"github.com/tristore/tristore/store/inuse"
)

// ErrInUse is returned by Remove, Rename, SetAttrs and Create (UNCHECKED,
// with a size) when the file they would remove, replace, move or truncate
// is a block volume being served (store/inuse). NFS answers it with
// NFS3ERR_ACCES. It is store.ErrInUse, so either name matches.
var ErrInUse = store.ErrInUse

// The helpers below take the change lock of store/inuse as the server
// itself, not as the caller: the lock only reads the file, and a caller
// allowed to unlink a file it cannot read must still be stopped.

// holdName takes the change lock on name in the directory open as dirfd.
func holdName(dirfd int, name string) (*inuse.Change, error) {
	return inuse.ChangeAt(dirfd, name)
}

// holdObj takes the change lock on a resolved object (for a truncate).
func holdObj(o *obj) (*inuse.Change, error) {
	if o.st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil, nil
	}
	return inuse.ChangeFd(o.fd)
}
