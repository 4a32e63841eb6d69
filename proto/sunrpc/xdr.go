// Package sunrpc implements the wire format of ONC RPC version 2 (RFC 5531):
// XDR encoding (RFC 4506), record marking over TCP, call and reply headers
// and the AUTH_NONE / AUTH_SYS credentials. It is shared by tristore's NFS
// server (frontend/nfs) and client (client/nfs).
//
// Why hand-written: the maintained Go XDR libraries (davecgh/go-xdr,
// rasky/go-xdr) decode through reflection into freshly allocated values,
// which costs an allocation per field on the hot READ/WRITE path and gives no
// control over per-field length limits (a hostile length prefix must be
// refused before anything is allocated). The codec here decodes in place
// from one record buffer with explicit limits and a sticky error, so a
// decoder is a straight sequence of calls and a truncated or oversized field
// is reported once, as ErrGarbage.
//
// Usage (encoding a call):
//
//	var w sunrpc.Writer
//	sunrpc.Call{XID: 1, Prog: 100003, Vers: 3, Proc: 1, Cred: sunrpc.AuthNone(), Verf: sunrpc.AuthNone()}.Encode(&w)
//	args.Encode(&w)
//	sunrpc.WriteRecord(conn, w.Bytes())
//
// Decoding a reply:
//
//	rec, _ := sunrpc.ReadRecord(br, sunrpc.DefaultMaxRecord)
//	r := sunrpc.NewReader(rec)
//	rep, err := sunrpc.DecodeReply(r) // rep.Err() is non-nil unless SUCCESS
//	res.Decode(r)
package sunrpc

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// ErrGarbage is returned (wrapped) by every decoder when the input is not
// valid XDR for the expected type: truncated, a length over its limit, a
// bool that is neither 0 nor 1. Servers answer such calls with GARBAGE_ARGS.
var ErrGarbage = errors.New("sunrpc: malformed XDR")

// Writer appends XDR-encoded values to a growing buffer. The zero value is
// ready to use; Reset keeps the allocation for reuse.
type Writer struct {
	buf []byte
}

// NewWriter returns a Writer whose buffer has capacity n.
func NewWriter(n int) *Writer { return &Writer{buf: make([]byte, 0, n)} }

// Bytes returns the encoded bytes (aliasing the internal buffer).
func (w *Writer) Bytes() []byte { return w.buf }

// Len is the number of bytes written so far.
func (w *Writer) Len() int { return len(w.buf) }

// Reset empties the buffer, keeping its capacity.
func (w *Writer) Reset() { w.buf = w.buf[:0] }

// Truncate drops everything after the first n bytes.
func (w *Writer) Truncate(n int) { w.buf = w.buf[:n] }

// Uint32 writes an unsigned int.
func (w *Writer) Uint32(v uint32) { w.buf = binary.BigEndian.AppendUint32(w.buf, v) }

// Int32 writes a signed int.
func (w *Writer) Int32(v int32) { w.Uint32(uint32(v)) }

// Uint64 writes an unsigned hyper.
func (w *Writer) Uint64(v uint64) { w.buf = binary.BigEndian.AppendUint64(w.buf, v) }

// Int64 writes a hyper.
func (w *Writer) Int64(v int64) { w.Uint64(uint64(v)) }

// Bool writes a bool as 0 or 1.
func (w *Writer) Bool(b bool) {
	if b {
		w.Uint32(1)
	} else {
		w.Uint32(0)
	}
}

func (w *Writer) pad(n int) {
	for n%4 != 0 {
		w.buf = append(w.buf, 0)
		n++
	}
}

// FixedOpaque writes opaque[n] (no length prefix), padded to 4 bytes.
func (w *Writer) FixedOpaque(b []byte) {
	w.buf = append(w.buf, b...)
	w.pad(len(b))
}

// Opaque writes variable-length opaque<>: length, bytes, padding.
func (w *Writer) Opaque(b []byte) {
	w.Uint32(uint32(len(b)))
	w.FixedOpaque(b)
}

