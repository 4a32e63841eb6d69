package bench

import (
	"context"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/tristore/tristore/client/nfs"
)

// amplification (seed 000 §IV-F, Figure 7): the bytes that cross the
// network, both ways, per byte of file written or read — per protocol and
// access form. Per (form, size, threads): a set of new files is written
// whole with the form (POSIX: open(O_CREAT|O_TRUNC|flag), write, close, and
// fsync for the default form so that its write-back is inside the step;
// NFS: UNSTABLE + COMMIT or FILE_SYNC; iSCSI: WRITE + SYNCHRONIZE CACHE or
// WRITE with FUA; S3: PUT), read back cold with the form, and deleted, by
// 1 thread (the seed's single-threaded batch) and 8 (multithreaded). The
// amplification ratio of a step is (wire_up_bytes + wire_down_bytes) ÷
// payload_bytes of its run.json phase, the bytes an emulated link counted
// while the step ran (seed: "total transmission volume in both directions
// divided by the file size"; for batches, the sum of the rates divided by
// the throughput, which is the same quotient).
//
// A network target is run through a counting link even without --network
// (as root a netns link, whose counters are IP packet bytes, headers
// included, as the seed's packet capture; else a proxy counting TCP
// payload). A directory target (a FUSE or kernel mount) has no link the
// workbench can count: its run says so in params.extra and records
// throughput only; run its server under `tristore netem` to count.
//
// Records: phases write (op put), read (op get), delete; form; unit = the
// file size; threads.
func init() {
	register(&Suite{
		Name:      "amplification",
		Seed:      "seed 000 §IV-F (Figure 7)",
		Doc:       "files of 4 KiB … 16 MiB written and read per access form by 1 and 8 threads; wire bytes both ways ÷ payload",
		UsesForms: true,
		NeedsWire: true,
		Defaults: func(scale float64) Params {
			return Params{Sizes: ScaleSizes(Powers(4<<10, 16<<20, 16), scale), Threads: ScaleThreads([]int{1, 8}, scale),
				Count: ScaleCount(256, scale, 1), Bytes: int64(ScaleCount(256<<20, scale, 1<<20))}
		},
		Run: runAmplification,
	})
}

