package iscsi

import (
	"net"
	"sync"

	proto "github.com/tristore/tristore/proto/iscsi"
)

// batchWriter sends PDUs on a connection with group commit: a goroutine
// that finds no write in progress becomes the flusher and writes
// everything queued (its own PDU and those appended meanwhile) in as few
// write(2) calls as possible; the others append and return. At queue depth
// 32 this turns one system call per command into one per batch, which on
// a busy 2-core machine is most of the initiator's cost. Order is the
// order of appending, so CmdSN order on the wire is kept.
type batchWriter struct {
	nc  net.Conn
	opt proto.Options

	mu       sync.Mutex
	buf      []byte // encoded PDUs waiting for the flusher
	spare    []byte
	flushing bool
	err      error
}

// maxSpare bounds the buffer kept between batches.
const maxSpare = 4 << 20

func (w *batchWriter) write(p *proto.PDU) error {
	w.mu.Lock()
	if w.err != nil {
		err := w.err
		w.mu.Unlock()
		return err
	}
	var err error
	if w.buf, err = proto.AppendPDU(w.buf, p, w.opt); err != nil {
		w.mu.Unlock()
		return err
	}
	if w.flushing {
		w.mu.Unlock()
		return nil // the current flusher will send it
	}
	w.flushing = true
	for len(w.buf) > 0 && w.err == nil {
		b := w.buf
		w.buf = w.spare[:0]
		w.spare = nil
		w.mu.Unlock()
		_, werr := w.nc.Write(b)
		w.mu.Lock()
		if cap(b) <= maxSpare {
			w.spare = b[:0]
		}
		if werr != nil {
			w.err = werr
		}
	}
	w.flushing = false
	err = w.err
	w.mu.Unlock()
	return err
}
