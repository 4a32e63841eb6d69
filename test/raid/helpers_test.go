// Package raid holds the end-to-end RAID tests (issue 10): a RAID volume
// served by the `tristore serve` gateway and mounted through FUSE + loop
// (gateway_test.go), and seed 002's reliability experiment over four
// separate target processes (reliability_test.go).
package raid

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tristore/tristore/internal/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

// sh runs a command (bounded to 2 minutes) and fails t with its output.
func sh(t *testing.T, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// quiet runs a cleanup command and ignores its failure.
func quiet(name string, args ...string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_ = exec.CommandContext(ctx, name, args...).Run()
}

func isMounted(dir string) bool {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	return strings.Contains(string(b), " "+dir+" ")
}

// loopDev attaches file to a loop device, detached at cleanup (and by
// detach).
type loopDev struct{ dev string }

func attachLoop(t *testing.T, file string) *loopDev {
	t.Helper()
	l := &loopDev{dev: sh(t, "losetup", "-f", "--show", file)}
	t.Cleanup(l.detach)
	return l
}

func (l *loopDev) detach() {
	if l.dev != "" {
		for i := 0; i < 20; i++ { // udev may still be probing it
			if exec.Command("losetup", "-d", l.dev).Run() == nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		l.dev = ""
	}
}

// mountExt4 mounts dev on dir; the cleanup unmounts it lazily if the test
// did not.
func mountExt4(t *testing.T, dev, dir string) {
	t.Helper()
	sh(t, "mount", "-t", "ext4", dev, dir)
	t.Cleanup(func() {
		if isMounted(dir) {
			syscall.Unmount(dir, syscall.MNT_DETACH)
		}
	})
}

// mountProc is a running `tristore mount`.
type mountProc struct {
	cmd  *exec.Cmd
	dir  string
	log  string
	done chan struct{}
}

func (m *mountProc) output() string {
	b, _ := os.ReadFile(m.log)
	return string(b)
}

// startMount runs `tristore mount URL DIR args...` and waits (60 s at
// most) until DIR is a mount; the cleanup kills it and detaches DIR.
func startMount(t *testing.T, bin, url, dir string, args ...string) *mountProc {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"mount", url, dir}, args...)...)
	cmd.Env = append(os.Environ(), "XDG_CONFIG_HOME="+t.TempDir())
	m := &mountProc{cmd: cmd, dir: dir, log: filepath.Join(t.TempDir(), "mount.log"), done: make(chan struct{})}
	f, err := os.Create(m.log)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { cmd.Wait(); close(m.done) }()
	t.Cleanup(func() {
		select {
		case <-m.done:
		default:
			cmd.Process.Kill()
			<-m.done
		}
		if isMounted(dir) {
			syscall.Unmount(dir, syscall.MNT_DETACH)
		}
	})
	for deadline := time.Now().Add(60 * time.Second); !isMounted(dir); {
		select {
		case <-m.done:
			t.Fatalf("mount exited: %v\n%s", cmd.ProcessState, m.output())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("not mounted within 60 s\n%s", m.output())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return m
}

// stop unmounts with SIGTERM and wants exit status 0.
func (m *mountProc) stop(t *testing.T) {
	t.Helper()
	m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("mount did not exit within 60 s of SIGTERM\n%s", m.output())
	}
	if !m.cmd.ProcessState.Success() {
		t.Fatalf("mount exited %v\n%s", m.cmd.ProcessState, m.output())
	}
}

func sums(t *testing.T, dir string) map[string]string {
	t.Helper()
	s, err := testutil.TreeSums(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// diffSums names the first few paths whose entries differ.
func diffSums(want, got map[string]string) []string {
	var out []string
	for k, v := range want {
		if got[k] != v && len(out) < 5 {
			out = append(out, k+": want "+v+", got "+got[k])
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok && len(out) < 5 {
			out = append(out, k+": unexpected")
		}
	}
	return out
}

// runBin runs the tristore binary (bounded to 2 minutes) with a fresh
// config directory and returns its combined output.
func runBin(bin string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cfgDir, err := os.MkdirTemp("", "tristore-raid-cfg-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(cfgDir)
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = append(os.Environ(), "XDG_CONFIG_HOME="+cfgDir)
	out, err := cmd.CombinedOutput()
	return string(out), err
}
