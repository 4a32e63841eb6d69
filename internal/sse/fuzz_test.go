package sse

import (
	"bytes"
	"io"
	"testing"
)

// FuzzDecryptRange: for any object size, range and flipped stored byte, a
// range read returns exactly the plaintext's bytes or fails; it fails when
// the flipped byte is inside the segments it reads, and never returns
// other bytes without an error.
func FuzzDecryptRange(f *testing.F) {
	f.Add(uint32(0), uint32(0), uint32(0), int64(-1))
	f.Add(uint32(SegSize+1), uint32(SegSize-2), uint32(5), int64(SegSize+TagSize+1))
	f.Add(uint32(3*SegSize+7), uint32(10), uint32(2*SegSize), int64(3))
	f.Add(uint32(100), uint32(99), uint32(1), int64(115))
	key, prefix, err := NewDataKey()
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, size, off, n uint32, flip int64) {
		size %= 4*SegSize + 100
		plain := make([]byte, size)
		for i := range plain {
			plain[i] = byte(i*7 + i>>9)
		}
		er, err := NewEncryptReader(bytes.NewReader(plain), int64(size), key, prefix, nil)
		if err != nil {
			t.Fatal(err)
		}
		ct, err := io.ReadAll(er)
		if err != nil {
			t.Fatal(err)
		}
		if p, ok := PlainSize(int64(len(ct))); !ok || p != int64(size) {
			t.Fatalf("PlainSize(%d) = %d %v, want %d", len(ct), p, ok, size)
		}
		if size == 0 {
			return
		}
		o := int64(off % size)
		m := 1 + int64(n)%(int64(size)-o)
		coff, cn := Span(int64(size), o, m)
		inside := flip >= coff && flip < coff+cn
		if flip >= 0 && flip < int64(len(ct)) {
			ct[flip] ^= 0x10
		}
		dr, err := NewDecryptReader(bytes.NewReader(ct[coff:coff+cn]), int64(size), o, m, key, prefix)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(dr)
		switch {
		case inside && err == nil:
			t.Fatalf("byte %d flipped inside [%d,%d) and the read succeeded", flip, coff, coff+cn)
		case !inside && (err != nil || !bytes.Equal(got, plain[o:o+m])):
			t.Fatalf("range %d+%d of %d: %v (equal %v)", o, m, size, err, bytes.Equal(got, plain[o:o+m]))
		case err != nil && len(got) > 0 && !bytes.Equal(got, plain[o:o+int64(len(got))]):
			t.Fatalf("wrong bytes returned before the failure")
		}
	})
}
