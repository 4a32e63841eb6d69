package testutil

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// cleanupTB is the test's T with Cleanup collected instead of registered,
// so a test can run a helper's cleanup at a point it chooses (as the end
// of a failed test would).
type cleanupTB struct {
	*testing.T
	fns []func()
}

func (c *cleanupTB) Cleanup(f func()) { c.fns = append(c.fns, f) }

func (c *cleanupTB) runCleanups() {
	for i := len(c.fns) - 1; i >= 0; i-- {
		c.fns[i]()
	}
	c.fns = nil
}

// loopFile makes a 1 MiB file name in dir (a new temp dir if "").
func loopFile(t *testing.T, dir, name string) string {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, make([]byte, 1<<20), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func needLoop(t *testing.T) {
	t.Helper()
	NeedRoot(t, "loop devices")
	NeedCmd(t, "losetup")
}

// TestLoopDetachWaitsForRelease: while the device is open, losetup -d
// only marks it for release when the last opener closes it; Detach
// returns once the device has let go of the file, not before.
func TestLoopDetachWaitsForRelease(t *testing.T) {
	needLoop(t)
	l := AttachLoop(t, loopFile(t, "", "a.img"))
	if !l.Holds() {
		t.Fatalf("%s does not hold %s after AttachLoop (backing %q)", l.Dev, l.File, LoopBacking(l.Dev))
	}
	f, err := os.Open(l.Dev)
	if err != nil {
		t.Fatal(err)
	}
	closed := make(chan time.Time, 1)
	go func() {
		time.Sleep(500 * time.Millisecond)
		closed <- time.Now()
		f.Close()
	}()
	if err := l.Detach(t); err != nil {
		f.Close()
		t.Fatal(err)
	}
	select {
	case <-closed:
	default:
		t.Fatalf("Detach returned while %s was still open", l.Dev)
	}
	if l.Holds() {
		t.Fatalf("%s still holds %s after Detach", l.Dev, l.File)
	}
}

// TestLoopCleanupDetachesOnFailure: the cleanup AttachLoop registers
// detaches the device by name when the test failed with it attached.
func TestLoopCleanupDetachesOnFailure(t *testing.T) {
	needLoop(t)
	c := &cleanupTB{T: t}
	t.Cleanup(c.runCleanups) // whatever happens below
	l := AttachLoop(c, loopFile(t, "", "a.img"))
	if len(c.fns) != 1 {
		t.Fatalf("AttachLoop registered %d cleanups, want 1", len(c.fns))
	}
	c.runCleanups()
	if l.Holds() {
		t.Fatalf("%s still holds %s after the cleanup", l.Dev, l.File)
	}
}

// TestLoopCleanupSparesReusedDevice: a device the test detached itself
// and that now holds another file (here the next AttachLoop, which
// usually gets the same /dev/loopN) is left alone by the first cleanup.
func TestLoopCleanupSparesReusedDevice(t *testing.T) {
	needLoop(t)
	c := &cleanupTB{T: t}
	t.Cleanup(c.runCleanups)
	first := AttachLoop(c, loopFile(t, "", "a.img"))
	if err := first.Detach(t); err != nil {
		t.Fatal(err)
	}
	second := AttachLoop(t, loopFile(t, "", "b.img"))
	if second.Dev != first.Dev {
		t.Logf("the second file got %s, not %s: the check is weaker this time", second.Dev, first.Dev)
	}
	c.runCleanups()
	if !second.Holds() {
		t.Fatalf("the first device's cleanup detached %s (holding %s)", second.Dev, second.File)
	}
}

// TestDetachLoopsUnder detaches a device on a file below the directory
// and leaves one on a file elsewhere.
func TestDetachLoopsUnder(t *testing.T) {
	needLoop(t)
	dir := t.TempDir()
	in := AttachLoop(t, loopFile(t, dir, "in.img"))
	out := AttachLoop(t, loopFile(t, "", "out.img"))
	DetachLoopsUnder(t, dir)
	if in.Holds() || !out.Holds() {
		t.Fatalf("after DetachLoopsUnder %s: %s holds %q, %s holds %q", dir, in.Dev, LoopBacking(in.Dev), out.Dev, LoopBacking(out.Dev))
	}
}

// TestLoopRemove: Remove leaves a device that still holds its file alone
// and deletes a detached one (its sysfs entry goes; another test may have
// made a new device with the same number meanwhile, then that one holds
// another file).
func TestLoopRemove(t *testing.T) {
	needLoop(t)
	NeedCmd(t, "blockdev")
	l := AttachLoop(t, loopFile(t, "", "r.img"))
	if err := l.FlushBufs(); err != nil {
		t.Fatal(err)
	}
	l.Remove()
	if !l.Holds() {
		t.Fatalf("Remove took %s from %s while attached", l.Dev, l.File)
	}
	if err := l.Detach(t); err != nil {
		t.Fatal(err)
	}
	l.Remove()
	sys := filepath.Join("/sys/block", filepath.Base(l.Dev))
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if _, err := os.Stat(sys); os.IsNotExist(err) {
			return
		}
		if b := LoopBacking(l.Dev); b != "" && b != l.File {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s still exists, detached, 5 s after Remove", l.Dev)
		}
	}
}
