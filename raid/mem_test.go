package raid

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/tristore/tristore/blockdev"
)

var errInjected = errors.New("injected member failure")

// memDevice is an in-memory Device with a volatile write cache and fault
// injection: durable holds what survived Flush; cache holds writes since.
type memDevice struct {
	mu      sync.Mutex
	bs      int
	durable []byte
	cur     []byte // durable + unflushed writes (what reads see)
	pending []pendingWrite
	failed  bool // every I/O fails
	short   bool // reads return half the bytes
	garbage bool // reads return flipped bytes
	closed  bool
	delay   time.Duration // per I/O, outside the lock, to widen races
	// failAfter > 0: the device fails for good after that many more writes
	// (a member vanishing mid-request).
	failAfter int
	// pw, if set, is the power shared by a set of members: once it is cut,
	// every I/O fails and nothing more reaches the device.
	pw *power
	// hang, if set, blocks every I/O until it is closed (a member that
	// stops answering and ignores its context).
	hang chan struct{}
	// drop, if set, makes the device lie: writes it matches report success
	// and change nothing.
	drop func(off int64, n int) bool
}

var errPowerCut = errors.New("power cut")

// power counts member writes and flushes down to a cut.
type power struct {
	mu   sync.Mutex
	left int
	off  bool
}

// io reports whether the device still has power for one more I/O (count
// true for writes and flushes).
func (p *power) io(count bool) bool {
	if p == nil {
		return true
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.off {
		return false
	}
	if count {
		if p.left--; p.left <= 0 {
			p.off = true
			return false
		}
	}
	return true
}

func (p *power) cut() { p.mu.Lock(); p.off = true; p.mu.Unlock() }

type pendingWrite struct {
	off int64
	p   []byte
}

func newMem(size int64) *memDevice {
	return &memDevice{bs: 512, durable: make([]byte, size), cur: make([]byte, size)}
}

func (m *memDevice) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	m.waitHang()
	if m.delay > 0 {
		time.Sleep(m.delay)
	}
	if !m.pw.io(false) {
		return 0, errPowerCut
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failed {
		return 0, errInjected
	}
	if off < 0 || off+int64(len(p)) > int64(len(m.cur)) {
		return 0, blockdev.ErrOutOfRange
	}
	n := copy(p, m.cur[off:])
	if m.garbage {
		for i := range p {
			p[i] ^= 0x5a
		}
	}
	if m.short {
		return n / 2, nil
	}
	return n, nil
}

func (m *memDevice) WriteAt(ctx context.Context, p []byte, off int64) (int, error) {
	m.waitHang()
	if m.delay > 0 {
		time.Sleep(m.delay)
	}
	if !m.pw.io(true) {
		return 0, errPowerCut
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failed {
		return 0, errInjected
	}
	if off < 0 || off+int64(len(p)) > int64(len(m.cur)) {
		return 0, blockdev.ErrOutOfRange
	}
	if m.failAfter > 0 {
		if m.failAfter--; m.failAfter == 0 {
			m.failed = true
			return 0, errInjected
		}
	}
	if m.drop != nil && m.drop(off, len(p)) {
		return len(p), nil
	}
	copy(m.cur[off:], p)
	m.pending = append(m.pending, pendingWrite{off, append([]byte(nil), p...)})
	return len(p), nil
}

func (m *memDevice) waitHang() {
	m.mu.Lock()
	h := m.hang
	m.mu.Unlock()
	if h != nil {
		<-h
	}
}

func (m *memDevice) Flush(ctx context.Context) error {
	m.waitHang()
	if err := ctx.Err(); err != nil {
		return err // as a remote member would: the request was abandoned
	}
	if !m.pw.io(true) {
		return errPowerCut
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failed {
		return errInjected
	}
	copy(m.durable, m.cur)
	m.pending = nil
	return nil
}

// crash simulates power loss: of the unflushed writes, only those for
// which keep returns true reach the medium (in order); the rest are lost.
func (m *memDevice) crash(keep func() bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, w := range m.pending {
		if keep() {
			copy(m.durable[w.off:], w.p)
		}
	}
	m.pending = nil
	copy(m.cur, m.durable)
}

func (m *memDevice) setFailed(v bool) { m.mu.Lock(); m.failed = v; m.mu.Unlock() }
func (m *memDevice) Size() int64      { return int64(len(m.cur)) }
func (m *memDevice) BlockSize() int   { return m.bs }
func (m *memDevice) Close() error     { return nil }

// reopen returns a fresh handle on the same durable medium (after crash).
func (m *memDevice) reopen() *memDevice {
	m.mu.Lock()
	defer m.mu.Unlock()
	return &memDevice{bs: m.bs, durable: m.durable, cur: append([]byte(nil), m.durable...)}
}
