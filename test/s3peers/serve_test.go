package s3peers

import (
	"context"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/tristore/tristore/internal/testutil"
)

// served is a running `tristore serve` with S3 and the admin port.
type served struct {
	*testutil.Served
	addrs map[string]string
}

func startServe(t *testing.T, bin, data string, env []string) *served {
	t.Helper()
	sv := testutil.StartServe(t, testutil.ServeOptions{Bin: bin, Data: data, On: []string{"s3", "admin"}, Env: env})
	return &served{Served: sv, addrs: sv.Addrs}
}

// stop shuts serve down with SIGTERM and fails t unless it exits with 0.
func (s *served) stop(t *testing.T) {
	t.Helper()
	if !s.Stop() {
		t.Fatal("serve did not stop after SIGTERM")
	}
	if err := s.Err(); err != nil {
		t.Fatalf("serve exit after SIGTERM: %v\n%s", err, s.Log())
	}
}

// TestServeBinary runs the real `tristore serve`: first start generates and
// prints root keys once (saved 0600), the S3 API works with them, /healthz
// and /metrics answer, SIGTERM stops it cleanly with no temp files left,
// and a restart keeps the data and prints no keys.
func TestServeBinary(t *testing.T) {
	ctx0, cancel0 := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel0()
	bin := testutil.TristoreBin(ctx0, t)
	data := t.TempDir()
	env := []string{"TRISTORE_ACCESS_KEY=", "TRISTORE_SECRET_KEY="}
	s := startServe(t, bin, data, env)
	out := s.Log()
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
	if strings.Count(s.Log(), sk) != 1 {
		t.Fatal("secret printed more than once")
	}
	filepath.WalkDir(data, func(p string, d fs.DirEntry, err error) error {
		if err == nil && strings.HasPrefix(d.Name(), ".tristore-tmp") {
			t.Errorf("temp file left after shutdown: %s", p)
		}
		return nil
	})

	s2 := startServe(t, bin, data, env)
	if strings.Contains(s2.Log(), "secret key:") {
		t.Fatalf("restart printed keys again:\n%s", s2.Log())
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

// TestMain removes the tristore binary TestServeBinary builds.
func TestMain(m *testing.M) { testutil.Main(m) }
