package netemlink

import (
	"io"
	"net"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestProxyCommand runs `tristore netem proxy` (no root needed) in front
// of an echo server on 127.0.0.1 and checks the delay, the warning that
// it has no real loss, and a clean stop on SIGTERM.
func TestProxyCommand(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for i := 0; i < 10; i++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { defer c.Close(); io.Copy(c, c) }()
		}
	}()
	p := startTristore(t, "netem", "proxy", "--listen", "127.0.0.1:0", "--target", ln.Addr().String(), "--delay", "10ms", "--loss", "0.1%")
	re := regexp.MustCompile(`listening on (\S+) ->`)
	var addr string
	p.waitLine(t, 30*time.Second, func(l string) bool {
		if m := re.FindStringSubmatch(l); m != nil {
			addr = m[1]
		}
		return addr != ""
	})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(20 * time.Second))
	start := time.Now()
	buf := make([]byte, 5)
	if _, err := c.Write([]byte("hello")); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "hello" {
		t.Fatalf("echo %q %v", buf, err)
	}
	if rtt := time.Since(start); rtt < 20*time.Millisecond {
		t.Errorf("round trip %v through a 10 ms (each way) proxy", rtt)
	}
	c.Close()
	p.signal(t, syscallSIGTERM)
	for _, want := range []string{"NO real packet loss", "IGNORED", "delivered"} {
		if !strings.Contains(p.output(), want) {
			t.Errorf("output lacks %q:\n%s", want, p.output())
		}
	}
}
