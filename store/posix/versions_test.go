package posix_test

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/tristore/tristore/store"
	"github.com/tristore/tristore/store/posix"
)

// TestVersionsCrashStates reopens a tree in the states a crash can leave
// between the steps of a versioned DELETE (the current file preserved
// and removed, the marker not yet written) and checks that the store
// answers consistently: the preserved version is current again.
func TestVersionsCrashStates(t *testing.T) {
	// Sidecar mode keeps the preserved copy's record in a sidecar that
	// only preserve writes; the power-loss scenario covers that mode.
	for _, noXattr := range []bool{false} {
		dir := t.TempDir()
		ctx := context.Background()
		b, err := posix.Open(dir, posix.Options{NoXattr: noXattr})
		if err != nil {
			t.Fatal(err)
		}
		if err := b.CreateBucket(ctx, "bkt", ""); err != nil {
			t.Fatal(err)
		}
		if err := b.SetBucketConfig(ctx, "bkt", store.VersioningConfig, store.VersioningEnabled); err != nil {
			t.Fatal(err)
		}
		for _, body := range []string{"one", "two"} {
			if _, err := b.Put(ctx, "bkt", "d/k", bytes.NewReader([]byte(body)), int64(len(body)), store.ObjectMeta{}); err != nil {
				t.Fatal(err)
			}
		}
		// The state after "preserve" and "unlink current" of a DELETE,
		// before its marker: the newest version is only in the versions area.
		cur, err := b.StatVersion(ctx, "bkt", "d/k", "")
		if err != nil {
			t.Fatal(err)
		}
		vdir := filepath.Join(dir, "bkt", ".tristore-hidden", "versions")
		hashes, _ := os.ReadDir(vdir)
		if len(hashes) != 1 {
			t.Fatalf("versions area: %v", hashes)
		}
		if err := os.Link(filepath.Join(dir, "bkt", "d", "k"), filepath.Join(vdir, hashes[0].Name(), cur.VersionID)); err != nil {
			t.Fatal(err)
		}
		b.Close()
		// The current file gone, as a crash before the marker leaves it.
		if err := os.Remove(filepath.Join(dir, "bkt", "d", "k")); err != nil {
			t.Fatal(err)
		}
		b3, err := posix.Open(dir, posix.Options{NoXattr: noXattr})
		if err != nil {
			t.Fatal(err)
		}
		rc, oi, err := b3.Get(ctx, "bkt", "d/k", 0, -1)
		if err != nil {
			t.Fatalf("noxattr=%v: after reopening a tree whose newest version lost its current file: %v", noXattr, err)
		}
		got, _ := io.ReadAll(rc)
		rc.Close()
		if string(got) != "two" || oi.VersionID != cur.VersionID {
			t.Fatalf("noxattr=%v: current after repair: %q %q, want two %q", noXattr, got, oi.VersionID, cur.VersionID)
		}
		lr, err := b3.ListVersions(ctx, "bkt", store.ListVersionsOptions{})
		if err != nil || len(lr.Versions) != 2 || !lr.Versions[0].IsLatest || lr.Versions[0].VersionID != cur.VersionID {
			t.Fatalf("noxattr=%v: versions after repair: %+v %v", noXattr, lr.Versions, err)
		}
		b3.Close()
	}
}
