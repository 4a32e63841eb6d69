package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestServeWarnsNotBuckets: `tristore serve` over an existing tree says once,
// in its log, which top-level directories S3 will not show (names that
// cannot be buckets), bounded to the first names plus a count, with the
// rule; valid names (adopted as buckets) are not listed.
func TestServeWarnsNotBuckets(t *testing.T) {
	data := t.TempDir()
	bad := []string{"b", "My Photos", "UPPER"}
	for i := 0; i < 10; i++ {
		bad = append(bad, fmt.Sprintf("x_%d", i))
	}
	for _, d := range append([]string{"existing", "photos.2026"}, bad...) {
		if err := os.Mkdir(filepath.Join(data, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(data, "readme.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}

	ready := filepath.Join(t.TempDir(), "ready.json")
	root := NewRoot()
	root.SetArgs([]string{"serve", "--data", data, "--s3-addr", "127.0.0.1:0", "--nfs-addr", "off", "--iscsi-addr", "off",
		"--admin-addr", "off", "--access-key", "testkey1", "--secret-key", "testsecret12345678", "--ready-file", ready})
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	for deadline := time.Now().Add(30 * time.Second); ; {
		var addrs map[string]string
		if b, err := os.ReadFile(ready); err == nil && json.Unmarshal(b, &addrs) == nil && addrs["s3"] != "" {
			break
		}
		if time.Now().After(deadline) {
			cancel()
			t.Fatal("serve not ready within 30 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("serve: %v\n%s", err, out.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop")
	}
	log := out.String()

	var warn string
	for _, line := range strings.Split(log, "\n") {
		if strings.Contains(line, "not valid bucket names") {
			if warn != "" {
				t.Fatalf("warning logged more than once:\n%s", log)
			}
			warn = line
		}
	}
	if warn == "" {
		t.Fatalf("no warning about directories that cannot be buckets:\n%s", log)
	}
	for _, want := range []string{"level=WARN", "count=13", `\"My Photos\"`, `\"UPPER\"`, `\"b\"`, `\"x_6\" ...`, "3-63 characters"} {
		if !strings.Contains(warn, want) {
			t.Errorf("warning lacks %q: %s", want, warn)
		}
	}
	for _, not := range []string{"existing", "photos.2026", "x_7", ".tristore"} {
		if strings.Contains(warn, not) {
			t.Errorf("warning names %q, which it should not: %s", not, warn)
		}
	}
	if !strings.Contains(log, "top-level files are not visible over S3") || !strings.Contains(log, "readme.txt") {
		t.Errorf("no warning about the top-level file:\n%s", log)
	}
}
