package iscsipeers

import (
	"os"
	"strings"
	"testing"
)

// The testdata files are iscsi-test-cu 1.19's verbose output (libiscsi,
// Debian 12): the SCSI family against tgt and against tristore, the iSCSI
// family against tristore (now, and as it was before the DataSN fix: a
// real failing run for the parser).

func readCU(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestParseCU: skips are counted apart from passes, the counts agree with
// the tool's Run Summary, and a result word followed by later output on
// the same line is read.
func TestParseCU(t *testing.T) {
	for _, c := range []struct {
		file             string
		pass, skip, fail int
		want             map[string]cuOutcome
	}{
		{"testcu-scsi-tgt.txt", 146, 62, 7, map[string]cuOutcome{
			"Reserve6.LUNReset":        cuPass, // "...passed    [FAILED] PRIN ..." (output after the result)
			"ExtendedCopy.Simple":      cuSkip,
			"GetLBAStatus.BeyondEol":   cuFail,
			"ModeSense6.Control-SWP":   cuPass, // output before "passed", no [SKIPPED]
			"Reserve6.TargetColdReset": cuSkip, // [SKIPPED], a blank line, then passed
			"Inquiry.Standard":         cuPass,
		}},
		{"testcu-scsi-tristore.txt", 169, 46, 0, map[string]cuOutcome{
			"CompareAndWrite.InvalidDataOutSize": cuSkip,
			"MultipathIO.Reset":                  cuSkip,
			"Inquiry.Standard":                   cuPass,
		}},
		{"testcu-iscsi-tristore-2026-11-23-before-datasn-fix.txt", 14, 0, 1, map[string]cuOutcome{
			"iSCSIdatasn.iSCSIDataSnInvalid": cuFail,
			"iSCSITMF.LUNResetSimpleAsync":   cuPass,
		}},
		{"testcu-iscsi-tristore.txt", 15, 0, 0, map[string]cuOutcome{
			// "[FAILED] WRITE10 ..." lines are the test's own expected
			// command failures (CHECK CONDITION 0B/47/05), then "passed".
			"iSCSIdatasn.iSCSIDataSnInvalid": cuPass,
			"iSCSITMF.LUNResetSimpleAsync":   cuPass,
		}},
	} {
		r := parseCU(readCU(t, c.file))
		if p, s, f := r.counts(); p != c.pass || s != c.skip || f != c.fail {
			t.Errorf("%s: %s, want %d passed, %d skipped, %d failed", c.file, r.summary(), c.pass, c.skip, c.fail)
		}
		if p := r.problem(); p != "" {
			t.Errorf("%s: %s", c.file, p)
		}
		for k, want := range c.want {
			if got, ok := r.tests[k]; !ok || got != want {
				t.Errorf("%s: %s is %s, want %d", c.file, k, outcomeName(r.tests, k), want)
			}
		}
	}
}

// TestParseCUNotRun: a run that died mid-test, ran nothing, or printed
// nothing is a problem, and the test it died in is a failure.
func TestParseCUNotRun(t *testing.T) {
	full := readCU(t, "testcu-scsi-tristore.txt")
	cut := full[:strings.Index(full, "  Test: Simple ...    [SKIPPED] EXTENDEDCOPY")+len("  Test: Simple ...    [SKIPPED] EXTENDEDCOPY")]
	r := parseCU(cut)
	if p := r.problem(); !strings.Contains(p, "did not finish") {
		t.Errorf("crashed run: problem %q", p)
	}
	if r.tests["ExtendedCopy.Simple"] != cuFail {
		t.Errorf("the test the tool died in is %s, want failed", outcomeName(r.tests, "ExtendedCopy.Simple"))
	}
	none := "Run Summary:    Type  Total    Ran Passed Failed Inactive\n" +
		"              suites      0      0    n/a      0        0\n" +
		"               tests      0      0      0      0        0\n"
	if p := parseCU(none).problem(); !strings.Contains(p, "no test ran") {
		t.Errorf("zero tests: problem %q", p)
	}
	if p := parseCU("iscsi_connect failed. Failed to connect\n").problem(); p == "" {
		t.Error("no output: no problem reported")
	}
	// A Run Summary that disagrees with the parsed tests.
	bad := strings.Replace(full, "tests    215    215    215", "tests    215    215    214", 1)
	if p := parseCU(bad).problem(); !strings.Contains(p, "Run Summary says") {
		t.Errorf("disagreeing summary: problem %q", p)
	}
}

// TestCheckMustPass: the real runs pass the list; a run without a
// must-pass suite, or where it only skipped or failed, does not.
func TestCheckMustPass(t *testing.T) {
	scsi := parseCU(readCU(t, "testcu-scsi-tristore.txt"))
	iscsi := parseCU(readCU(t, "testcu-iscsi-tristore.txt"))
	if errs := checkMustPass(scsi, iscsi); len(errs) != 0 {
		t.Errorf("real runs: %v", errs)
	}
	errs := strings.Join(checkMustPass(iscsi), "\n")
	if !strings.Contains(errs, "must-pass suite Inquiry did not run") {
		t.Errorf("SCSI family missing: %s", errs)
	}
	skipped := parseCU(readCU(t, "testcu-scsi-tristore.txt"))
	failed := parseCU(readCU(t, "testcu-scsi-tristore.txt"))
	for k := range skipped.tests {
		if strings.HasPrefix(k, "Inquiry.") {
			skipped.tests[k] = cuSkip
		}
	}
	failed.tests["Read10.Simple"] = cuFail
	if errs := strings.Join(checkMustPass(skipped, iscsi), "\n"); !strings.Contains(errs, "must-pass suite Inquiry only skipped") {
		t.Errorf("Inquiry all skipped: %s", errs)
	}
	if errs := strings.Join(checkMustPass(failed, iscsi), "\n"); !strings.Contains(errs, "Read10.Simple (must-pass suite) failed") {
		t.Errorf("Read10.Simple failed: %s", errs)
	}
}
