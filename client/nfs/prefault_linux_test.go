//go:build linux

package nfs

import (
	"bytes"
	"context"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/tristore/tristore/proto/nfs3"
	"github.com/tristore/tristore/proto/sunrpc"
)

// ReadAt faults in each READ's part of a fresh buffer while the READ is
// in flight, not when the reply is copied there by the connection's one
// reading goroutine: here the server answers each READ only once that part
// of the buffer is resident (mincore), so without the prefault every READ
// waits out its 2 s and the test fails.
func TestReadAtPrefaults(t *testing.T) {
	const mib = 1 << 20
	p, err := unix.Mmap(-1, 0, 16*mib, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(p)
	resident := func(b []byte) bool {
		vec := make([]byte, (len(b)+4095)/4096)
		if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
			t.Error(e)
			return false
		}
		for _, v := range vec {
			if v&1 == 0 {
				return false
			}
		}
		return true
	}
	late := make(chan uint64, 16)
	f := &fakeServer{}
	f.handle = func(call sunrpc.Call, r *sunrpc.Reader) ([]byte, bool) {
		var a nfs3.ReadArgs
		a.Decode(r)
		end := time.Now().Add(2 * time.Second)
		for !resident(p[a.Offset : a.Offset+uint64(a.Count)]) {
			if time.Now().After(end) {
				late <- a.Offset
				break
			}
			time.Sleep(time.Millisecond)
		}
		return readReply(call.XID, 0, false, false, pattern(a.Offset, int(a.Count))), false
	}
	c := fakeClient(t, f, Options{Rsize: 4 * mib, Parallel: 4})
	if n, err := c.ReadAt(context.Background(), FH{1}, p, 0); err != nil || n != len(p) {
		t.Fatalf("ReadAt: %d %v", n, err)
	}
	close(late)
	for off := range late {
		t.Errorf("the buffer for the READ at %d MiB was not faulted in while it was in flight", off>>20)
	}
	for off := 0; off < len(p); off += 4 * mib {
		if !bytes.Equal(p[off:off+4*mib], pattern(uint64(off), 4*mib)) {
			t.Fatalf("4 MiB at %d differs", off)
		}
	}
}
