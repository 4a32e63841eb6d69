//go:build linux

package nfs

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// prefault has the kernel map p's pages writable now (MADV_POPULATE_WRITE,
// Linux 5.14), without changing their contents, so that a READ reply later
// copied into p by the connection's one reading goroutine does not take
// the page faults of memory never touched before (a fresh buffer: 256 per
// MiB) on that goroutine. Pages already mapped cost a page-table walk.
// Errors (an older kernel, memory that is not writable) are ignored: the
// reply's copy faults the pages in as before.
func prefault(p []byte) {
	const page = 4096
	if len(p) < 2*page {
		return
	}
	start := uintptr(unsafe.Pointer(unsafe.SliceData(p)))
	lo := (start + page - 1) &^ (page - 1)
	hi := (start + uintptr(len(p))) &^ (page - 1)
	if hi <= lo {
		return
	}
	unix.Syscall(unix.SYS_MADVISE, lo, hi-lo, unix.MADV_POPULATE_WRITE)
}
