package posix_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/tristore/tristore/store"
	"github.com/tristore/tristore/store/posix"
	"github.com/tristore/tristore/store/storetest"
)

// FuzzListOrder stores a fuzzed set of keys (one per line; refused and
// conflicting ones are dropped) and compares List with the S3 model for a
// fuzzed prefix, delimiter, start key and page size, page by page.
func FuzzListOrder(f *testing.F) {
	f.Add("a\na-b\na/b\na.b\na0\nA\n~", "a", "/", "", 2)
	f.Add("x/y/z\nx/y-z\nx/y.z\nx/\nx/y/\nx!\nx /a", "x/", "/", "x/y", 1)
	f.Add("é/1\né2\ne\xcc\x81\nz\x01/q\nz/q\nz\x7f", "", "/", "", 3)
	f.Add("k1-a-b\nk1-a-c\nk1-b\nk2", "k1-", "-", "", 1)
	f.Add("d/\nd/e/\nd/e/f\nd-", "d", "", "d/", 0)
	f.Fuzz(func(t *testing.T, keyList, prefix, delim, after string, limit int) {
		if delim != "" && delim != "/" && len(delim) > 3 {
			return
		}
		lines := strings.Split(keyList, "\n")
		if len(lines) > 24 {
			lines = lines[:24]
		}
		b, err := posix.Open(t.TempDir(), posix.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		ctx := context.Background()
		b.CreateBucket(ctx, "bkt", "")
		var keys []string
		seen := map[string]bool{}
		for _, k := range lines {
			if seen[k] {
				continue
			}
			_, err := b.Put(ctx, "bkt", k, strings.NewReader("x"), 1, store.ObjectMeta{})
			switch {
			case err == nil:
				seen[k] = true
				keys = append(keys, k)
			case errors.Is(err, store.ErrInvalidKey), errors.Is(err, store.ErrKeyConflict):
			default:
				t.Fatalf("Put %q: %v", k, err)
			}
		}
		limit = limit%5 + 1
		if limit < 1 {
			limit += 5
		}
		opts := store.ListOptions{Prefix: prefix, Delimiter: delim, After: after, Limit: limit}
		for page := 0; page < 40; page++ {
			wo, wc, wt, wn := storetest.ListModel(keys, opts)
			res, err := b.List(ctx, "bkt", opts)
			if err != nil {
				t.Fatalf("List %+v: %v", opts, err)
			}
			var got []string
			for _, o := range res.Objects {
				got = append(got, o.Key)
			}
			if fmt.Sprint(got) != fmt.Sprint(wo) || fmt.Sprint(res.CommonPrefixes) != fmt.Sprint(wc) || res.IsTruncated != wt || (wt && res.NextAfter != wn) {
				t.Fatalf("keys %q\nList %+v:\n got %q %q truncated=%v next=%q\nwant %q %q truncated=%v next=%q",
					keys, opts, got, res.CommonPrefixes, res.IsTruncated, res.NextAfter, wo, wc, wt, wn)
			}
			if !res.IsTruncated {
				return
			}
			opts.After = res.NextAfter
		}
	})
}
