package filelun

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tristore/tristore/internal/units"
	"github.com/tristore/tristore/store"
	"github.com/tristore/tristore/store/inuse"
)

// Volumes.
//
// A volume BUCKET/NAME is the object NAME in BUCKET: a sparse file of the
// volume's size. What makes an object a volume is its entry in the
// bucket's config document "iscsi-volumes" (store.BucketConfigurer), a
// small JSON map name -> {serial, created}. A registry was chosen over an
// object metadata flag because listing volumes must not Stat every object
// (Stat of a file written in place re-hashes it for the ETag, which for a
// big volume means reading it all) and because the serial number that the
// iSCSI target reports in VPD pages must survive restarts.
//
// Volume names are 1-64 characters of [a-z0-9-], starting with a letter
// or digit, so that "iqn...:BUCKET:NAME" is a valid iSCSI name.
//
// In use: a running target holds the served lock of store/inuse on the
// volume file while an initiator is logged in (when the store is a local
// tree, store.LocalPather). Shrinking or deleting a volume takes the change
// lock and fails with ErrInUse instead of pulling blocks from under a live
// initiator, and so does every other view of the tree (S3 PUT/DELETE, NFS
// REMOVE/RENAME/truncate), because the same lock is checked in store/posix
// and vfs. Growing is allowed live: the target notices the new size and
// reports a CAPACITY DATA HAS CHANGED unit attention.
//
// Broken volumes: the object of a registered volume can still disappear
// behind tristore's back (rm(1) in the tree, an S3 DELETE while it was not
// served). List reports such a volume with State "broken" rather than
// failing, so one lost volume never hides the others (discovery, `volume
// list`), and Delete removes its registration.

// ConfigName is the bucket config document holding the volume registry.
const ConfigName = "iscsi-volumes"

var (
	// ErrNotVolume is returned for BUCKET/NAME that is not a registered volume.
	ErrNotVolume = errors.New("not a volume")
	// ErrVolumeExists is returned by Create when the name is taken.
	ErrVolumeExists = errors.New("volume already exists")
	// ErrInUse is returned when a volume to shrink or delete is being
	// served. It is store.ErrInUse, which every view returns for the same
	// reason, so errors.Is matches either name.
	ErrInUse = store.ErrInUse
	// ErrBadName is returned for an invalid volume name.
	ErrBadName = errors.New("invalid volume name (want 1-64 of a-z, 0-9, '-')")
	// ErrBadSize is returned for a size that is zero, negative or not block-aligned.
	ErrBadSize = errors.New("invalid volume size")
)

// Info describes a volume.
type Info struct {
	Bucket    string    `json:"bucket"`
	Name      string    `json:"name"`
	Size      int64     `json:"size"`
	Allocated int64     `json:"allocated"` // bytes on disk; -1 if unknown
	Serial    string    `json:"serial"`
	Created   time.Time `json:"created"`
	// State is StateOK, or StateBroken when the registered object is
	// missing or unreadable (Problem says why; Size is then -1).
	State   string `json:"state"`
	Problem string `json:"problem,omitempty"`
	// Served: a target has the volume open (an initiator is logged in),
	// so no view may replace, truncate or delete it.
	Served bool `json:"served"`
}

// Volume states (Info.State).
const (
	StateOK     = "ok"
	StateBroken = "broken"
)

type regEntry struct {
	Serial  string `json:"serial"`
	Created int64  `json:"created"`
}

// Store is what volume management needs from a store.
type Store interface {
	store.Store
	store.Filer
	store.BucketConfigurer
}

// AsStore checks that st has the optional interfaces volumes need.
func AsStore(st store.Store) (Store, error) {
	vs, ok := st.(Store)
	if !ok {
		return nil, fmt.Errorf("volumes: %w: store lacks random-access files or bucket config", store.ErrNotSupported)
	}
	return vs, nil
}

// ValidName reports whether name is a valid volume name. It is
// inuse.VolumeName: store/posix takes the in-use change lock only on
// files with such a name directly under a bucket.
func ValidName(name string) bool { return inuse.VolumeName(name) }

