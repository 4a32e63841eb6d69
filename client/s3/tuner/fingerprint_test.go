package tuner

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"
)

// closingListener listens on 127.0.0.1 and closes every connection it
// accepts (a fingerprint only connects); closed when the test ends.
func closingListener(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	return ln
}

// TestFingerprintConnectsAtOnce: the fingerprint's three connects run at
// once, so --auto pays one round trip before a transfer, not three (on
// `realistic` 150 ms of a 6 s upload of 1,000 small files). Every connect
// here takes 200 ms: together 0.2 s, one after another 0.6 s.
func TestFingerprintConnectsAtOnce(t *testing.T) {
	ln := closingListener(t)
	const delay = 200 * time.Millisecond
	slow := func(ctx context.Context, network, addr string) (net.Conn, error) {
		time.Sleep(delay)
		return (&net.Dialer{}).DialContext(ctx, network, addr)
	}
	ep := "http://" + ln.Addr().String()
	start := time.Now()
	_, _, err := Fingerprint(context.Background(), ep, Up, slow)
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	if took >= 2*delay {
		t.Errorf("fingerprint took %v with %v per connect: the connects ran one after another", took, delay)
	}
	// A refused connect is an error naming the endpoint.
	ln.Close()
	if _, _, err := Fingerprint(context.Background(), ep, Up, nil); err == nil || !strings.Contains(err.Error(), ep) {
		t.Errorf("closed endpoint: %v", err)
	}
}

// TestFingerprintIgnoresSchedulingDelay: the round trip is the kernel's
// (TCP_INFO), not the connect's wall time, so a process that runs late
// after its connects (a loaded machine: loopback connects took over 2 ms
// now and then, TestTuneCycle then found no profile under the new
// fingerprint) keeps its fingerprint. Here every connect returns 5 ms late.
func TestFingerprintIgnoresSchedulingDelay(t *testing.T) {
	ln := closingListener(t)
	late := func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		time.Sleep(5 * time.Millisecond)
		return c, err
	}
	ep := "http://" + ln.Addr().String()
	fast, fastDesc, err := Fingerprint(context.Background(), ep, Down, nil)
	if err != nil {
		t.Fatal(err)
	}
	slow, slowDesc, err := Fingerprint(context.Background(), ep, Down, late)
	if err != nil {
		t.Fatal(err)
	}
	if fast != slow || !strings.Contains(slowDesc, "rtt <2ms") {
		t.Errorf("connects returned 5 ms late: %s (%s), on time: %s (%s)", slow, slowDesc, fast, fastDesc)
	}
}
