package posix

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"unsafe"

	"golang.org/x/sys/unix"
)

// A GET of a large object writes the response from a read-only mapping of
// the object's file (write(2) from the mapping: one copy, page cache to
// socket buffer) instead of sendfile(2). Over loopback, sendfile hands the
// receiver socket buffers of one 4 KiB page cache page per fragment, and
// the sender splices 64 KiB per round; 4 MiB objects at 16 in parallel
// cost sender and receiver together about 1.6x the CPU of writing the same
// bytes from a mapping (docs/bench/profiles/s3-get-4m-*), and on this
// 2-core machine that CPU is what bounds the GET rows. Small objects keep
// sendfile, where the mapping's set-up would cost more than it saves.
const (
	mapReadMin    = 1 << 20 // objects (ranges) of at least this many bytes
	mapReadWindow = 8 << 20 // mapped at most this much at a time
)

// errMappedFault: the file shrank under a mapped write (another view
// truncated it); the response is cut short like a short read.
var errMappedFault = errors.New("posix: object file shrank while it was sent")

// writeMapped writes [off, off+n) of f to w from read-only mappings of at
// most mapReadWindow bytes. ok is false when f cannot be mapped (then
// nothing was written and the caller copies as before).
//
// A page past the file's end faults with SIGBUS when Go code touches it
// (net/http copies the first bytes behind the headers into its buffer;
// TLS reads all of it). The goroutine runs with SetPanicOnFault, so such a
// fault is a recovered panic turned into errMappedFault, not a crash; the
// kernel's own copies from the mapping fail with EFAULT instead.
func writeMapped(w io.Writer, f *os.File, off, n int64) (written int64, ok bool, err error) {
	ps := int64(os.Getpagesize())
	fd := int(f.Fd())
	first := true
	for n > 0 {
		base := off &^ (ps - 1)
		span := min(n, mapReadWindow)
		m, merr := unix.Mmap(fd, base, int(off-base+span), unix.PROT_READ, unix.MAP_SHARED)
		if merr != nil {
			if first {
				return 0, false, nil
			}
			return written, true, merr
		}
		first = false
		k, werr := writeFrom(w, m, m[off-base:])
		unix.Munmap(m)
		runtime.KeepAlive(f)
		written += int64(k)
		off += int64(k)
		n -= int64(k)
		if werr != nil {
			return written, true, werr
		}
		if int64(k) < span {
			return written, true, io.ErrShortWrite
		}
	}
	return written, true, nil
}

// writeFrom is w.Write(p) where p lies in the mapping m; a memory fault in
// m while writing (the file shrank) becomes errMappedFault.
func writeFrom(w io.Writer, m, p []byte) (k int, err error) {
	defer debug.SetPanicOnFault(debug.SetPanicOnFault(true))
	defer func() {
		r := recover()
		if r == nil {
			return
		}
		if fe, isFault := r.(interface{ Addr() uintptr }); isFault && inMapping(fe.Addr(), m) {
			err = fmt.Errorf("%w (fault at %#x)", errMappedFault, fe.Addr())
			return
		}
		panic(r)
	}()
	return w.Write(p)
}

func inMapping(a uintptr, m []byte) bool {
	if len(m) == 0 {
		return false
	}
	lo := uintptr(unsafePointer(m))
	return a >= lo && a < lo+uintptr(len(m))
}

func unsafePointer(m []byte) unsafe.Pointer { return unsafe.Pointer(unsafe.SliceData(m)) }
