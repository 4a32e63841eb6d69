// Package fusectl stops in-process FUSE servers that would otherwise wait
// forever: it aborts a FUSE connection through the fusectl file system
// (/sys/fs/fuse/connections).
//
// A FUSE server's Unmount (go-fuse's) unmounts and then waits until the
// kernel connection ends. A process that made a new mount namespace while
// the file system was mounted (unshare --mount, as scripts/bench's NFS
// scripts do) keeps a copy of the mount, so the connection does not end
// and that wait never returns (test/powerloss and test/nfsclient hung on
// it). Unmount here bounds the wait and then aborts the connection: the
// copy then fails every request with ENOTCONN and the server stops.
package fusectl

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// ErrStuck is wrapped by Unmount's error when the server's Unmount did
// not return even after the connection was aborted.
var ErrStuck = errors.New("FUSE server did not stop")

// Dir is where fusectl is (or gets) mounted.
const Dir = "/sys/fs/fuse/connections"

// Conn returns the fusectl connection number of the FUSE mount at dir
// (its device minor), 0 if dir cannot be read. Ask while it is mounted.
func Conn(dir string) uint64 {
	var st syscall.Stat_t
	if syscall.Stat(dir, &st) != nil {
		return 0
	}
	return (st.Dev & 0xff) | ((st.Dev >> 12) & 0xfff00)
}

// Abort aborts FUSE connection conn, failing every pending and later
// request; 0 is none. Where fusectl is not mounted (a machine without
// systemd) it is mounted for the abort and unmounted after it.
func Abort(conn uint64) {
	if conn == 0 {
		return
	}
	p := filepath.Join(Dir, strconv.FormatUint(conn, 10), "abort")
	if _, err := os.Stat(p); err != nil {
		if syscall.Mount("fusectl", Dir, "fusectl", 0, "") == nil {
			defer syscall.Unmount(Dir, syscall.MNT_DETACH)
		}
	}
	os.WriteFile(p, []byte("1"), 0o200)
}

// Unmount calls unmount (a FUSE server's Unmount) and returns its error.
// When it has not returned within the bound, connection conn (Conn of the
// mount point, asked before) is aborted and it gets the bound once more;
// after that the error wraps ErrStuck and unmount must not be called
// again (it still runs).
func Unmount(unmount func() error, conn uint64, within time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- unmount() }()
	select {
	case err := <-done:
		return err
	case <-time.After(within):
	}
	Abort(conn)
	select {
	case err := <-done:
		return err
	case <-time.After(within):
		return fmt.Errorf("%w within %v of its unmount, nor %v after aborting connection %d", ErrStuck, within, within, conn)
	}
}
