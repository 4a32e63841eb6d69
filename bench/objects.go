package bench

import (
	"context"
	"fmt"
)

// objects (seed 001 §3–4, Table III, Figures 1–5): PUT and GET of objects
// of 1 KiB … 16 MiB (powers of 4) at parallelism 1 … 64 (powers of 2), each
// size with Table III's object number (scaled), every object unique. Per
// (size, parallelism): PUT the objects, GET them, DELETE them. Per-request
// latency, first byte of GETs, and aggregate bandwidth come from the
// records. Any protocol can run it (files stand in for objects), but it is
// meant for s3:// targets.
//
// Records: phases put, get, delete (ops of the same names); unit = the
// object size; threads = the parallelism degree.
func init() {
	register(&Suite{
		Name: "objects",
		Seed: "seed 001 §3-4 (Table III)",
		Doc:  "PUT/GET/DELETE of 1 KiB … 16 MiB objects at parallelism 1 … 64, seed 001 Table III object counts",
		Defaults: func(scale float64) Params {
			sizes := ScaleSizes(Powers(1<<10, 16<<20, 4), scale)
			counts := make([]int, len(sizes))
			for i, s := range sizes {
				counts[i] = ScaleCount(tableIIICount(s), scale, 1)
			}
			return Params{Sizes: sizes, Counts: counts, Threads: ScaleThreads([]int{1, 2, 4, 8, 16, 32, 64}, scale)}
		},
		Run: func(ctx context.Context, r *Runner) error {
			for i, size := range r.P.Sizes {
				for _, t := range r.P.Threads {
					n := r.P.Count
					if n == 0 && i < len(r.P.Counts) {
						n = r.P.Counts[i]
					}
					if n == 0 {
						n = ScaleCount(tableIIICount(size), r.cfg.Scale, 1)
					}
					n = max(n, t)
					dir := r.Path(fmt.Sprintf("objects-%s-p%d", FormatSize(size), t))
					wf := wholeFiles{dir: dir, size: size, threads: t, count: n,
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

// tableIII is seed 001's object number per object size.
var tableIII = map[int64]int{1 << 10: 81920, 4 << 10: 40960, 16 << 10: 40960, 64 << 10: 40960, 256 << 10: 40960,
	1 << 20: 16384, 4 << 20: 4096, 16 << 20: 2048}

// tableIIICount is the object number for size: the row of the largest
// table size not above it (the first row below 1 KiB).
func tableIIICount(size int64) int {
	best, n := int64(0), tableIII[1<<10]
	for s, c := range tableIII {
		if s <= size && s > best {
			best, n = s, c
		}
	}
	return n
}
