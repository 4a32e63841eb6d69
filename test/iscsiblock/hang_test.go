package iscsiblock

import (
	"bytes"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/tristore/tristore/client/iscsi"
	iscsitgt "github.com/tristore/tristore/frontend/iscsi"
)

// freezer is a TCP proxy on 127.0.0.1 whose existing connections can be
// frozen (nothing forwarded, nothing closed): a hung target or a black-holed
// path, which only the initiator's NOP-Out probes can detect.
type freezer struct {
	ln     net.Listener
	mu     sync.Mutex
	conns  []net.Conn
	frozen chan struct{} // closed on freeze
}

func newFreezer(t *testing.T, backend string) *freezer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &freezer{ln: ln, frozen: make(chan struct{})}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			b, err := net.Dial("tcp", backend)
			if err != nil {
				c.Close()
				continue
			}
			f.mu.Lock()
			gate := f.frozen
			select {
			case <-gate: // connections made after the freeze flow freely
				gate = make(chan struct{})
			default:
			}
			f.conns = append(f.conns, c, b)
			f.mu.Unlock()
			go f.pipe(c, b, gate)
			go f.pipe(b, c, gate)
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		f.mu.Lock()
		for _, c := range f.conns {
			c.Close()
		}
		f.mu.Unlock()
	})
	return f
}

func (f *freezer) pipe(dst, src net.Conn, gate chan struct{}) {
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		select {
		case <-gate:
			io.Copy(io.Discard, src) // swallow everything from now on
			return
		default:
		}
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			dst.Close()
			return
		}
	}
}

func (f *freezer) freeze() { f.mu.Lock(); close(f.frozen); f.mu.Unlock() }

// TestInitiatorHungTarget: the path to the target goes silent with a
// command in flight; NOP-Out probes notice, the session logs in again and
// the command completes.
func TestInitiatorHungTarget(t *testing.T) {
	tg := startOurs(t, 8<<20, iscsitgt.CHAPConfig{})
	px := newFreezer(t, tg.Portal)
	s := openURL(t, iscsi.Config{Portal: px.ln.Addr().String(), Target: tg.IQN, QueueDepth: 4,
		PingInterval: 200 * time.Millisecond, PingTimeout: 700 * time.Millisecond})
	ctx := testCtx(t)
	data := bytes.Repeat([]byte("hung"), 256<<10/4)
	if _, err := s.WriteAt(ctx, data, 0); err != nil {
		t.Fatal(err)
	}
	px.freeze()
	start := time.Now()
	got := make([]byte, len(data))
	if _, err := s.ReadAt(ctx, got, 0); err != nil {
		t.Fatalf("read across a hung connection: %v", err)
	}
	if !bytes.Equal(got, data) {
		t.Fatal("data differs after recovery")
	}
	if s.Reconnects() == 0 {
		t.Fatal("no reconnect happened")
	}
	t.Logf("recovered in %v", time.Since(start))
}
