package netem

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"io"
	"net"
	"testing"
	"time"
)

// startProxy runs a proxy in front of an echo-or-sink server on 127.0.0.1.
func startProxy(t *testing.T, cfg Config, serve func(net.Conn)) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for i := 0; i < 100; i++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); serve(c) }()
		}
	}()
	p, err := NewProxy("127.0.0.1:0", ln.Addr().String(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- p.Serve(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("proxy Serve: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("proxy did not stop")
		}
	})
	return p
}

func TestProxyDelayAndIntegrity(t *testing.T) {
	p := startProxy(t, Symmetric(Dir{Delay: 20 * time.Millisecond}), func(c net.Conn) { io.Copy(c, c) })
	c, err := net.Dial("tcp", p.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	buf := make([]byte, 1)
	var best time.Duration = time.Hour
	for i := 0; i < 5; i++ {
		start := time.Now()
		if _, err := c.Write([]byte{byte(i)}); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, buf); err != nil || buf[0] != byte(i) {
			t.Fatalf("echo: %v %v", buf, err)
		}
		best = min(best, time.Since(start))
	}
	// 20 ms each way: the round trip cannot be shorter than 40 ms.
	if best < 40*time.Millisecond || best > 2*time.Second {
		t.Errorf("round trip %v, want >= 40ms", best)
	}
	// A larger echo arrives intact and in order.
	data := make([]byte, 1<<20)
	rand.Read(data)
	errc := make(chan error, 1)
	go func() { _, err := c.Write(data); errc <- err }()
	got := make([]byte, len(data))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, data) {
		t.Fatal("echoed data differs")
	}
}

func TestProxyRateLimits(t *testing.T) {
	const size = 1 << 20
	// 16 Mbit/s = 2 MB/s: 1 MiB takes at least ~0.5 s.
	p := startProxy(t, Symmetric(Dir{Rate: 16e6, Delay: 2 * time.Millisecond}), func(c net.Conn) {
		c.Write(make([]byte, size))
	})
	c, err := net.Dial("tcp", p.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(60 * time.Second))
	start := time.Now()
	n, err := io.Copy(io.Discard, c)
	el := time.Since(start)
	if err != nil || n != size {
		t.Fatalf("read %d, %v", n, err)
	}
	if el < 450*time.Millisecond {
		t.Errorf("1 MiB at 16 Mbit/s took %v; the rate limit is not applied", el)
	}
	cs := p.Counters()
	if cs.Down.Bytes != size || cs.Down.DeliveredBytes != size {
		t.Errorf("counters %+v", cs.Down)
	}
}

func TestProxyRefusesBadConfig(t *testing.T) {
	if _, err := NewProxy("127.0.0.1:0", "127.0.0.1:1", Symmetric(Dir{Loss: 2})); !errors.Is(err, ErrInvalid) {
		t.Errorf("loss 2 accepted: %v", err)
	}
	if _, err := NewProxy("127.0.0.1:0", "nohostport", Config{}); !errors.Is(err, ErrInvalid) {
		t.Errorf("bad target accepted: %v", err)
	}
}
