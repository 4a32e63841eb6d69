// Package sse is tristore's encryption at rest for S3 objects (SSE-S3 and
// SSE-C): a chunked AES-256-GCM layout, the per-object data key wrapped by
// a server key (or the customer's key), and the server key file.
//
// Layout of an encrypted object's stored bytes: the plaintext cut into
// SegSize segments, each sealed on its own (ciphertext || 16-byte tag):
//
//	[seg 0: SegSize+16][seg 1: SegSize+16]...[last: 0..SegSize + 16]
//
// An empty object is one empty final segment (16 bytes), so every object
// ends with a segment marked final. Segment i's nonce is the object's
// random 7-byte prefix || uint32 i || final flag (the STREAM construction):
// a segment cannot be moved, dropped or cut off at a segment boundary
// without failing authentication, and a range read decrypts only the
// segments it touches. The per-object data key is random, so nonces never
// repeat under one key.
package sse

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
)

// SegSize is the plaintext size of every segment but the last.
const SegSize = 64 << 10

// TagSize is the GCM tag added to each segment.
const TagSize = 16

// KeySize is the AES-256 key length (server, customer and data keys).
const KeySize = 32

// PrefixSize is the per-object random part of every segment nonce.
const PrefixSize = 7

// ErrAuth: stored ciphertext failed authentication (changed on disk, or
// the wrong key); never answered with the bytes it would have produced.
var ErrAuth = errors.New("sse: stored ciphertext failed authentication")

// segments is the number of segments of a plaintext of size p.
func segments(p int64) int64 {
	if p <= 0 {
		return 1
	}
	return (p + SegSize - 1) / SegSize
}

// CipherSize is the stored size of a plaintext of size p.
func CipherSize(p int64) int64 { return p + TagSize*segments(p) }

// PlainSize is the plaintext size of stored bytes of size c; ok is false
// when no plaintext has that stored size.
func PlainSize(c int64) (int64, bool) {
	if c < TagSize {
		return 0, false
	}
	n := (c + SegSize + TagSize - 1) / (SegSize + TagSize)
	p := c - TagSize*n
	return p, p >= 0 && CipherSize(p) == c
}

func newGCM(key []byte) (cipher.AEAD, error) {
	if len(key) != KeySize {
		return nil, fmt.Errorf("sse: key of %d bytes, want %d", len(key), KeySize)
	}
	b, err := aes.NewCipher(key)
	if err != nil {
		return nil, err
	}
	return cipher.NewGCM(b)
}

func nonce(prefix []byte, i int64, final bool) []byte {
	n := make([]byte, 12)
	copy(n, prefix[:PrefixSize])
	binary.BigEndian.PutUint32(n[PrefixSize:], uint32(i))
	if final {
		n[11] = 1
	}
	return n
}

// NewDataKey returns a random data key and nonce prefix for one object.
func NewDataKey() (key, prefix []byte, err error) {
	key, prefix = make([]byte, KeySize), make([]byte, PrefixSize)
	if _, err = rand.Read(key); err != nil {
		return nil, nil, err
	}
	if _, err = rand.Read(prefix); err != nil {
		return nil, nil, err
	}
	return key, prefix, nil
}

// wrapAAD binds a wrapped key to its purpose.
var wrapAAD = []byte("tristore-sse-v1 data key")

// Wrap seals a data key under kek (the server key, or the customer's key
// for SSE-C): random 12-byte nonce || ciphertext || tag.
func Wrap(kek, dataKey []byte) ([]byte, error) {
	g, err := newGCM(kek)
	if err != nil {
		return nil, err
	}
	n := make([]byte, g.NonceSize())
	if _, err := rand.Read(n); err != nil {
		return nil, err
	}
	return g.Seal(n, n, dataKey, wrapAAD), nil
}

// Unwrap opens what Wrap sealed; a wrong kek gives ErrAuth.
func Unwrap(kek, wrapped []byte) ([]byte, error) {
	g, err := newGCM(kek)
	if err != nil {
		return nil, err
	}
	if len(wrapped) < g.NonceSize()+g.Overhead() {
		return nil, ErrAuth
	}
	k, err := g.Open(nil, wrapped[:g.NonceSize()], wrapped[g.NonceSize():], wrapAAD)
	if err != nil || len(k) != KeySize {
		return nil, ErrAuth
	}
	return k, nil
}

