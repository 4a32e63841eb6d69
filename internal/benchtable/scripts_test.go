package main

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestScriptsFailWithoutPeer runs each benchmark script with a PATH that
// has the shell, go and a few basics but none of the peers: each must stop
// at once with a non-zero status, name the missing tool, and leave no raw
// file. (scripts/bench/s3.sh used to print "skipped" and exit 0, so a
// table could silently lose a peer.)
func TestScriptsFailWithoutPeer(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	for _, c := range []string{"bash", "dirname", "id", "go", "cat", "env"} {
		p, err := exec.LookPath(c)
		if err != nil {
			t.Fatalf("%s: %v", c, err)
		}
		if err := os.Symlink(p, filepath.Join(bin, c)); err != nil {
			t.Fatal(err)
		}
	}
	rawDir := t.TempDir()
	for script, missing := range map[string]string{
		"s3.sh":              "versitygw",
		"iscsi-initiator.sh": "tgtd",
		"nfs.sh":             "ganesha.nfsd",
		"netem.sh":           "iperf3",
	} {
		t.Run(script, func(t *testing.T) {
			if script != "s3.sh" && os.Geteuid() != 0 {
				// The root check comes first and fails just as clearly.
				missing = "needs root"
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			cmd := exec.CommandContext(ctx, filepath.Join(bin, "bash"), filepath.Join(root, "scripts/bench", script))
			cmd.Dir = root
			// GOPATH and BENCH_DIR in temp dirs: s3.sh also looks in
			// $GOPATH/bin, and must not touch /var/tmp for this.
			cmd.Env = []string{"PATH=" + bin, "HOME=" + quietHome(t), "GOPATH=" + t.TempDir(),
				"GOCACHE=" + t.TempDir(), "BENCH_RAW_DIR=" + rawDir, "BENCH_DIR=" + t.TempDir()}
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			if ctx.Err() != nil {
				t.Fatalf("still running after 30 s; stderr:\n%s", stderr.String())
			}
			if err == nil {
				t.Fatalf("exit status 0 without %s; stderr:\n%s", missing, stderr.String())
			}
			if !strings.Contains(stderr.String(), missing) {
				t.Errorf("stderr does not name %q:\n%s", missing, stderr.String())
			}
		})
	}
	if ents, _ := os.ReadDir(rawDir); len(ents) > 0 {
		t.Errorf("a failed run left raw files: %v", ents)
	}
}

// quietHome is a HOME for a script that runs the go command: Go telemetry
// is off in it (the mode file go telemetry off writes), since a telemetry
// child of go outliving the script wrote into t.TempDir() while its
// cleanup ran ("directory not empty"). It is removed best effort.
func quietHome(t *testing.T) string {
	t.Helper()
	home, err := os.MkdirTemp("", "benchtable-home-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for i := 0; i < 5 && os.RemoveAll(home) != nil; i++ {
			time.Sleep(200 * time.Millisecond)
		}
	})
	dir := filepath.Join(home, ".config", "go", "telemetry")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "mode"), []byte("off"), 0o644); err != nil {
		t.Fatal(err)
	}
	return home
}
