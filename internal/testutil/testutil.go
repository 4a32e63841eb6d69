// Package testutil holds helpers shared by tests across the tree.
package testutil

import (
	"os"
	"os/exec"
	"testing"
)

// NeedCmd returns the path of an external peer tool. When it is missing the
// test fails under CI (CI=true: scripts/deps.sh must have installed it) and
// is skipped with a clear message on a developer machine.
func NeedCmd(t testing.TB, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("peer tool %q is not installed; scripts/deps.sh should install it", name)
	}
	t.Skipf("peer tool %q is not installed (run scripts/deps.sh); skipping", name)
	return ""
}

// NeedRoot skips the test with a clear message when not running as root.
func NeedRoot(t testing.TB, why string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skipf("needs root: %s", why)
	}
}
