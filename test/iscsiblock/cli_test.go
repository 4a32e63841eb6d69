package iscsiblock

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	iscsitgt "github.com/tristore/tristore/frontend/iscsi"
	"github.com/tristore/tristore/internal/testutil"
)

// tristoreBin builds cmd/tristore once per test binary run.
func tristoreBin(t *testing.T) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	return testutil.TristoreBin(ctx, t)
}

func tristore(t *testing.T, stdin []byte, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, tristoreBin(t), args...)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "XDG_CONFIG_HOME="+t.TempDir())
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	if err := cmd.Run(); err != nil {
		t.Fatalf("tristore %s: %v\nstderr: %s", strings.Join(args, " "), err, errb.Bytes())
	}
	return out.Bytes()
}

// TestCLI drives `tristore iscsi discover|ls|write|read|bench` and
// `tristore mount iscsi://` against our target.
func TestCLI(t *testing.T) {
	testutil.NeedCmd(t, "go")
	tg := startOurs(t, 16<<20, iscsitgt.CHAPConfig{})
	portal := "iscsi://" + tg.Portal
	lunURL := portal + "/" + tg.IQN + "/0"

	if out := tristore(t, nil, "iscsi", "discover", portal); !strings.Contains(string(out), tg.IQN) {
		t.Fatalf("discover output: %s", out)
	}
	var rows []struct {
		Target string `json:"target"`
		LUN    int    `json:"lun"`
		Type   string `json:"type"`
		Size   int64  `json:"size_bytes"`
		Error  string `json:"error"`
	}
	if err := json.Unmarshal(tristore(t, nil, "iscsi", "ls", "--json", portal), &rows); err != nil {
		t.Fatal(err)
	}
	ok := false
	for _, r := range rows {
		ok = ok || r.Target == tg.IQN && r.LUN == 0 && r.Type == "disk" && r.Size == 16<<20 && r.Error == ""
	}
	if !ok {
		t.Fatalf("ls: %+v", rows)
	}

	data := make([]byte, 3<<20)
	rand.Read(data)
	tristore(t, data, "iscsi", "write", "--offset", "1MiB", lunURL)
	got := tristore(t, nil, "iscsi", "read", "--offset", "1MiB", "--length", "3MiB", lunURL)
	if !bytes.Equal(got, data) {
		t.Fatalf("read back %d bytes, differs from the %d written", len(got), len(data))
	}
	// the same range by LBA: 1 MiB = block 2048 of 512
	if got := tristore(t, nil, "iscsi", "read", "--lba", "2048", "--blocks", "6144", lunURL); !bytes.Equal(got, data) {
		t.Fatal("read by --lba/--blocks differs")
	}
	var res []struct {
		Ops  int64   `json:"ops"`
		IOPS float64 `json:"iops"`
	}
	if err := json.Unmarshal(tristore(t, nil, "iscsi", "bench", "-q", "--json", "--pattern", "randread,randwrite", "--span", "1MiB",
		"--duration", "1s", "--queue-depth", "4", lunURL), &res); err != nil {
		t.Fatal(err)
	}
	if len(res) != 2 || res[0].Ops == 0 || res[1].Ops == 0 {
		t.Fatalf("bench: %+v", res)
	}

	t.Run("mount", func(t *testing.T) {
		testutil.NeedRoot(t, "FUSE mount")
		testutil.NeedFUSE(t)
		dir := t.TempDir()
		var stderr bytes.Buffer
		cmd := exec.Command(tristoreBin(t), "mount", lunURL, dir)
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		t.Cleanup(func() {
			_ = cmd.Process.Signal(syscall.SIGKILL)
			testutil.Quiet("umount", "-l", dir)
		})
		file := filepath.Join(dir, "lun")
		deadline := time.Now().Add(60 * time.Second)
		for {
			if st, err := os.Stat(file); err == nil && st.Size() == 16<<20 {
				break
			}
			select {
			case err := <-exited:
				t.Fatalf("mount exited: %v\n%s", err, stderr.Bytes())
			case <-time.After(100 * time.Millisecond):
			}
			if time.Now().After(deadline) {
				t.Fatalf("mount did not come up: %s", stderr.Bytes())
			}
		}
		f, err := os.OpenFile(file, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, len(data))
		if _, err := f.ReadAt(buf, 1<<20); err != nil || !bytes.Equal(buf, data) {
			t.Fatalf("reading through the mount: %v", err)
		}
		if _, err := f.WriteAt([]byte("through fuse"), 100); err != nil {
			t.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			t.Fatal(err)
		}
		f.Close()
		_ = cmd.Process.Signal(syscall.SIGINT)
		select {
		case err := <-exited:
			if err != nil {
				t.Fatalf("mount exited with %v after SIGINT\n%s", err, stderr.Bytes())
			}
		case <-time.After(30 * time.Second):
			t.Fatal("mount did not exit after SIGINT")
		}
		if out := tristore(t, nil, "iscsi", "read", "--length", "512", lunURL); !bytes.Equal(out[100:112], []byte("through fuse")) {
			t.Fatalf("write through the mount not on the LUN: %q", out[96:116])
		}
	})
}
