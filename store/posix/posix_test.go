package posix_test

import (
	"testing"

	"github.com/tristore/tristore/store"
	"github.com/tristore/tristore/store/posix"
	"github.com/tristore/tristore/store/storetest"
)

func TestConformanceXattr(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return open(t, posix.Options{}) })
}

func TestConformanceNoXattr(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store { return open(t, posix.Options{NoXattr: true}) })
}

func open(t *testing.T, opts posix.Options) *posix.Backend {
	t.Helper()
	b, err := posix.Open(t.TempDir(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { b.Close() })
	// The start-up walk for stale temp files is over before a test plants
	// reserved names of its own (it would remove them).
	waitCleanup(t, b)
	return b
}
