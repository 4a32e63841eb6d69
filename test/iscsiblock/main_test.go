package iscsiblock

import (
	"os"
	"testing"

	"github.com/tristore/tristore/internal/testutil"
)

// TestMain removes the tristore binary TestCLI builds (once per run).
func TestMain(m *testing.M) {
	code := m.Run()
	testutil.RemoveTristoreBin()
	os.Exit(code)
}