// ParseRef splits "BUCKET/NAME".
func ParseRef(ref string) (bucket, name string, err error) {
	b, n, ok := strings.Cut(ref, "/")
	if !ok || b == "" || n == "" {
		return "", "", fmt.Errorf("volume %q: want BUCKET/NAME", ref)
	}
	if !ValidName(n) {
		return "", "", fmt.Errorf("volume %q: %w", ref, ErrBadName)
	}
	return b, n, nil
}

// ParseSize parses a volume size with internal/units (the one size syntax
// of every tristore flag: 1Gi and 512Mi are powers of 1024, 1G and 512M
// powers of 1000, a bare number is bytes) and requires a positive multiple
// of the block size, so "1M" (10^6, not a whole number of 512-byte blocks)
// is an error that suggests "1Mi" instead of a silently rounded size.
func ParseSize(s string) (int64, error) {
	n, err := units.ParseSize(s)
	if err != nil {
		return 0, fmt.Errorf("%w: %w", ErrBadSize, err)
	}
	if n <= 0 || n%DefaultBlockSize != 0 {
		hint := ""
		if q, err := units.Parse(s); err == nil && q.Prefix != "" && !strings.HasSuffix(q.Prefix, "i") {
			num := strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(s), q.Unit))
			num = strings.TrimSpace(num[:len(num)-1]) // the prefix letter
			hint = fmt.Sprintf(" (%s means powers of 1000; did you mean %s%si?)", q.Prefix, num, strings.ToUpper(q.Prefix))
		}
		return 0, fmt.Errorf("%w: %q is %d bytes, not a positive multiple of the %d-byte block%s", ErrBadSize, s, n, DefaultBlockSize, hint)
	}
	return n, nil
}

func readRegistry(ctx context.Context, st Store, bucket string) (map[string]regEntry, error) {
	doc, err := st.GetBucketConfig(ctx, bucket, ConfigName)
	if err != nil {
		return nil, err
	}
	reg := map[string]regEntry{}
	if doc == "" {
		return reg, nil
	}
	if err := json.Unmarshal([]byte(doc), &reg); err != nil {
		return nil, fmt.Errorf("volumes: registry of bucket %s is corrupt: %w", bucket, err)
	}
	return reg, nil
}

func writeRegistry(ctx context.Context, st Store, bucket string, reg map[string]regEntry) error {
	if len(reg) == 0 {
		return st.SetBucketConfig(ctx, bucket, ConfigName, "")
	}
	b, err := json.Marshal(reg)
	if err != nil {
		return err
	}
	return st.SetBucketConfig(ctx, bucket, ConfigName, string(b))
}

