package drivertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

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

	cmd  *exec.Cmd
	log  *os.File
	done chan error
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
	ready := filepath.Join(data, ".ready.json")
	logf, err := os.CreateTemp("", "tristore-bench-serve-*.log")
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "serve", "--data", data, "--s3-addr", "127.0.0.1:0", "--nfs-addr", "127.0.0.1:0",
		"--iscsi-addr", "127.0.0.1:0", "--admin-addr", "off", "--access-key", AccessKey, "--secret-key", SecretKey,
		"--ready-file", ready, "--log-level", "warn")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		logf.Close()
		os.Remove(logf.Name())
		return nil, err
	}
	s := &Server{Data: data, cmd: cmd, log: logf, done: make(chan error, 1)}
	go func() { s.done <- cmd.Wait() }()
	var addrs map[string]string
	for deadline := time.Now().Add(30 * time.Second); ; {
		if b, err := os.ReadFile(ready); err == nil && json.Unmarshal(b, &addrs) == nil && addrs["s3"] != "" && addrs["nfs"] != "" && addrs["iscsi"] != "" {
			break
		}
		select {
		case err := <-s.done:
			s.done <- err
			b, _ := os.ReadFile(logf.Name())
			s.Stop()
			return nil, fmt.Errorf("tristore serve exited: %v\n%s", err, b)
		default:
		}
		if time.Now().After(deadline) {
			s.Stop()
			return nil, errors.New("tristore serve did not write its ready file within 30s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	os.Remove(ready)
	s.S3Addr = addrs["s3"]
	s.S3 = "s3://" + addrs["s3"] + "/bench"
	s.NFS = "nfs://" + addrs["nfs"] + "/"
	s.ISCSI = "iscsi://" + addrs["iscsi"] + "/iqn.2026-11.io.tristore:vols:bench/0"
	return s, nil
}

// Stop ends serve (SIGTERM, then SIGKILL after 20 s) and removes its log.
func (s *Server) Stop() error {
	defer func() {
		s.log.Close()
		os.Remove(s.log.Name())
	}()
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-s.done:
		s.done <- err
		return nil
	case <-time.After(20 * time.Second):
		s.cmd.Process.Kill()
		<-s.done
		return errors.New("tristore serve did not stop within 20s")
	}
}

// Log returns what serve printed so far (for failure messages).
func (s *Server) Log() string {
	b, _ := os.ReadFile(s.log.Name())
	return string(b)
}
