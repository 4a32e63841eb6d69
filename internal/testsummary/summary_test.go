package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The fixture module (testdata/fixture) has, in package a, passing,
// failing and skipping tests (a capability skip through the testutil
// prefix, a direct "needs root" skip, a helper-process skip, a skip with no
// reason, subtests that pass, fail and skip, a parent that fails on its
// own), in b a test that hangs past -timeout, in c a panic, in d a build
// failure, and e has no tests. testdata/fixture.json is its
// `go test -json -count=1 -timeout 3s ./...` output.

var (
	// Not strict: 4 passes in a, 1 in b; failures TestFail, TestSubs/bad,
	// TestParentOwnFail, b's TestHang, c's TestPanics, d's build; 5 skips.
	wantLoose = "5 passed, 6 failed, 5 skipped"
	// Strict: the capability skip, the direct root skip and the reasonless
	// skip fail; the helper-process skip and the soak skip stay skips.
	wantStrict = "5 passed, 9 failed, 2 skipped"
)

var lastLine = regexp.MustCompile(`^\d+ passed, \d+ failed, \d+ skipped$`)

func summarise(t *testing.T, args ...string) (string, int) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := run(append([]string{"-trim", "example.com/fx/"}, args...), &out, &errOut)
	if errOut.Len() > 0 {
		t.Logf("stderr: %s", errOut.String())
	}
	return out.String(), code
}

func last(out string) string {
	ls := strings.Split(strings.TrimRight(out, "\n"), "\n")
	return ls[len(ls)-1]
}

func TestFixtureLoose(t *testing.T) {
	out, code := summarise(t, "-strict=false", "-in", "testdata/fixture.json")
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	if l := last(out); l != wantLoose || !lastLine.MatchString(l) {
		t.Errorf("last line %q, want %q", l, wantLoose)
	}
	for _, want := range []string{
		"SKIP a TestSkipCapability: a_test.go:13: missing capability: needs /dev/fuse",
		"SKIP a TestSkipDirectRoot: a_test.go:14: needs root: mounting",
		"SKIP a TestSkipHelper: a_test.go:17: helper process for TestPass only",
		"SKIP a TestSkipNoReason: (no reason given)",
		"SKIP a TestSubs/skip: a_test.go:24: set FX_SOAK=1 for the soak",
		"FAIL a TestFail\n        a_test.go:10: before\n        a_test.go:11: got 1, want 2\n",
		"FAIL a TestSubs/bad\n",
		"FAIL a TestParentOwnFail\n",
		"FAIL b TestHang: did not finish",
		"panic: test timed out after 3s",
		"FAIL c TestPanics\n        panic: assignment to entry in nil map",
		"FAIL d: build failed",
		"d/d_test.go:5:33: undefined: undefinedThing",
		"(1 packages have no test files)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("summary lacks %q", want)
		}
	}
	// A parent whose subtest failed is not counted again, nor are parents
	// that passed through their subtests.
	for _, not := range []string{"FAIL a TestSubs\n", "SKIP a TestSubs\n", "FAIL c TestAfter"} {
		if strings.Contains(out, not) {
			t.Errorf("summary has %q", not)
		}
	}
	if !regexp.MustCompile(`(?m)^a +4 +3 +5 `).MatchString(out) {
		t.Errorf("package a's row is not 4 passed, 3 failed, 5 skipped:\n%s", out)
	}
}

func TestFixtureStrict(t *testing.T) {
	out, code := summarise(t, "-strict", "-in", "testdata/fixture.json")
	if code != 1 {
		t.Errorf("exit %d, want 1", code)
	}
	if l := last(out); l != wantStrict {
		t.Errorf("last line %q, want %q", l, wantStrict)
	}
	for _, want := range []string{
		"FAIL a TestSkipCapability: skipped for a missing capability",
		"FAIL a TestSkipDirectRoot: skipped for a missing capability",
		"FAIL a TestSkipNoReason: skipped without a reason",
		"SKIP a TestSkipHelper: a_test.go:17: helper process for TestPass only",
		"SKIP a TestSubs/skip: a_test.go:24: set FX_SOAK=1 for the soak",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("strict summary lacks %q", want)
		}
	}
}

// TestStrictDefaultsToCI: CI=true turns strict mode on without the flag.
func TestStrictDefaultsToCI(t *testing.T) {
	t.Setenv("CI", "true")
	out, _ := summarise(t, "-in", "testdata/fixture.json")
	if l := last(out); l != wantStrict {
		t.Errorf("CI=true: last line %q, want %q", l, wantStrict)
	}
}

