package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"path"
	"strings"
	"sync"
	"time"

	"github.com/tristore/tristore/client/nfs"
)

// NFS drives an NFS v3 export with tristore's userspace client (no kernel
// client, no page cache in between: every read and write is on the wire).
// Access forms: default writes UNSTABLE and COMMITs at Sync/Close (as a
// kernel client's write-back), sync writes FILE_SYNC (as O_SYNC on a kernel
// mount). Put writes the file and makes it stable before returning. The
// client is soft with no retransmissions, so a lost request is an error the
// suite counts.
type NFS struct {
	c      *nfs.Client
	target string

	mu   sync.Mutex
	dirs map[string]nfs.FH // directory handles by path ("" = root)
}

// OpenNFS mounts nfs://host:port/export (query mountport=P when MOUNT is on
// another port).
func OpenNFS(ctx context.Context, u *url.URL, o Options) (*NFS, error) {
	target := Redact(u.String())
	host := u.Host
	if _, _, err := net.SplitHostPort(host); err != nil {
		host = net.JoinHostPort(host, "2049")
	}
	opts := nfs.Options{Timeout: o.timeout(), Retries: -1}
	if mp := u.Query().Get("mountport"); mp != "" {
		h, _, _ := net.SplitHostPort(host)
		opts.MountAddr = net.JoinHostPort(h, mp)
	}
	if o.Dial != nil {
		opts.Dial = o.Dial
	}
	export := u.Path
	if export == "" {
		export = "/"
	}
	c, err := nfs.Dial(ctx, host, opts)
	if err != nil {
		return nil, fmt.Errorf("bench: target %s: connect: %w", target, err)
	}
	root, err := c.Mount(ctx, export)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("bench: target %s: mount %s: %w", target, export, err)
	}
	return &NFS{c: c, target: target, dirs: map[string]nfs.FH{"": root}}, nil
}

func (d *NFS) Protocol() string { return "nfs" }
func (d *NFS) Target() string   { return d.target }
func (d *NFS) Forms() []string  { return []string{FormDefault, FormSync} }

// dir returns the handle of directory p, looking it up once.
func (d *NFS) dir(ctx context.Context, p string) (nfs.FH, error) {
	p = strings.Trim(path.Clean("/"+p), "/")
	d.mu.Lock()
	fh, ok := d.dirs[p]
	d.mu.Unlock()
	if ok {
		return fh, nil
	}
	fh, _, err := d.c.LookupPath(ctx, p)
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	d.dirs[p] = fh
	d.mu.Unlock()
	return fh, nil
}

func (d *NFS) split(ctx context.Context, name string) (nfs.FH, string, error) {
	dir, base := path.Split(strings.Trim(name, "/"))
	fh, err := d.dir(ctx, dir)
	return fh, base, err
}

func (d *NFS) Mkdir(ctx context.Context, dir string) error {
	parent, base, err := d.split(ctx, dir)
	if err != nil {
		return err
	}
	fh, _, err := d.c.Mkdir(ctx, parent, base, nfs.SetAttr{Mode: ptr(uint32(0o755))})
	if errors.Is(err, nfs.ErrExist) {
		fh, _, err = d.c.Lookup(ctx, parent, base)
	}
	if err != nil {
		return err
	}
	d.mu.Lock()
	d.dirs[strings.Trim(path.Clean("/"+dir), "/")] = fh
	d.mu.Unlock()
	return nil
}

func ptr[T any](v T) *T { return &v }

// create makes (or truncates) name and returns its handle.
func (d *NFS) create(ctx context.Context, name string, size uint64) (nfs.FH, error) {
	dir, base, err := d.split(ctx, name)
	if err != nil {
		return nil, err
	}
	fh, _, err := d.c.Create(ctx, dir, base, nfs.Unchecked, nfs.SetAttr{Mode: ptr(uint32(0o644)), Size: &size}, nfs.Verifier{})
	return fh, err
}

func (d *NFS) Put(ctx context.Context, name string, data []byte) error {
	fh, err := d.create(ctx, name, 0)
	if err != nil {
		return err
	}
	return d.c.WriteFile(ctx, fh, data, nfs.Unstable)
}

func (d *NFS) Get(ctx context.Context, name string, buf []byte) (int, time.Time, error) {
	dir, base, err := d.split(ctx, name)
	if err != nil {
		return 0, time.Time{}, err
	}
	fh, _, err := d.c.Lookup(ctx, dir, base)
	if err != nil {
		return 0, time.Time{}, err
	}
	if len(buf) == 0 {
		return 0, time.Time{}, nil
	}
	// The first READ alone, to time the first byte; the rest in parallel.
	first := min(len(buf), int(d.c.Rsize()))
	n, eof, err := d.c.Read(ctx, fh, 0, buf[:first])
	t := time.Now()
	if err != nil || eof || n < first {
		return n, t, err
	}
	m, err := d.c.ReadAt(ctx, fh, buf[n:], uint64(n))
	if err == io.EOF {
		err = nil
	}
	return n + m, t, err
}

