package bench

import (
	"context"
	"fmt"
)

// batch (seed 000 §IV-D/E, Figures 4–6): sets of same-size files (4 KiB as
// small, 16 MiB as large files) accessed by 1 … 64 threads (powers of 2);
// each thread takes the next file of the set, so throughput is that of the
// steady state. Per (size, threads): write the set, read it cold, delete
// it. A set has Count files, fewer for large files (at most Bytes of
// payload), but at least two per thread.
//
// Records: phases write (op put), read (op get), delete; unit = the file
// size; threads = the step's thread count.
func init() {
	register(&Suite{
		Name: "batch",
		Seed: "seed 000 §IV-D/E (Figures 4-6)",
		Doc:  "sets of same-size files (4 KiB, 16 MiB) by 1 … 64 threads: write, cold read, delete",
		Defaults: func(scale float64) Params {
			return Params{Sizes: ScaleSizes([]int64{4 << 10, 16 << 20}, scale), Threads: ScaleThreads([]int{1, 2, 4, 8, 16, 32, 64}, scale),
				Count: ScaleCount(1024, scale, 1), Bytes: int64(ScaleCount(1<<30, scale, 1<<20))}
		},
		Run: func(ctx context.Context, r *Runner) error {
			for _, size := range r.P.Sizes {
				for _, t := range r.P.Threads {
					n := r.P.Count
					if r.P.Bytes > 0 {
						n = min(n, int(r.P.Bytes/size))
					}
					n = max(n, 2*t)
					dir := r.Path(fmt.Sprintf("batch-%s-t%d", FormatSize(size), t))
					if err := fileSteps(dir, size, t, n).run(ctx, r); err != nil {
						return err
					}
				}
			}
			return nil
		},
	})
}
