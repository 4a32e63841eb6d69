// Package iscsipeers tests tristore's iSCSI target with peer tools:
// libiscsi's iscsi-inq, iscsi-ls, iscsi-readcapacity16 and its target test
// suite iscsi-test-cu (SCSI and iSCSI families, also run against tgt for
// comparison), and qemu-img convert to and from iscsi:// URLs.
package iscsipeers

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tristore/tristore/blockdev/filelun"
	iscsitgt "github.com/tristore/tristore/frontend/iscsi"
	"github.com/tristore/tristore/internal/testutil/iscsitarget"
	"github.com/tristore/tristore/internal/testutil/tgt"
)

// target is our target serving one volume on 127.0.0.1.
type target struct {
	addr string
	iqn  string
	url  string // iscsi://addr/iqn/0
	st   filelun.Store
}

func startOurs(t *testing.T, size int64, cfg iscsitgt.Config) *target {
	t.Helper()
	tg := iscsitarget.Start(t, "peer", size, cfg)
	return &target{addr: tg.Portal, iqn: tg.IQN, url: tg.URL, st: tg.Store}
}

// startTgt runs tgtd on 127.0.0.1 with one LUN (1) over a new file of size
// bytes with the rdwr backing store. It returns the LUN's URL.
func startTgt(t *testing.T, size int64) string {
	t.Helper()
	tg := tgt.Start(t, tgt.Opts{Size: size, IQN: "iqn.2026-11.io.tristore.test:tgt"})
	return "iscsi://" + tg.Portal + "/" + tg.IQN + "/1"
}

// cuOutcome is one iscsi-test-cu test's result. The tool reports a test
// that skipped ("[SKIPPED] X is not implemented") as passed; it is told
// apart here so a skip is never counted as a pass.
type cuOutcome int

const (
	cuPass cuOutcome = iota
	cuSkip
	cuFail
)

// cuResults is one iscsi-test-cu run: each "Suite.Test" with its outcome,
// in the order they ran, and the tool's own Run Summary.
type cuResults struct {
	tests    map[string]cuOutcome
	order    []string
	ran      int  // the Run Summary's "tests ... Ran" column
	passed   int  // its Passed column (skips included)
	failed   int  // its Failed column
	complete bool // the Run Summary was printed: the tool did not die mid-run
	exit     int
}

func (r cuResults) counts() (pass, skip, fail int) {
	for _, o := range r.tests {
		switch o {
		case cuPass:
			pass++
		case cuSkip:
			skip++
		case cuFail:
			fail++
		}
	}
	return
}

// with lists the tests with outcome o, sorted.
func (r cuResults) with(o cuOutcome) []string {
	var out []string
	for k, v := range r.tests {
		if v == o {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// summary is "P passed, S skipped, F failed of N run".
func (r cuResults) summary() string {
	p, s, f := r.counts()
	return fmt.Sprintf("%d passed, %d skipped, %d failed of %d run", p, s, f, len(r.tests))
}

// problem says why the run cannot be trusted, or "" when it can: the tool
// died before its Run Summary (a crash or kill), ran no test, or ran a
// different number of tests than were parsed.
func (r cuResults) problem() string {
	switch {
	case !r.complete:
		return fmt.Sprintf("the tool did not finish (no Run Summary; exit %d); %d tests parsed", r.exit, len(r.tests))
	case r.ran == 0 || len(r.tests) == 0:
		return fmt.Sprintf("no test ran (Run Summary: %d run; exit %d)", r.ran, r.exit)
	}
	if p, s, f := r.counts(); r.ran != len(r.tests) || r.passed != p+s || r.failed != f {
		return fmt.Sprintf("the Run Summary says %d ran, %d passed, %d failed but the output gives %s",
			r.ran, r.passed, r.failed, r.summary())
	}
	return ""
}

// runTestCU runs iscsi-test-cu for one family in its verbose mode and
// parses what it prints. (The XML mode cannot be used: it records a
// skipped test as a success and its [SKIPPED] lines cannot be tied to a
// test.)
func runTestCU(t *testing.T, family, url string) cuResults {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "iscsi-test-cu", "--dataloss", "--verbose", "-t", family, url)
	cmd.Dir = t.TempDir()
	// Its exit status does not say whether tests failed; the output does.
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("iscsi-test-cu -t %s %s: %v\n%s", family, url, err, out)
	}
	res := parseCU(string(out))
	res.exit = cmd.ProcessState.ExitCode()
	return res
}

var cuRunSummary = regexp.MustCompile(`^\s*tests\s+(\d+)\s+(\d+)\s+(\d+|n/a)\s+(\d+)\s+(\d+)\s*$`)

// parseCU reads CUnit's verbose output: "Suite: S", then per test
// "  Test: T ..." followed, on the same line or after the test's own
// output, by "passed" or "FAILED"; a passed test that printed a [SKIPPED]
// line is a skip. A test left open when the output ends (the tool died)
// is a failure. The "Run Summary:" table gives the number of tests run.
func parseCU(out string) cuResults {
	res := cuResults{tests: map[string]cuOutcome{}, ran: -1}
	var suite, test string
	open, skipped, inSummary := false, false, false
	finish := func(o cuOutcome) {
		k := suite + "." + test
		if _, seen := res.tests[k]; !seen {
			res.order = append(res.order, k)
		}
		res.tests[k] = o
		open = false
	}
	// The result word starts its line, or follows "Test: T ..."; output
	// from the next steps may follow it on the same line.
	result := func(s string) bool {
		word, _, _ := strings.Cut(s, " ")
		switch word {
		case "passed":
			if skipped {
				finish(cuSkip)
			} else {
				finish(cuPass)
			}
			return true
		case "FAILED":
			finish(cuFail)
			return true
		}
		return false
	}
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimRight(l, "\r")
		if name, ok := strings.CutPrefix(l, "Suite: "); ok {
			if open {
				finish(cuFail)
			}
			suite = strings.TrimSpace(name)
			continue
		}
		if rest, ok := strings.CutPrefix(strings.TrimSpace(l), "Test: "); ok && strings.Contains(rest, " ...") {
			if open {
				finish(cuFail)
			}
			name, after, _ := strings.Cut(rest, " ...")
			test, open, skipped = strings.TrimSpace(name), true, false
			if result(after) {
				continue
			}
			l = after
		}
		if strings.HasPrefix(strings.TrimSpace(l), "Run Summary:") {
			if open {
				finish(cuFail)
			}
			inSummary = true
			continue
		}
		if inSummary {
			if m := cuRunSummary.FindStringSubmatch(l); m != nil {
				res.ran, _ = strconv.Atoi(m[2])
				res.passed, _ = strconv.Atoi(m[3])
				res.failed, _ = strconv.Atoi(m[4])
				res.complete = true
			}
			continue
		}
		if !open {
			continue
		}
		if strings.Contains(l, "[SKIPPED]") {
			skipped = true
		}
		result(l)
	}
	if open {
		finish(cuFail)
	}
	return res
}
