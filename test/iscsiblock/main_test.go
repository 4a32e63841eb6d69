package iscsiblock

import (
	"os"
	"path/filepath"
	"testing"
)

// TestMain removes the tristore binary TestCLI builds (once per run).
func TestMain(m *testing.M) {
	code := m.Run()
	if binPath != "" {
		os.RemoveAll(filepath.Dir(binPath))
	}
	os.Exit(code)
}
