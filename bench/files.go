package bench

import (
	"context"
	"fmt"
	"time"
)

// wholeFiles is the step triple the single, batch and objects suites share:
// count files of size bytes written whole (Put), read whole (Get, cold where
// the client has a cache) and deleted, each spread over threads workers.
// Phase names are the suite's (write/read/delete or put/get/delete).
type wholeFiles struct {
	dir                       string
	size                      int64
	threads, count            int
	write, read, delete       string
	writeOp, readOp, deleteOp string
}

func (wf wholeFiles) run(ctx context.Context, r *Runner) error {
	if err := r.Setup("mkdir "+wf.dir, r.D.Mkdir(ctx, wf.dir)); err != nil {
		return err
	}
	name := func(i int) string { return fmt.Sprintf("%s/f%06d", wf.dir, i) }
	data := AlignedBuffer(int(wf.size))
	Fill(data, uint64(wf.size))
	if err := r.Step(ctx, Step{Phase: wf.write, Op: wf.writeOp, Unit: wf.size, Threads: wf.threads, Count: wf.count},
		func(ctx context.Context, w, i int) (int64, time.Time, error) {
			if err := r.D.Put(ctx, name(i), data); err != nil {
				return 0, time.Time{}, err
			}
			return wf.size, time.Time{}, nil
		}); err != nil {
		return err
	}
	if cd, ok := r.D.(CacheDropper); ok {
		for i := range wf.count {
			cd.DropCache(ctx, name(i)) // a file whose Put failed has nothing cached
		}
	}
	bufs := make([][]byte, wf.threads)
	for w := range bufs {
		bufs[w] = AlignedBuffer(int(wf.size))
	}
	if err := r.Step(ctx, Step{Phase: wf.read, Op: wf.readOp, Unit: wf.size, Threads: wf.threads, Count: wf.count},
		func(ctx context.Context, w, i int) (int64, time.Time, error) {
			n, first, err := r.D.Get(ctx, name(i), bufs[w])
			if err == nil && int64(n) != wf.size {
				err = fmt.Errorf("short read of %s: %d of %d bytes", name(i), n, wf.size)
			}
			return int64(n), first, err
		}); err != nil {
		return err
	}
	bufs = nil
	return r.Step(ctx, Step{Phase: wf.delete, Op: wf.deleteOp, Unit: wf.size, Threads: wf.threads, Count: wf.count},
		func(ctx context.Context, w, i int) (int64, time.Time, error) {
			return 0, time.Time{}, r.D.Delete(ctx, name(i))
		})
}

func fileSteps(dir string, size int64, threads, count int) wholeFiles {
	return wholeFiles{dir: dir, size: size, threads: threads, count: count,
		write: "write", read: "read", delete: "delete", writeOp: "put", readOp: "get", deleteOp: "delete"}
}
