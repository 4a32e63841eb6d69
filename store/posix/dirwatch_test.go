package posix_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/tristore/tristore/store"
	"github.com/tristore/tristore/store/posix"
	"github.com/tristore/tristore/store/storetest"
)

// TestListWatchedDirStaysCurrent: a directory listed once is watched
// (dirwatch.go); after changes made directly in the tree, as NFS makes
// them (files created, removed and renamed, directories made and removed,
// a file that becomes a directory, a directory marker) and through the
// store (Put, Delete), the next page, asked for at once, is the model's
// page for the keys that exist now (any start-after, delimiter "/" or
// none, any page size) and reads no more entries from disk than the small
// subdirectories it enters: not the 1,500-entry directory again. Paging
// the whole prefix with the returned NextAfter (the continuation token)
// gives every key once. Without the watch every page after a change read
// the whole directory again (its stamp moved).
func TestListWatchedDirStaysCurrent(t *testing.T) {
	defer posix.SetWatchMinDirSize(posix.SetWatchMinDirSize(0))
	b, ctx := newBucket(t, posix.Options{})
	root := filepath.Join(b.Root(), "bkt")
	dir := filepath.Join(root, "d")
	keys := map[string]bool{}
	writeFiles(t, dir, 1500, func(i int) string { return fmt.Sprintf("f%05d", i*2) })
	for i := range 1500 {
		keys[fmt.Sprintf("d/f%05d", i*2)] = true
	}
	sorted := func() []string {
		var ks []string
		for k := range keys {
			ks = append(ks, k)
		}
		sort.Strings(ks)
		return ks
	}
	check := func(step int, opts store.ListOptions, maxRead int64) {
		t.Helper()
		read, _, res := pageCost(t, b, opts)
		objs, cps, trunc, next := storetest.ListModel(sorted(), opts)
		var gotObjs []string
		for _, o := range res.Objects {
			gotObjs = append(gotObjs, o.Key)
		}
		if !slices.Equal(gotObjs, objs) || !slices.Equal(res.CommonPrefixes, cps) || res.IsTruncated != trunc || trunc && res.NextAfter != next {
			t.Fatalf("step %d, %+v:\n got %v %v %v %q\nwant %v %v %v %q", step, opts, gotObjs, res.CommonPrefixes, res.IsTruncated, res.NextAfter, objs, cps, trunc, next)
		}
		if read > maxRead {
			t.Fatalf("step %d, %+v: the page read %d directory entries from disk (max %d)", step, opts, read, maxRead)
		}
	}
	check(0, store.ListOptions{Prefix: "d/", Limit: 10}, 1<<20) // the first read of the directory is whole
	if b.WatchedDirs() == 0 {
		t.Fatal("no directory is watched")
	}
	rng := rand.New(rand.NewPCG(3, 4))
	pick := func() string { // an existing key of the top directory, or ""
		ks := sorted()
		for range 20 {
			k := ks[rng.IntN(len(ks))]
			if !strings.Contains(k[2:], "/") {
				return k
			}
		}
		return ""
	}
	for step := 1; step <= 60; step++ {
		for range 1 + rng.IntN(4) {
			n := rng.IntN(4000)
			name := fmt.Sprintf("f%05d", n)
			p := filepath.Join(dir, name)
			switch rng.IntN(8) {
			case 0, 1: // a file made over NFS
				if _, err := os.Stat(p); err == nil {
					continue
				}
				if err := os.WriteFile(p, []byte("nfs"), 0o644); err != nil {
					t.Fatal(err)
				}
				keys["d/"+name] = true
			case 2: // removed over NFS
				if k := pick(); k != "" {
					if err := os.Remove(filepath.Join(root, k)); err != nil {
						t.Fatal(err)
					}
					delete(keys, k)
				}
			case 3: // renamed over NFS
				if k := pick(); k != "" {
					if _, err := os.Stat(p); err == nil {
						continue
					}
					if err := os.Rename(filepath.Join(root, k), p); err != nil {
						t.Fatal(err)
					}
					delete(keys, k)
					keys["d/"+name] = true
				}
			case 4: // a file becomes a directory holding one
				if k := pick(); k != "" {
					os.Remove(filepath.Join(root, k))
					delete(keys, k)
					if err := os.MkdirAll(filepath.Join(root, k), 0o755); err != nil {
						t.Fatal(err)
					}
					if err := os.WriteFile(filepath.Join(root, k, "in"), nil, 0o644); err != nil {
						t.Fatal(err)
					}
					keys[k+"/in"] = true
				}
			case 5: // through the store
				k := fmt.Sprintf("d/p%05d", n)
				putS(t, b, k, "s3")
				keys[k] = true
			case 6:
				if k := pick(); k != "" {
					if err := b.Delete(ctx, "bkt", k); err != nil {
						t.Fatal(err)
					}
					delete(keys, k)
				}
			case 7: // a directory marker (key "d/mNNNNN/") and its removal
				k := fmt.Sprintf("d/m%05d/", n)
				if keys[k] {
					if err := b.Delete(ctx, "bkt", k); err != nil {
						t.Fatal(err)
					}
					delete(keys, k)
				} else {
					putS(t, b, k, "")
					keys[k] = true
				}
			}
		}
		opts := store.ListOptions{Prefix: "d/", After: pick(), Limit: 1 + rng.IntN(40)}
		if rng.IntN(2) == 0 {
			opts.Delimiter = "/"
		}
		// Entering (or checking) a small subdirectory reads its few entries.
		check(step, opts, int64(3*opts.Limit+10))
	}
	// The whole prefix page by page, with and without the delimiter.
	for _, delim := range []string{"", "/"} {
		var got []string
		opts := store.ListOptions{Prefix: "d/", Delimiter: delim, Limit: 97}
		for range 100 {
			res, err := b.List(context.Background(), "bkt", opts)
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range res.Objects {
				got = append(got, o.Key)
			}
			got = append(got, res.CommonPrefixes...)
			if !res.IsTruncated {
				break
			}
			opts.After = res.NextAfter
		}
		sort.Strings(got)
		objs, cps, _, _ := storetest.ListModel(sorted(), store.ListOptions{Prefix: "d/", Delimiter: delim, Limit: 1 << 20})
		want := append(objs, cps...)
		sort.Strings(want)
		if !slices.Equal(got, want) {
			t.Fatalf("paged listing (delimiter %q): %d keys, want %d", delim, len(got), len(want))
		}
	}
	// The watched directory removed and made again with other files.
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	clear(keys)
	writeFiles(t, dir, 5, func(i int) string { return fmt.Sprintf("new%d", i) })
	for i := range 5 {
		keys[fmt.Sprintf("d/new%d", i)] = true
	}
	check(100, store.ListOptions{Prefix: "d/", Limit: 10}, 100)
}
