package testutil

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// IsMounted reports whether dir is a mount point of this mount namespace:
// the mount point field of a /proc/self/mountinfo line, not dir anywhere
// in it (a mount's root or source may name it too).
func IsMounted(dir string) bool {
	b, _ := os.ReadFile("/proc/self/mountinfo")
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == dir {
			return true
		}
	}
	return false
}

// Mount is a running `tristore mount` started by StartMount.
type Mount struct {
	Dir  string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

// StartMount runs `BIN mount URL DIR args...` (with a private
// XDG_CONFIG_HOME) and waits, 60 s at most, until DIR is a mount. The
// cleanup kills the process if it still runs and detaches DIR.
func StartMount(t testing.TB, bin, url, dir string, args ...string) *Mount {
	t.Helper()
	cmd := exec.Command(bin, append([]string{"mount", url, dir}, args...)...)
	cmd.Env = append(os.Environ(), "XDG_CONFIG_HOME="+t.TempDir())
	m := &Mount{Dir: dir, cmd: cmd, log: filepath.Join(t.TempDir(), "mount.log"), done: make(chan struct{})}
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
		m.Kill()
		if IsMounted(dir) {
			syscall.Unmount(dir, syscall.MNT_DETACH)
		}
	})
	for deadline := time.Now().Add(60 * time.Second); !IsMounted(dir); {
		select {
		case <-m.done:
			t.Fatalf("mount exited: %v\n%s", cmd.ProcessState, m.Output())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("not mounted within 60 s\n%s", m.Output())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return m
}

// Output is what the mount process printed so far.
func (m *Mount) Output() string {
	b, _ := os.ReadFile(m.log)
	return string(b)
}

// Kill ends the mount process with SIGKILL, as a crash would, and waits
// for it; it does nothing if the process has already exited.
func (m *Mount) Kill() {
	select {
	case <-m.done:
	default:
		m.cmd.Process.Kill()
		<-m.done
	}
}

// Stop unmounts with SIGTERM and wants exit status 0 within the given
// time (the mount's final flush succeeded).
func (m *Mount) Stop(t testing.TB, within time.Duration) {
	t.Helper()
	m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.done:
	case <-time.After(within):
		t.Fatalf("mount did not exit within %v of SIGTERM\n%s", within, m.Output())
	}
	if !m.cmd.ProcessState.Success() {
		t.Fatalf("mount exited %v\n%s", m.cmd.ProcessState, m.Output())
	}
}
