package bench

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"
)

// iozone (seed 002): iozone's four tests the paper averages — sequential
// write, sequential read, random write, random read — over one data set
// (a file, or a region of a raw device) in requests of 4 KiB … 64 KiB
// (powers of two), per access form. Per (form, request size): write the
// data set front to back (phase write), sync (op sync, as iozone -e's
// fsync, recorded apart so the write figure is iozone's default one),
// drop it from the client's cache, read it front to back (read), write
// it in a random order (randwrite: every request-sized block exactly once,
// a shuffle seeded by the request size, so each random pass moves the
// same bytes as a sequential one), sync, drop, read in a random order
// (randread). Threads (default 1) share one file, each taking the next
// request. The figure the seed reports is the mean of the four MB/s
// (IozoneAverages; the report's table and `tristore bench iozone`'s last
// lines).
//
// Any Driver runs it: it only needs OpenFile and File (a directory file, an
// NFS file, an iSCSI LUN region, OpenBlock over a RAID volume); S3 objects
// are read-only (ranged GETs: the write passes are skipped and marked in
// params.extra). The data set shrinks with --scale (1 GiB at scale 1, a
// power of two, at least 1 MiB); --file-size sets it, --sizes the request
// sizes (each must divide it).
//
// Records: phases write, read, randwrite, randread (ops writeat/readat)
// and sync; unit = the request size; threads = the step's threads.
func init() {
	register(&Suite{
		Name:      "iozone",
		UsesForms: true,
		Seed:      "seed 002 (iozone)",
		Doc:       "sequential and random write and read of a data set in 4 KiB … 64 KiB requests, and their four-way average",
		Defaults: func(scale float64) Params {
			file := int64(1 << 30)
			for file > 1<<20 && float64(file) > float64(1<<30)*scale*1.0001 {
				file /= 2
			}
			return Params{FileSize: file, Sizes: Powers(4<<10, 64<<10, 2), Threads: []int{1}}
		},
		Run: runIozone,
	})
}

// IozonePhases are the four tests in the order the suite runs them.
var IozonePhases = []string{"write", "read", "randwrite", "randread"}

