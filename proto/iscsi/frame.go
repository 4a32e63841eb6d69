package iscsi

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"sync"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// CRC32C returns the iSCSI digest value of b (Castagnoli polynomial, as
// computed by hash/crc32, which uses the SSE4.2/ARM instructions).
func CRC32C(b []byte) uint32 { return crc32.Checksum(b, castagnoli) }

// crc32cUpdate continues a CRC32C over more bytes.
func crc32cUpdate(crc uint32, b []byte) uint32 { return crc32.Update(crc, castagnoli, b) }

// putDigest stores a digest in wire order (least significant byte first).
func putDigest(b []byte, crc uint32) { binary.LittleEndian.PutUint32(b, crc) }

// Options are the per-connection framing parameters negotiated at login.
// Digests apply from the first PDU after the final Login Response.
type Options struct {
	HeaderDigest bool
	DataDigest   bool
	// MaxRecvDataSegmentLength is the largest data segment this side
	// accepts; 0 means no limit beyond the 24-bit field (used during login,
	// where RFC 7143 fixes 8192 but peers may send more).
	MaxRecvDataSegmentLength int
}

// ReadPDU reads one complete PDU from r. Errors:
//   - io.EOF / io.ErrUnexpectedEOF: the connection ended (cleanly before a header);
//   - ErrHeaderDigest: the header cannot be trusted; the connection must be dropped;
//   - ErrDataTooLong: the data segment exceeds o.MaxRecvDataSegmentLength (protocol error);
//   - ErrDataDigest: the header is valid and returned with the error, so the
//     target can send Reject (reason RejectDataDigest) quoting it;
//   - ErrUnknownOpcode: the PDU was read completely and is returned, so the
//     target can answer with Reject and keep the connection;
//   - ErrBadAHS: a malformed AHS; the PDU is returned.
func ReadPDU(r io.Reader, o Options) (*PDU, error) {
	return readPDU(r, o, nil)
}

// Placer chooses where a PDU's data segment is read to: given the decoded
// header and the data length, it returns a slice of exactly n bytes (the
// data is read straight into it, no allocation) or nil (a new buffer is
// allocated). A target uses it to land Data-Out payloads in the command's
// buffer. The data in the slice is only valid if the read returns no error.
type Placer func(p *PDU, n int) []byte

func readPDU(r io.Reader, o Options, place Placer) (*PDU, error) {
	var hdr [BHSLen + 4]byte
	if _, err := io.ReadFull(r, hdr[:BHSLen]); err != nil {
		return nil, err
	}
	p, ahsLen, dataLen, perr := UnmarshalBHS(hdr[:BHSLen])
	var ahs []byte
	if ahsLen > 0 {
		ahs = make([]byte, ahsLen)
		if _, err := io.ReadFull(r, ahs); err != nil {
			return nil, unexpected(err)
		}
	}
	if o.HeaderDigest {
		if _, err := io.ReadFull(r, hdr[BHSLen:]); err != nil {
			return nil, unexpected(err)
		}
		crc := crc32cUpdate(CRC32C(hdr[:BHSLen]), ahs)
		if binary.LittleEndian.Uint32(hdr[BHSLen:]) != crc {
			return p, ErrHeaderDigest
		}
	}
	if o.MaxRecvDataSegmentLength > 0 && dataLen > o.MaxRecvDataSegmentLength {
		return p, fmt.Errorf("%w: %d > %d", ErrDataTooLong, dataLen, o.MaxRecvDataSegmentLength)
	}
	if dataLen > 0 {
		var dst []byte
		if place != nil && perr == nil {
			dst = place(p, dataLen)
		}
		var padBuf [4]byte
		var buf, pad []byte
		if len(dst) == dataLen {
			buf, pad = dst, padBuf[:pad4(dataLen)-dataLen]
		} else {
			buf = make([]byte, pad4(dataLen))
			pad = buf[dataLen:]
			buf = buf[:dataLen]
		}
		if _, err := io.ReadFull(r, buf); err != nil {
			return nil, unexpected(err)
		}
		if len(pad) > 0 {
			if _, err := io.ReadFull(r, pad); err != nil {
				return nil, unexpected(err)
			}
		}
		p.Data = buf
		if o.DataDigest {
			var d [4]byte
			if _, err := io.ReadFull(r, d[:]); err != nil {
				return nil, unexpected(err)
			}
			if binary.LittleEndian.Uint32(d[:]) != crc32cUpdate(CRC32C(buf), pad) {
				p.Data = nil
				return p, ErrDataDigest
			}
		}
	}
	if perr != nil {
		return p, perr
	}
	if err := p.decodeAHS(ahs); err != nil {
		return p, err
	}
	return p, nil
}

