package s3peers

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
)

// buildTristore builds cmd/tristore into a temp dir.
func buildTristore(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "tristore")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, "github.com/tristore/tristore/cmd/tristore").CombinedOutput()
	if err != nil {
		t.Fatalf("go build cmd/tristore: %v\n%s", err, out)
	}
	return bin
}

// otherFrontendsOff turns off every front end but S3 so the test does not
// depend on (or collide over) their default ports.
func otherFrontendsOff(t *testing.T, bin string) []string {
	help, err := exec.Command(bin, "serve", "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("serve --help: %v\n%s", err, help)
	}
	var args []string
	for _, p := range []string{"nfs", "iscsi", "swift"} {
		if bytes.Contains(help, []byte("--"+p+"-addr ")) {
			args = append(args, "--"+p+"-addr", "off")
		}
	}
	return args
}

// syncBuffer is a bytes.Buffer the child's output goroutine and the test share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

type served struct {
	cmd    *exec.Cmd
	stderr *syncBuffer
	addrs  map[string]string
	done   chan error
}

func startServe(t *testing.T, bin, data string, env []string) *served {
	t.Helper()
	ready := filepath.Join(t.TempDir(), "ready.json")
	args := append([]string{"serve", "--data", data, "--s3-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0", "--ready-file", ready},
		otherFrontendsOff(t, bin)...)
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	stderr := &syncBuffer{}
	cmd.Stderr = stderr
	cmd.Stdout = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	s := &served{cmd: cmd, stderr: stderr, done: make(chan error, 1)}
	go func() { s.done <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-s.done
	})
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if b, err := os.ReadFile(ready); err == nil && json.Unmarshal(b, &s.addrs) == nil && s.addrs["s3"] != "" {
			return s
		}
		select {
		case err := <-s.done:
			s.done <- err
			t.Fatalf("tristore serve exited: %v\n%s", err, stderr.String())
		case <-time.After(100 * time.Millisecond):
		}
	}
	t.Fatalf("tristore serve not ready after 60s\n%s", stderr.String())
	return nil
}

func (s *served) stop(t *testing.T) {
	t.Helper()
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case err := <-s.done:
		s.done <- err
		if err != nil {
			t.Fatalf("serve exit after SIGTERM: %v\n%s", err, s.stderr.String())
		}
	case <-time.After(40 * time.Second):
		t.Fatal("serve did not stop after SIGTERM")
	}
}

// TestServeBinary runs the real `tristore serve`: first start generates and
// prints root keys once (saved 0600), the S3 API works with them, /healthz
// and /metrics answer, SIGTERM stops it cleanly with no temp files left,
// and a restart keeps the data and prints no keys.
func TestServeBinary(t *testing.T) {
	bin := buildTristore(t)
	data := t.TempDir()
	env := []string{"TRISTORE_ACCESS_KEY=", "TRISTORE_SECRET_KEY=", "XDG_CONFIG_HOME=" + t.TempDir()}
	s := startServe(t, bin, data, env)
	out := s.stderr.String()
	var ak, sk string
	for _, line := range strings.Split(out, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "access key: "); ok {
			ak = v
		}
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "secret key: "); ok {
			sk = v
		}
	}
	if ak == "" || sk == "" {
		t.Fatalf("first start printed no keys:\n%s", out)
	}
	credFile := filepath.Join(data, ".tristore", "iam", "root-credentials")
	if fi, err := os.Stat(credFile); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("root-credentials: %v %v", fi, err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := sdkClient("http://"+s.addrs["s3"], ak, sk)
	if _, err := c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String("served")}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String("served"), Key: aws.String("a/b.txt"), Body: strings.NewReader("kept")}); err != nil {
		t.Fatal(err)
	}
	// The object is a plain file in the tree.
	if b, err := os.ReadFile(filepath.Join(data, "served", "a", "b.txt")); err != nil || string(b) != "kept" {
		t.Fatalf("object as file: %q %v", b, err)
	}
	for path, want := range map[string]string{"/healthz": "ok", "/metrics": "tristore_s3_requests_total"} {
		res, err := http.Get("http://" + s.addrs["admin"] + path)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if !strings.Contains(string(b), want) {
			t.Fatalf("%s lacks %q", path, want)
		}
	}
	s.stop(t)
	if strings.Count(s.stderr.String(), sk) != 1 {
		t.Fatal("secret printed more than once")
	}
	filepath.WalkDir(data, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), ".tristore-tmp") {
			t.Errorf("temp file left after shutdown: %s", p)
		}
		return nil
	})

	s2 := startServe(t, bin, data, env)
	if strings.Contains(s2.stderr.String(), "secret key:") {
		t.Fatalf("restart printed keys again:\n%s", s2.stderr.String())
	}
	c2 := sdkClient("http://"+s2.addrs["s3"], ak, sk)
	o, err := c2.GetObject(ctx, &awss3.GetObjectInput{Bucket: aws.String("served"), Key: aws.String("a/b.txt")})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(o.Body)
	o.Body.Close()
	if string(b) != "kept" {
		t.Fatalf("after restart: %q", b)
	}
	s2.stop(t)
}
