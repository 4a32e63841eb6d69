package testutil

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// The tristore binary built by TristoreBin, shared by all tests of one test
// binary run.
var tristoreBin struct {
	once sync.Once
	path string
	err  error
}

// TristoreBin builds cmd/tristore once per test binary run (go build, bounded
// by ctx) into a temporary directory and returns its path; a failed build
// fails t. Tests that run the real CLI use it; the package's TestMain is
// testutil.Main, which removes the binary after the tests.
func TristoreBin(ctx context.Context, t testing.TB) string {
	t.Helper()
	b := &tristoreBin
	b.once.Do(func() {
		dir, err := os.MkdirTemp("", "tristore-test-bin-")
		if err != nil {
			b.err = err
			return
		}
		b.path = filepath.Join(dir, "tristore")
		out, err := exec.CommandContext(ctx, "go", "build", "-o", b.path, "github.com/tristore/tristore/cmd/tristore").CombinedOutput()
		if err != nil {
			b.err = fmt.Errorf("go build cmd/tristore: %v\n%s", err, out)
		}
	})
	if b.err != nil {
		t.Fatal(b.err)
	}
	return b.path
}

// Main is the TestMain of packages that use TristoreBin: it runs the
// tests, removes what TristoreBin built, if anything, and exits with the
// tests' code.
func Main(m *testing.M) {
	code := m.Run()
	RemoveTristoreBin()
	os.Exit(code)
}

// RemoveTristoreBin removes what TristoreBin built, if anything (for a
// TestMain that does more than Main).
func RemoveTristoreBin() {
	if tristoreBin.path != "" {
		os.RemoveAll(filepath.Dir(tristoreBin.path))
	}
}
