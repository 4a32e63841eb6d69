package lab

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
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

	cmd  *exec.Cmd
	log  string
	done chan error
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
	s := &server{data: data, accessKey: "LAB" + randomHex(8), secretKey: randomHex(20), log: filepath.Join(tmp, "serve.log"),
		done: make(chan error, 1)}
	logf, err := os.Create(s.log)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	ready := filepath.Join(tmp, "ready.json")
	cmd := exec.Command(bin, "serve", "--data", data, "--s3-addr", "127.0.0.1:0", "--nfs-addr", "127.0.0.1:0",
		"--iscsi-addr", "127.0.0.1:0", "--admin-addr", "off", "--ready-file", ready, "--log-level", "warn")
	// Credentials through the environment, not the command line (ps).
	cmd.Env = append(os.Environ(), "TRISTORE_ACCESS_KEY="+s.accessKey, "TRISTORE_SECRET_KEY="+s.secretKey)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own process group: a Ctrl-C on the terminal reaches the lab only,
	// which lets the running suite clean up through the server first and
	// then stops it.
	// Pdeathsig: a lab killed with SIGKILL cannot stop its server, so the
	// kernel does (the starting goroutine is not locked to its thread, so
	// the thread lives as long as the process).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s.cmd = cmd
	go func() { s.done <- cmd.Wait() }()
	var addrs map[string]string
	for deadline := time.Now().Add(30 * time.Second); ; {
		if b, err := os.ReadFile(ready); err == nil && json.Unmarshal(b, &addrs) == nil && addrs["s3"] != "" && addrs["nfs"] != "" && addrs["iscsi"] != "" {
			break
		}
		select {
		case err := <-s.done:
			s.done <- err
			return nil, fmt.Errorf("tristore serve exited: %v: %s", err, s.logTail())
		case <-ctx.Done():
			s.stop()
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, errors.New("tristore serve did not write its ready file within 30s")
		}
	}
	os.Remove(ready)
	s.s3 = "s3://" + addrs["s3"] + "/lab"
	s.nfs = "nfs://" + addrs["nfs"] + "/"
	s.iscsi = "iscsi://" + addrs["iscsi"] + "/iqn.2026-11.io.tristore:vols:lab/0"
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

// stop ends serve (SIGTERM, SIGKILL after 20 s) and waits for it.
func (s *server) stop() error {
	if s == nil || s.cmd == nil {
		return nil
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-s.done:
		s.done <- err
		return nil
	case <-time.After(20 * time.Second):
		s.cmd.Process.Kill()
		<-s.done
		return errors.New("tristore serve did not stop within 20s (killed)")
	}
}

// alive reports whether serve is still running (a suite failure caused by
// the server's exit names it).
func (s *server) exited() error {
	select {
	case err := <-s.done:
		s.done <- err
		if err == nil {
			err = errors.New("exit status 0")
		}
		return fmt.Errorf("tristore serve exited (%v): %s", err, s.logTail())
	default:
		return nil
	}
}

func (s *server) logTail() string {
	b, _ := os.ReadFile(s.log)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
