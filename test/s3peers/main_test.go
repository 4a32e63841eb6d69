// Package s3peers drives tristore's S3 front end with real clients:
// aws-sdk-go-v2 (incl. its upload manager and presigning), minio-go,
// boto3 and rclone, against a server on 127.0.0.1:0 over the embedded
// posix store.
package s3peers

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

const (
	rootAK = "TRISTORETESTROOT0001"
	rootSK = "tristore-test-root-secret-0001"
)

// server is a running S3 front end for one test.
type server struct {
	endpoint string // http://127.0.0.1:port
	addr     string
	dir      string
	users    *iam.Store
}

// startServer runs frontend/s3 over posix.Open(tempdir) with the real
// SigV4 verifier, iam users (root: rootAK/rootSK) and authz.
func startServer(t *testing.T, anonymous bool, mods ...func(*s3.Options)) *server {
	t.Helper()
	return startServerIn(t, t.TempDir(), anonymous, mods...)
}

// startServerAt serves the data directory dir (e.g. a small tmpfs).
func startServerAt(t *testing.T, dir string) *server {
	t.Helper()
	return startServerIn(t, dir, false)
}

func startServerIn(t *testing.T, dir string, anonymous bool, mods ...func(*s3.Options)) *server {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := posix.Open(dir, posix.Options{Log: log})
	if err != nil {
		t.Fatal(err)
	}
	users, err := iam.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := users.EnsureRoot(rootAK, rootSK); err != nil {
		t.Fatal(err)
	}
	opts := s3.Options{Log: log, AllowAnonymous: anonymous,
		Auth: s3.NewSigV4Auth(users, "us-east-1"), Authz: s3.NewPolicyAuthz()}
	for _, m := range mods {
		m(&opts)
	}
	srv, err := s3.New(st, opts)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Error("server did not stop")
		}
		st.Close()
	})
	return &server{endpoint: "http://" + ln.Addr().String(), addr: ln.Addr().String(), dir: dir, users: users}
}
