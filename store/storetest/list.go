package storetest

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/tristore/tristore/store"
)

// listKeys is a key set that a directory tree can hold (no key is a
// path prefix of another) chosen so that directory-walk order and S3 byte
// order differ: '-' (0x2d) and '.' (0x2e) sort before '/' (0x2f), '0'
// after it, upper case before lower case, UTF-8 after ASCII.
var listKeys = []string{
	"a-b", "a.b", "a/b", "a/b-c", "a/b.c/d", "a/c/d", "a/c-d", "a/c/e/f", "a0", "A",
	"b", "c/d/e/f", "c/d-e", "c/d.e/x", "c/d0", "é", "éa/x", "~", "z/", "z/y/", "z/y/w", "z/y-",
}

func testListOrder(t *testing.T, newStore func(*testing.T) store.Store) {
	s, ctx := withBucket(t, newStore)
	for i, k := range listKeys {
		put(t, s, ctx, "bkt", k, pattern(i, i))
	}
	want := append([]string(nil), listKeys...)
	sort.Strings(want)
	checkList(t, s, ctx, store.ListOptions{}, want, nil)
	res, err := s.List(ctx, "bkt", store.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range res.Objects {
		i := indexOf(listKeys, o.Key)
		if o.Size != int64(i) || o.ETag != md5hex(pattern(i, i)) || o.Bucket != "bkt" || o.ModTime.IsZero() {
			t.Fatalf("listed object %+v: want size %d ETag %s", o, i, md5hex(pattern(i, i)))
		}
	}
	if res.IsTruncated || res.NextAfter != "" {
		t.Fatalf("complete listing says truncated=%v next=%q", res.IsTruncated, res.NextAfter)
	}
}

func indexOf(xs []string, x string) int {
	for i, v := range xs {
		if v == x {
			return i
		}
	}
	return -1
}

// ListModel computes the page S3 returns for opts over a set of keys:
// object keys, common prefixes, whether it is truncated and NextAfter.
// Backend tests (and fuzz targets) compare List with it.
func ListModel(keys []string, opts store.ListOptions) (objs, cps []string, truncated bool, next string) {
	return model(keys, opts)
}

// model computes the expected page for opts over keys (S3 semantics).
func model(keys []string, opts store.ListOptions) (objs, cps []string, truncated bool, next string) {
	sorted := append([]string(nil), keys...)
	sort.Strings(sorted)
	limit := opts.Limit
	if limit <= 0 {
		limit = 1000
	}
	type ent struct {
		name string
		cp   bool
	}
	var ents []ent
	seen := map[string]bool{}
	for _, k := range sorted {
		if !strings.HasPrefix(k, opts.Prefix) {
			continue
		}
		if opts.Delimiter != "" {
			if i := strings.Index(k[len(opts.Prefix):], opts.Delimiter); i >= 0 {
				cp := k[:len(opts.Prefix)+i+len(opts.Delimiter)]
				if !seen[cp] {
					seen[cp] = true
					ents = append(ents, ent{cp, true})
				}
				continue
			}
		}
		ents = append(ents, ent{k, false})
	}
	n := 0
	for _, e := range ents {
		if e.name <= opts.After {
			continue
		}
		if n == limit {
			return objs, cps, true, next
		}
		n++
		if e.cp {
			cps = append(cps, e.name)
		} else {
			objs = append(objs, e.name)
		}
		next = e.name
	}
	return objs, cps, false, ""
}

// checkList compares one List call with the expected keys and prefixes.
func checkList(t *testing.T, s store.Store, ctx context.Context, opts store.ListOptions, objs, cps []string) {
	t.Helper()
	res, err := s.List(ctx, "bkt", opts)
	if err != nil {
		t.Fatalf("List %+v: %v", opts, err)
	}
	var got []string
	for _, o := range res.Objects {
		got = append(got, o.Key)
	}
	if fmt.Sprint(got) != fmt.Sprint(objs) || fmt.Sprint(res.CommonPrefixes) != fmt.Sprint(cps) {
		t.Fatalf("List %+v:\n got objects %q prefixes %q\nwant objects %q prefixes %q", opts, got, res.CommonPrefixes, objs, cps)
	}
}

// testListModel compares every page of many listings with the model.
func testListModel(t *testing.T, newStore func(*testing.T) store.Store) {
	s, ctx := withBucket(t, newStore)
	for i, k := range listKeys {
		put(t, s, ctx, "bkt", k, pattern(i, 1))
	}
	prefixes := []string{"", "a", "a/", "a/b", "a/c", "a/c/", "c/d", "c/d/", "c/d/e/f", "é", "z/", "z/y", "zz", "a/b-", "A"}
	afters := []string{"", "a", "a/", "a/b", "a/b.", "a/c", "a/c/", "a/c/e", "a/c/e/f", "b", "c/d/", "z/y/", "~", "\xff"}
	// Delimiters other than "/" may be refused with ErrNotSupported.
	for _, delim := range []string{"", "/", "-", "b", "/c", "é", "d/", "//", "a/b"} {
		if _, err := s.List(ctx, "bkt", store.ListOptions{Delimiter: delim}); errors.Is(err, store.ErrNotSupported) && delim != "" && delim != "/" {
			t.Logf("delimiter %q not supported by this store", delim)
			continue
		}
		for _, p := range prefixes {
			for _, after := range afters {
				for _, limit := range []int{0, 1, 2, 3, 7} {
					opts := store.ListOptions{Prefix: p, Delimiter: delim, After: after, Limit: limit}
					wo, wc, wt, wn := model(listKeys, opts)
					res, err := s.List(ctx, "bkt", opts)
					if err != nil {
						t.Fatalf("List %+v: %v", opts, err)
					}
					var got []string
					for _, o := range res.Objects {
						got = append(got, o.Key)
					}
					if fmt.Sprint(got) != fmt.Sprint(wo) || fmt.Sprint(res.CommonPrefixes) != fmt.Sprint(wc) || res.IsTruncated != wt || (wt && res.NextAfter != wn) {
						t.Fatalf("List %+v:\n got %q %q truncated=%v next=%q\nwant %q %q truncated=%v next=%q",
							opts, got, res.CommonPrefixes, res.IsTruncated, res.NextAfter, wo, wc, wt, wn)
					}
				}
			}
		}
	}
	// Paging by NextAfter visits everything exactly once.
	for _, delim := range []string{"", "/", "-", "b", "d/"} {
		if _, err := s.List(ctx, "bkt", store.ListOptions{Delimiter: delim}); errors.Is(err, store.ErrNotSupported) && delim != "" && delim != "/" {
			continue
		}
		for _, limit := range []int{1, 2, 5} {
			wo, wc, _, _ := model(listKeys, store.ListOptions{Delimiter: delim})
			var gotO, gotC []string
			after := ""
			for page := 0; page < 100; page++ {
				res, err := s.List(ctx, "bkt", store.ListOptions{Delimiter: delim, After: after, Limit: limit})
				if err != nil {
					t.Fatal(err)
				}
				if len(res.Objects)+len(res.CommonPrefixes) > limit {
					t.Fatalf("page of %d entries exceeds limit %d", len(res.Objects)+len(res.CommonPrefixes), limit)
				}
				for _, o := range res.Objects {
					gotO = append(gotO, o.Key)
				}
				gotC = append(gotC, res.CommonPrefixes...)
				if !res.IsTruncated {
					break
				}
				after = res.NextAfter
			}
			if fmt.Sprint(gotO) != fmt.Sprint(wo) || fmt.Sprint(gotC) != fmt.Sprint(wc) {
				t.Fatalf("paging delim=%q limit=%d: got %q %q want %q %q", delim, limit, gotO, gotC, wo, wc)
			}
		}
	}
}

func testListEdges(t *testing.T, newStore func(*testing.T) store.Store) {
	s, ctx := withBucket(t, newStore)
	checkList(t, s, ctx, store.ListOptions{}, nil, nil)
	checkList(t, s, ctx, store.ListOptions{Prefix: "x/", Delimiter: "/"}, nil, nil)
	// More than the default page of 1000.
	var keys []string
	for i := range 1005 {
		k := fmt.Sprintf("many/%04d", i)
		keys = append(keys, k)
		put(t, s, ctx, "bkt", k, nil)
	}
	res, err := s.List(ctx, "bkt", store.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Objects) != 1000 || !res.IsTruncated || res.NextAfter != keys[999] {
		t.Fatalf("default limit: %d objects truncated=%v next=%q; want 1000, true, %q", len(res.Objects), res.IsTruncated, res.NextAfter, keys[999])
	}
	res, err = s.List(ctx, "bkt", store.ListOptions{After: res.NextAfter})
	if err != nil || len(res.Objects) != 5 || res.IsTruncated {
		t.Fatalf("second page: %d objects truncated=%v err=%v", len(res.Objects), res.IsTruncated, err)
	}
	checkList(t, s, ctx, store.ListOptions{Delimiter: "/"}, nil, []string{"many/"})
	checkList(t, s, ctx, store.ListOptions{Delimiter: "/", After: "many/"}, nil, nil)
	checkList(t, s, ctx, store.ListOptions{Prefix: "many/100", Delimiter: "/"}, keys[1000:], nil)
	// An exact-size page is not truncated.
	res, err = s.List(ctx, "bkt", store.ListOptions{Prefix: "many/100", Limit: 5})
	if err != nil || len(res.Objects) != 5 || res.IsTruncated {
		t.Fatalf("exact page: %d objects truncated=%v err=%v", len(res.Objects), res.IsTruncated, err)
	}
	// Prefixes that no valid key can have are simply empty.
	checkList(t, s, ctx, store.ListOptions{Prefix: "../"}, nil, nil)
	checkList(t, s, ctx, store.ListOptions{Prefix: "many//"}, nil, nil)
}
