package tuner

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"
)

// TestFingerprintConnectsAtOnce: the fingerprint's three connects run at
// once, so --auto pays one round trip before a transfer, not three (on
// `realistic` 150 ms of a 6 s upload of 1,000 small files). Every connect
// here takes 200 ms: together 0.2 s, one after another 0.6 s.
func TestFingerprintConnectsAtOnce(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	const delay = 200 * time.Millisecond
	slow := func(ctx context.Context, network, addr string) (net.Conn, error) {
		time.Sleep(delay)
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}
	ep := "http://" + ln.Addr().String()
	start := time.Now()
	_, desc, err := Fingerprint(context.Background(), ep, Up, slow)
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if took >= 2*delay {
		t.Errorf("fingerprint took %v with %v per connect: the connects ran one after another", took, delay)
	}
	if !strings.Contains(desc, "rtt 20-200ms") && !strings.Contains(desc, "rtt >200ms") {
		t.Errorf("desc %q: the round trip class is not the connects' %v", desc, delay)
	}
	// A refused connect is an error naming the endpoint.
	ln.Close()
	if _, _, err := Fingerprint(context.Background(), ep, Up, nil); err == nil || !strings.Contains(err.Error(), ep) {
		t.Errorf("closed endpoint: %v", err)
	}
}
