package bench

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"path"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/tristore/tristore/blockdev"
	"github.com/tristore/tristore/client/iscsi"
)

// ISCSI drives one LUN as a raw block device with tristore's initiator.
// There is no file system: each "file" of a run is a region of the LUN
// (aligned to Alignment), held in a table in this process, so the numbers
// are the block protocol's own. THE LUN'S DATA IS OVERWRITTEN from offset 0
// on. Access forms: default (WRITE, SYNCHRONIZE CACHE at Sync/Close) and
// sync (every WRITE with FUA, as O_SYNC on a block device). Put writes the
// region and flushes the cache, so it is durable on return like the other
// drivers' Put.
//
// OpenBlock gives the same driver over any blockdev.Device (a RAID volume,
// a file LUN): the suites that only need OpenFile (units, iozone) then
// measure that device.
type ISCSI struct {
	s      blockdev.Device
	proto  string // "iscsi", or OpenBlock's protocol
	target string

	mu      sync.Mutex
	files   map[string]region // by name
	dirs    map[string]bool
	free    []region // freed regions, reused first-fit
	next    int64    // bump pointer
	maxUsed int64
	// base and limit confine the regions to [base, limit) of the LUN (a
	// client process of the clients suite; limit 0: the whole LUN).
	base, limit int64
}

type region struct{ off, size int64 }

// OpenISCSI logs in to iscsi://[user:secret@]host:port/iqn/lun.
func OpenISCSI(ctx context.Context, u *url.URL, o Options) (*ISCSI, error) {
	target := Redact(u.String())
	a, err := iscsi.FromURL(u)
	if err != nil {
		return nil, fmt.Errorf("bench: target %s: %w", target, err)
	}
	if a.Target == "" {
		return nil, fmt.Errorf("bench: target %s: want iscsi://host:port/IQN/LUN", target)
	}
	cfg := iscsi.ConfigFromAddress(a)
	if cfg.CHAP.User == "" && o.CHAPUser != "" {
		cfg.CHAP.User, cfg.CHAP.Secret = o.CHAPUser, o.CHAPSecret
	}
	cfg.DialTimeout = o.timeout()
	// Commands fail instead of waiting for a re-login, so a dropped target
	// shows up as failed requests.
	cfg.ReplacementTimeout = -1
	s, err := iscsi.Open(ctx, cfg)
	if err != nil {
		return nil, fmt.Errorf("bench: target %s: login: %w", target, err)
	}
	return &ISCSI{s: s, proto: "iscsi", target: target, files: map[string]region{}, dirs: map[string]bool{}}, nil
}

func (d *ISCSI) Protocol() string { return d.proto }
func (d *ISCSI) Target() string   { return d.target }
func (d *ISCSI) Forms() []string  { return []string{FormDefault, FormSync} }

// ErrLUNFull is returned when the run's files do not fit in the LUN.
var ErrLUNFull = errors.New("bench: the LUN has no room for another region")

func roundUp(n, a int64) int64 { return (n + a - 1) / a * a }

// alloc finds room for size bytes: a freed region first, else the end.
func (d *ISCSI) alloc(size int64) (region, error) {
	need := roundUp(max(size, 1), Alignment)
	for i, r := range d.free {
		if r.size >= need {
			d.free = append(d.free[:i], d.free[i+1:]...)
			if r.size > need {
				d.free = append(d.free, region{r.off + need, r.size - need})
			}
			return region{r.off, size}, nil
		}
	}
	end := d.s.Size()
	if d.limit > 0 {
		end = min(end, d.limit)
	}
	if d.next+need > end {
		return region{}, fmt.Errorf("%w (%d bytes asked, %d of %d in use)", ErrLUNFull, size, d.next-d.base, end-d.base)
	}
	r := region{d.next, size}
	d.next += need
	d.maxUsed = max(d.maxUsed, d.next)
	return r, nil
}

func (d *ISCSI) release(r region) {
	d.free = append(d.free, region{r.off, roundUp(max(r.size, 1), Alignment)})
	if len(d.files) == 0 { // everything freed: start again from the base
		d.free, d.next = nil, d.base
	}
}

// place gives name a region of size bytes (reusing its own if it fits).
func (d *ISCSI) place(name string, size int64) (region, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if r, ok := d.files[name]; ok {
		if roundUp(max(r.size, 1), Alignment) >= size {
			r.size = size
			d.files[name] = r
			return r, nil
		}
		delete(d.files, name)
		d.release(r)
	}
	r, err := d.alloc(size)
	if err != nil {
		return r, err
	}
	d.files[name] = r
	return r, nil
}

func (d *ISCSI) lookup(name string) (region, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	r, ok := d.files[name]
	if !ok {
		return r, fmt.Errorf("bench: iscsi region %s: no such file", name)
	}
	return r, nil
}

func (d *ISCSI) Mkdir(ctx context.Context, dir string) error {
	d.mu.Lock()
	d.dirs[strings.Trim(dir, "/")] = true
	d.mu.Unlock()
	return nil
}

// Put writes data into name's region (a partial last block is written
// padded to the LUN's block size) and flushes the target's cache.
func (d *ISCSI) Put(ctx context.Context, name string, data []byte) error {
	r, err := d.place(name, int64(len(data)))
	if err != nil {
		return err
	}
	if err := d.write(ctx, data, r.off, false); err != nil {
		return err
	}
	return d.s.Flush(ctx)
}