func runAmplification(ctx context.Context, r *Runner) error {
	if r.cfg.Wire == nil {
		r.W.Update(func(run *Run) {
			if run.Params.Extra == nil {
				run.Params.Extra = map[string]string{}
			}
			run.Params.Extra["wire"] = "not measured: a " + r.D.Protocol() + " target has no link to count"
		})
	}
	for _, form := range r.Forms {
		for _, size := range r.P.Sizes {
			for _, t := range r.P.Threads {
				n := r.P.Count
				if r.P.Bytes > 0 {
					n = min(n, int(r.P.Bytes/size))
				}
				n = max(n, 2*t, 1)
				dir := r.Path(fmt.Sprintf("amplification-%s-%s-t%d", form, FormatSize(size), t))
				if err := ampSteps(ctx, r, dir, form, size, t, n); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func ampSteps(ctx context.Context, r *Runner, dir, form string, size int64, threads, count int) error {
	if err := r.Setup("mkdir "+dir, r.D.Mkdir(ctx, dir)); err != nil {
		return err
	}
	name := func(i int) string { return fmt.Sprintf("%s/f%06d", dir, i) }
	data := AlignedBuffer(int(size))
	Fill(data, uint64(size))
	if err := r.Step(ctx, Step{Phase: "write", Form: form, Op: "put", Unit: size, Threads: threads, Count: count},
		func(ctx context.Context, w, i int) (int64, time.Time, error) {
			if err := PutForm(ctx, r.D, name(i), data, form); err != nil {
				return 0, time.Time{}, err
			}
			return size, time.Time{}, nil
		}); err != nil {
		return err
	}
	if cd, ok := r.D.(CacheDropper); ok {
		for i := range count {
			cd.DropCache(ctx, name(i))
		}
	}
	bufs := make([][]byte, threads)
	for w := range bufs {
		bufs[w] = AlignedBuffer(int(size))
	}
	if err := r.Step(ctx, Step{Phase: "read", Form: form, Op: "get", Unit: size, Threads: threads, Count: count},
		func(ctx context.Context, w, i int) (int64, time.Time, error) {
			n, first, err := GetForm(ctx, r.D, name(i), bufs[w], form)
			if err == nil && int64(n) != size {
				err = fmt.Errorf("short read of %s: %d of %d bytes", name(i), n, size)
			}
			return int64(n), first, err
		}); err != nil {
		return err
	}
	return r.Step(ctx, Step{Phase: "delete", Form: form, Op: "delete", Unit: size, Threads: threads, Count: count},
		func(ctx context.Context, w, i int) (int64, time.Time, error) {
			return 0, time.Time{}, r.D.Delete(ctx, name(i))
		})
}

// FormPutter is a Driver that writes a whole new file with an access form
// (the amplification suite's writes); FormGetter reads one with a form.
// A driver without them has only the default form, which is Put and Get.
type FormPutter interface {
	PutForm(ctx context.Context, name string, data []byte, form string) error
}

// FormGetter: see FormPutter.
type FormGetter interface {
	GetForm(ctx context.Context, name string, buf []byte, form string) (int, time.Time, error)
}

// PutForm writes name whole with access form form through d.
func PutForm(ctx context.Context, d Driver, name string, data []byte, form string) error {
	if fp, ok := d.(FormPutter); ok {
		return fp.PutForm(ctx, name, data, form)
	}
	if form != FormDefault && form != "" {
		return fmt.Errorf("bench: %s has no access form %q for whole-file writes", d.Protocol(), form)
	}
	return d.Put(ctx, name, data)
}

// GetForm reads name whole with access form form through d (Get where the
// form makes no difference to a read: no page cache in this process).
func GetForm(ctx context.Context, d Driver, name string, buf []byte, form string) (int, time.Time, error) {
	if fg, ok := d.(FormGetter); ok {
		return fg.GetForm(ctx, name, buf, form)
	}
	return d.Get(ctx, name, buf)
}

// PutForm creates name with the form's open flag and writes data; the
// default form fsyncs before close, so the write-back a mount does later
// happens inside the request (and the step that counts its wire bytes).
// O_DIRECT needs data aligned (AlignedBuffer) and a multiple of 4 KiB.
func (d *POSIX) PutForm(ctx context.Context, name string, data []byte, form string) error {
	fl, err := formFlags(form)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(d.path(name), os.O_CREATE|os.O_TRUNC|os.O_WRONLY|fl, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if form == FormDefault || form == "" {
		if err := f.Sync(); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}

// GetForm reads name opened with the form's flag (O_DIRECT bypasses the
// page cache; O_SYNC reads as default ones).
func (d *POSIX) GetForm(ctx context.Context, name string, buf []byte, form string) (int, time.Time, error) {
	fl, err := formFlags(form)
	if err != nil {
		return 0, time.Time{}, err
	}
	f, err := os.OpenFile(d.path(name), os.O_RDONLY|fl, 0)
	if err != nil {
		return 0, time.Time{}, err
	}
	defer f.Close()
	var first time.Time
	n := 0
	for n < len(buf) {
		m, err := f.Read(buf[n:min(len(buf), n+getChunk)])
		if first.IsZero() && m > 0 {
			first = time.Now()
		}
		n += m
		if err == io.EOF || (err == nil && m == 0) {
			break
		}
		if err != nil {
			return n, first, err
		}
	}
	return n, first, nil
}

// PutForm writes a new file: default UNSTABLE WRITEs and a COMMIT (one
// FILE_SYNC WRITE when it fits, as the Linux client), sync FILE_SYNC
// WRITEs (O_SYNC on a kernel mount).
func (d *NFS) PutForm(ctx context.Context, name string, data []byte, form string) error {
	switch form {
	case FormDefault, "":
		return d.Put(ctx, name, data)
	case FormSync:
	default:
		return fmt.Errorf("bench: nfs has no access form %q (default, sync)", form)
	}
	fh, err := d.create(ctx, name, 0)
	if err != nil {
		return err
	}
	return d.c.WriteFile(ctx, fh, data, nfs.FileSync)
}

// PutForm writes name's region: default WRITEs then SYNCHRONIZE CACHE,
// sync WRITEs with FUA (no cache flush).
func (d *ISCSI) PutForm(ctx context.Context, name string, data []byte, form string) error {
	switch form {
	case FormDefault, "":
		return d.Put(ctx, name, data)
	case FormSync:
	default:
		return fmt.Errorf("bench: iscsi has no access form %q (default, sync)", form)
	}
	r, err := d.place(name, int64(len(data)))
	if err != nil {
		return err
	}
	return d.write(ctx, data, r.off, true)
}
