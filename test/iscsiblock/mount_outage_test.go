package iscsiblock

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"github.com/tristore/tristore/internal/testutil"
)

// mountProc is one `tristore mount iscsi://...` process.
type mountProc struct {
	dir    string
	cmd    *exec.Cmd
	stderr *bytes.Buffer
	exited chan error
}

// startMount runs `tristore mount ARGS... DIR` and waits for DIR/lun.
func startMount(t *testing.T, size int64, args ...string) *mountProc {
	t.Helper()
	m := &mountProc{dir: t.TempDir(), stderr: &bytes.Buffer{}, exited: make(chan error, 1)}
	m.cmd = exec.Command(tristoreBin(t), append(append([]string{"mount"}, args...), m.dir)...)
	m.cmd.Stderr = m.stderr
	if err := m.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { m.exited <- m.cmd.Wait() }()
	t.Cleanup(func() {
		_ = m.cmd.Process.Signal(syscall.SIGKILL)
		testutil.Quiet("umount", "-l", m.dir)
	})
	deadline := time.Now().Add(60 * time.Second)
	for {
		if st, err := os.Stat(filepath.Join(m.dir, "lun")); err == nil && st.Size() == size {
			return m
		}
		select {
		case err := <-m.exited:
			t.Fatalf("mount exited: %v\n%s", err, m.stderr.Bytes())
		case <-time.After(100 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("mount did not come up: %s", m.stderr.Bytes())
		}
	}
}

// stopWithin sends sig and fails t unless the process exits cleanly (a
// plain unmount, not a lazy detach) and the mount is gone within limit.
func (m *mountProc) stopWithin(t *testing.T, sig syscall.Signal, limit time.Duration) {
	t.Helper()
	start := time.Now()
	_ = m.cmd.Process.Signal(sig)
	select {
	case err := <-m.exited:
		t.Logf("mount exited %v after %v", time.Since(start).Round(time.Millisecond), sig)
		if err != nil {
			t.Fatalf("mount exited with %v after %v\n%s", err, sig, m.stderr.Bytes())
		}
	case <-time.After(limit):
		t.Fatalf("mount did not exit within %v of %v\n%s", limit, sig, m.stderr.Bytes())
	}
	mounts, _ := os.ReadFile("/proc/self/mounts")
	if strings.Contains(string(mounts), " "+m.dir+" ") {
		t.Fatalf("%s still mounted after the mount process exited", m.dir)
	}
}

// openDirect opens the block file with O_DIRECT (FUSE direct_io: every
// read is a request to the initiator, none is served from the page cache).
func openDirect(t *testing.T, m *mountProc) *os.File {
	t.Helper()
	f, err := os.OpenFile(filepath.Join(m.dir, "lun"), os.O_RDWR|syscall.O_DIRECT, 0)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// alignedBuf returns n bytes aligned to 4096 (O_DIRECT).
func alignedBuf(n int) []byte {
	b := make([]byte, n+4096)
	off := int(4096 - uintptr(unsafe.Pointer(&b[0]))%4096)
	return b[off%4096 : off%4096+n]
}

// TestMountOutage drives `tristore mount iscsi://` through a target outage
// longer than the replacement timeout (given as the URL option): reads fail
// with EIO, fast once the budget is spent, and work again when the target
// is back; SIGTERM then unmounts promptly while the target is down. A
// second mount with a long --iscsi-replacement-timeout shows SIGTERM
// unmounting promptly even with a read waiting for the absent target.
func TestMountOutage(t *testing.T) {
	testutil.NeedRoot(t, "FUSE mount")
	testutil.NeedCmd(t, "go")
	testutil.NeedFUSE(t)
	const size = 8 << 20
	tg := startRestartable(t, size)

	t.Run("eio-then-back", func(t *testing.T) {
		m := startMount(t, size, tg.URL+"?replacement_timeout=1")
		f := openDirect(t, m)
		defer f.Close()
		want := alignedBuf(4096)
		copy(want, "before the outage")
		if _, err := f.WriteAt(want, 8192); err != nil {
			t.Fatal(err)
		}
		buf := alignedBuf(4096)
		tg.Stop()
		start := time.Now()
		if _, err := f.ReadAt(buf, 8192); !errors.Is(err, syscall.EIO) {
			t.Fatalf("read during the outage: %v, want EIO", err)
		}
		if took := time.Since(start); took > 5*time.Second {
			t.Fatalf("read during the outage took %v to fail (budget 1s)", took)
		}
		for i := 0; i < 3; i++ {
			start = time.Now()
			if _, err := f.ReadAt(buf, 8192); !errors.Is(err, syscall.EIO) {
				t.Fatalf("read %d after the budget: %v, want EIO", i, err)
			}
			if took := time.Since(start); took > 500*time.Millisecond {
				t.Fatalf("read %d after the budget took %v to fail", i, took)
			}
		}
		tg.Start()
		var err error
		for start = time.Now(); time.Since(start) < 10*time.Second; time.Sleep(100 * time.Millisecond) {
			if _, err = f.ReadAt(buf, 8192); err == nil {
				break
			}
		}
		if err != nil || !bytes.Equal(buf, want) {
			t.Fatalf("no good read through the mount 10s after the target came back: %v", err)
		}
		t.Logf("reads work again %v after the target is back", time.Since(start).Round(time.Millisecond))
		f.Close()
		tg.Stop()
		m.stopWithin(t, syscall.SIGTERM, 5*time.Second)
		tg.Start()
	})

	t.Run("sigterm-with-read-waiting", func(t *testing.T) {
		m := startMount(t, size, "--iscsi-replacement-timeout", "2m", tg.URL)
		f := openDirect(t, m)
		defer f.Close()
		tg.Stop()
		defer tg.Start()
		got := make(chan error, 1)
		go func() {
			_, err := f.ReadAt(alignedBuf(4096), 0)
			got <- err
			f.Close() // the file is no longer busy: a plain unmount can work
		}()
		time.Sleep(500 * time.Millisecond)
		select {
		case err := <-got:
			t.Fatalf("read returned during the outage within a 2m budget: %v", err)
		default:
		}
		m.stopWithin(t, syscall.SIGTERM, 5*time.Second)
		select {
		case err := <-got:
			if err == nil {
				t.Fatal("read waiting for the absent target succeeded")
			}
		case <-time.After(10 * time.Second):
			t.Fatal("read waiting for the absent target never returned after unmount")
		}
	})
}
