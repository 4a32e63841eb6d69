package sunrpc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
)

// Record marking (RFC 5531 section 11): over a byte stream each RPC message
// is sent as one or more fragments, each preceded by a 4-byte header whose
// top bit marks the last fragment and whose low 31 bits are its length.

// DefaultMaxRecord bounds a reassembled record: a 1 MiB WRITE plus headers
// fits with room to spare. Larger records are refused and the connection
// should be dropped (there is no way to resynchronise the stream).
const DefaultMaxRecord = 1<<20 + 64<<10

const lastFragment = 1 << 31

// ErrRecordTooLarge is returned by ReadRecord when a record (the sum of its
// fragments) would exceed the limit.
var ErrRecordTooLarge = errors.New("sunrpc: record too large")

// ReadRecord reads one complete record (all fragments) from r. A record
// larger than max bytes returns ErrRecordTooLarge without reading (or
// allocating) the oversized fragment. A stream that ends cleanly before a
// record starts returns io.EOF; one that ends inside a record returns
// io.ErrUnexpectedEOF.
func ReadRecord(r io.Reader, max int) ([]byte, error) {
	return ReadRecordInto(r, max, nil)
}

// ReadRecordInto is ReadRecord reusing buf's storage when it is large
// enough (servers keep a pool of record buffers so that a stream of 1 MiB
// WRITEs does not allocate and zero 1 MiB per call).
func ReadRecordInto(r io.Reader, max int, buf []byte) ([]byte, error) {
	rec := buf[:0]
	var hdr [4]byte
	for frags := 0; ; frags++ {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			if err == io.EOF && frags > 0 {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		h := binary.BigEndian.Uint32(hdr[:])
		n := int(h &^ lastFragment)
		if len(rec)+n > max {
			return nil, fmt.Errorf("%w: %d bytes (limit %d)", ErrRecordTooLarge, len(rec)+n, max)
		}
		old := len(rec)
		if cap(rec)-old >= n {
			rec = rec[:old+n]
		} else if old == 0 && h&lastFragment != 0 {
			rec = make([]byte, n)
		} else {
			rec = append(rec, make([]byte, n)...)
		}
		if _, err := io.ReadFull(r, rec[old:]); err != nil {
			return nil, unexpected(err)
		}
		if h&lastFragment != 0 {
			if rec == nil {
				rec = []byte{}
			}
			return rec, nil
		}
		// An empty non-last fragment makes no progress; the size limit alone
		// would not stop a peer sending them forever.
		if n == 0 && frags > 1024 {
			return nil, fmt.Errorf("%w: too many empty fragments", ErrGarbage)
		}
	}
}

func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// WriteRecord sends b as a single-fragment record. It issues one vectored
// write, so callers that serialise WriteRecord calls with a mutex never
// interleave records on a shared connection.
func WriteRecord(w io.Writer, b []byte) error {
	if len(b) >= lastFragment {
		return fmt.Errorf("%w: %d bytes", ErrRecordTooLarge, len(b))
	}
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], uint32(len(b))|lastFragment)
	bufs := net.Buffers{hdr[:], b}
	_, err := bufs.WriteTo(w)
	return err
}

// WriteRecordBuffers sends the concatenation of bufs as a single-fragment
// record in one vectored write, so a large payload (READ data) goes out
// without being copied into the reply buffer first.
func WriteRecordBuffers(w io.Writer, bufs ...[]byte) error {
	n := 0
	for _, b := range bufs {
		n += len(b)
	}
	if n >= lastFragment {
		return fmt.Errorf("%w: %d bytes", ErrRecordTooLarge, n)
	}
	var hdr [4]byte
	binary.BigEndian.PutUint32(hdr[:], uint32(n)|lastFragment)
	nb := make(net.Buffers, 0, len(bufs)+1)
	nb = append(nb, hdr[:])
	for _, b := range bufs {
		if len(b) > 0 {
			nb = append(nb, b)
		}
	}
	_, err := nb.WriteTo(w)
	return err
}

// AppendFragmentHeader appends a fragment header for n bytes (last marks the
// final fragment). Useful to build a multi-fragment record in tests.
func AppendFragmentHeader(dst []byte, n int, last bool) []byte {
	h := uint32(n)
	if last {
		h |= lastFragment
	}
	return binary.BigEndian.AppendUint32(dst, h)
}