func runIozone(ctx context.Context, r *Runner) error {
	file := r.P.FileSize
	for _, u := range r.P.Sizes {
		if u <= 0 || file%u != 0 {
			return fmt.Errorf("iozone: request size %d does not divide the %d-byte data set", u, file)
		}
	}
	buf := AlignedBuffer(int(slices.Max(r.P.Sizes)))
	Fill(buf, 2)
	skipped := ""
	for _, form := range r.Forms {
		name := r.Path("iozone-" + form)
		f, err := r.D.OpenFile(ctx, name, file, form)
		if err := r.Setup("open "+name+" ("+form+")", err); err != nil {
			return err
		}
		err = func() error {
			defer f.Close(context.WithoutCancel(ctx))
			ro, _ := f.(ReadOnlyFile)
			readOnly := ro != nil && ro.ReadOnly()
			if readOnly {
				skipped = "WriteAt not supported by " + r.D.Protocol()
			}
			for _, u := range r.P.Sizes {
				for _, t := range r.P.Threads {
					if err := iozonePasses(ctx, r, f, name, form, file, u, t, buf, readOnly); err != nil {
						return err
					}
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
	if skipped != "" {
		r.W.Update(func(run *Run) {
			if run.Params.Extra == nil {
				run.Params.Extra = map[string]string{}
			}
			run.Params.Extra["skipped_write"] = skipped
			run.Params.Extra["skipped_randwrite"] = skipped
		})
	}
	return nil
}

// iozonePasses runs the four tests of one (form, request size, threads).
func iozonePasses(ctx context.Context, r *Runner, f File, name, form string, file, u int64, threads int, buf []byte, readOnly bool) error {
	n := int(file / u)
	seq := func(i int) int64 { return int64(i) * u }
	perm := rand.New(rand.NewPCG(uint64(u), uint64(file))).Perm(n)
	random := func(i int) int64 { return int64(perm[i]) * u }
	bufs := make([][]byte, threads)
	for w := range bufs {
		bufs[w] = AlignedBuffer(int(u))
	}
	pass := func(phase string, write bool, at func(int) int64) error {
		op := "readat"
		if write {
			op = "writeat"
		}
		return r.Step(ctx, Step{Phase: phase, Form: form, Op: op, Unit: u, Threads: threads, Count: n},
			func(ctx context.Context, w, i int) (int64, time.Time, error) {
				if write {
					m, err := f.WriteAt(ctx, buf[:u], at(i))
					return int64(m), time.Time{}, err
				}
				p := bufs[w]
				m, err := f.ReadAt(ctx, p, at(i))
				if err == nil && m != len(p) {
					err = fmt.Errorf("short read at %d: %d of %d bytes", at(i), m, len(p))
				}
				return int64(m), time.Time{}, err
			})
	}
	syncDrop := func() error {
		if err := r.Step(ctx, Step{Phase: "sync", Form: form, Op: "sync", Unit: u, Threads: 1, Count: 1},
			func(ctx context.Context, w, i int) (int64, time.Time, error) { return 0, time.Time{}, f.Sync(ctx) }); err != nil {
			return err
		}
		return drop(ctx, r, name)
	}
	if !readOnly {
		if err := pass("write", true, seq); err != nil {
			return err
		}
		if err := syncDrop(); err != nil {
			return err
		}
	}
	if err := pass("read", false, seq); err != nil {
		return err
	}
	if !readOnly {
		if err := pass("randwrite", true, random); err != nil {
			return err
		}
		if err := syncDrop(); err != nil {
			return err
		}
	}
	return pass("randread", false, random)
}

// drop makes the next read of name cold where the client has a cache.
func drop(ctx context.Context, r *Runner, name string) error {
	if cd, ok := r.D.(CacheDropper); ok {
		return r.Setup("drop cache of "+name, cd.DropCache(ctx, name))
	}
	return nil
}

// IozoneAverage is one line of the seed's iozone table: the MB/s of the
// four tests at one (form, request size, threads) and their mean (over the
// tests that ran: S3 has no write passes).
type IozoneAverage struct {
	Form      string  `json:"form,omitempty"`
	Unit      int64   `json:"unit"`
	Threads   int     `json:"threads"`
	Write     float64 `json:"write_mb_per_s"`
	Read      float64 `json:"read_mb_per_s"`
	RandWrite float64 `json:"randwrite_mb_per_s"`
	RandRead  float64 `json:"randread_mb_per_s"`
	Average   float64 `json:"average_mb_per_s"`
	// Tests is how many of the four ran (4, or 2 on a read-only target).
	Tests int `json:"tests"`
}

// IozoneAverages computes the four-way averages from an iozone run's rows
// (Summarize), in the rows' order.
func IozoneAverages(rows []Row) []IozoneAverage {
	type key struct {
		form    string
		unit    int64
		threads int
	}
	var out []IozoneAverage
	idx := map[key]int{}
	for _, row := range rows {
		if !slices.Contains(IozonePhases, row.Phase) {
			continue
		}
		k := key{row.Form, row.Unit, row.Threads}
		i, ok := idx[k]
		if !ok {
			i = len(out)
			idx[k] = i
			out = append(out, IozoneAverage{Form: row.Form, Unit: row.Unit, Threads: row.Threads})
		}
		a := &out[i]
		switch row.Phase {
		case "write":
			a.Write = row.MBps
		case "read":
			a.Read = row.MBps
		case "randwrite":
			a.RandWrite = row.MBps
		case "randread":
			a.RandRead = row.MBps
		}
		a.Tests++
	}
	for i := range out {
		if out[i].Tests > 0 {
			out[i].Average = (out[i].Write + out[i].Read + out[i].RandWrite + out[i].RandRead) / float64(out[i].Tests)
		}
	}
	return out
}
