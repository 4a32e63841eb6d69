package sse

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

func seal(t *testing.T, plain []byte) (ct, key, prefix []byte) {
	t.Helper()
	key, prefix, err := NewDataKey()
	if err != nil {
		t.Fatal(err)
	}
	er, err := NewEncryptReader(bytes.NewReader(plain), int64(len(plain)), key, prefix, nil)
	if err != nil {
		t.Fatal(err)
	}
	ct, err = io.ReadAll(er)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(ct)) != CipherSize(int64(len(plain))) {
		t.Fatalf("%d plaintext bytes sealed to %d, CipherSize says %d", len(plain), len(ct), CipherSize(int64(len(plain))))
	}
	return ct, key, prefix
}

func open(ct []byte, size, off, n int64, key, prefix []byte) ([]byte, error) {
	coff, cn := Span(size, off, n)
	dr, err := NewDecryptReader(bytes.NewReader(ct[coff:coff+cn]), size, off, n, key, prefix)
	if err != nil {
		return nil, err
	}
	return io.ReadAll(dr)
}

// TestSizes: every stored size maps back to its plaintext size, at and
// around segment boundaries.
func TestSizes(t *testing.T) {
	for _, p := range []int64{0, 1, SegSize - 1, SegSize, SegSize + 1, 3*SegSize - 1, 3 * SegSize, 5<<30 + 7} {
		got, ok := PlainSize(CipherSize(p))
		if !ok || got != p {
			t.Errorf("PlainSize(CipherSize(%d)) = %d, %v", p, got, ok)
		}
	}
	if _, ok := PlainSize(SegSize + TagSize + 5); ok {
		t.Error("a stored size with a 5-byte last segment (shorter than a tag) was accepted")
	}
}

// TestRanges: any range of any size decrypts to the plaintext's bytes.
func TestRanges(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, size := range []int64{0, 1, SegSize, SegSize + 1, 3*SegSize + 100} {
		plain := make([]byte, size)
		for i := range plain {
			plain[i] = byte(r.IntN(256))
		}
		ct, key, prefix := seal(t, plain)
		if size > 64 && bytes.Contains(ct, plain[:64]) {
			t.Fatal("ciphertext contains plaintext")
		}
		got, err := open(ct, size, 0, size, key, prefix)
		if err != nil || !bytes.Equal(got, plain) {
			t.Fatalf("size %d: whole object: %v", size, err)
		}
		for range 30 {
			if size == 0 {
				break
			}
			off := r.Int64N(size)
			n := 1 + r.Int64N(size-off)
			got, err := open(ct, size, off, n, key, prefix)
			if err != nil || !bytes.Equal(got, plain[off:off+n]) {
				t.Fatalf("size %d range %d+%d: %v", size, off, n, err)
			}
		}
	}
}

// TestTamper: a flipped bit, a dropped last segment, swapped segments and
// a wrong key all fail authentication instead of giving wrong bytes.
func TestTamper(t *testing.T) {
	plain := bytes.Repeat([]byte("0123456789abcdef"), 3*SegSize/16+10)
	size := int64(len(plain))
	ct, key, prefix := seal(t, plain)
	flip := bytes.Clone(ct)
	flip[SegSize+TagSize+10] ^= 1
	if _, err := open(flip, size, SegSize, 10, key, prefix); !errors.Is(err, ErrAuth) {
		t.Errorf("flipped byte: %v, want ErrAuth", err)
	}
	// Cut to the first two segments, claiming a size that ends there.
	cut := ct[:2*(SegSize+TagSize)]
	if _, err := open(cut, 2*SegSize, 0, 2*SegSize, key, prefix); !errors.Is(err, ErrAuth) {
		t.Errorf("truncated at a segment boundary: %v, want ErrAuth", err)
	}
	swap := bytes.Clone(ct)
	copy(swap[:SegSize+TagSize], ct[SegSize+TagSize:2*(SegSize+TagSize)])
	if _, err := open(swap, size, 0, 10, key, prefix); !errors.Is(err, ErrAuth) {
		t.Errorf("segments swapped: %v, want ErrAuth", err)
	}
	other, _, _ := NewDataKey()
	if _, err := open(ct, size, 0, 10, other, prefix); !errors.Is(err, ErrAuth) {
		t.Errorf("wrong key: %v, want ErrAuth", err)
	}
	w, err := Wrap(key, other)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Unwrap(other, w); !errors.Is(err, ErrAuth) {
		t.Errorf("unwrap with the wrong key: %v", err)
	}
	if k, err := Unwrap(key, w); err != nil || !bytes.Equal(k, other) {
		t.Errorf("unwrap: %v", err)
	}
}

// TestShortBody: a body shorter than announced is an error, never a
// shorter object.
func TestShortBody(t *testing.T) {
	key, prefix, _ := NewDataKey()
	er, _ := NewEncryptReader(bytes.NewReader(make([]byte, 100)), 200, key, prefix, nil)
	if _, err := io.ReadAll(er); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("short body: %v", err)
	}
}

func TestKeyFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "sys", "sse", "server.key")
	k1, err := LoadOrCreateKey(p)
	if err != nil {
		t.Fatal(err)
	}
	k2, err := LoadOrCreateKey(p)
	if err != nil || !bytes.Equal(k1, k2) {
		t.Fatalf("second load: %v, same key %v", err, bytes.Equal(k1, k2))
	}
	st, err := os.Stat(p)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v mode %v", err, st.Mode())
	}
	if dst, _ := os.Stat(filepath.Dir(p)); dst.Mode().Perm() != 0o700 {
		t.Errorf("key directory mode %v", dst.Mode())
	}
	if ents, _ := os.ReadDir(filepath.Dir(p)); len(ents) != 1 {
		t.Errorf("temp files left: %v", ents)
	}
}
