package bench

import (
	"context"
	"fmt"
	"time"
)

// metadata (seed 004 §3.2 case 2, Table 3): many small files — 50,000 of
// 1.1 KB — uploaded, listed, downloaded and deleted by one client; the
// figure of merit is file operations per second (fops). Threads default
// to 1 (the seed's single client); --threads adds parallel workers.
//
// Records: phases put, list (op list, one request, items = names
// returned), get, delete; unit = the file size.
func init() {
	register(&Suite{
		Name: "metadata",
		Seed: "seed 004 §3.2 (Table 3)",
		Doc:  "50,000 files of 1.1 KB: upload, list, download, delete (fops)",
		Defaults: func(scale float64) Params {
			return Params{Sizes: []int64{1100}, Threads: []int{1}, Count: ScaleCount(50000, scale, 1)}
		},
		Run: func(ctx context.Context, r *Runner) error {
			for _, size := range r.P.Sizes {
				for _, t := range r.P.Threads {
					if err := runMetadata(ctx, r, size, t, r.P.Count); err != nil {
						return err
					}
				}
			}
			return nil
		},
	})
}

func runMetadata(ctx context.Context, r *Runner, size int64, threads, count int) error {
	dir := r.Path(fmt.Sprintf("metadata-%s-t%d", FormatSize(size), threads))
	if err := r.Setup("mkdir "+dir, r.D.Mkdir(ctx, dir)); err != nil {
		return err
	}
	name := func(i int) string { return fmt.Sprintf("%s/f%06d", dir, i) }
	data := make([]byte, size)
	Fill(data, uint64(size))
	var ok int64
	if err := r.Step(ctx, Step{Phase: "put", Op: "put", Unit: size, Threads: threads, Count: count},
		func(ctx context.Context, w, i int) (int64, time.Time, error) {
			if err := r.D.Put(ctx, name(i), data); err != nil {
				return 0, time.Time{}, err
			}
			return size, time.Time{}, nil
		}); err != nil {
		return err
	}
	for _, ph := range r.W.Run().Phases {
		if ph.Name == "put" && ph.Unit == size && ph.Threads == threads {
			ok = ph.Ops - ph.Errors
		}
	}
	if err := r.Step(ctx, Step{Phase: "list", Op: "list", Unit: size, Threads: 1, Count: 1},
		func(ctx context.Context, w, i int) (int64, time.Time, error) {
			names, err := r.D.List(ctx, dir)
			if err == nil && int64(len(names)) != ok {
				err = fmt.Errorf("list of %s: %d names, %d files were written", dir, len(names), ok)
			}
			return int64(len(names)), time.Time{}, err
		}); err != nil {
		return err
	}
	if cd, isCD := r.D.(CacheDropper); isCD {
		for i := range count {
			cd.DropCache(ctx, name(i))
		}
	}
	bufs := make([][]byte, threads)
	for w := range bufs {
		bufs[w] = make([]byte, size)
	}
	if err := r.Step(ctx, Step{Phase: "get", Op: "get", Unit: size, Threads: threads, Count: count},
		func(ctx context.Context, w, i int) (int64, time.Time, error) {
			n, first, err := r.D.Get(ctx, name(i), bufs[w])
			if err == nil && int64(n) != size {
				err = fmt.Errorf("short read of %s: %d of %d bytes", name(i), n, size)
			}
			return int64(n), first, err
		}); err != nil {
		return err
	}
	return r.Step(ctx, Step{Phase: "delete", Op: "delete", Unit: size, Threads: threads, Count: count},
		func(ctx context.Context, w, i int) (int64, time.Time, error) {
			return 0, time.Time{}, r.D.Delete(ctx, name(i))
		})
}
