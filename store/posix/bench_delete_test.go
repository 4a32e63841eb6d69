package posix_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/tristore/tristore/store"
)

// BenchmarkDelete: a durable DELETE of a 4 KiB object, alone in its prefix
// (prefix) or next to other keys (flat); the object is PUT again between
// deletes (outside the timer). Without a journal the store makes each
// removal durable before it frees the inode (retire.go), which this
// measures.
func BenchmarkDelete(b *testing.B) {
	data := bytes.Repeat([]byte("tristore"), 512)
	for _, shape := range []string{"flat", "prefix"} {
		b.Run(shape, func(b *testing.B) {
			st, ctx := benchStore(b, false)
			key := func(i int) string {
				if shape == "prefix" {
					return fmt.Sprintf("d/%d/k", i%64)
				}
				return fmt.Sprintf("d/k%d", i%64)
			}
			for i := range 64 {
				if _, err := st.Put(ctx, "bench", key(i), bytes.NewReader(data), int64(len(data)), store.ObjectMeta{}); err != nil {
					b.Fatal(err)
				}
			}
			defer cpuMeter(b)()
			for i := 0; b.Loop(); i++ {
				if err := st.Delete(ctx, "bench", key(i)); err != nil {
					b.Fatal(err)
				}
				b.StopTimer()
				if _, err := st.Put(ctx, "bench", key(i), bytes.NewReader(data), int64(len(data)), store.ObjectMeta{}); err != nil {
					b.Fatal(err)
				}
				b.StartTimer()
			}
		})
	}
}
