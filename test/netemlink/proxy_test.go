package netemlink

import (
	"bufio"
	"io"
	"net"
	"os/exec"
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
	cmd := exec.Command(binPath, "netem", "proxy", "--listen", "127.0.0.1:0", "--target", ln.Addr().String(), "--delay", "10ms", "--loss", "0.1%")
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait(); pw.Close() }()
	defer func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-done
		}
	}()
	var out strings.Builder
	addrc := make(chan string, 1)
	re := regexp.MustCompile(`listening on (\S+) ->`)
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			out.WriteString(sc.Text() + "\n")
			if m := re.FindStringSubmatch(sc.Text()); m != nil {
				addrc <- m[1]
			}
		}
	}()
	var addr string
	select {
	case addr = <-addrc:
	case <-time.After(30 * time.Second):
		t.Fatal("proxy did not start")
	}
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
	cmd.Process.Signal(syscallSIGTERM)
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("proxy ignored SIGTERM")
	}
	<-scanned
	for _, want := range []string{"NO real packet loss", "IGNORED", "delivered"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("output lacks %q:\n%s", want, out.String())
		}
	}
}