func newSerial() string {
	b := make([]byte, 8)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// Create makes a new sparse volume of size bytes (a multiple of the block
// size) and registers it.
func Create(ctx context.Context, st Store, bucket, name string, size int64) (Info, error) {
	if !ValidName(name) {
		return Info{}, ErrBadName
	}
	if size <= 0 || size%DefaultBlockSize != 0 {
		return Info{}, fmt.Errorf("%w: %d is not a positive multiple of %d", ErrBadSize, size, DefaultBlockSize)
	}
	reg, err := readRegistry(ctx, st, bucket)
	if err != nil {
		return Info{}, err
	}
	if _, ok := reg[name]; ok {
		return Info{}, fmt.Errorf("%s/%s: %w", bucket, name, ErrVolumeExists)
	}
	f, err := st.OpenFile(ctx, bucket, name, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		if errors.Is(err, os.ErrExist) {
			return Info{}, fmt.Errorf("%s/%s: an object with that name exists: %w", bucket, name, ErrVolumeExists)
		}
		return Info{}, err
	}
	if err := f.Truncate(size); err != nil {
		f.Close()
		st.Delete(ctx, bucket, name)
		return Info{}, err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		st.Delete(ctx, bucket, name)
		return Info{}, err
	}
	f.Close()
	e := regEntry{Serial: newSerial(), Created: time.Now().Unix()}
	reg[name] = e
	if err := writeRegistry(ctx, st, bucket, reg); err != nil {
		st.Delete(ctx, bucket, name)
		return Info{}, err
	}
	return Info{Bucket: bucket, Name: name, Size: size, Allocated: allocated(st, bucket, name), Serial: e.Serial, Created: time.Unix(e.Created, 0), State: StateOK}, nil
}

// Get returns one volume's info.
func Get(ctx context.Context, st Store, bucket, name string) (Info, error) {
	reg, err := readRegistry(ctx, st, bucket)
	if err != nil {
		return Info{}, err
	}
	e, ok := reg[name]
	if !ok {
		return Info{}, fmt.Errorf("%s/%s: %w", bucket, name, ErrNotVolume)
	}
	return info(ctx, st, bucket, name, e)
}

func info(ctx context.Context, st Store, bucket, name string, e regEntry) (Info, error) {
	f, err := st.OpenFile(ctx, bucket, name, os.O_RDONLY, 0)
	if err != nil {
		return Info{}, fmt.Errorf("volume %s/%s is registered but its object is unreadable: %w", bucket, name, err)
	}
	defer f.Close()
	sz, err := f.Size()
	if err != nil {
		return Info{}, err
	}
	served := false
	if p, ok := localPath(st, bucket, name); ok {
		served = inuse.Served(p)
	}
	return Info{Bucket: bucket, Name: name, Size: sz, Allocated: allocated(st, bucket, name), Serial: e.Serial,
		Created: time.Unix(e.Created, 0), State: StateOK, Served: served}, nil
}

// List returns the volumes of bucket ("" for every bucket), sorted. A
// volume whose object is missing or unreadable is listed with State
// StateBroken, not as an error. Listing every bucket skips a bucket whose
// registry cannot be read and returns the others together with an error
// naming it; callers show what they got and report the error.
func List(ctx context.Context, st Store, bucket string) ([]Info, error) {
	var buckets []string
	if bucket != "" {
		buckets = []string{bucket}
	} else {
		bs, err := st.ListBuckets(ctx)
		if err != nil {
			return nil, err
		}
		for _, b := range bs {
			buckets = append(buckets, b.Name)
		}
	}
	var out []Info
	var errs []error
	for _, b := range buckets {
		reg, err := readRegistry(ctx, st, b)
		if err != nil {
			if bucket != "" {
				return nil, err
			}
			if !errors.Is(err, store.ErrNoSuchBucket) { // else: deleted since ListBuckets
				errs = append(errs, fmt.Errorf("bucket %s: %w", b, err))
			}
			continue
		}
		names := make([]string, 0, len(reg))
		for n := range reg {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			in, err := info(ctx, st, b, n, reg[n])
			if err != nil {
				if ctx.Err() != nil {
					return nil, ctx.Err()
				}
				e := reg[n]
				in = Info{Bucket: b, Name: n, Size: -1, Allocated: -1, Serial: e.Serial, Created: time.Unix(e.Created, 0),
					State: StateBroken, Problem: err.Error()}
			}
			out = append(out, in)
		}
	}
	return out, errors.Join(errs...)
}

// Resize changes a volume's size. Growing is always allowed; shrinking
// fails with ErrInUse while a target serves the volume.
func Resize(ctx context.Context, st Store, bucket, name string, size int64) (Info, error) {
	if size <= 0 || size%DefaultBlockSize != 0 {
		return Info{}, fmt.Errorf("%w: %d is not a positive multiple of %d", ErrBadSize, size, DefaultBlockSize)
	}
	old, err := Get(ctx, st, bucket, name)
	if err != nil {
		return Info{}, err
	}
	if size < old.Size {
		held, err := lockChange(st, bucket, name)
		if err != nil {
			return Info{}, err
		}
		defer held.Release()
	}
	f, err := st.OpenFile(ctx, bucket, name, os.O_RDWR, 0)
	if err != nil {
		return Info{}, err
	}
	defer f.Close()
	if err := f.Truncate(size); err != nil {
		return Info{}, err
	}
	if err := f.Sync(); err != nil {
		return Info{}, err
	}
	return Get(ctx, st, bucket, name)
}

// Delete removes a volume (its object and registry entry). It fails with
// ErrInUse while a target serves it. A broken volume (object missing or not
// a file) loses its registration; whatever is at its name that is not a
// regular file is left alone.
func Delete(ctx context.Context, st Store, bucket, name string) error {
	reg, err := readRegistry(ctx, st, bucket)
	if err != nil {
		return err
	}
	if _, ok := reg[name]; !ok {
		return fmt.Errorf("%s/%s: %w", bucket, name, ErrNotVolume)
	}
	held, err := lockChange(st, bucket, name)
	if err != nil {
		return err
	}
	defer held.Release()
	if err := st.Delete(ctx, bucket, name); err != nil && !errors.Is(err, store.ErrNoSuchKey) {
		return err
	}
	delete(reg, name)
	return writeRegistry(ctx, st, bucket, reg)
}

// Open opens a registered volume as a LUN and marks it in use until Close.
func Open(ctx context.Context, st Store, bucket, name string) (*LUN, Info, error) {
	in, err := Get(ctx, st, bucket, name)
	if err != nil {
		return nil, Info{}, err
	}
	unlock, lockf, err := lockServe(st, bucket, name)
	if err != nil {
		return nil, Info{}, err
	}
	// The served lock keeps every changer away from the name, so this
	// opens the very inode locked above.
	f, err := st.OpenFile(ctx, bucket, name, os.O_RDWR, 0)
	if err != nil {
		unlock()
		return nil, Info{}, err
	}
	l, err := New(f, DefaultBlockSize)
	if err != nil {
		f.Close()
		unlock()
		return nil, Info{}, err
	}
	l.release = unlock
	l.mapf = lockf
	if lockf != nil {
		l.openLocalCache(lockf)
	}
	return l, in, nil
}

// localPath returns the file of bucket/name when the store is a local tree.
func localPath(st store.Store, bucket, name string) (string, bool) {
	lp, ok := st.(store.LocalPather)
	if !ok {
		return "", false
	}
	return filepath.Join(lp.Root(), bucket, name), true
}

// allocated returns the bytes a volume occupies on disk, or -1.
func allocated(st store.Store, bucket, name string) int64 {
	p, ok := localPath(st, bucket, name)
	if !ok {
		return -1
	}
	var s syscall.Stat_t
	if err := syscall.Stat(p, &s); err != nil {
		return -1
	}
	return s.Blocks * 512
}

// lockServe takes the served lock of store/inuse on the volume file. It
// also returns the file holding the lock (nil when the store has no local
// files), which the LUN uses to find holes. Stores without local files get
// no lock.
func lockServe(st store.Store, bucket, name string) (func(), *os.File, error) {
	p, ok := localPath(st, bucket, name)
	if !ok {
		return func() {}, nil, nil
	}
	f, err := inuse.Serve(p)
	if err != nil {
		if errors.Is(err, store.ErrInUse) {
			return nil, nil, fmt.Errorf("%s/%s: %w", bucket, name, err)
		}
		return nil, nil, err
	}
	return func() { f.Close() }, f, nil
}

// lockChange takes the change lock of store/inuse on the volume file, for
// a shrink or delete; it fails with ErrInUse while the volume is served.
// A missing object needs no lock (nil).
func lockChange(st store.Store, bucket, name string) (*inuse.Change, error) {
	p, ok := localPath(st, bucket, name)
	if !ok {
		return nil, nil
	}
	held, err := inuse.ChangeAt(unix.AT_FDCWD, p)
	if errors.Is(err, store.ErrInUse) {
		return nil, fmt.Errorf("%s/%s: %w (log its initiators out or stop `tristore serve`; growing is allowed live)", bucket, name, err)
	}
	return held, err
}
