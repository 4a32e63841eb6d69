package powerloss_test

import (
	"context"
	"testing"
	"time"

	"github.com/tristore/tristore/internal/testutil"
)

// The harness has teeth: tristore built with -tags faultsync skips the
// fsync named by TRISTORE_FAULT_SKIP (internal/faultsync), and each
// scenario must then report a lost or torn acknowledged write. Without
// the tag the skip list is never read (the sites compile to plain syncs).

// faultsyncBin builds cmd/tristore with -tags faultsync once per run.
func faultsyncBin(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	return testutil.TristoreBinTags(ctx, t, "faultsync")
}

// TestS3Teeth: with the object fsync, the directory fsync after the
// publishing rename, or the directory fsync after a delete skipped, the
// S3 scenario reports a lost, torn or resurrected acknowledged object.
func TestS3Teeth(t *testing.T) {
	bin := faultsyncBin(t)
	for _, tc := range []struct {
		site string
		ops  s3Ops
	}{
		{"put-file", allS3Ops},
		{"put-dir", s3Ops{put: true, multipart: true, copy: true}},
		{"delete-dir", s3Ops{put: true, del: true, cutOnDelete: true}},
	} {
		t.Run(tc.site, func(t *testing.T) {
			mustCatch(t, bin, tc.site, func(r *rig) *report { return s3Scenario(t, r, 42, 4, tc.ops) })
		})
	}
}

// TestNFSTeeth: with the FILE_SYNC write's fsync, COMMIT's fsync or the
// directory fsync after CREATE/RENAME/REMOVE skipped, the NFS scenario
// reports a lost acknowledged write or name.
func TestNFSTeeth(t *testing.T) {
	bin := faultsyncBin(t)
	for _, tc := range []struct {
		site string
		ops  nfsOps
	}{
		{"nfs-write", nfsOps{fileSync: true}},
		{"nfs-commit", nfsOps{commit: true}},
		{"nfs-dir", allNFSOps},
		// Only the source side of a cross-directory RENAME unsynced: the
		// strict per-directory model finds the file under both names.
		{"nfs-rename-src", nfsOps{fileSync: true, namespace: true, crossOnly: true}},
	} {
		t.Run(tc.site, func(t *testing.T) {
			mustCatch(t, bin, tc.site, func(r *rig) *report { return nfsScenario(t, r, 42, 4, tc.ops) })
		})
	}
}

// TestISCSITeeth: with the fsync after a FUA write or the fsync of
// SYNCHRONIZE CACHE skipped, the iSCSI scenario reports a lost block.
func TestISCSITeeth(t *testing.T) {
	bin := faultsyncBin(t)
	for _, tc := range []struct {
		site string
		ops  lunOps
	}{
		{"lun-fua", lunOps{fua: true}},
		{"lun-flush", lunOps{flush: true}},
	} {
		t.Run(tc.site, func(t *testing.T) {
			mustCatch(t, bin, tc.site, func(r *rig) *report { return lunScenario(t, r, 42, 4, tc.ops) })
		})
	}
}

// TestISCSIWriteCacheClaim: the LUN keeps plain writes in the page cache
// until SYNCHRONIZE CACHE, so it must report WCE=1 — and the checker
// would catch it if it reported WCE=0: taking every completed plain write
// as a promise (as WCE=0 means) finds lost writes after a cut.
func TestISCSIWriteCacheClaim(t *testing.T) {
	r := newRig(t, ourBin(t))
	rep := lunScenario(t, r, 42, 4, lunOps{flush: true, claimNoWCE: true})
	if !rep.failed() {
		t.Fatal("plain writes survived every cut although they are not synced: WCE=1 would then be a needless claim, or the check is blind")
	}
	t.Logf("a LUN claiming WCE=0 would be caught (%d violations), first: %s", len(rep.errs), rep.errs[0])
}

// mustCatch runs scenario on a rig whose server skips the fsync at site
// and fails t unless the scenario reports a violation.
func mustCatch(t *testing.T, bin, site string, scenario func(*rig) *report) {
	t.Helper()
	rep := scenario(newRig(t, bin, "TRISTORE_FAULT_SKIP="+site))
	if !rep.failed() {
		t.Fatalf("skipping the %s fsync went unnoticed in 4 power cuts", site)
	}
	t.Logf("caught (%d violations), first: %s", len(rep.errs), rep.errs[0])
}