func (d *NFS) OpenFile(ctx context.Context, name string, size int64, form string) (File, error) {
	stable := nfs.Unstable
	switch form {
	case FormDefault, "":
	case FormSync:
		stable = nfs.FileSync
	default:
		return nil, fmt.Errorf("bench: nfs has no access form %q (default, sync)", form)
	}
	dir, base, err := d.split(ctx, name)
	if err != nil {
		return nil, err
	}
	fh, attr, err := d.c.Lookup(ctx, dir, base)
	if err != nil || attr == nil || int64(attr.Size) != size {
		buf := make([]byte, size)
		Fill(buf, 1)
		if err := d.Put(ctx, name, buf); err != nil {
			return nil, err
		}
		if fh, _, err = d.c.Lookup(ctx, dir, base); err != nil {
			return nil, err
		}
	}
	f := &nfsFile{c: d.c, fh: fh, stable: stable}
	if stable == nfs.Unstable {
		f.u = nfs.NewUnstable(d.c, fh)
	}
	return f, nil
}

type nfsFile struct {
	c      *nfs.Client
	fh     nfs.FH
	stable nfs.Stable
	u      *nfs.UnstableWriter
}

func (f *nfsFile) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	n, err := f.c.ReadAt(ctx, f.fh, p, uint64(off))
	if err == io.EOF && n == len(p) {
		err = nil
	}
	return n, err
}

func (f *nfsFile) WriteAt(ctx context.Context, p []byte, off int64) (int, error) {
	if f.u != nil {
		if err := f.u.WriteAt(ctx, p, uint64(off), false); err != nil {
			return 0, err
		}
		// Bound the data kept for a resend: commit every 64 MiB, as a
		// kernel client flushes under memory pressure.
		if f.u.Pending() > 64<<20 {
			if err := f.u.Commit(ctx); err != nil {
				return len(p), err
			}
		}
		return len(p), nil
	}
	for done := 0; done < len(p); {
		n := min(len(p)-done, int(f.c.Wsize()))
		wr, err := f.c.Write(ctx, f.fh, uint64(off)+uint64(done), p[done:done+n], f.stable)
		if err != nil {
			return done, err
		}
		if wr.Count == 0 {
			return done, fmt.Errorf("nfs WRITE: no progress at offset %d", off+int64(done))
		}
		done += int(wr.Count)
	}
	return len(p), nil
}

func (f *nfsFile) Sync(ctx context.Context) error {
	if f.u != nil {
		return f.u.Commit(ctx)
	}
	return nil
}

func (f *nfsFile) Close(ctx context.Context) error { return f.Sync(ctx) }

func (d *NFS) List(ctx context.Context, dir string) ([]string, error) {
	fh, err := d.dir(ctx, dir)
	if err != nil {
		return nil, err
	}
	ents, err := d.c.Readdir(ctx, fh)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		if e.Name != "." && e.Name != ".." {
			names = append(names, e.Name)
		}
	}
	return names, nil
}

func (d *NFS) Delete(ctx context.Context, name string) error {
	dir, base, err := d.split(ctx, name)
	if err != nil {
		return err
	}
	return d.c.Remove(ctx, dir, base)
}

// RemoveAll walks dir depth-first (bounded depth) removing files, then the
// directories.
func (d *NFS) RemoveAll(ctx context.Context, dir string) error {
	dir = strings.Trim(path.Clean("/"+dir), "/")
	if dir == "" {
		return errors.New("bench: refusing to remove the export's root")
	}
	err := d.removeAll(ctx, dir, 0)
	if errors.Is(err, nfs.ErrNoEnt) {
		return nil
	}
	return err
}

func (d *NFS) removeAll(ctx context.Context, dir string, depth int) error {
	if depth > 32 {
		return fmt.Errorf("bench: %s: directories nested too deep to remove", dir)
	}
	parent, base, err := d.split(ctx, dir)
	if err != nil {
		return err
	}
	fh, attr, err := d.c.Lookup(ctx, parent, base)
	if err != nil {
		return err
	}
	if attr != nil && attr.Type != nfs.TypeDir {
		return d.c.Remove(ctx, parent, base)
	}
	ents, err := d.c.Readdirplus(ctx, fh)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if e.Name == "." || e.Name == ".." {
			continue
		}
		if e.Attr != nil && e.Attr.Type == nfs.TypeDir {
			if err := d.removeAll(ctx, dir+"/"+e.Name, depth+1); err != nil {
				return err
			}
			continue
		}
		if err := d.c.Remove(ctx, fh, e.Name); err != nil && !errors.Is(err, nfs.ErrNoEnt) {
			return err
		}
	}
	d.mu.Lock()
	for k := range d.dirs {
		if k == dir || strings.HasPrefix(k, dir+"/") {
			delete(d.dirs, k)
		}
	}
	d.mu.Unlock()
	return d.c.Rmdir(ctx, parent, base)
}

func (d *NFS) Close(ctx context.Context) error {
	d.c.Unmount(ctx)
	return d.c.Close()
}

var _ Driver = (*NFS)(nil)
