package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const reportSamples = "../../bench/report/testdata"

// TestReportCommand: `report DIR... --out` writes the page and both
// exports and names them; `--compare A B` prints the ratios; --compare of
// one run and a directory without results are refused by name.
func TestReportCommand(t *testing.T) {
	out := filepath.Join(t.TempDir(), "rep")
	a, b := filepath.Join(reportSamples, "batch-posix"), filepath.Join(reportSamples, "batch-s3")
	stdout, stderr, err := runCLI3(t, "report", "posix="+a, "s3="+b, "--compare", "--out", out)
	if err != nil {
		t.Fatalf("%v\n%s\n%s", err, stdout, stderr)
	}
	for _, want := range []string{"A = posix", "B = s3", "MB/s A", "256KiB", "wrote " + filepath.Join(out, "index.html"),
		"wrote " + filepath.Join(out, "compare.csv"), "complete"} {
		if !strings.Contains(stdout, want) {
			t.Fatalf("output lacks %q:\n%s", want, stdout)
		}
	}
	for _, f := range []string{"index.html", "summary.csv", "summary.json", "compare.csv", "compare.json"} {
		if st, err := os.Stat(filepath.Join(out, f)); err != nil || st.Size() == 0 {
			t.Fatalf("%s: %v", f, err)
		}
	}
	if _, _, err := runCLI3(t, "report", a, "--compare", "--out", t.TempDir()); err == nil || !strings.Contains(err.Error(), "two runs") {
		t.Fatalf("--compare with one run: %v", err)
	}
	empty := t.TempDir()
	if _, _, err := runCLI3(t, "report", empty, "--out", t.TempDir()); err == nil || !strings.Contains(err.Error(), empty) {
		t.Fatalf("no results: %v", err)
	}
}
