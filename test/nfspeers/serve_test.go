package nfspeers

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tristore/tristore/internal/testutil"
)

// TestServeCLI runs the real `tristore serve` with NFS exports given as
// flags and talks to it with libnfs: the front end's registration, flag
// parsing and shutdown on SIGTERM.
func TestServeCLI(t *testing.T) {
	testutil.NeedCmd(t, "nfs-ls")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin := testutil.TristoreBin(ctx, t)
	data := t.TempDir()
	os.MkdirAll(filepath.Join(data, "bkt"), 0o755)
	os.WriteFile(filepath.Join(data, "bkt", "obj.txt"), []byte("object body"), 0o644)
	ready := filepath.Join(t.TempDir(), "ready.json")
	args := []string{"serve", "--data", data, "--s3-addr", "off", "--admin-addr", "off",
		"--nfs-addr", "127.0.0.1:0", "--ready-file", ready,
		"--nfs-export", "/=rw,clients=127.0.0.0/8,no_root_squash", "--nfs-export", "/bkt=ro"}
	if help, _ := exec.CommandContext(ctx, bin, "serve", "--help").CombinedOutput(); strings.Contains(string(help), "--iscsi-addr") {
		args = append(args, "--iscsi-addr", "off")
	}
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "XDG_CONFIG_HOME="+t.TempDir())
	// A file, not a pipe: Wait then returns as soon as serve exits, even if
	// something it started still holds the descriptor.
	logPath := filepath.Join(t.TempDir(), "serve.log")
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd.Stderr = logf
	stderr := logText(logPath)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// exited is closed when serve has exited (waitErr is then set); a
	// closed channel can be waited on any number of times.
	exited := make(chan struct{})
	var waitErr error
	go func() { waitErr = cmd.Wait(); close(exited) }()
	defer func() {
		select {
		case <-exited:
		default:
			cmd.Process.Kill()
			select {
			case <-exited:
			case <-time.After(30 * time.Second):
				t.Error("serve did not exit after SIGKILL")
			}
		}
	}()
	var addrs map[string]string
	for i := 0; i < 600; i++ {
		if b, err := os.ReadFile(ready); err == nil && json.Unmarshal(b, &addrs) == nil {
			break
		}
		select {
		case <-exited:
			t.Fatalf("serve exited: %v\n%s", waitErr, stderr.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	nfsAddr := addrs["nfs"]
	if nfsAddr == "" {
		t.Fatalf("no nfs address in ready file %v\n%s", addrs, stderr.String())
	}
	port := nfsAddr[strings.LastIndex(nfsAddr, ":")+1:]
	url := func(p string) string {
		return "nfs://127.0.0.1" + p + "?nfsport=" + port + "&mountport=" + port + "&version=3"
	}
	if out := run(t, "nfs-cat", url("/bkt/obj.txt")); out != "object body" {
		t.Fatalf("nfs-cat through serve: %q", out)
	}
	if out := run(t, "nfs-ls", url("/")); !strings.Contains(out, "bkt") {
		t.Fatalf("nfs-ls through serve: %q", out)
	}
	// /bkt is exported read-only: the longest matching export wins.
	src := filepath.Join(t.TempDir(), "src")
	os.WriteFile(src, []byte("x"), 0o644)
	out, err := exec.CommandContext(ctx, "nfs-cp", src, url("/bkt/new.txt")).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "NFS3ERR_ROFS") {
		t.Fatalf("write to a ro export: %v %s", err, out)
	}
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
		if waitErr != nil {
			t.Fatalf("serve after SIGTERM: %v\n%s", waitErr, stderr.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("serve did not stop on SIGTERM\n%s", stderr.String())
	}
}

type logText string

func (l logText) String() string { b, _ := os.ReadFile(string(l)); return string(b) }
