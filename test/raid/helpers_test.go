// Package raid holds the end-to-end RAID tests (issue 10): a RAID volume
// served by the `tristore serve` gateway and mounted through FUSE + loop
// (gateway_test.go), and seed 002's reliability experiment over four
// separate target processes (reliability_test.go).
package raid

import (
	"context"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/tristore/tristore/internal/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

// mountExt4 mounts dev on dir; the cleanup unmounts it lazily if the test
// did not.
func mountExt4(t *testing.T, dev, dir string) {
	t.Helper()
	testutil.Run(t, 2*time.Minute, "mount", "-t", "ext4", dev, dir)
	t.Cleanup(func() {
		if testutil.IsMounted(dir) {
			syscall.Unmount(dir, syscall.MNT_DETACH)
		}
	})
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
