package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// startServe runs `tristore serve` with args (plus --ready-file) in-process
// and waits, at most limit, for its ready file to name the address of the
// front end want; it returns the addresses by front end. t's cleanup stops
// serve, failing t if it does not return cleanly within limit.
func startServe(t *testing.T, want string, limit time.Duration, args ...string) map[string]string {
	t.Helper()
	ready := filepath.Join(t.TempDir(), "ready.json")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	root := NewRoot()
	root.SetArgs(append(append([]string{"serve"}, args...), "--ready-file", ready))
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	go func() { done <- root.ExecuteContext(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("serve: %v\n%s", err, out.Bytes())
			}
		case <-time.After(limit):
			t.Errorf("serve did not stop within %v", limit)
		}
	})
	var addrs map[string]string
	for deadline := time.Now().Add(limit); ; {
		if b, err := os.ReadFile(ready); err == nil && json.Unmarshal(b, &addrs) == nil && addrs[want] != "" {
			return addrs
		}
		select {
		case err := <-done:
			done <- err // for the cleanup
			t.Fatalf("serve exited: %v\n%s", err, out.Bytes())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("serve did not write its ready file within %v", limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// serveS3 runs `tristore serve` with only the S3 front end, on data (a new
// temporary directory when empty) with the keys ak/sk, and returns the
// endpoint URL.
func serveS3(t *testing.T, data, ak, sk string) string {
	t.Helper()
	if data == "" {
		data = t.TempDir()
	}
	addrs := startServe(t, "s3", 30*time.Second, "--data", data, "--s3-addr", "127.0.0.1:0", "--nfs-addr", "off",
		"--iscsi-addr", "off", "--admin-addr", "off", "--access-key", ak, "--secret-key", sk)
	return "http://" + addrs["s3"]
}
