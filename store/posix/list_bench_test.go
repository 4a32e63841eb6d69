package posix_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tristore/tristore/store"
)

// BenchmarkListPage lists one 1000-key page of a 20,000-key flat prefix
// (files made directly in the tree: no PUT cost in setup).
func BenchmarkListPage(b *testing.B) {
	st, ctx := benchStore(b, false)
	dir := filepath.Join(st.Root(), "bench", "flat")
	os.MkdirAll(dir, 0o755)
	for i := range 20000 {
		os.WriteFile(filepath.Join(dir, fmt.Sprintf("%06d", i)), nil, 0o644)
	}
	// First listing computes and stores every ETag.
	after := ""
	for range 100 {
		res, err := st.List(ctx, "bench", store.ListOptions{Prefix: "flat/", After: after})
		if err != nil {
			b.Fatal(err)
		}
		if !res.IsTruncated {
			break
		}
		after = res.NextAfter
	}
	defer cpuMeter(b)()
	for i := 0; b.Loop(); i++ {
		res, err := st.List(ctx, "bench", store.ListOptions{Prefix: "flat/", After: fmt.Sprintf("flat/%06d", (i*1000)%19000)})
		if err != nil || len(res.Objects) != 1000 {
			b.Fatal(err, len(res.Objects))
		}
	}
}

// BenchmarkListPageDelim lists one page of 50 common prefixes with the
// delimiter "-" from a directory of 20,000 keys in 200 groups of 100
// ("gNNN-NNN"), starting in the middle.
func BenchmarkListPageDelim(b *testing.B) {
	st, ctx := benchStore(b, false)
	dir := filepath.Join(st.Root(), "bench", "grp")
	os.MkdirAll(dir, 0o755)
	for i := range 20000 {
		os.WriteFile(filepath.Join(dir, fmt.Sprintf("g%03d-%03d", i/100, i%100)), nil, 0o644)
	}
	opts := store.ListOptions{Prefix: "grp/", Delimiter: "-", After: "grp/g100-", Limit: 50}
	if _, err := st.List(ctx, "bench", opts); err != nil {
		b.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond) // let the directory's stamp settle (dircache.go)
	defer cpuMeter(b)()
	for b.Loop() {
		res, err := st.List(ctx, "bench", opts)
		if err != nil || len(res.CommonPrefixes) != 50 {
			b.Fatal(err, len(res.CommonPrefixes))
		}
	}
}
