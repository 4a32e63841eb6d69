package nfsclient

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tristore/tristore/internal/testutil"
)

// Server outages under `tristore mount` (a separate process, as users run
// it) with our server in-process, stopped and restarted on the same port.

// cliMount is a running `tristore mount` process.
type cliMount struct {
	dir    string
	cmd    *exec.Cmd
	exited chan error
	log    *bytes.Buffer
}

// startCLIMount runs `tristore mount URL DIR` and waits until DIR is a
// mount. t.Cleanup kills the process and detaches the mount if left.
func startCLIMount(t *testing.T, url string) *cliMount {
	t.Helper()
	testutil.NeedRoot(t, "FUSE mounts need root")
	m := &cliMount{dir: filepath.Join(t.TempDir(), "mnt"), exited: make(chan error, 1), log: &bytes.Buffer{}}
	os.Mkdir(m.dir, 0o755)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	m.cmd = tristoreCmd(ctx, "", "mount", url, m.dir)
	m.cmd.Stdout, m.cmd.Stderr = m.log, m.log
	if err := m.cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	go func() { m.exited <- m.cmd.Wait() }()
	t.Cleanup(func() {
		if testutil.IsMounted(m.dir) {
			testutil.Quiet("umount", "-l", m.dir)
		}
		m.cmd.Process.Kill()
		cancel()
	})
	deadline := time.Now().Add(60 * time.Second)
	for !testutil.IsMounted(m.dir) {
		select {
		case err := <-m.exited:
			t.Fatalf("tristore mount exited early: %v\n%s", err, m.log.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("not mounted after 60s:\n%s", m.log.String())
		}
		time.Sleep(100 * time.Millisecond)
	}
	return m
}

// bg is a command running in the background.
type bg struct {
	cmd  *exec.Cmd
	out  bytes.Buffer
	err  bytes.Buffer
	done chan error
}

func startBG(t *testing.T, name string, args ...string) *bg {
	t.Helper()
	b := &bg{cmd: exec.Command(name, args...), done: make(chan error, 1)}
	b.cmd.Stdout, b.cmd.Stderr = &b.out, &b.err
	if err := b.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { b.done <- b.cmd.Wait() }()
	t.Cleanup(func() {
		b.cmd.Process.Kill()
		select {
		case <-b.done:
		case <-time.After(30 * time.Second):
			t.Errorf("%s did not exit after SIGKILL", name)
		}
	})
	return b
}

// wait waits up to d for the command; ok is false if it is still running.
func (b *bg) wait(d time.Duration) (err error, ok bool) {
	select {
	case err := <-b.done:
		b.done <- err // keep it for the cleanup
		return err, true
	case <-time.After(d):
		return nil, false
	}
}

// TestMountHardOutage: on the default (hard) mount, an operation issued
// while the server is down waits and completes once the server is back on
// the same port; a process blocked that way can be killed (the FUSE
// interrupt becomes EINTR); and SIGTERM to the mount process during an
// outage still unmounts promptly.
func TestMountHardOutage(t *testing.T) { testHardOutage(t, "") }

// TestMountHardOutage4 is TestMountHardOutage over NFSv4.1: the restarted
// server lost the session, the mount makes a new one.
func TestMountHardOutage4(t *testing.T) { testHardOutage(t, "?version=4.1") }

// testHardOutage is TestMountHardOutage with query added to the URL.
func testHardOutage(t *testing.T, query string) {
	testutil.NeedCmd(t, "cat")
	tg := startOurs(t, "")
	m := startCLIMount(t, "nfs://"+tg.Addr+"/"+query)
	f := filepath.Join(m.dir, "f")
	if err := os.WriteFile(f, []byte("hello over a hard mount\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	// Outage 1: 3 s, then the server comes back.
	tg.stop()
	reader := startBG(t, "cat", f)
	victim := startBG(t, "cat", f)
	time.Sleep(time.Second)
	if err, ok := reader.wait(0); ok {
		t.Fatalf("cat finished while the server was down (hard mount): %v %q %q", err, reader.out.String(), reader.err.String())
	}
	victim.cmd.Process.Signal(syscall.SIGTERM)
	start := time.Now()
	if _, ok := victim.wait(5 * time.Second); !ok {
		t.Fatal("a process blocked on the hard mount did not die from SIGTERM within 5 s")
	}
	t.Logf("blocked process killed after %v", time.Since(start).Round(time.Millisecond))
	time.Sleep(2 * time.Second)
	if err, ok := reader.wait(0); ok {
		t.Fatalf("cat finished while the server was down (hard mount): %v %q %q", err, reader.out.String(), reader.err.String())
	}
	tg.serve(t)
	start = time.Now()
	err, ok := reader.wait(20 * time.Second)
	if !ok {
		t.Fatal("cat still blocked 20 s after the server came back")
	}
	if err != nil || reader.out.String() != "hello over a hard mount\n" {
		t.Fatalf("cat across the outage: %v, out %q, err %q", err, reader.out.String(), reader.err.String())
	}
	t.Logf("operation issued during the outage completed %v after the server came back", time.Since(start).Round(time.Millisecond))

	// Outage 2: SIGTERM to the mount process while a reader is blocked.
	tg.stop()
	blocked := startBG(t, "cat", f)
	time.Sleep(500 * time.Millisecond)
	m.cmd.Process.Signal(syscall.SIGTERM)
	start = time.Now()
	select {
	case err := <-m.exited:
		if err != nil {
			t.Fatalf("tristore mount exit after SIGTERM during an outage: %v\n%s", err, m.log.String())
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("tristore mount did not exit within 20 s of SIGTERM during an outage:\n%s", m.log.String())
	}
	t.Logf("unmounted %v after SIGTERM with the server down", time.Since(start).Round(time.Millisecond))
	if testutil.IsMounted(m.dir) {
		t.Fatal("still mounted after tristore mount exited")
	}
	if err, ok := blocked.wait(5 * time.Second); !ok || err == nil {
		t.Fatalf("the blocked reader: exited %v, err %v; want a failure once the mount gave up", ok, err)
	}
}

// TestMountSoftOutage: a soft mount with timeo=3 (0.3 s) and retrans=1
// fails an operation with EIO after about 0.9 s while the server is down
// (not ECONNREFUSED, not forever), and works again once it is back.
func TestMountSoftOutage(t *testing.T) {
	testutil.NeedCmd(t, "cat")
	tg := startOurs(t, "")
	m := startCLIMount(t, "nfs://"+tg.Addr+"/?soft&timeo=3&retrans=1")
	f := filepath.Join(m.dir, "f")
	if err := os.WriteFile(f, []byte("soft\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tg.stop()
	start := time.Now()
	_, err := os.Open(f)
	took := time.Since(start)
	if !errors.Is(err, syscall.EIO) {
		t.Fatalf("open on a soft mount with the server down: %v, want EIO", err)
	}
	if took < 700*time.Millisecond || took > 10*time.Second {
		t.Fatalf("soft open failed after %v, want about 0.9 s (timeo 0.3 s + 0.6 s)", took)
	}
	t.Logf("soft open failed with %v after %v", err, took.Round(time.Millisecond))
	out, err := testutil.TryRun(time.Minute, "cat", f)
	if err == nil || !strings.Contains(out, "Input/output error") {
		t.Fatalf("cat on a soft mount with the server down: %v %q, want an I/O error", err, out)
	}
	tg.serve(t)
	if b, err := os.ReadFile(f); err != nil || string(b) != "soft\n" {
		t.Fatalf("read after the server came back: %q %v", b, err)
	}
	m.cmd.Process.Signal(syscall.SIGINT)
	select {
	case err := <-m.exited:
		if err != nil {
			t.Fatalf("tristore mount exit: %v\n%s", err, m.log.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("tristore mount did not exit after SIGINT:\n%s", m.log.String())
	}
}

// TestMountUmountWhileDown: umount from outside ends a hard mount whose
// server is down (nothing blocked in it), and the process exits 0 without
// waiting for the server. umount(8) is given --no-canonicalize: plain
// umount stats the mount point first, and on a hard mount that stat waits
// for the server, as it does on a Linux NFS hard mount.
func TestMountUmountWhileDown(t *testing.T) {
	testutil.NeedCmd(t, "umount")
	tg := startOurs(t, "")
	m := startCLIMount(t, "nfs://"+tg.Addr+"/")
	if err := os.WriteFile(filepath.Join(m.dir, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	tg.stop()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "umount", "--no-canonicalize", m.dir).CombinedOutput(); err != nil {
		t.Fatalf("umount with the server down: %v: %s", err, out)
	}
	select {
	case err := <-m.exited:
		if err != nil {
			t.Fatalf("tristore mount exit after umount: %v\n%s", err, m.log.String())
		}
		if took := time.Since(start); took > 3*time.Second {
			t.Fatalf("umount + exit took %v with the server down, want prompt", took)
		}
	case <-time.After(20 * time.Second):
		t.Fatalf("tristore mount still running 20 s after umount:\n%s", m.log.String())
	}
}
