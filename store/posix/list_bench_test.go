package posix_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

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
