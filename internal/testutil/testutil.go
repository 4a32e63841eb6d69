// Package testutil holds helpers shared by tests across the tree.
//
// Every test that needs something the machine may lack (root, /dev/fuse,
// /dev/net/tun, a tmpfs mount, xattrs, a peer tool or Python module) asks
// for it here rather than calling t.Skip itself: on a developer machine the
// test is skipped with a message that starts with MissingPrefix, and under
// CI (CI=true: scripts/deps.sh installed every tool and the runner is root
// with FUSE and TUN) it fails, so a broken CI machine cannot turn tests
// into silent skips. The test summariser (internal/testsummary) lists every
// skip with its reason and, under CI, also fails a skip that carries the
// prefix or reads like a missing capability.
package testutil

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// MissingPrefix starts the message of every skip for a missing capability
// or tool, so such skips can be told apart from legitimate ones (a helper
// process, a store without an optional interface).
const MissingPrefix = "missing capability: "

// CI reports whether the tests run under CI (CI=true), where a missing
// capability or tool is a failure, not a skip.
func CI() bool { return os.Getenv("CI") == "true" }

// Missing stops the test because the machine lacks what it needs: a
// failure under CI, a skip (with MissingPrefix and the reason) elsewhere.
func Missing(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if CI() {
		t.Fatalf("%s%s (CI=true: scripts/deps.sh and the CI machine must provide it)", MissingPrefix, msg)
		return
	}
	t.Skipf("%s%s", MissingPrefix, msg)
}

// NeedCmd returns the path of an external peer tool, looked up first in the
// repository's Python virtual environment (.venv/bin, where scripts/deps.sh
// installs aws and other pip tools) and then on PATH. When it is missing
// the test fails under CI and is skipped elsewhere (Missing).
func NeedCmd(t testing.TB, name string) string {
	t.Helper()
	if dir := VenvBin(); dir != "" {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p
		}
	}
	p, err := exec.LookPath(name)
	if err == nil {
		return p
	}
	Missing(t, "peer tool %q is not installed (scripts/deps.sh installs it)", name)
	return ""
}

// NeedPython returns the python3 that has every module in modules: the
// repository's virtual environment's when there is one (scripts/deps.sh
// makes it), else python3 on PATH. A missing module is Missing.
func NeedPython(t testing.TB, modules ...string) string {
	t.Helper()
	py := NeedCmd(t, "python3")
	for _, m := range modules {
		if out, err := exec.Command(py, "-c", "import "+m).CombinedOutput(); err != nil {
			Missing(t, "python module %q is not importable by %s (scripts/deps.sh installs it into .venv): %v %s",
				m, py, err, strings.TrimSpace(string(out)))
		}
	}
	return py
}

// VenvBin returns the bin directory of the repository's Python virtual
// environment (<module root>/.venv/bin), or "" when there is none. Tests
// run in their package's directory, so the root is found by walking up to
// the go.mod.
func VenvBin() string {
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for range 64 {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			bin := filepath.Join(dir, ".venv", "bin")
			if fi, err := os.Stat(bin); err == nil && fi.IsDir() {
				return bin
			}
			return ""
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	return ""
}

// NeedRoot stops the test (Missing) when not running as root.
func NeedRoot(t testing.TB, why string) {
	t.Helper()
	if os.Geteuid() != 0 {
		Missing(t, "needs root: %s", why)
	}
}

// NeedFUSE stops the test (Missing) unless /dev/fuse can be opened, as a
// FUSE mount needs.
func NeedFUSE(t testing.TB) {
	t.Helper()
	fd, err := unix.Open("/dev/fuse", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		Missing(t, "needs /dev/fuse: %v", err)
		return
	}
	unix.Close(fd)
}

// NeedTUN stops the test (Missing) unless /dev/net/tun can be opened, as
// netem's links need.
func NeedTUN(t testing.TB) {
	t.Helper()
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		Missing(t, "needs /dev/net/tun: %v", err)
		return
	}
	unix.Close(fd)
}

// NeedXattr stops the test (Missing) unless the file system holding dir
// stores user.* extended attributes (set, read back, removed on a probe
// file).
func NeedXattr(t testing.TB, dir string) {
	t.Helper()
	f, err := os.CreateTemp(dir, ".xattr-probe-")
	if err != nil {
		t.Fatalf("xattr probe: %v", err)
	}
	name := f.Name()
	f.Close()
	defer os.Remove(name)
	if err := unix.Setxattr(name, "user.tristore.probe", []byte("1"), 0); err != nil {
		Missing(t, "needs user xattrs on %s: %v", dir, err)
		return
	}
	buf := make([]byte, 8)
	if n, err := unix.Getxattr(name, "user.tristore.probe", buf); err != nil || string(buf[:n]) != "1" {
		Missing(t, "user xattrs on %s do not read back: %q %v", dir, buf[:max(n, 0)], err)
	}
}

// MountTmpfs mounts a tmpfs of size (mount's size= option, e.g. "1m") on
// dir, named source in the mount table, and unmounts it (lazily) when the
// test ends; a mount that fails is Missing. Callers that must unmount at a
// particular point may do so themselves: the cleanup then finds nothing.
func MountTmpfs(t testing.TB, dir, size, source string) {
	t.Helper()
	NeedRoot(t, "mounting a tmpfs")
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, source, dir).CombinedOutput(); err != nil {
		Missing(t, "cannot mount a tmpfs on %s: %v %s", dir, err, strings.TrimSpace(string(out)))
		return
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
}
