package testutil

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Loop devices for tests: one way to attach a file, detach exactly that
// device, and leave none behind when a test fails half way.

// How long Detach retries `losetup -d` and then waits for the kernel to
// let go of the backing file (variables so the package's tests can see
// the bound; nothing else changes them).
var (
	loopDetachTries   = 10 * time.Second
	loopReleaseWithin = 60 * time.Second
)

// Loop is a loop device that AttachLoop attached to File.
type Loop struct {
	Dev  string // /dev/loopN
	File string // the backing file: absolute, symbolic links resolved
}

// AttachLoop attaches file to a free loop device (`losetup --find --show
// [flags] FILE`, at most a minute; flags such as "-r" or
// "--direct-io=on") and returns it; a failure fails t. The cleanup it
// registers detaches the device by name when the test ends, passed or
// failed, if the device is still attached to file: a device the test
// detached itself may by then belong to another test, which must keep it
// (TestSeaweedCluster once saw e2fsck fail on /dev/loop0 because another
// run's cleanup detached the loop0 it had detached earlier). A mount of
// the device must be gone before this cleanup runs: register its own
// cleanup after AttachLoop (cleanups run last-registered first), or the
// detach waits its 60 s for a release that the mount prevents and fails.
func AttachLoop(t testing.TB, file string, flags ...string) *Loop {
	t.Helper()
	abs, err := filepath.Abs(file)
	if err == nil {
		abs, err = filepath.EvalSymlinks(abs)
	}
	if err != nil {
		t.Fatalf("loop device for %s: %v", file, err)
	}
	args := append(append([]string{"--find", "--show"}, flags...), abs)
	out, err := TryRun(time.Minute, "losetup", args...)
	if err != nil {
		t.Fatalf("%v %s", err, out)
	}
	l := &Loop{Dev: strings.TrimSpace(out), File: abs}
	t.Cleanup(func() {
		if err := l.Detach(t); err != nil {
			t.Errorf("cleanup: %v", err)
		}
	})
	return l
}

// Holds reports whether the device is attached to File.
func (l *Loop) Holds() bool { return LoopBacking(l.Dev) == l.File }

// Detach detaches the device and waits until it has let go of File; it
// does nothing when the device no longer holds File. `losetup -d DEV` is
// retried for up to 10 s (it can fail with EBUSY just after an unmount,
// or while udev probes the device); the kernel then lets go of the file
// asynchronously, once the device's last opener has closed it, and a
// FUSE mount serving the file stays busy until then: Detach waits for
// that up to 60 s (under load it took 14 and 29 s in TestSeaweedCluster)
// and logs a release slower than 5 s. The error says which bound ran out.
func (l *Loop) Detach(t testing.TB) error {
	if !l.Holds() {
		return nil
	}
	var out string
	var err error
	for deadline, i := time.Now().Add(loopDetachTries), 0; i < 100; i++ {
		if out, err = TryRun(loopDetachTries, "losetup", "-d", l.Dev); err == nil || !l.Holds() {
			err = nil
			break
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		return fmt.Errorf("%v (%s holding %s), retried for %v: %s", err, l.Dev, l.File, loopDetachTries, strings.TrimSpace(out))
	}
	start := time.Now()
	for deadline, i := start.Add(loopReleaseWithin), 0; i < 10000 && l.Holds(); i++ {
		if time.Now().After(deadline) {
			return fmt.Errorf("loop device %s still holds %s %v after losetup -d", l.Dev, l.File, loopReleaseWithin)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Logf("loop device %s let go of %s %.1f s after losetup -d", l.Dev, l.File, d.Seconds())
	}
	return nil
}

// LoopBacking returns the file loop device dev (/dev/loopN or loopN) is
// attached to, as the kernel names it (sysfs backing_file, without a
// " (deleted)" suffix), or "" when it is attached to none.
func LoopBacking(dev string) string {
	b, err := os.ReadFile(filepath.Join("/sys/block", filepath.Base(dev), "loop", "backing_file"))
	if err != nil {
		return ""
	}
	return strings.TrimSuffix(strings.TrimSpace(string(b)), " (deleted)")
}

// DetachLoopsUnder detaches (Detach) every loop device attached to a file
// below dir, whoever attached it: the sweep of a cleanup that owns dir,
// for devices a failed step or a child process left. Errors are logged.
func DetachLoopsUnder(t testing.TB, dir string) {
	if d, err := filepath.EvalSymlinks(dir); err == nil {
		dir = d
	}
	devs, _ := filepath.Glob("/sys/block/loop*")
	for _, d := range devs {
		f := LoopBacking(d)
		if f == "" || !strings.HasPrefix(f, strings.TrimSuffix(dir, "/")+"/") {
			continue
		}
		l := &Loop{Dev: "/dev/" + filepath.Base(d), File: f}
		if err := l.Detach(t); err != nil {
			t.Logf("cleanup: %v", err)
		}
	}
}

// FlushBufs drops the device's page cache (`blockdev --flushbufs DEV`, at
// most 30 s). That cache outlives a detach and may be handed to the next
// opener of the same device: a test that changes the backing file behind
// the device (a simulated power cut, e2fsck on the file) flushes before
// it detaches. The sync part of the flush fails (EIO) when the backing
// file's writes fail; the error is the caller's to report or ignore.
func (l *Loop) FlushBufs() error {
	out, err := TryRun(30*time.Second, "blockdev", "--flushbufs", l.Dev)
	if err != nil {
		return fmt.Errorf("%v %s", err, strings.TrimSpace(out))
	}
	return nil
}

// Remove deletes the detached device node (LOOP_CTL_REMOVE) so that its
// page cache goes with it and the next AttachLoop gets a fresh device
// (test/powerloss saw blocks cached from before a power cut survive
// FlushBufs). It does nothing while the device holds File. Best effort and
// bounded: a device still busy after 1 s (udev has it open, another test
// attached it meanwhile) is left.
func (l *Loop) Remove() {
	n, err := strconv.Atoi(strings.TrimPrefix(l.Dev, "/dev/loop"))
	if err != nil || l.Holds() {
		return
	}
	fd, err := unix.Open("/dev/loop-control", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	for range 50 {
		if err := unix.IoctlSetInt(fd, unix.LOOP_CTL_REMOVE, n); err == nil || !errors.Is(err, unix.EBUSY) {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}