// TestAllPassExitsZero: a run with only passes and legitimate skips exits 0
// even in strict mode.
func TestAllPassExitsZero(t *testing.T) {
	var keep []string
	for _, l := range strings.Split(readFile(t, "testdata/fixture.json"), "\n") {
		if strings.Contains(l, `"Test":"TestPass"`) || strings.Contains(l, `"Test":"TestSkipHelper"`) {
			keep = append(keep, l)
		}
	}
	keep = append(keep, `{"Action":"pass","Package":"example.com/fx/a","Elapsed":0.1}`)
	in := filepath.Join(t.TempDir(), "ok.json")
	os.WriteFile(in, []byte(strings.Join(keep, "\n")+"\n"), 0o644)
	out, code := summarise(t, "-strict", "-in", in)
	if code != 0 || last(out) != "1 passed, 0 failed, 1 skipped" {
		t.Errorf("exit %d, last line %q", code, last(out))
	}
}

// TestRunSavesRawAndPrintsProgress runs a command whose output is the
// fixture: the raw file is a byte-for-byte copy, each package is printed as
// it finishes with its failures' output, then the summary.
func TestRunSavesRawAndPrintsProgress(t *testing.T) {
	raw := filepath.Join(t.TempDir(), "raw.json")
	out, code := summarise(t, "-strict=false", "-o", raw, "--", "cat", "testdata/fixture.json")
	if code != 1 || last(out) != wantLoose {
		t.Errorf("exit %d, last line %q", code, last(out))
	}
	if got, want := readFile(t, raw), readFile(t, "testdata/fixture.json"); got != want {
		t.Errorf("raw file differs from go test's output (%d vs %d bytes)", len(got), len(want))
	}
	progress, _, ok := strings.Cut(out, "=== Summary per package")
	if !ok {
		t.Fatalf("no summary:\n%s", out)
	}
	for _, want := range []string{
		"FAIL a ", "4 passed, 3 failed, 5 skipped",
		"    --- FAIL a TestFail\n        a_test.go:10: before\n",
		"FAIL b ", "FAIL c ", "FAIL d ",
	} {
		if !strings.Contains(progress, want) {
			t.Errorf("progress lacks %q:\n%s", want, progress)
		}
	}
}

// TestCommandFailureWithoutTests: go test failing without any failed test
// in its output (here a command that prints nothing and exits 1) is a
// failure.
func TestCommandFailureWithoutTests(t *testing.T) {
	out, code := summarise(t, "--", "sh", "-c", "echo 'no packages to test' >&2; exit 1")
	if code != 1 || last(out) != "0 passed, 1 failed, 0 skipped" {
		t.Errorf("exit %d, last line %q\n%s", code, last(out), out)
	}
	if !strings.Contains(out, "FAIL (go test): go test: exit status 1") {
		t.Errorf("summary does not say go test failed:\n%s", out)
	}
}

// TestTruncatedStream: a stream that stops mid-package (go test killed)
// counts the unfinished test and package as failures.
func TestTruncatedStream(t *testing.T) {
	in := filepath.Join(t.TempDir(), "cut.json")
	os.WriteFile(in, []byte(`{"Action":"start","Package":"p"}
{"Action":"run","Package":"p","Test":"TestA"}
{"Action":"output","Package":"p","Test":"TestA","Output":"=== RUN   TestA\n"}
`), 0o644)
	out, code := summarise(t, "-in", in)
	if code != 1 || last(out) != "0 passed, 1 failed, 0 skipped" || !strings.Contains(out, "FAIL p TestA: did not finish") {
		t.Errorf("exit %d:\n%s", code, out)
	}
}

// TestLiveGoTest runs go test -json on the fixture module with the Go in
// use, so a change in go test's JSON is noticed; the counts must match the
// saved fixture's.
func TestLiveGoTest(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: runs go test on the fixture module (about 5 s)")
	}
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("go not on PATH: %v", err)
	}
	t.Chdir("testdata/fixture")
	t.Setenv("GOFLAGS", "-mod=mod")
	out, code := summarise(t, "-strict", "--", goBin, "test", "-json", "-count=1", "-timeout", "3s", "./...")
	if code != 1 || last(out) != wantStrict {
		t.Errorf("exit %d, last line %q, want %q\n%s", code, last(out), wantStrict, out)
	}
}

func TestLinesBounded(t *testing.T) {
	var l lines
	for i := range 10000 {
		l.write("line " + strings.Repeat("x", i%7) + "\n")
	}
	l.write("partial")
	all := l.all()
	if len(all) != headMax+1+tailMax+1 || !strings.Contains(all[headMax], "9700 lines left out") || all[len(all)-1] != "partial" {
		t.Errorf("%d lines kept; marker %q; last %q", len(all), all[headMax], all[len(all)-1])
	}
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