// write sends p at off, padding a partial final block with zeros.
func (d *ISCSI) write(ctx context.Context, p []byte, off int64, fua bool) error {
	bs := int64(d.s.BlockSize())
	whole := int64(len(p)) / bs * bs
	wr := d.s.WriteAt
	if fw, ok := d.s.(blockdev.FUAWriter); ok && fua {
		wr = fw.WriteAtFUA
	} else if fua { // no FUA below: write, then flush
		wr = func(ctx context.Context, p []byte, off int64) (int, error) {
			n, err := d.s.WriteAt(ctx, p, off)
			if err == nil {
				err = d.s.Flush(ctx)
			}
			return n, err
		}
	}
	if whole > 0 {
		if _, err := wr(ctx, p[:whole], off); err != nil {
			return err
		}
	}
	if rest := int64(len(p)) - whole; rest > 0 {
		tail := make([]byte, bs)
		copy(tail, p[whole:])
		if _, err := wr(ctx, tail, off+whole); err != nil {
			return err
		}
	}
	return nil
}

// read fills p from off, reading a partial final block whole.
func (d *ISCSI) read(ctx context.Context, p []byte, off int64) (int, error) {
	bs := int64(d.s.BlockSize())
	whole := int64(len(p)) / bs * bs
	if whole > 0 {
		if n, err := d.s.ReadAt(ctx, p[:whole], off); err != nil {
			return n, err
		}
	}
	if rest := int64(len(p)) - whole; rest > 0 {
		tail := make([]byte, bs)
		if _, err := d.s.ReadAt(ctx, tail, off+whole); err != nil {
			return int(whole), err
		}
		copy(p[whole:], tail)
	}
	return len(p), nil
}

func (d *ISCSI) Get(ctx context.Context, name string, buf []byte) (int, time.Time, error) {
	r, err := d.lookup(name)
	if err != nil {
		return 0, time.Time{}, err
	}
	n := int(min(int64(len(buf)), r.size))
	got, err := d.read(ctx, buf[:n], r.off)
	return got, time.Time{}, err
}

func (d *ISCSI) OpenFile(ctx context.Context, name string, size int64, form string) (File, error) {
	fua := false
	switch form {
	case FormDefault, "":
	case FormSync:
		fua = true
	default:
		return nil, fmt.Errorf("bench: iscsi has no access form %q (default, sync)", form)
	}
	d.mu.Lock()
	_, exists := d.files[name]
	d.mu.Unlock()
	r, err := d.place(name, size)
	if err != nil {
		return nil, err
	}
	if !exists {
		buf := AlignedBuffer(int(min(size, 1<<20)))
		Fill(buf, 1)
		for off := int64(0); off < size; off += int64(len(buf)) {
			if err := d.write(ctx, buf[:min(int64(len(buf)), size-off)], r.off+off, false); err != nil {
				return nil, err
			}
		}
		if err := d.s.Flush(ctx); err != nil {
			return nil, err
		}
	}
	return &iscsiFile{d: d, r: r, fua: fua}, nil
}

type iscsiFile struct {
	d   *ISCSI
	r   region
	fua bool
}

func (f *iscsiFile) check(n int, off int64) error {
	if off < 0 || off+int64(n) > f.r.size {
		return fmt.Errorf("bench: iscsi region: [%d, %d) outside the file's %d bytes", off, off+int64(n), f.r.size)
	}
	return nil
}

func (f *iscsiFile) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	if err := f.check(len(p), off); err != nil {
		return 0, err
	}
	return f.d.read(ctx, p, f.r.off+off)
}

func (f *iscsiFile) WriteAt(ctx context.Context, p []byte, off int64) (int, error) {
	if err := f.check(len(p), off); err != nil {
		return 0, err
	}
	if err := f.d.write(ctx, p, f.r.off+off, f.fua); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (f *iscsiFile) Sync(ctx context.Context) error  { return f.d.s.Flush(ctx) }
func (f *iscsiFile) Close(ctx context.Context) error { return f.d.s.Flush(ctx) }

func (d *ISCSI) List(ctx context.Context, dir string) ([]string, error) {
	dir = strings.Trim(dir, "/")
	d.mu.Lock()
	defer d.mu.Unlock()
	var names []string
	for n := range d.files {
		if path.Dir(n) == dir || (dir == "" && !strings.Contains(n, "/")) {
			names = append(names, path.Base(n))
		}
	}
	sort.Strings(names)
	return names, nil
}

func (d *ISCSI) Delete(ctx context.Context, name string) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	r, ok := d.files[name]
	if !ok {
		return fmt.Errorf("bench: iscsi region %s: no such file", name)
	}
	delete(d.files, name)
	d.release(r)
	return nil
}

// RemoveAll forgets the regions under dir. The blocks keep the benchmark's
// data (the LUN is raw: there is nothing to delete on the target).
func (d *ISCSI) RemoveAll(ctx context.Context, dir string) error {
	dir = strings.Trim(dir, "/")
	d.mu.Lock()
	defer d.mu.Unlock()
	for n, r := range d.files {
		if strings.HasPrefix(n, dir+"/") {
			delete(d.files, n)
			d.release(r)
		}
	}
	delete(d.dirs, dir)
	return nil
}

// Files is the number of regions in use (for tests of cleanup).
func (d *ISCSI) Files() int { d.mu.Lock(); defer d.mu.Unlock(); return len(d.files) }

func (d *ISCSI) Close(ctx context.Context) error { return d.s.Close() }

var _ Driver = (*ISCSI)(nil)