func unexpected(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

var zeroPad [4]byte

// AppendPDU appends the wire form of p (header, AHS, header digest, data,
// padding, data digest) to dst.
func AppendPDU(dst []byte, p *PDU, o Options) ([]byte, error) {
	if len(p.Data) > MaxDataSegmentLength {
		return dst, fmt.Errorf("iscsi: data segment of %d bytes does not fit the 24-bit length", len(p.Data))
	}
	ahs := p.EncodeAHS()
	if len(ahs)%4 != 0 || len(ahs)/4 > 255 {
		return dst, ErrBadAHS
	}
	bhs := p.MarshalBHS(len(ahs))
	dst = append(dst, bhs[:]...)
	dst = append(dst, ahs...)
	if o.HeaderDigest {
		var d [4]byte
		putDigest(d[:], crc32cUpdate(CRC32C(bhs[:]), ahs))
		dst = append(dst, d[:]...)
	}
	if n := len(p.Data); n > 0 {
		dst = append(dst, p.Data...)
		padn := pad4(n) - n
		dst = append(dst, zeroPad[:padn]...)
		if o.DataDigest {
			var d [4]byte
			putDigest(d[:], crc32cUpdate(CRC32C(p.Data), zeroPad[:padn]))
			dst = append(dst, d[:]...)
		}
	}
	return dst, nil
}

// WritePDU writes p to w in one Write call.
func WritePDU(w io.Writer, p *PDU, o Options) error {
	b, err := AppendPDU(make([]byte, 0, BHSLen+8+pad4(len(p.Data))+len(p.AHS)), p, o)
	if err != nil {
		return err
	}
	_, err = w.Write(b)
	return err
}

// Conn frames PDUs on a network connection. Reads must come from one
// goroutine; writes may come from many. The options may be changed between
// PDUs with SetOptions (e.g. when digests start after login).
//
// Writes are group-committed: a writer that finds no write in progress
// becomes the flusher and sends its PDU together with every PDU queued
// meanwhile in one write(2) or writev(2); a writer that finds a flush in
// progress encodes its PDU into the queue (under the lock, in order, so
// numbers assigned by prepare go out in order) and returns without
// waiting. A PDU whose data segment is at least writevThreshold is not
// copied: its writer waits for the flusher to finish and flushes it
// itself, the data as its own iovec. Flush waits for queued PDUs to be
// written.
type Conn struct {
	nc net.Conn
	br *bufio.Reader

	optMu sync.Mutex
	rOpt  Options // options for reading (our MaxRecvDataSegmentLength)
	wOpt  Options // options for writing (digests; peer's limit is checked by the caller)

	wmu      sync.Mutex
	wdone    sync.Cond // signalled (on wmu) when a flush ends
	waiting  int       // writers waiting on wdone
	flushing bool
	werr     error    // the first write error; every later write returns it
	wbuf     []byte   // encoded PDUs waiting for the flusher
	wspare   []byte   // the other buffer, swapped with wbuf per flush
	iov      [][]byte // flush's writev vector (reused)
}

// NewConn wraps nc. Until SetOptions is called no digests are used and the
// data segment limit is 8192 bytes + slack (login phase, RFC 7143 §6.1).
func NewConn(nc net.Conn) *Conn {
	c := &Conn{
		nc:   nc,
		br:   bufio.NewReaderSize(nc, 64<<10),
		rOpt: Options{MaxRecvDataSegmentLength: 65536},
	}
	c.wdone.L = &c.wmu
	return c
}

// NetConn returns the underlying connection.
func (c *Conn) NetConn() net.Conn { return c.nc }

// SetOptions sets the read and write framing options.
func (c *Conn) SetOptions(read, write Options) {
	c.optMu.Lock()
	c.rOpt, c.wOpt = read, write
	c.optMu.Unlock()
}

// ReadPDU reads the next PDU (see the package-level ReadPDU for errors).
func (c *Conn) ReadPDU() (*PDU, error) {
	return c.ReadPDUPlaced(nil)
}

// ReadPDUPlaced is ReadPDU with a Placer for the data segment.
func (c *Conn) ReadPDUPlaced(place Placer) (*PDU, error) {
	c.optMu.Lock()
	o := c.rOpt
	c.optMu.Unlock()
	return readPDU(c.br, o, place)
}

// WritePDU writes one PDU atomically with respect to other writers.
func (c *Conn) WritePDU(p *PDU) error {
	return c.WritePDUFunc(p, nil)
}

// WritePDUFunc queues p for writing, calling prepare(p) first under the
// write lock, in the order the PDUs go out: a target uses prepare to assign
// StatSN so that status numbers go out in order. It returns once p is
// written, or once it is queued behind a flush in progress (whose flusher
// then writes it); an error means p or an earlier PDU could not be written
// and the stream is unusable. The caller may reuse p and its data when it
// returns.
func (c *Conn) WritePDUFunc(p *PDU, prepare func(*PDU)) error {
	c.optMu.Lock()
	o := c.wOpt
	c.optMu.Unlock()
	large := len(p.Data) >= writevThreshold
	c.wmu.Lock()
	for large && c.flushing && c.werr == nil {
		// The data is written from the caller's buffer, so by the
		// caller, once the flush in progress is over.
		c.waiting++
		c.wdone.Wait()
		c.waiting--
	}
	if c.werr != nil {
		err := c.werr
		c.wmu.Unlock()
		return err
	}
	if prepare != nil {
		prepare(p)
	}
	var data, tail []byte
	var err error
	if large {
		data, tail, err = c.appendHeader(p, o)
	} else {
		mark := len(c.wbuf)
		if c.wbuf, err = AppendPDU(c.wbuf, p, o); err != nil {
			c.wbuf = c.wbuf[:mark]
		}
	}
	if err != nil {
		c.wmu.Unlock()
		return err
	}
	if c.flushing {
		c.wmu.Unlock()
		return nil // the flusher writes it
	}
	c.flushing = true
	return c.flushLocked(data, tail)
}

// flushLocked writes the queue until it is empty, data and tail (if any)
// right after the first batch, then ends the flush and unlocks wmu. The
// caller holds wmu and has set flushing.
func (c *Conn) flushLocked(data, tail []byte) error {
	for len(c.wbuf) > 0 && c.werr == nil {
		b := c.wbuf
		c.wbuf, c.wspare = c.wspare[:0], nil
		c.wmu.Unlock()
		var werr error
		if data != nil {
			c.iov = append(c.iov[:0], b, data)
			if len(tail) > 0 {
				c.iov = append(c.iov, tail)
			}
			bufs := net.Buffers(c.iov)
			_, werr = bufs.WriteTo(c.nc)
			clear(c.iov)
			data = nil
		} else {
			_, werr = c.nc.Write(b)
		}
		c.wmu.Lock()
		if cap(b) <= maxSpare {
			c.wspare = b[:0]
		}
		if werr != nil {
			c.werr = werr
		}
	}
	c.flushing = false
	if c.waiting > 0 {
		c.wdone.Broadcast()
	}
	err := c.werr
	c.wmu.Unlock()
	return err
}

// QueuePDUFunc is WritePDUFunc without the flush: p is encoded into the
// queue (prepare called as for WritePDUFunc) and written by the next
// flush, which Flush, any WritePDUFunc, or a flush in progress does. A
// reader that answers several buffered requests in a row queues the
// answers and flushes them with one write when it has no complete request
// left (see PDUBuffered). A PDU with a data segment of writevThreshold or
// more is written at once, as by WritePDUFunc.
func (c *Conn) QueuePDUFunc(p *PDU, prepare func(*PDU)) error {
	if len(p.Data) >= writevThreshold {
		return c.WritePDUFunc(p, prepare)
	}
	c.optMu.Lock()
	o := c.wOpt
	c.optMu.Unlock()
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.werr != nil {
		return c.werr
	}
	if prepare != nil {
		prepare(p)
	}
	mark := len(c.wbuf)
	var err error
	if c.wbuf, err = AppendPDU(c.wbuf, p, o); err != nil {
		c.wbuf = c.wbuf[:mark]
	}
	return err
}

// Flush writes the queued PDUs unless a flush is in progress (whose
// flusher then writes them); it does not wait for another flusher.
func (c *Conn) Flush() error {
	c.wmu.Lock()
	if c.flushing || len(c.wbuf) == 0 || c.werr != nil {
		err := c.werr
		c.wmu.Unlock()
		return err
	}
	c.flushing = true
	return c.flushLocked(nil, nil)
}

// Drain waits until every queued PDU has been written (or the stream has
// failed) and returns the write error, if any.
func (c *Conn) Drain() error {
	if err := c.Flush(); err != nil {
		return err
	}
	c.wmu.Lock()
	defer c.wmu.Unlock()
	for c.flushing && c.werr == nil {
		c.waiting++
		c.wdone.Wait()
		c.waiting--
	}
	return c.werr
}

// PDUBuffered reports whether a complete PDU has already been received
// and buffered, so the next read will not block.
func (c *Conn) PDUBuffered() bool {
	n := c.br.Buffered()
	if n < BHSLen {
		return false
	}
	h, err := c.br.Peek(BHSLen)
	if err != nil {
		return false
	}
	c.optMu.Lock()
	o := c.rOpt
	c.optMu.Unlock()
	need := BHSLen + int(h[4])*4 + pad4(int(h[5])<<16|int(h[6])<<8|int(h[7]))
	if o.HeaderDigest {
		need += 4
	}
	if o.DataDigest && h[5]|h[6]|h[7] != 0 {
		need += 4
	}
	return n >= need
}

// maxSpare bounds the write buffer kept between flushes.
const maxSpare = 1 << 20

// writevThreshold is the data segment size from which a PDU is sent with
// writev (header, data, padding+digest) instead of being copied into the
// write buffer: profiling 1 MiB reads showed the copy as the largest
// user-space cost.
const writevThreshold = 16 << 10

// appendHeader appends p's header (with its header digest) to the write
// buffer and returns the data segment and what follows it (padding and
// data digest), which are written from their own buffers. The caller
// holds wmu.
func (c *Conn) appendHeader(p *PDU, o Options) (data, tail []byte, err error) {
	if len(p.Data) > MaxDataSegmentLength {
		return nil, nil, fmt.Errorf("iscsi: data segment of %d bytes does not fit the 24-bit length", len(p.Data))
	}
	data = p.Data
	mark := len(c.wbuf)
	p.Data = data[:0:0] // header only, DataSegmentLength patched below
	c.wbuf, err = AppendPDU(c.wbuf, p, Options{HeaderDigest: false})
	p.Data = data
	if err != nil {
		c.wbuf = c.wbuf[:mark]
		return nil, nil, err
	}
	hdr := c.wbuf[mark:]
	dl := len(data)
	hdr[5], hdr[6], hdr[7] = byte(dl>>16), byte(dl>>8), byte(dl)
	if o.HeaderDigest {
		var d [4]byte
		putDigest(d[:], CRC32C(hdr))
		c.wbuf = append(c.wbuf, d[:]...)
	}
	padn := pad4(dl) - dl
	if padn > 0 || o.DataDigest {
		tail = make([]byte, 0, 8)
		tail = append(tail, zeroPad[:padn]...)
		if o.DataDigest {
			var d [4]byte
			putDigest(d[:], crc32cUpdate(CRC32C(data), zeroPad[:padn]))
			tail = append(tail, d[:]...)
		}
	}
	return data, tail, nil
}

// Close closes the underlying connection.
func (c *Conn) Close() error { return c.nc.Close() }

var _ io.Closer = (*Conn)(nil)