// String writes string<>.
func (w *Writer) String(s string) {
	w.Uint32(uint32(len(s)))
	w.buf = append(w.buf, s...)
	w.pad(len(s))
}

// Reserve appends n zero bytes and returns their offset, so a caller can
// fill in a value (e.g. a count) once it is known with PutUint32At.
func (w *Writer) Reserve(n int) int {
	off := len(w.buf)
	w.buf = append(w.buf, make([]byte, n)...)
	return off
}

// PutUint32At overwrites 4 bytes at off (from Reserve).
func (w *Writer) PutUint32At(off int, v uint32) { binary.BigEndian.PutUint32(w.buf[off:], v) }

// Reader decodes XDR from a byte slice. The first error is sticky: after it,
// every method returns zero values and Err reports it, so decoders can read
// all fields and check once at the end.
type Reader struct {
	buf []byte
	off int
	err error
}

// NewReader returns a Reader over b.
func NewReader(b []byte) *Reader { return &Reader{buf: b} }

// Err is the first decoding error, wrapping ErrGarbage, or nil.
func (r *Reader) Err() error { return r.err }

// Remaining is the number of undecoded bytes.
func (r *Reader) Remaining() int { return len(r.buf) - r.off }

// Offset is the number of bytes consumed so far.
func (r *Reader) Offset() int { return r.off }

// Fail records err (if none yet); decoders use it for semantic errors such
// as an unknown union discriminant.
func (r *Reader) Fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s", ErrGarbage, fmt.Sprintf(format, args...))
	}
}

func (r *Reader) take(n int, what string) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.buf)-r.off {
		r.Fail("%s: need %d bytes, %d left", what, n, len(r.buf)-r.off)
		return nil
	}
	b := r.buf[r.off : r.off+n]
	r.off += n
	return b
}

// Uint32 reads an unsigned int.
func (r *Reader) Uint32() uint32 {
	b := r.take(4, "uint32")
	if b == nil {
		return 0
	}
	return binary.BigEndian.Uint32(b)
}

// Int32 reads an int.
func (r *Reader) Int32() int32 { return int32(r.Uint32()) }

// Uint64 reads an unsigned hyper.
func (r *Reader) Uint64() uint64 {
	b := r.take(8, "uint64")
	if b == nil {
		return 0
	}
	return binary.BigEndian.Uint64(b)
}

// Int64 reads a hyper.
func (r *Reader) Int64() int64 { return int64(r.Uint64()) }

// Bool reads a bool; values other than 0 and 1 are garbage.
func (r *Reader) Bool() bool {
	v := r.Uint32()
	if v > 1 {
		r.Fail("bool value %d", v)
		return false
	}
	return v == 1
}

// FixedOpaque reads opaque[n] and its padding. The result aliases the input.
func (r *Reader) FixedOpaque(n int) []byte {
	padded := (n + 3) &^ 3
	b := r.take(padded, "opaque")
	if b == nil {
		return nil
	}
	return b[:n:n]
}

// Opaque reads opaque<max>. A length over max is garbage (checked before
// anything is allocated). The result aliases the input; copy it to keep it
// beyond the record's lifetime.
func (r *Reader) Opaque(max int) []byte {
	n := r.Uint32()
	if r.err != nil {
		return nil
	}
	if uint64(n) > uint64(max) {
		r.Fail("opaque length %d over limit %d", n, max)
		return nil
	}
	b := r.FixedOpaque(int(n))
	if b == nil && r.err == nil {
		return []byte{}
	}
	return b
}

// String reads string<max>.
func (r *Reader) String(max int) string {
	return string(r.Opaque(max))
}

// Rest returns all undecoded bytes without consuming them.
func (r *Reader) Rest() []byte { return r.buf[r.off:] }

// Buffer is the whole buffer the Reader decodes (for a caller that owns it
// and recycles it once nothing decoded from it is used any more).
func (r *Reader) Buffer() []byte { return r.buf }
