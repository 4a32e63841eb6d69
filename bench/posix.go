package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// POSIX drives a directory through the kernel's file interface: a local
// disk, a FUSE mount of ours, or a kernel NFS/iSCSI mount. Access forms
// (seed 000 Table I): default (page cache, fsync only at Sync), sync
// (O_SYNC: every write durable when it returns) and direct (O_DIRECT: no
// page cache; buffers, sizes and offsets must be Alignment-aligned, which
// the suites ensure with AlignedBuffer).
type POSIX struct {
	root string
}

// OpenPOSIX opens directory root, which must exist.
func OpenPOSIX(root string) (*POSIX, error) {
	fi, err := os.Stat(root)
	if err != nil {
		return nil, fmt.Errorf("bench: target %s: %w", root, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("bench: target %s is not a directory", root)
	}
	return &POSIX{root: root}, nil
}

func (d *POSIX) Protocol() string { return "posix" }
func (d *POSIX) Target() string   { return d.root }
func (d *POSIX) Forms() []string  { return []string{FormDefault, FormSync, FormDirect} }

func (d *POSIX) path(name string) string { return filepath.Join(d.root, filepath.FromSlash(name)) }

func formFlags(form string) (int, error) {
	switch form {
	case FormDefault, "":
		return 0, nil
	case FormSync:
		return syscall.O_SYNC, nil
	case FormDirect:
		return syscall.O_DIRECT, nil
	}
	return 0, fmt.Errorf("bench: unknown access form %q (default, sync, direct)", form)
}

func (d *POSIX) Mkdir(ctx context.Context, dir string) error {
	if err := os.Mkdir(d.path(dir), 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	return nil
}

// Put writes name through the page cache and fsyncs it before returning:
// a "whole file written" means durable, as Put on S3 and a FILE_SYNC or
// COMMITted NFS write are.
func (d *POSIX) Put(ctx context.Context, name string, data []byte) error {
	f, err := os.OpenFile(d.path(name), os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// getChunk is the read size of Get: the first byte is timed after the first
// read returns.
const getChunk = 1 << 20

func (d *POSIX) Get(ctx context.Context, name string, buf []byte) (int, time.Time, error) {
	f, err := os.Open(d.path(name))
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
		if err == io.EOF {
			break
		}
		if err != nil {
			return n, first, err
		}
	}
	return n, first, nil
}

func (d *POSIX) OpenFile(ctx context.Context, name string, size int64, form string) (File, error) {
	fl, err := formFlags(form)
	if err != nil {
		return nil, err
	}
	p := d.path(name)
	if fi, err := os.Stat(p); err != nil || fi.Size() != size {
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			return nil, err
		}
		// Allocate for real (not a sparse file): reads must hit data.
		f, err := os.OpenFile(p, os.O_WRONLY, 0o644)
		if err != nil {
			return nil, err
		}
		buf := AlignedBuffer(min(int(size), 1<<20))
		Fill(buf, 1)
		for off := int64(0); off < size; off += int64(len(buf)) {
			if _, err := f.WriteAt(buf[:min(int64(len(buf)), size-off)], off); err != nil {
				f.Close()
				return nil, err
			}
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return nil, err
		}
		// Leave no pages of the fill in the cache: reads start cold, and
		// O_DIRECT writes do not pay for invalidating cached pages (fio's
		// invalidate=1 does the same before a job).
		unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
		f.Close()
	}
	f, err := os.OpenFile(p, os.O_RDWR|fl, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open %s (%s): %w", name, form, err)
	}
	return posixFile{f}, nil
}

type posixFile struct{ f *os.File }

func (f posixFile) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	n, err := f.f.ReadAt(p, off)
	if err == io.EOF && n == len(p) {
		err = nil
	}
	return n, err
}
func (f posixFile) WriteAt(ctx context.Context, p []byte, off int64) (int, error) {
	return f.f.WriteAt(p, off)
}
func (f posixFile) Sync(ctx context.Context) error  { return f.f.Sync() }
func (f posixFile) Close(ctx context.Context) error { return f.f.Close() }

func (d *POSIX) List(ctx context.Context, dir string) ([]string, error) {
	ents, err := os.ReadDir(d.path(dir))
	if err != nil {
		return nil, err
	}
	names := make([]string, len(ents))
	for i, e := range ents {
		names[i] = e.Name()
	}
	sort.Strings(names)
	return names, nil
}

func (d *POSIX) Delete(ctx context.Context, name string) error { return os.Remove(d.path(name)) }

func (d *POSIX) RemoveAll(ctx context.Context, dir string) error {
	if dir == "" || dir == "." || dir == "/" {
		return errors.New("bench: refusing to remove the target's root")
	}
	return os.RemoveAll(d.path(dir))
}

func (d *POSIX) Close(ctx context.Context) error { return nil }

// DropCaches asks the kernel to drop clean page-cache pages (root only), so
// that a read phase after a write phase reads cold. It reports whether it
// could.
func DropCaches() bool {
	syscall.Sync()
	return os.WriteFile("/proc/sys/vm/drop_caches", []byte("1"), 0o200) == nil
}

var _ Driver = (*POSIX)(nil)

// CacheDropper is implemented by drivers with a client-side cache that a
// cold read must bypass (the POSIX driver: the kernel's page cache).
type CacheDropper interface {
	DropCache(ctx context.Context, name string) error
}

// DropCache drops name's clean pages from the page cache
// (posix_fadvise DONTNEED after fsync), as fio's invalidate=1 does, so the
// next read of it goes to the device, the FUSE daemon or the NFS server.
func (d *POSIX) DropCache(ctx context.Context, name string) error {
	f, err := os.Open(d.path(name))
	if err != nil {
		return err
	}
	defer f.Close()
	if err := f.Sync(); err != nil {
		return err
	}
	return unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
}

var _ CacheDropper = (*POSIX)(nil)
