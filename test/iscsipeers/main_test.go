// Package iscsipeers tests tristore's iSCSI target with peer tools:
// libiscsi's iscsi-inq, iscsi-ls, iscsi-readcapacity16 and its target test
// suite iscsi-test-cu (SCSI and iSCSI families, also run against tgt for
// comparison), and qemu-img convert to and from iscsi:// URLs.
package iscsipeers

import (
	"context"
	"encoding/xml"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
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

func run(t *testing.T, timeout time.Duration, dir, name string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// cuResults maps "Suite.Test" to pass (true) or fail (false), and counts
// the tests that passed only by skipping (the tool counts a skip as a pass).
type cuResults struct {
	tests     map[string]bool
	skipped   int
	truncated bool // the results file ended early: the tool died mid-run
	exit      int
}

func (r cuResults) counts() (pass, fail int) {
	for _, ok := range r.tests {
		if ok {
			pass++
		} else {
			fail++
		}
	}
	return
}

func (r cuResults) failed() []string {
	var out []string
	for k, ok := range r.tests {
		if !ok {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// runTestCU runs iscsi-test-cu for one family in XML mode and parses
// CUnitAutomated-Results.xml.
func runTestCU(t *testing.T, family, url string) cuResults {
	t.Helper()
	dir := t.TempDir()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "iscsi-test-cu", "--dataloss", "-x", "-t", family, url)
	cmd.Dir = dir
	// It exits non-zero when a test fails; the XML file says which.
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("iscsi-test-cu -t %s %s: %v\n%s", family, url, err, out)
	}
	res := parseCU(t, filepath.Join(dir, "CUnitAutomated-Results.xml"))
	res.skipped = strings.Count(string(out), "[SKIPPED]")
	res.exit = cmd.ProcessState.ExitCode()
	return res
}

type cuXML struct {
	Suites []struct {
		Success *cuSuite `xml:"CUNIT_RUN_SUITE_SUCCESS"`
		Failure *cuSuite `xml:"CUNIT_RUN_SUITE_FAILURE"`
	} `xml:"CUNIT_RESULT_LISTING>CUNIT_RUN_SUITE"`
}

type cuSuite struct {
	Name    string `xml:"SUITE_NAME"`
	Records []struct {
		Success *struct {
			Name string `xml:"TEST_NAME"`
		} `xml:"CUNIT_RUN_TEST_SUCCESS"`
		Failure *struct {
			Name string `xml:"TEST_NAME"`
		} `xml:"CUNIT_RUN_TEST_FAILURE"`
	} `xml:"CUNIT_RUN_TEST_RECORD"`
}

func parseCU(t *testing.T, path string) cuResults {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("iscsi-test-cu wrote no results: %v", err)
	}
	// The file declares a DTD we do not have; the decoder ignores it.
	var x cuXML
	d := xml.NewDecoder(strings.NewReader(string(b)))
	d.Strict = false
	res := cuResults{tests: map[string]bool{}}
	if err := d.Decode(&x); err != nil {
		// A tool killed mid-run leaves a truncated file: close the open
		// elements and keep what was recorded.
		t.Logf("%s is incomplete (%v); using the results it has", path, err)
		res.truncated = true
		x = cuXML{}
		fixed := string(b[:strings.LastIndex(string(b), "</CUNIT_RUN_TEST_RECORD>")+len("</CUNIT_RUN_TEST_RECORD>")])
		fixed += "</CUNIT_RUN_SUITE_SUCCESS></CUNIT_RUN_SUITE></CUNIT_RESULT_LISTING></CUNIT_TEST_RUN_REPORT>"
		d = xml.NewDecoder(strings.NewReader(fixed))
		d.Strict = false
		if err := d.Decode(&x); err != nil {
			t.Fatalf("parsing %s: %v", path, err)
		}
	}
	for _, s := range x.Suites {
		su := s.Success
		if su == nil {
			su = s.Failure
		}
		if su == nil {
			continue
		}
		name := strings.TrimSpace(su.Name)
		for _, r := range su.Records {
			switch {
			case r.Failure != nil:
				res.tests[name+"."+strings.TrimSpace(r.Failure.Name)] = false
			case r.Success != nil:
				k := name + "." + strings.TrimSpace(r.Success.Name)
				if _, seen := res.tests[k]; !seen {
					res.tests[k] = true
				}
			}
		}
	}
	if len(res.tests) == 0 {
		t.Fatalf("no test results in %s", path)
	}
	return res
}

// runErr runs a command and returns its output and error.
func runErr(timeout time.Duration, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	return string(out), err
}
