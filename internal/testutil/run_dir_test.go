package testutil

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRunInDir: RunIn runs the command in dir (entered by a shell after
// the exec, see Exec) and a missing dir is an error naming the command.
func TestRunInDir(t *testing.T) {
	dir := t.TempDir()
	if got := strings.TrimSpace(RunIn(t, 10*time.Second, dir, nil, "pwd", "-P")); got != dir {
		real, _ := filepath.EvalSymlinks(dir)
		if got != real {
			t.Fatalf("pwd in %s printed %q", dir, got)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "a b"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := RunIn(t, 10*time.Second, dir, nil, "cat", "a b"); got != "x" {
		t.Fatalf("cat of a relative name with a space: %q", got)
	}
	if out, err := Exec(t.Context(), 10*time.Second, filepath.Join(dir, "missing"), nil, "true"); err == nil || !strings.Contains(err.Error(), "true") {
		t.Fatalf("missing dir: %v\n%s", err, out)
	}
}
