package iscsipeers

import (
	"fmt"
	"os"
	"strings"
	"testing"

	iscsitgt "github.com/tristore/tristore/frontend/iscsi"
	"github.com/tristore/tristore/internal/testutil"
)

// mustPass lists the iscsi-test-cu suites (libiscsi 1.19, Debian) in which
// every test passed against our target when this list was written. A test
// here that fails, skips every test or does not run is a regression.
// PreventAllow is not here: every one of its tests skips on a LUN that is
// not removable, as ours is. iSCSIdatasn is in since an out-of-order
// DataSN ends the command with CHECK CONDITION and keeps the connection
// (RFC 7143 §7.9), so the tool's reconnect never replays the write.
var mustPass = []string{
	"CompareAndWrite", "Inquiry", "Mandatory", "ModeSense6", "NoMedia", "Prefetch10", "Prefetch16",
	"Read6", "Read10", "Read12", "Read16", "ReadCapacity10", "ReadCapacity16",
	"StartStopUnit", "TestUnitReady", "Unmap", "Verify10", "Verify12", "Verify16",
	"Write10", "Write12", "Write16", "WriteSame10", "WriteSame16", "WriteVerify10", "WriteVerify12", "WriteVerify16",
	"GetLBAStatus", "OrWrite", "ReportSupportedOpcodes", "PrinReadKeys", "PrinServiceactionRange", "PrinReportCapabilities", "ProutRegister",
	"ProutReserve", "ProutClear", "ProutPreempt", "Reserve6", "ReadDefectData10", "ReadDefectData12",
	"iSCSIcmdsn", "iSCSIdatasn", "iSCSIResiduals", "iSCSITMF",
}

// knownGaps are tests that pass against tgt and do not pass against
// tristore, each with the reason; any other such test fails TestTestCU.
var knownGaps = map[string]string{
	// The tool's own reconnect replays the write it corrupted; depends on
	// reconnect timing (it also fails against tgt at times).
	"iSCSIdatasn.iSCSIDataSnInvalid": "timing-dependent in the tool",
	// Our Block Limits VPD sets WSNZ (frontend/iscsi/scsi/spc.go): WRITE
	// SAME with 0 blocks ("to the end of the LUN") is refused, so the tool
	// skips these; tgt implements them.
	"WriteSame10.ZeroBlocks": "WSNZ=1: WRITE SAME with 0 blocks is not implemented (skipped)",
	"WriteSame16.ZeroBlocks": "WSNZ=1: WRITE SAME with 0 blocks is not implemented (skipped)",
}

// TestTestCU runs libiscsi's target test suite, families SCSI and iSCSI,
// against our target and against tgt on a file of the same size, logs both
// runs' passed/skipped/failed counts (the tool itself counts a skip as a
// pass; here it is not), and fails when a run did not complete or ran no
// test, when a test of a mustPass suite fails or a mustPass suite did not
// run or only skipped, and when a test that passes against tgt does not
// pass here.
func TestTestCU(t *testing.T) {
	testutil.NeedCmd(t, "iscsi-test-cu")
	testutil.NeedCmd(t, "tgtd")
	testutil.NeedRoot(t, "tgtd needs root")
	ours := startOurs(t, 64<<20, iscsitgt.Config{})
	tgtURL := startTgt(t, 64<<20)
	report := os.Getenv("TRISTORE_TESTCU_REPORT") // optional file for docs/bench
	var lines []string
	var runs []cuResults
	for _, fam := range []string{"SCSI", "iSCSI"} {
		o := runTestCU(t, fam, ours.url)
		g := runTestCU(t, fam, tgtURL)
		if p := o.problem(); p != "" {
			t.Errorf("iscsi-test-cu, %s family, against tristore: %s", fam, p)
		}
		if p := g.problem(); p != "" {
			t.Errorf("iscsi-test-cu, %s family, against tgt: %s (the comparison with tgt is void)", fam, p)
		}
		line := fmt.Sprintf("family %s: tristore %s; tgt %s", fam, o.summary(), g.summary())
		t.Log(line)
		t.Logf("  tristore failed:  %v", o.with(cuFail))
		t.Logf("  tristore skipped: %v", o.with(cuSkip))
		t.Logf("  tgt failed:       %v", g.with(cuFail))
		lines = append(lines, line,
			"  tristore failed: "+strings.Join(o.with(cuFail), " "),
			"  tristore skipped: "+strings.Join(o.with(cuSkip), " "),
			"  tgt failed: "+strings.Join(g.with(cuFail), " "),
			"  tgt skipped: "+strings.Join(g.with(cuSkip), " "))
		for _, k := range g.order {
			if g.tests[k] != cuPass || o.tests[k] == cuPass {
				continue
			}
			if why, ok := knownGaps[k]; ok {
				t.Logf("known gap: %s passes against tgt, %s against tristore: %s", k, outcomeName(o.tests, k), why)
				lines = append(lines, "  known gap: "+k+" ("+outcomeName(o.tests, k)+"): "+why)
				continue
			}
			t.Errorf("%s passes against tgt but not against tristore (%s)", k, outcomeName(o.tests, k))
		}
		runs = append(runs, o)
	}
	for _, e := range checkMustPass(runs...) {
		t.Error(e)
	}
	if report != "" {
		if err := os.WriteFile(report, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
			t.Error(err)
		}
	}
}

// checkMustPass returns an error for each mustPass suite that did not run
// in any of runs, ran only skipped tests, or had a test fail or not finish.
func checkMustPass(runs ...cuResults) []string {
	var errs []string
	for _, m := range mustPass {
		var pass, skip int
		for _, r := range runs {
			for _, k := range r.order {
				suite, _, _ := strings.Cut(k, ".")
				if suite != m {
					continue
				}
				switch r.tests[k] {
				case cuPass:
					pass++
				case cuSkip:
					skip++
				case cuFail:
					errs = append(errs, fmt.Sprintf("%s (must-pass suite) failed against tristore", k))
				}
			}
		}
		switch {
		case pass == 0 && skip == 0:
			errs = append(errs, fmt.Sprintf("must-pass suite %s did not run against tristore", m))
		case pass == 0:
			errs = append(errs, fmt.Sprintf("must-pass suite %s only skipped (%d tests) against tristore", m, skip))
		}
	}
	return errs
}

func outcomeName(m map[string]cuOutcome, k string) string {
	o, ok := m[k]
	switch {
	case !ok:
		return "did not run"
	case o == cuSkip:
		return "skipped"
	case o == cuFail:
		return "failed"
	}
	return "passed"
}
