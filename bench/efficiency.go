package bench

import (
	"context"
	"fmt"
)

// efficiency (seed 004 §3.2 case 3, Figures 5-8): 40 MB as 1 KiB × 40960,
// 4 KiB × 10240, 64 KiB × 640 or 1 MiB × 40 files, uploaded and downloaded
// by one client. Transmission efficiency = payload ÷ bytes on the wire,
// per phase from run.json's phases (payload_bytes ÷ (wire_up_bytes +
// wire_down_bytes)). A network target is run through a counting link (no
// shaping) when --network is not given: as root a netns link, which counts
// IP packets (TCP/IP headers and ACKs in, as the seed's packet capture),
// else a proxy, which counts TCP payload (protocol headers in, TCP/IP
// headers out). A POSIX target has no wire: its records say so
// (params.extra).
//
// Records: phases put, get, delete; unit = the file size; threads 1.
func init() {
	register(&Suite{
		Name:      "efficiency",
		Seed:      "seed 004 §3.2 (Figures 5-8)",
		Doc:       "40 MB as 1 KiB / 4 KiB / 64 KiB / 1 MiB files up and down; payload ÷ wire bytes",
		NeedsWire: true,
		Defaults: func(scale float64) Params {
			sizes := []int64{1 << 10, 4 << 10, 64 << 10, 1 << 20}
			return Params{Sizes: sizes, Threads: []int{1}, Bytes: int64(ScaleCount(40<<20, scale, 64<<10))}
		},
		Run: func(ctx context.Context, r *Runner) error {
			if r.cfg.Wire == nil {
				r.W.Update(func(run *Run) {
					if run.Params.Extra == nil {
						run.Params.Extra = map[string]string{}
					}
					run.Params.Extra["wire"] = "not measured: a " + r.D.Protocol() + " target has no link to count"
				})
			}
			for _, size := range r.P.Sizes {
				n := r.P.Count
				if n == 0 {
					n = int(max(1, r.P.Bytes/size))
				}
				for _, t := range r.P.Threads {
					dir := r.Path(fmt.Sprintf("efficiency-%s-t%d", FormatSize(size), t))
					wf := wholeFiles{dir: dir, size: size, threads: t, count: max(n, t),
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
