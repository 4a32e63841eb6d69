package raid

import "encoding/binary"

// xorInto sets dst[i] ^= src[i] for i < min(len(dst), len(src)).
// It works 8 bytes at a time through encoding/binary (which the compiler
// lowers to plain 64-bit loads and stores), four words per iteration.
func xorInto(dst, src []byte) {
	n := min(len(dst), len(src))
	dst, src = dst[:n], src[:n]
	i := 0
	le := binary.LittleEndian
	for ; i+32 <= n; i += 32 {
		d, s := dst[i:i+32], src[i:i+32]
		le.PutUint64(d[0:], le.Uint64(d[0:])^le.Uint64(s[0:]))
		le.PutUint64(d[8:], le.Uint64(d[8:])^le.Uint64(s[8:]))
		le.PutUint64(d[16:], le.Uint64(d[16:])^le.Uint64(s[16:]))
		le.PutUint64(d[24:], le.Uint64(d[24:])^le.Uint64(s[24:]))
	}
	for ; i+8 <= n; i += 8 {
		le.PutUint64(dst[i:], le.Uint64(dst[i:])^le.Uint64(src[i:]))
	}
	for ; i < n; i++ {
		dst[i] ^= src[i]
	}
}