// encReader turns exactly size plaintext bytes from r into the layout.
type encReader struct {
	r      io.Reader
	g      cipher.AEAD
	prefix []byte
	size   int64 // plaintext bytes still to read
	seg    int64
	nseg   int64
	pbuf   []byte
	out    []byte // sealed bytes not yet returned
	err    error
	onEOF  func()
}

// NewEncryptReader returns the stored bytes (CipherSize(size) of them) of
// the size plaintext bytes r yields. A short r fails with r's error or
// io.ErrUnexpectedEOF; onEOF (if set) runs once the whole plaintext has
// been read, before the last sealed bytes are returned.
func NewEncryptReader(r io.Reader, size int64, dataKey, prefix []byte, onEOF func()) (io.Reader, error) {
	g, err := newGCM(dataKey)
	if err != nil {
		return nil, err
	}
	return &encReader{r: r, g: g, prefix: prefix, size: size, nseg: segments(size), pbuf: make([]byte, SegSize), onEOF: onEOF}, nil
}

func (e *encReader) Read(p []byte) (int, error) {
	for len(e.out) == 0 {
		if e.err != nil {
			return 0, e.err
		}
		if e.seg >= e.nseg {
			return 0, io.EOF
		}
		want := min(e.size, SegSize)
		m, err := io.ReadFull(e.r, e.pbuf[:want])
		if int64(m) < want {
			if err == nil || err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			e.err = err
			return 0, err
		}
		e.size -= want
		final := e.seg == e.nseg-1
		e.out = e.g.Seal(e.out[:0], nonce(e.prefix, e.seg, final), e.pbuf[:want], nil)
		e.seg++
		if final && e.onEOF != nil {
			e.onEOF()
			e.onEOF = nil
		}
	}
	n := copy(p, e.out)
	e.out = e.out[n:]
	return n, nil
}

// Span is where the plaintext range [off, off+n) lives in the stored
// bytes of an object of plaintext size: read cn stored bytes from coff and
// give them with off to NewDecryptReader.
func Span(size, off, n int64) (coff, cn int64) {
	if n <= 0 {
		return 0, 0
	}
	first, last := off/SegSize, (off+n-1)/SegSize
	coff = first * (SegSize + TagSize)
	end := min((last+1)*(SegSize+TagSize), CipherSize(size))
	return coff, end - coff
}

type decReader struct {
	r      io.Reader
	g      cipher.AEAD
	prefix []byte
	nseg   int64
	size   int64
	seg    int64 // next segment to open
	skip   int64 // plaintext bytes of the first segment to drop
	left   int64 // plaintext bytes still to return
	cbuf   []byte
	out    []byte
}

// NewDecryptReader returns n plaintext bytes from off of an object of
// plaintext size, reading r (the stored bytes from Span's coff). Each
// segment is authenticated before any of it is returned; a failure is
// ErrAuth.
func NewDecryptReader(r io.Reader, size, off, n int64, dataKey, prefix []byte) (io.Reader, error) {
	g, err := newGCM(dataKey)
	if err != nil {
		return nil, err
	}
	return &decReader{r: r, g: g, prefix: prefix, nseg: segments(size), size: size, seg: off / SegSize,
		skip: off % SegSize, left: n, cbuf: make([]byte, SegSize+TagSize)}, nil
}

func (d *decReader) Read(p []byte) (int, error) {
	for len(d.out) == 0 {
		if d.left <= 0 {
			return 0, io.EOF
		}
		if d.seg >= d.nseg {
			return 0, ErrAuth
		}
		final := d.seg == d.nseg-1
		clen := int64(SegSize + TagSize)
		if final {
			clen = d.size - d.seg*SegSize + TagSize
		}
		if _, err := io.ReadFull(d.r, d.cbuf[:clen]); err != nil {
			if err == io.EOF {
				err = io.ErrUnexpectedEOF
			}
			return 0, fmt.Errorf("sse: reading segment %d: %w", d.seg, err)
		}
		pt, err := d.g.Open(d.cbuf[:0], nonce(d.prefix, d.seg, final), d.cbuf[:clen], nil)
		if err != nil {
			return 0, fmt.Errorf("segment %d: %w", d.seg, ErrAuth)
		}
		d.seg++
		pt = pt[min(d.skip, int64(len(pt))):]
		d.skip = 0
		if int64(len(pt)) > d.left {
			pt = pt[:d.left]
		}
		d.out = pt
	}
	n := copy(p, d.out)
	d.out = d.out[n:]
	d.left -= int64(n)
	return n, nil
}
