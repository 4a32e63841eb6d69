package iscsiblock

import (
	"testing"

	"github.com/tristore/tristore/internal/testutil"
)

// TestMain removes the tristore binary TestCLI builds (once per run).
func TestMain(m *testing.M) { testutil.Main(m) }
