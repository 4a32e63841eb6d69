package posix_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/tristore/tristore/store"
	"github.com/tristore/tristore/store/posix"
	"github.com/tristore/tristore/store/storetest"
)

// TestListRandomShapes stores random keys over a tiny alphabet ('/', '.',
// '-', 'a', 'b': empty and dot segments, keys that are prefixes of others,
// both plain and hidden) and compares random listings, page by page, with
// the S3 model: the merge of the directory walk and the hidden keys, the
// seeks and the skipping of common prefixes together.
func TestListRandomShapes(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 7))
	alpha := []string{"/", ".", "-", "a", "b"}
	word := func(max int) string {
		var sb strings.Builder
		for range 1 + rng.IntN(max) {
			sb.WriteString(alpha[rng.IntN(len(alpha))])
		}
		return sb.String()
	}
	for set := range 3 {
		b, ctx := newBucket(t, posix.Options{NoXattr: set%3 == 2})
		seen := map[string]bool{}
		var keys []string
		for range 60 {
			k := word(6)
			if seen[k] {
				continue
			}
			seen[k] = true
			keys = append(keys, k)
			putS(t, b, k, k)
		}
		for q := range 150 {
			opts := store.ListOptions{Limit: 1 + rng.IntN(4)}
			if rng.IntN(3) > 0 {
				opts.Prefix = word(3)
			}
			switch rng.IntN(4) {
			case 0:
			case 1:
				opts.Delimiter = "/"
			default:
				opts.Delimiter = word(2)
			}
			if rng.IntN(2) == 0 {
				opts.After = word(5)
			}
			checkPages(t, b, ctx, keys, opts, fmt.Sprintf("set %d query %d", set, q))
		}
	}
}

func checkPages(t *testing.T, b *posix.Backend, ctx context.Context, keys []string, opts store.ListOptions, what string) {
	t.Helper()
	for page := 0; page < 200; page++ {
		wo, wc, wt, wn := storetest.ListModel(keys, opts)
		res, err := b.List(ctx, "bkt", opts)
		if err != nil {
			t.Fatalf("%s: List %+v: %v", what, opts, err)
		}
		var got []string
		for _, o := range res.Objects {
			got = append(got, o.Key)
		}
		if fmt.Sprint(got) != fmt.Sprint(wo) || fmt.Sprint(res.CommonPrefixes) != fmt.Sprint(wc) || res.IsTruncated != wt || (wt && res.NextAfter != wn) {
			t.Fatalf("%s: keys %q\nList %+v:\n got %q %q truncated=%v next=%q\nwant %q %q truncated=%v next=%q",
				what, keys, opts, got, res.CommonPrefixes, res.IsTruncated, res.NextAfter, wo, wc, wt, wn)
		}
		if !res.IsTruncated {
			return
		}
		opts.After = res.NextAfter
	}
}
