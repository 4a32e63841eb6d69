package iscsi

import (
	"bytes"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// gateConn is a net.Conn whose writes are recorded; the first write blocks
// until gate is closed.
type gateConn struct {
	net.Conn // nil: only Write is used
	gate     chan struct{}
	entered  chan struct{}
	mu       sync.Mutex
	buf      bytes.Buffer
	sizes    []int
	writes   atomic.Int64
}

func (g *gateConn) Write(b []byte) (int, error) {
	if g.writes.Add(1) == 1 {
		close(g.entered)
		<-g.gate
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.sizes = append(g.sizes, len(b))
	return g.buf.Write(b)
}

// TestConnGroupCommit: PDUs written while a write is in progress are
// queued (numbered in queue order by prepare) and their writers return at
// once; the flusher then sends all of them in one write, in order. A large
// PDU waits for the flush and keeps its place.
func TestConnGroupCommit(t *testing.T) {
	g := &gateConn{gate: make(chan struct{}), entered: make(chan struct{})}
	c := NewConn(g)
	var sn uint32
	prepare := func(p *PDU) { p.StatSN = sn; sn++ }
	resp := func(itt uint32) *PDU {
		return &PDU{Opcode: OpSCSIResponse, Final: true, ITT: itt, Response: RespCompleted}
	}
	first := make(chan error, 1)
	go func() { first <- c.WritePDUFunc(resp(0), prepare) }()
	<-g.entered // the first writer is the flusher, blocked in write(2)
	const n = 20
	done := make(chan error, n)
	for i := 1; i <= n; i++ {
		go func() { done <- c.WritePDUFunc(resp(uint32(i)), prepare) }()
	}
	for i := 0; i < n; i++ {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%d of %d writers still blocked behind a write in progress", n-i, n)
		}
	}
	// One more small PDU queued without a flush, then a large one: it
	// waits for the flush in progress and goes out after everything queued.
	big := &PDU{Opcode: OpDataIn, ITT: 99, TTT: ReservedTag, Data: bytes.Repeat([]byte{7}, writevThreshold+3)}
	if err := c.QueuePDUFunc(resp(n+1), prepare); err != nil {
		t.Fatal(err)
	}
	bigDone := make(chan error, 1)
	go func() { bigDone <- c.WritePDUFunc(big, prepare) }()
	select {
	case <-bigDone:
		t.Fatal("a large PDU was written while another write was in progress")
	case <-time.After(50 * time.Millisecond):
	}
	close(g.gate)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := <-bigDone; err != nil {
		t.Fatal(err)
	}
	if err := c.Drain(); err != nil {
		t.Fatal(err)
	}
	// The second write carries the n+1 queued responses (48 bytes each);
	// the large PDU follows (header, data, padding: separate writes on a
	// conn without writev).
	if len(g.sizes) < 2 || g.sizes[1] != (n+1)*BHSLen {
		t.Errorf("write sizes %v: want the %d queued PDUs in the second write (%d bytes)", g.sizes, n+1, (n+1)*BHSLen)
	}
	r := bytes.NewReader(g.buf.Bytes())
	for i := uint32(0); i <= n+2; i++ {
		p, err := ReadPDU(r, Options{})
		if err != nil {
			t.Fatalf("PDU %d: %v", i, err)
		}
		if p.StatSN != i {
			t.Fatalf("PDU %d has StatSN %d: numbers out of wire order", i, p.StatSN)
		}
		if i == n+2 && (p.ITT != 99 || !bytes.Equal(p.Data, big.Data)) {
			t.Fatalf("last PDU is ITT %d with %d bytes, want the large Data-In", p.ITT, len(p.Data))
		}
	}
	if r.Len() != 0 {
		t.Fatalf("%d bytes after the last PDU", r.Len())
	}
}

// TestConnQueueFlush: queued PDUs are not written until Flush, and then in
// one write; PDUBuffered tells a complete buffered PDU from a partial one.
func TestConnQueueFlush(t *testing.T) {
	g := &gateConn{gate: make(chan struct{}), entered: make(chan struct{})}
	close(g.gate)
	c := NewConn(g)
	for i := 0; i < 5; i++ {
		if err := c.QueuePDUFunc(&PDU{Opcode: OpNOPIn, Final: true, ITT: uint32(i), TTT: ReservedTag, Data: []byte("ping")}, nil); err != nil {
			t.Fatal(err)
		}
	}
	if w := g.writes.Load(); w != 0 {
		t.Fatalf("%d writes before Flush", w)
	}
	if err := c.Flush(); err != nil {
		t.Fatal(err)
	}
	if w := g.writes.Load(); w != 1 {
		t.Fatalf("%d writes for 5 queued PDUs, want 1", w)
	}
	wire := g.buf.Bytes()
	one := len(wire) / 5
	for _, tc := range []struct {
		n    int
		want bool
	}{{0, false}, {BHSLen, false}, {one - 1, false}, {one, true}, {one + 10, true}} {
		a, b := net.Pipe()
		go func() { b.Write(wire[:tc.n]); b.Close() }()
		rc := NewConn(a)
		// fill the read buffer with what was sent
		for rc.br.Buffered() < tc.n {
			if _, err := rc.br.Peek(rc.br.Buffered() + 1); err != nil {
				break
			}
		}
		if got := rc.PDUBuffered(); got != tc.want {
			t.Errorf("%d of %d bytes buffered: PDUBuffered = %v, want %v", tc.n, one, got, tc.want)
		}
		a.Close()
	}
}
