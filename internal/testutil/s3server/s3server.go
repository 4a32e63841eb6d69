// Package s3server starts tristore's S3 front end (frontend/s3) in-process
// for tests that talk to it from outside the front end: a posix store in a
// directory, iam users with a root key, the real SigV4 verifier and the
// policy authorizer, served on 127.0.0.1 until the test ends. (frontend/s3's
// own tests cannot import it: that would be an import cycle.)
package s3server

import (
	"context"
	"io"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/tristore/tristore/frontend/s3"
	"github.com/tristore/tristore/iam"
	"github.com/tristore/tristore/store/posix"
)

// Config says what to serve.
type Config struct {
	// Dir is the data directory (default: a t.TempDir()).
	Dir string
	// AccessKey and SecretKey are the root user's keys (required).
	AccessKey, SecretKey string
	// Anonymous lets unsigned requests through (authz still applies).
	Anonymous bool
	// Listener, when set, is served instead of a new 127.0.0.1:0 listener
	// (e.g. one inside an emulated link's namespace).
	Listener net.Listener
	// Mods change the front end's options before it is built.
	Mods []func(*s3.Options)
	// Store and Users, when set, are served instead of a store and iam
	// users opened in Dir (another Server's, to serve one store on a
	// second listener); the caller keeps them open until the test ends.
	Store *posix.Backend
	Users *iam.Store
}

// Server is a running S3 front end.
type Server struct {
	Endpoint string // http://127.0.0.1:port
	Addr     string // 127.0.0.1:port
	Dir      string
	Users    *iam.Store
	Store    *posix.Backend
}

// Start serves c until the test ends; t.Cleanup stops the server (bounded)
// and closes the store if Start opened it.
func Start(t testing.TB, c Config) *Server {
	t.Helper()
	if c.Dir == "" {
		c.Dir = t.TempDir()
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, users := c.Store, c.Users
	closeStore := func() {}
	if st == nil {
		var err error
		if st, err = posix.Open(c.Dir, posix.Options{Log: log}); err != nil {
			t.Fatal(err)
		}
		closeStore = func() { st.Close() }
	}
	if users == nil {
		var err error
		if users, err = iam.Open(c.Dir); err != nil {
			closeStore()
			t.Fatal(err)
		}
		if _, _, _, err := users.EnsureRoot(c.AccessKey, c.SecretKey); err != nil {
			closeStore()
			t.Fatal(err)
		}
	}
	opts := s3.Options{Log: log, AllowAnonymous: c.Anonymous,
		Auth: s3.NewSigV4Auth(users, "us-east-1"), Authz: s3.NewPolicyAuthz()}
	for _, m := range c.Mods {
		m(&opts)
	}
	srv, err := s3.New(st, opts)
	if err != nil {
		closeStore()
		t.Fatal(err)
	}
	ln := c.Listener
	if ln == nil {
		if ln, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
			closeStore()
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("S3 server did not stop within 30 s")
		}
		closeStore()
	})
	addr := ln.Addr().String()
	return &Server{Endpoint: "http://" + addr, Addr: addr, Dir: c.Dir, Users: users, Store: st}
}
