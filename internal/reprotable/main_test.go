package main

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// repoRoot: the doc's blocks name data paths relative to the repository.
func repoRoot(t *testing.T) {
	t.Helper()
	wd, _ := os.Getwd()
	t.Chdir(filepath.Join(wd, "..", ".."))
}

// TestDocMatchesData is render -check on docs/reproduction.md: every
// figure in its table is what the saved runs give.
func TestDocMatchesData(t *testing.T) {
	repoRoot(t)
	doc, err := os.ReadFile("docs/reproduction.md")
	if err != nil {
		t.Fatal(err)
	}
	out, err := Render(doc)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out, doc) {
		t.Fatal("docs/reproduction.md differs from its saved runs: go run ./internal/reprotable render docs/reproduction.md")
	}
	// Every finding is a row, measured or not.
	for _, want := range []string{"iSCSI leads small-file", "object storage with ≥ 8 threads", "O_SYNC write amplification",
		"efficiency (payload ÷ wire bytes) rises", "object bandwidth rises", "HTTP server throughput rises",
		"PostMark runs faster on iSCSI", "independent disks beat RAID"} {
		if !strings.Contains(string(doc), want) {
			t.Errorf("table lacks the row %q", want)
		}
	}
}

// TestCheckCatchesEdit: a figure changed by hand (or a verdict flipped) is
// caught by -check, and render puts the data's figure back.
func TestCheckCatchesEdit(t *testing.T) {
	repoRoot(t)
	doc, err := os.ReadFile("docs/reproduction.md")
	if err != nil {
		t.Fatal(err)
	}
	num := regexp.MustCompile(`\d+\.\d\d`)
	loc := num.FindIndex(doc[bytes.Index(doc, []byte("<!-- reprotable:")):])
	if loc == nil {
		t.Fatal("no figure in the table")
	}
	off := bytes.Index(doc, []byte("<!-- reprotable:"))
	edited := append(append(append([]byte{}, doc[:off+loc[0]]...), []byte("99.99")...), doc[off+loc[1]:]...)
	f := filepath.Join(t.TempDir(), "r.md")
	os.WriteFile(f, edited, 0o644)
	if err := renderFile(f, true); err == nil || !strings.Contains(err.Error(), "differs from its saved runs") {
		t.Fatalf("check of an edited figure: %v", err)
	}
	if err := renderFile(f, false); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(f); !bytes.Equal(b, doc) {
		t.Fatal("render did not restore the data's figure")
	}
	flipped := bytes.Replace(doc, []byte("| yes |"), []byte("| no |"), 1)
	os.WriteFile(f, flipped, 0o644)
	if !bytes.Equal(flipped, doc) {
		if err := renderFile(f, true); err == nil {
			t.Fatal("a flipped verdict passed -check")
		}
	}
}
