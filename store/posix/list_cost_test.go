package posix_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tristore/tristore/store"
	"github.com/tristore/tristore/store/posix"
)

// settle waits until directory stamps written so far are old enough for
// listings to reuse their snapshots (dircache.go: stampSettle is 50 ms).
func settle() { time.Sleep(120 * time.Millisecond) }

// pageCost lists one page and returns the directory entries it read from
// disk and the entries it looked at.
func pageCost(t *testing.T, b *posix.Backend, opts store.ListOptions) (read, visited int64, res store.ListResult) {
	t.Helper()
	r0, v0 := b.ListCounters()
	res, err := b.List(context.Background(), "bkt", opts)
	if err != nil {
		t.Fatal(err)
	}
	r1, v1 := b.ListCounters()
	return r1 - r0, v1 - v0, res
}

func writeFiles(t *testing.T, dir string, n int, name func(i int) string) {
	t.Helper()
	made := ""
	for i := range n {
		p := filepath.Join(dir, name(i))
		if d := filepath.Dir(p); d != made {
			os.MkdirAll(d, 0o755)
			made = d
		}
		if err := os.WriteFile(p, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestListPageCostBoundedByPage: once a directory has been read, a page
// cut from its middle reads no entries from disk and looks at about as
// many entries as it returns, whether the directory holds 500 or 3,000
// keys; with a delimiter other than "/" a page of common prefixes skips
// each group's keys (flat or in subdirectories) instead of reading them.
// Without the snapshot cache and the seeks each page read the whole
// directory (and, for "-", every key of every group it returned).
func TestListPageCostBoundedByPage(t *testing.T) {
	const limit = 20
	for _, n := range []int{500, 3000} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			b, _ := newBucket(t, posix.Options{})
			root := filepath.Join(b.Root(), "bkt")
			g := n / 100 // keys per group: 100 groups
			writeFiles(t, filepath.Join(root, "grp"), n, func(i int) string { return fmt.Sprintf("g%04d-%04d", i/g, i%g) })
			writeFiles(t, filepath.Join(root, "nest"), 300, func(i int) string { return fmt.Sprintf("k%04d-d/%04d", i/5, i%5) })
			putS(t, b, "grp//odd", "hidden key in the range")
			settle()
			for _, c := range []struct {
				opts store.ListOptions
				cps  bool
			}{
				{store.ListOptions{Prefix: "grp/", After: "grp/g0050-", Limit: limit}, false},
				{store.ListOptions{Prefix: "grp/", Delimiter: "-", After: "grp/g0050-", Limit: limit}, true},
				{store.ListOptions{Prefix: "nest/", Delimiter: "-", After: "nest/k0020-", Limit: limit}, true},
			} {
				pageCost(t, b, c.opts) // the first read of a directory is whole
				read, visited, res := pageCost(t, b, c.opts)
				if got := len(res.Objects) + len(res.CommonPrefixes); got != limit || !res.IsTruncated {
					t.Fatalf("%+v: %d entries, truncated=%v", c.opts, got, res.IsTruncated)
				}
				maxRead := int64(0)
				if c.cps && strings.HasPrefix(c.opts.Prefix, "nest") {
					maxRead = 5 * (limit + 1) // one short readdir per directory reported as a prefix
				}
				if read > maxRead || visited > 3*limit+10 {
					t.Fatalf("%+v in a %d-key directory: page read %d entries from disk (max %d) and looked at %d (max %d)",
						c.opts, n, read, maxRead, visited, 3*limit+10)
				}
			}
		})
	}
}

// TestListSnapshotSeesOtherViews: a cached directory snapshot is not used
// once the directory changed behind the store (a file made or removed
// directly, as NFS does), also right after the snapshot was taken.
func TestListSnapshotSeesOtherViews(t *testing.T) {
	b, _ := newBucket(t, posix.Options{})
	dir := filepath.Join(b.Root(), "bkt", "d")
	writeFiles(t, dir, 300, func(i int) string { return fmt.Sprintf("%04d", i*2) })
	settle()
	opts := store.ListOptions{Prefix: "d/", After: "d/0100", Limit: 3}
	want := func(keys string) {
		t.Helper()
		if got := strings.Join(listKeys(t, b, opts), ","); got != keys {
			t.Fatalf("List %+v = %s, want %s", opts, got, keys)
		}
	}
	want("d/0102,d/0104,d/0106")
	want("d/0102,d/0104,d/0106") // from the snapshot
	os.WriteFile(filepath.Join(dir, "0103"), []byte("new"), 0o644)
	want("d/0102,d/0103,d/0104")
	os.Remove(filepath.Join(dir, "0102"))
	want("d/0103,d/0104,d/0106")
	settle()
	want("d/0103,d/0104,d/0106")
	os.Remove(filepath.Join(dir, "0104"))
	os.Mkdir(filepath.Join(dir, "0104"), 0o755) // a file became a directory
	os.WriteFile(filepath.Join(dir, "0104", "in"), nil, 0o644)
	want("d/0103,d/0104/in,d/0106")
}
