package bench

import (
	"context"
	"fmt"
	"slices"
	"time"
)

// units (seed 000 §IV-B, Figure 2): one large file (16 MiB) written and
// then read sequentially in access units of 4 KiB … 16 MiB (powers of 4),
// once per access form (POSIX: default, O_SYNC, O_DIRECT; NFS and iSCSI:
// default, sync). One worker, as the paper's: each request is issued when
// the previous one returned. After each write pass the file is synced
// (recorded as op "sync": for the default form that is where write-back
// data goes out) and, where the client has a page cache, dropped from it,
// so the read pass is cold.
//
// Records: phase "write" (op writeat) and "read" (op readat), form, unit =
// the access unit, threads 1; phase "sync" (op sync, size = the file).
func init() {
	register(&Suite{
		Name:      "units",
		UsesForms: true,
		Seed:      "seed 000 §IV-B (Figure 2)",
		Doc:       "a 16 MiB file written and read sequentially in units of 4 KiB … 16 MiB, per access form",
		Defaults: func(scale float64) Params {
			file := int64(16 << 20)
			// The file shrinks with the scale (a power of two, at least
			// 256 KiB); the units stay those that fit in it.
			for file > 256<<10 && float64(file) > float64(16<<20)*scale*1.0001 {
				file /= 2
			}
			var units []int64
			for _, u := range Powers(4<<10, 16<<20, 4) {
				if u <= file {
					units = append(units, u)
				}
			}
			return Params{FileSize: file, Sizes: units, Threads: []int{1}}
		},
		Run: runUnits,
	})
}

func runUnits(ctx context.Context, r *Runner) error {
	file := r.P.FileSize
	for _, u := range r.P.Sizes {
		if u <= 0 || file%u != 0 {
			return fmt.Errorf("units: unit %d does not divide the %d-byte file", u, file)
		}
	}
	buf := AlignedBuffer(int(min(file, slices.Max(r.P.Sizes))))
	Fill(buf, 7)
	skipped := map[string]string{}
	for _, form := range r.Forms {
		name := r.Path("units-" + form)
		f, err := r.D.OpenFile(ctx, name, file, form)
		if err := r.Setup("open "+name+" ("+form+")", err); err != nil {
			return err
		}
		err = func() error {
			defer f.Close(context.WithoutCancel(ctx))
			for _, u := range r.P.Sizes {
				n := int(file / u)
				p := buf[:u]
				if ro, ok := f.(ReadOnlyFile); ok && ro.ReadOnly() {
					skipped["write"] = "WriteAt not supported by " + r.D.Protocol()
				} else if werr := r.Step(ctx, Step{Phase: "write", Form: form, Op: "writeat", Unit: u, Threads: 1, Count: n},
					func(ctx context.Context, w, i int) (int64, time.Time, error) {
						m, err := f.WriteAt(ctx, p, int64(i)*u)
						return int64(m), time.Time{}, err
					}); werr != nil {
					return werr
				} else if err := r.Step(ctx, Step{Phase: "sync", Form: form, Op: "sync", Unit: u, Threads: 1, Count: 1},
					func(ctx context.Context, w, i int) (int64, time.Time, error) {
						return 0, time.Time{}, f.Sync(ctx)
					}); err != nil {
					return err
				}
				if cd, ok := r.D.(CacheDropper); ok {
					if err := r.Setup("drop cache of "+name, cd.DropCache(ctx, name)); err != nil {
						return err
					}
				}
				if err := r.Step(ctx, Step{Phase: "read", Form: form, Op: "readat", Unit: u, Threads: 1, Count: n},
					func(ctx context.Context, w, i int) (int64, time.Time, error) {
						m, err := f.ReadAt(ctx, p, int64(i)*u)
						if err == nil && m != len(p) {
							err = fmt.Errorf("short read: %d of %d bytes", m, len(p))
						}
						return int64(m), time.Time{}, err
					}); err != nil {
					return err
				}
			}
			return nil
		}()
		if err != nil {
			return err
		}
		if err := r.Setup("delete "+name, r.D.Delete(ctx, name)); err != nil {
			return err
		}
	}
	if len(skipped) > 0 {
		r.W.Update(func(run *Run) {
			if run.Params.Extra == nil {
				run.Params.Extra = map[string]string{}
			}
			for k, v := range skipped {
				run.Params.Extra["skipped_"+k] = v
			}
		})
	}
	return nil
}
