package bench

import (
	"context"
	"fmt"
	"math"
)

// datasize (seed 004 §3.2 case 1, Table 2): one large file uploaded and
// downloaded whole (MB/s); the seed ran each transfer for over five
// minutes at under 1 MB/s. Default 256 MiB, Count repetitions.
//
// Records: phases put, get, delete; unit = the file size; threads 1.
func init() {
	register(&Suite{
		Name: "datasize",
		Seed: "seed 004 §3.2 (Table 2)",
		Doc:  "one large file (256 MiB) uploaded and downloaded whole (MB/s)",
		Defaults: func(scale float64) Params {
			// 256 MiB x sqrt(scale), down to a power of two, at least 1 MiB.
			size := int64(256 << 20)
			for size > 1<<20 && float64(size) > float64(256<<20)*math.Sqrt(scale)*1.0001 {
				size /= 2
			}
			return Params{Sizes: []int64{size}, Threads: []int{1}, Count: 1}
		},
		Run: func(ctx context.Context, r *Runner) error {
			for _, size := range r.P.Sizes {
				for _, t := range r.P.Threads {
					dir := r.Path(fmt.Sprintf("datasize-%s-t%d", FormatSize(size), t))
					wf := wholeFiles{dir: dir, size: size, threads: t, count: max(r.P.Count, t),
						write: "put", read: "get", delete: "delete", writeOp: "put", readOp: "get", deleteOp: "delete"}
					if err := wf.run(ctx, r); err != nil {
						return err
					}
				}
			}
			return nil
		},
	})
}
