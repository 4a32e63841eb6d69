package nfs

import (
	"encoding/binary"
	"net"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/tristore/tristore/proto/sunrpc"
)

// writeRecordRaw writes one RPC record (fragment header, then bufs) to a
// TCP connection with writev(2) made as a raw system call, one that the Go
// scheduler does not see.
//
// Why (docs/bench/profiles/nfs-read-cache.txt): a READ reply of 1 MiB to
// a client on this machine is one writev that runs 150-400 us (the copy,
// and loopback delivers to the receiver inside it). Through net.Conn, Go
// counts that as a system call in progress; its monitor thread (sysmon)
// then keeps polling every 20 us, takes the processor away from the
// writing goroutine and starts another thread for it, and the writer must
// get one back when writev returns: runtime.sysmon was 11-14 % of the
// server's CPU during nfs-cp downloads, with ~6 context switches per READ.
// The socket is non-blocking, so the raw writev never sleeps: when the
// socket buffer is full it returns EAGAIN and the goroutine waits in the
// poller as usual (RawConn.Write, which also keeps the write deadline).
func writeRecordRaw(c *net.TCPConn, bufs ...[]byte) error {
	n := 0
	for _, b := range bufs {
		n += len(b)
	}
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], uint32(n)|1<<31)
	iov := make([]unix.Iovec, 0, len(bufs)+1)
	add := func(b []byte) {
		if len(b) > 0 {
			v := unix.Iovec{Base: unsafe.SliceData(b)}
			v.SetLen(len(b))
			iov = append(iov, v)
		}
	}
	add(hdr[:])
	for _, b := range bufs {
		add(b)
	}
	if n+4 >= 1<<31 {
		return sunrpc.ErrRecordTooLarge
	}
	rc, err := c.SyscallConn()
	if err != nil {
		return err
	}
	var werr error
	err = rc.Write(func(fd uintptr) bool {
		for len(iov) > 0 {
			m, _, e := unix.RawSyscall(unix.SYS_WRITEV, fd, uintptr(unsafe.Pointer(&iov[0])), uintptr(len(iov)))
			switch {
			case e == unix.EAGAIN:
				return false // wait in the poller
			case e == unix.EINTR:
				continue
			case e != 0:
				werr = e
				return true
			}
			// Drop what went out.
			for left := int(m); left > 0; {
				if l := int(iov[0].Len); l <= left {
					left -= l
					iov = iov[1:]
				} else {
					iov[0].Base = (*byte)(unsafe.Add(unsafe.Pointer(iov[0].Base), left))
					iov[0].SetLen(l - left)
					left = 0
				}
			}
		}
		return true
	})
	if err == nil {
		err = werr
	}
	// The iovecs point into bufs: keep them reachable until here.
	_ = hdr
	return err
}
