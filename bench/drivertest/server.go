package drivertest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/tristore/tristore/internal/serveproc"
	"github.com/tristore/tristore/internal/testutil"
)

// Credentials of the loopback server's admin user.
const (
	AccessKey = "TRISTOREBENCHTEST001"
	SecretKey = "tristore-bench-test-secret-0001"
)

// Server is a `tristore serve` with S3, NFS and iSCSI on 127.0.0.1 over a
// fresh data directory holding the volume vols/bench (VolumeSize bytes).
type Server struct {
	Data   string // the data directory (the store's tree)
	S3     string // s3://127.0.0.1:P/bench  (bucket created by the driver)
	S3Addr string
	NFS    string // nfs://127.0.0.1:P/
	ISCSI  string // iscsi://127.0.0.1:P/iqn.2026-11.io.tristore:vols:bench/0

	proc *serveproc.Proc
	dir  string // the ready file, log and config (removed by Stop)
}

// VolumeSize is the LUN size of Serve's volume.
const VolumeSize = 256 << 20

// Serve builds the tristore binary (once per test binary) and runs serve
// until the test ends. The package's TestMain should be testutil.Main.
func Serve(t testing.TB) *Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	s, err := Start(ctx, testutil.TristoreBin(ctx, t), t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := s.Stop(); err != nil {
			t.Error(err)
		}
	})
	return s
}

// Start runs bin serve over data (a new, empty directory) holding the
// volume vols/bench. Stop ends it. For test binaries that share one server
// among tests (started lazily, stopped in TestMain).
func Start(ctx context.Context, bin, data string) (*Server, error) {
	if out, err := exec.CommandContext(ctx, bin, "volume", "create", "--data", data, "vols/bench", "256Mi").CombinedOutput(); err != nil {
		return nil, fmt.Errorf("volume create: %v\n%s", err, out)
	}
	dir, err := os.MkdirTemp("", "tristore-bench-serve-")
	if err != nil {
		return nil, err
	}
	p, err := serveproc.Start(ctx, serveproc.Options{Bin: bin, Data: data, On: []string{"s3", "nfs", "iscsi"}, Dir: dir,
		Args: []string{"--access-key", AccessKey, "--secret-key", SecretKey, "--log-level", "warn"}, Ready: 30 * time.Second})
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	s := &Server{Data: data, proc: p, dir: dir}
	addrs := p.Addrs
	s.S3Addr = addrs["s3"]
	s.S3 = "s3://" + addrs["s3"] + "/bench"
	s.NFS = "nfs://" + addrs["nfs"] + "/"
	s.ISCSI = "iscsi://" + addrs["iscsi"] + "/iqn.2026-11.io.tristore:vols:bench/0"
	return s, nil
}

// Stop ends serve (SIGTERM, then SIGKILL after 30 s) and removes its log.
func (s *Server) Stop() error {
	defer os.RemoveAll(s.dir)
	if !s.proc.Stop() {
		return errors.New("tristore serve did not stop within 30s (killed)")
	}
	return nil
}

// Log returns what serve printed so far (for failure messages).
func (s *Server) Log() string { return s.proc.Log() }
