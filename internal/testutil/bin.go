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

// The tristore binaries built by TristoreBin and TristoreBinTags, one per
// build tag list, shared by all tests of one test binary run.
var tristoreBins struct {
	mu   sync.Mutex
	bins map[string]*builtBin
}

type builtBin struct {
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
	return TristoreBinTags(ctx, t, "")
}

// TristoreBinTags is TristoreBin built with go build -tags tags (e.g.
// "faultsync"), once per run for each tag list.
func TristoreBinTags(ctx context.Context, t testing.TB, tags string) string {
	t.Helper()
	bs := &tristoreBins
	bs.mu.Lock()
	if bs.bins == nil {
		bs.bins = map[string]*builtBin{}
	}
	b := bs.bins[tags]
	if b == nil {
		b = &builtBin{}
		bs.bins[tags] = b
	}
	bs.mu.Unlock()
	b.once.Do(func() {
		dir, err := os.MkdirTemp("", "tristore-test-bin-")
		if err != nil {
			b.err = err
			return
		}
		b.path = filepath.Join(dir, "tristore")
		args := []string{"build", "-o", b.path}
		if tags != "" {
			args = append(args, "-tags", tags)
		}
		out, err := exec.CommandContext(ctx, "go", append(args, "github.com/tristore/tristore/cmd/tristore")...).CombinedOutput()
		if err != nil {
			b.err = fmt.Errorf("go build -tags %q cmd/tristore: %v\n%s", tags, err, out)
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

// RemoveTristoreBin removes what TristoreBin and TristoreBinTags built,
// if anything (for a TestMain that does more than Main).
func RemoveTristoreBin() {
	bs := &tristoreBins
	bs.mu.Lock()
	defer bs.mu.Unlock()
	for _, b := range bs.bins {
		if b.path != "" {
			os.RemoveAll(filepath.Dir(b.path))
		}
	}
}
