package nfsclient

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tristore/tristore/client/nfs"
	"github.com/tristore/tristore/internal/cli"
	"github.com/tristore/tristore/internal/testutil"
)

// The test binary doubles as the tristore binary: with TRISTORE_TEST_CLI=1
// it runs the CLI on its arguments. So CLI tests run real separate
// processes (signals, exit codes, FUSE unmount, `ip netns exec`) without a
// separate go build.
func TestMain(m *testing.M) {
	if os.Getenv("TRISTORE_TEST_CLI") == "1" {
		os.Exit(cli.Execute())
	}
	os.Exit(m.Run())
}

// tristoreCmd runs the CLI in a child process (optionally inside a netns).
func tristoreCmd(ctx context.Context, ns string, args ...string) *exec.Cmd {
	self, _ := os.Executable()
	var cmd *exec.Cmd
	if ns != "" {
		cmd = exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", ns, self}, args...)...)
	} else {
		cmd = exec.CommandContext(ctx, self, args...)
	}
	cmd.Env = append(os.Environ(), "TRISTORE_TEST_CLI=1")
	return cmd
}

func runCLI(t *testing.T, ns string, stdin []byte, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := tristoreCmd(ctx, ns, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	if err := cmd.Run(); err != nil {
		t.Fatalf("tristore %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.Bytes()
}

// testCLI runs nfs put/ls/cat/get/bench; url maps a path inside the export
// to the URL (with the server's query options).
func testCLI(t *testing.T, tg *target, ns string, url func(p string) string) {
	tmp := t.TempDir()
	data := randBytes(t, 5<<20+99)
	local := filepath.Join(tmp, "in.bin")
	if err := os.WriteFile(local, data, 0o644); err != nil {
		t.Fatal(err)
	}
	runCLI(t, ns, nil, "nfs", "put", local, url("/cli/in.bin"))
	if disk, err := os.ReadFile(filepath.Join(tg.Dir, "cli", "in.bin")); err != nil || !bytes.Equal(disk, data) {
		t.Fatalf("nfs put: server has %d bytes (%v), want %d", len(disk), err, len(data))
	}
	runCLI(t, ns, nil, "nfs", "put", "--stable", "file", local, url("/cli/sync.bin"))
	out := runCLI(t, ns, nil, "nfs", "ls", "-l", url("/cli"))
	if !strings.Contains(string(out), "in.bin") || !strings.Contains(string(out), "5242979") || !strings.Contains(string(out), "sync.bin") {
		t.Fatalf("nfs ls -l:\n%s", out)
	}
	if got := runCLI(t, ns, nil, "nfs", "cat", url("/cli/sync.bin")); !bytes.Equal(got, data) {
		t.Fatalf("nfs cat: %d bytes, want %d", len(got), len(data))
	}
	back := filepath.Join(tmp, "back.bin")
	runCLI(t, ns, nil, "nfs", "get", url("/cli/in.bin"), back)
	if got, err := os.ReadFile(back); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("nfs get: %d bytes (%v)", len(got), err)
	}
	var res struct {
		Creates float64 `json:"creates_per_sec"`
		Write   float64 `json:"write_mb_per_sec"`
		Read    float64 `json:"read_mb_per_sec"`
	}
	out = runCLI(t, ns, nil, "nfs", "bench", "--json", "--files", "20", "--seq-size", "4194304", url("/cli"))
	if err := json.Unmarshal(out, &res); err != nil || res.Creates <= 0 || res.Write <= 0 || res.Read <= 0 {
		t.Fatalf("nfs bench output %q: %v", out, err)
	}
	ents, _ := os.ReadDir(filepath.Join(tg.Dir, "cli"))
	if len(ents) != 2 {
		t.Fatalf("bench left files behind: %d entries in cli/", len(ents))
	}
	var meta struct {
		Entries int               `json:"entries"`
		Readdir float64           `json:"readdirplus_entries_per_sec"`
		Lookup  struct{ Ops int } `json:"lookup"`
		Getattr struct{ Ops int } `json:"getattr"`
	}
	out = runCLI(t, ns, nil, "nfs", "bench-meta", "--json", "--duration", "200ms", url("/cli"))
	if err := json.Unmarshal(out, &meta); err != nil || meta.Entries != 2 || meta.Readdir <= 0 || meta.Lookup.Ops == 0 || meta.Getattr.Ops == 0 {
		t.Fatalf("nfs bench-meta output %q: %v", out, err)
	}
	runCLI(t, ns, nil, "nfs", "mkdir", url("/cli/sub"))
	runCLI(t, ns, nil, "nfs", "put", local, url("/cli/sub/x"))
	runCLI(t, ns, nil, "nfs", "rm", url("/cli/sub/x"))
	runCLI(t, ns, nil, "nfs", "rm", url("/cli/sub"))
	if _, err := os.Stat(filepath.Join(tg.Dir, "cli", "sub")); !os.IsNotExist(err) {
		t.Fatalf("nfs mkdir/rm: cli/sub still there (%v)", err)
	}
	// Errors: a missing file, a bad URL, a closed port.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, args := range [][]string{
		{"nfs", "cat", url("/cli/missing")},
		{"nfs", "rm", url("/cli/missing")},
		{"nfs", "ls", "http://127.0.0.1/x"},
		{"nfs", "ls", "nfs://127.0.0.1:1/x"},
		{"nfs", "bench-meta", url("/cli/in.bin")},
	} {
		cmd := tristoreCmd(ctx, ns, args...)
		o, err := cmd.CombinedOutput()
		if err == nil {
			t.Fatalf("tristore %v succeeded: %s", args, o)
		}
		if len(bytes.TrimSpace(o)) == 0 {
			t.Fatalf("tristore %v failed without a message", args)
		}
	}
}

func TestCLIVsTristore(t *testing.T) {
	tg := startOurs(t, "")
	c, root := tg.client(t, nfs.Options{})
	if _, _, err := c.Mkdir(ctxT(t), root, "cli", nfs.SetAttr{}); err != nil {
		t.Fatal(err)
	}
	testCLI(t, tg, "", func(p string) string { return "nfs://" + tg.Addr + p })
}

func TestCLIVsGanesha(t *testing.T) {
	tg := ganeshaTarget(t)
	c, root := tg.client(t, nfs.Options{})
	if _, _, err := c.Mkdir(ctxT(t), root, "cli", nfs.SetAttr{}); err != nil {
		t.Fatal(err)
	}
	testCLI(t, tg, tg.ns, func(p string) string {
		return "nfs://" + tg.Addr + tg.Export + p + "?mountport=" + strings.TrimPrefix(tg.MountAddr, "127.0.0.1:")
	})
}

// TestCLIMount runs `tristore mount nfs://...` as a process, uses the mount,
// and stops it with SIGINT: it must unmount and exit 0.
func TestCLIMount(t *testing.T) {
	testutil.NeedRoot(t, "FUSE mounts need root")
	tg := startOurs(t, "")
	c, root := tg.client(t, nfs.Options{})
	if _, _, err := c.Mkdir(ctxT(t), root, "m", nfs.SetAttr{}); err != nil {
		t.Fatal(err)
	}
	for _, access := range []string{"default", "sync", "subdir", "v4.1"} {
		t.Run(access, func(t *testing.T) {
			url, sub := "nfs://"+tg.Addr+"/?access="+access, "m"
			switch access {
			case "subdir":
				// A directory below the export is mounted by walking to it.
				url, sub = "nfs://"+tg.Addr+"/m", ""
			case "v4.1":
				// Over NFSv4.1, a directory of the v4 namespace.
				url, sub = "nfs://"+tg.Addr+"/m?version=4.1", ""
			}
			dir := filepath.Join(t.TempDir(), "mnt")
			os.Mkdir(dir, 0o755)
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			cmd := tristoreCmd(ctx, "", "mount", url, dir)
			var logb bytes.Buffer
			cmd.Stdout, cmd.Stderr = &logb, &logb
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			t.Cleanup(func() {
				if testutil.IsMounted(dir) {
					testutil.Quiet("umount", "-l", dir)
				}
				cmd.Process.Kill()
			})
			deadline := time.Now().Add(60 * time.Second)
			for !testutil.IsMounted(dir) {
				select {
				case err := <-exited:
					t.Fatalf("tristore mount exited early: %v\n%s", err, logb.String())
				default:
				}
				if time.Now().After(deadline) {
					t.Fatalf("not mounted after 60s:\n%s", logb.String())
				}
				time.Sleep(100 * time.Millisecond)
			}
			p := filepath.Join(dir, sub, access+".txt")
			f, err := os.Create(p)
			if err != nil {
				t.Fatal(err)
			}
			payload := []byte(strings.Repeat("tristore ", 1000))
			if _, err := f.Write(payload); err != nil {
				t.Fatal(err)
			}
			disk := filepath.Join(tg.Dir, "m", access+".txt")
			if access == "sync" {
				// Write-through: on the server before close.
				if got, _ := os.ReadFile(disk); !bytes.Equal(got, payload) {
					t.Fatalf("access=sync: server has %d bytes before close, want %d", len(got), len(payload))
				}
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}
			if got, _ := os.ReadFile(disk); !bytes.Equal(got, payload) {
				t.Fatalf("after close: server has %d bytes, want %d", len(got), len(payload))
			}
			if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-exited:
				if err != nil {
					t.Fatalf("tristore mount exit after SIGINT: %v\n%s", err, logb.String())
				}
			case <-time.After(60 * time.Second):
				t.Fatalf("tristore mount did not exit after SIGINT:\n%s", logb.String())
			}
			if testutil.IsMounted(dir) {
				t.Fatal("still mounted after tristore mount exited")
			}
		})
	}
}
