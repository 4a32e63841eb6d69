package testutil

import (
	"os"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// ResidentPages counts the pages of the first size bytes of the file at p
// that are in the page cache (mincore on a read-only shared mapping), for
// tests of what the page cache holds after a write or read path ran.
func ResidentPages(t testing.TB, p string, size int) int {
	t.Helper()
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	m, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(m)
	vec := make([]byte, (size+os.Getpagesize()-1)/os.Getpagesize())
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(size), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		t.Fatal(e)
	}
	n := 0
	for _, v := range vec {
		n += int(v & 1)
	}
	return n
}
