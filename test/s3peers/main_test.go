// Package s3peers drives tristore's S3 front end with real clients:
// aws-sdk-go-v2 (incl. its upload manager and presigning), minio-go,
// boto3 and rclone, against a server on 127.0.0.1:0 over the embedded
// posix store.
package s3peers

import (
	"testing"

	"github.com/tristore/tristore/frontend/s3"
	"github.com/tristore/tristore/iam"
	"github.com/tristore/tristore/internal/testutil/s3server"
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
	sv := s3server.Start(t, s3server.Config{Dir: dir, AccessKey: rootAK, SecretKey: rootSK, Anonymous: anonymous, Mods: mods})
	return &server{endpoint: sv.Endpoint, addr: sv.Addr, dir: dir, users: sv.Users}
}
