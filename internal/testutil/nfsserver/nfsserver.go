// Package nfsserver starts tristore's NFS front end (frontend/nfs)
// in-process for tests that talk to it from outside: exports of a data
// directory, served on 127.0.0.1 until the test ends, and stopped and
// started again on the same address for tests of a server outage or
// reboot. (frontend/nfs's own tests cannot import it: that would be an
// import cycle.)
package nfsserver

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/tristore/tristore/frontend/nfs"
)

// Config says what to serve.
type Config struct {
	// Dir is the data directory (default: a t.TempDir()).
	Dir string
	// Exports in the --nfs-export syntax (nfs.ParseExport); none: the
	// front end's default export.
	Exports []string
	// Addr to listen on (default 127.0.0.1:0).
	Addr string
}

// stopWithin bounds the wait for a stopped server's Serve to return.
const stopWithin = 30 * time.Second

// Server is a running NFS front end.
type Server struct {
	Addr    string // host:port it listens on (the same across Start)
	Port    int
	Dir     string
	exports []nfs.Export
	srv     *nfs.Server
	served  chan error
}

// Start serves c until the test ends; t.Cleanup stops the server
// (bounded, an error if it does not stop).
func Start(t testing.TB, c Config) *Server {
	t.Helper()
	if c.Dir == "" {
		c.Dir = t.TempDir()
	}
	if c.Addr == "" {
		c.Addr = "127.0.0.1:0"
	}
	s := &Server{Dir: c.Dir, Addr: c.Addr}
	for _, e := range c.Exports {
		ex, err := nfs.ParseExport(e)
		if err != nil {
			t.Fatal(err)
		}
		s.exports = append(s.exports, ex)
	}
	s.Start(t)
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Error(err)
		}
	})
	return s
}

// Start serves again on s.Addr (a new nfs.Server over the same data
// directory: a server reboot, new write verifier) after Stop; nothing
// if it runs. Binding the port just given up can race the old socket's
// teardown, so the listen is retried for up to 5 s.
func (s *Server) Start(t testing.TB) {
	t.Helper()
	if s.srv != nil {
		return
	}
	srv, err := nfs.New(nfs.Options{DataDir: s.Dir, Exports: s.exports, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatalf("frontend/nfs.New: %v", err)
	}
	var ln net.Listener
	for i := 0; i < 50; i++ {
		if ln, err = net.Listen("tcp", s.Addr); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		srv.Close()
		t.Fatalf("listen %s: %v", s.Addr, err)
	}
	s.srv, s.served = srv, make(chan error, 1)
	s.Addr = ln.Addr().String()
	s.Port = ln.Addr().(*net.TCPAddr).Port
	go func() { s.served <- srv.Serve(context.Background(), ln) }()
}

// Stop stops the server (Close: listeners, connections, exports) and
// waits, at most 30 s, for it to finish; nothing if it is stopped.
func (s *Server) Stop() error {
	if s.srv == nil {
		return nil
	}
	s.srv.Close()
	s.srv = nil
	select {
	case <-s.served:
		return nil
	case <-time.After(stopWithin):
		return fmt.Errorf("nfsserver: the NFS server on %s did not stop within %v", s.Addr, stopWithin)
	}
}

// Restart is Stop and Start: a server reboot on the same address.
func (s *Server) Restart(t testing.TB) {
	t.Helper()
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	s.Start(t)
}
