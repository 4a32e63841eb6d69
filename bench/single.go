package bench

import (
	"context"
	"fmt"
)

// single (seed 000 §IV-C, Figure 3): whole files of 4 KiB … 64 MiB
// (powers of 4), one at a time: each file is written (durable on return),
// read back cold, and deleted. Count is how many files of each size (the
// repetitions a figure point averages over).
//
// Records: phases write (op put), read (op get), delete; unit = the file
// size; threads 1.
func init() {
	register(&Suite{
		Name: "single",
		Seed: "seed 000 §IV-C (Figure 3)",
		Doc:  "whole files of 4 KiB … 64 MiB (powers of 4), one at a time: write, cold read, delete",
		Defaults: func(scale float64) Params {
			return Params{Sizes: ScaleSizes(Powers(4<<10, 64<<20, 4), scale), Threads: []int{1}, Count: ScaleCount(5, scale, 1)}
		},
		Run: func(ctx context.Context, r *Runner) error {
			for _, size := range r.P.Sizes {
				dir := r.Path(fmt.Sprintf("single-%s", FormatSize(size)))
				if err := fileSteps(dir, size, 1, r.P.Count).run(ctx, r); err != nil {
					return err
				}
			}
			return nil
		},
	})
}
