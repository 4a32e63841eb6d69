package scsi

import (
	"math/bits"
	"sync"
)

// Buffer pool for data-in and data-out buffers. Profiling 1 MiB reads
// showed ~9% of CPU zeroing freshly allocated buffers plus GC work;
// buffers are recycled by size class (powers of two from 4 KiB to 32 MiB).

const (
	minClass = 12 // 4 KiB
	maxClass = 25 // 32 MiB
)

var pools [maxClass + 1]sync.Pool

func class(n int) int {
	if n <= 1<<minClass {
		return minClass
	}
	return bits.Len(uint(n - 1))
}

// GetBuf returns a buffer of length n whose contents are undefined.
func GetBuf(n int) []byte {
	c := class(n)
	if c > maxClass {
		return make([]byte, n)
	}
	if v := pools[c].Get(); v != nil {
		return (*(v.(*[]byte)))[:n]
	}
	return make([]byte, n, 1<<c)
}

// PutBuf recycles a buffer from GetBuf. The caller must not use it again.
func PutBuf(b []byte) {
	c := class(cap(b))
	if c > maxClass || cap(b) != 1<<c {
		return
	}
	b = b[:cap(b)]
	pools[c].Put(&b)
}
