package testutil

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// recorder is a testing.TB that records Skipf and Fatalf instead of ending
// the goroutine, so Missing's choice can be checked.
type recorder struct {
	testing.TB
	skipped, fatal string
}

func (r *recorder) Helper()                           {}
func (r *recorder) Skipf(format string, args ...any)  { r.skipped = fmt.Sprintf(format, args...) }
func (r *recorder) Fatalf(format string, args ...any) { r.fatal = fmt.Sprintf(format, args...) }

// TestMissingFailsUnderCI: a missing capability is a skip with the prefix
// on a developer machine and a failure under CI=true.
func TestMissingFailsUnderCI(t *testing.T) {
	for _, ci := range []string{"", "true"} {
		t.Setenv("CI", ci)
		r := &recorder{}
		Missing(r, "needs %s", "/dev/fuse")
		if ci == "true" {
			if r.skipped != "" || !strings.HasPrefix(r.fatal, MissingPrefix+"needs /dev/fuse") {
				t.Errorf("CI=true: skipped %q, fatal %q; want a failure", r.skipped, r.fatal)
			}
		} else if r.fatal != "" || r.skipped != MissingPrefix+"needs /dev/fuse" {
			t.Errorf("CI unset: skipped %q, fatal %q; want a skip", r.skipped, r.fatal)
		}
	}
}

// TestNeedCmdMissing: an absent tool goes through Missing.
func TestNeedCmdMissing(t *testing.T) {
	t.Setenv("CI", "true")
	r := &recorder{}
	NeedCmd(r, "no-such-tool-tristore")
	if !strings.Contains(r.fatal, `peer tool "no-such-tool-tristore" is not installed`) {
		t.Errorf("fatal %q", r.fatal)
	}
}

// TestNeedXattr runs the probe on the test's temp dir (xattrs work on the
// file systems the suite runs on) and leaves nothing behind.
func TestNeedXattr(t *testing.T) {
	dir := t.TempDir()
	NeedXattr(t, dir)
	if m, _ := filepath.Glob(filepath.Join(dir, ".xattr-probe-*")); len(m) != 0 {
		t.Errorf("probe files left: %v", m)
	}
}

// TestIsMounted: a tmpfs's mount point is mounted; a directory that only
// stands in the mount's source field is not, nor one under the mount.
func TestIsMounted(t *testing.T) {
	dir, other := t.TempDir(), t.TempDir()
	MountTmpfs(t, dir, "1m", other)
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if !IsMounted(dir) || IsMounted(other) || IsMounted(sub) {
		t.Fatalf("IsMounted: mount point %v (want true), its source %v, a directory under it %v (want false)",
			IsMounted(dir), IsMounted(other), IsMounted(sub))
	}
}
