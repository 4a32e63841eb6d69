package lab

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"time"

	"github.com/tristore/tristore/internal/serveproc"
)

// server is a child `tristore serve` with S3, NFS and iSCSI on 127.0.0.1
// over a fresh data directory holding the volume vols/lab. It is a child
// process, not goroutines of the lab, so the server's CPU is its own (as a
// real server's would be) and stopping it cannot leave state in the lab.
type server struct {
	data      string
	s3, nfs   string
	iscsi     string
	accessKey string
	secretKey string

	proc *serveproc.Proc
}

// volumeSize is the LUN of the lab's volume: room for the raw-iSCSI
// suites' file regions and the clients suite's shares at lab scales.
const volumeSize = "512Mi"

// startServer runs bin serve over a new data directory under tmp.
func startServer(ctx context.Context, bin, tmp string) (*server, error) {
	data, err := os.MkdirTemp(tmp, "data-")
	if err != nil {
		return nil, err
	}
	if out, err := exec.CommandContext(ctx, bin, "volume", "create", "--data", data, "vols/lab", volumeSize).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("volume create: %v: %s", err, out)
	}
	s := &server{data: data, accessKey: "LAB" + randomHex(8), secretKey: randomHex(20)}
	// Credentials through the environment, not the command line (ps).
	// Its own process group: a Ctrl-C on the terminal reaches the lab
	// only, which lets the running suite clean up through the server
	// first and then stops it.
	p, err := serveproc.Start(ctx, serveproc.Options{Bin: bin, Data: data, On: []string{"s3", "nfs", "iscsi"}, Dir: tmp,
		Args: []string{"--log-level", "warn"}, Env: []string{"TRISTORE_ACCESS_KEY=" + s.accessKey, "TRISTORE_SECRET_KEY=" + s.secretKey},
		Ready: 30 * time.Second, OwnGroup: true})
	if err != nil {
		return nil, err
	}
	s.proc = p
	s.s3 = "s3://" + p.Addrs["s3"] + "/lab"
	s.nfs = "nfs://" + p.Addrs["nfs"] + "/"
	s.iscsi = "iscsi://" + p.Addrs["iscsi"] + "/iqn.2026-11.io.tristore:vols:lab/0"
	return s, nil
}

// target returns the URL of one kind of target on this server.
func (s *server) target(kind string) string {
	switch kind {
	case "s3":
		return s.s3
	case "nfs":
		return s.nfs
	case "iscsi":
		return s.iscsi
	case "ext4+iscsi":
		return "ext4+" + s.iscsi
	}
	return ""
}

// stop ends serve (SIGTERM, SIGKILL after 30 s) and waits for it.
func (s *server) stop() error {
	if s == nil || s.proc == nil {
		return nil
	}
	if !s.proc.Stop() {
		return errors.New("tristore serve did not stop within 30s (killed)")
	}
	return nil
}

// exited returns an error naming serve's exit if it has exited (a suite
// failure caused by the server's exit names it), nil while it runs.
func (s *server) exited() error { return s.proc.Exited() }

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
