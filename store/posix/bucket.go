package posix

import (
	"context"
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

	"github.com/tristore/tristore/store"
	"github.com/tristore/tristore/store/newdir"
)

// bucketRec is the bucket's own record: xattr user.tristore.bucket on the
// bucket directory, or .tristore/buckets/<bucket>/info.json.
type bucketRec struct {
	Owner   string    `json:"owner,omitempty"`
	Created time.Time `json:"created"`
}

func (b *Backend) bucketSysDir(bucket string) string { return filepath.Join(b.bucketsDir(), bucket) }

func (b *Backend) bucketInfo(bucket string, fi os.FileInfo) store.BucketInfo {
	bi := store.BucketInfo{Name: bucket, Created: fi.ModTime().UTC()}
	var data []byte
	var err error
	if b.useXattr {
		data, err = getxattr(b.bucketPath(bucket), nil, bucketXattr)
	}
	if !b.useXattr || err != nil {
		data, err = os.ReadFile(filepath.Join(b.bucketSysDir(bucket), "info.json"))
	}
	var r bucketRec
	if err == nil && json.Unmarshal(data, &r) == nil {
		bi.Owner = r.Owner
		if !r.Created.IsZero() {
			bi.Created = r.Created
		}
	}
	return bi
}

// ListBuckets returns the top-level directories that are valid bucket
// names, sorted by name. Directories with other names (made over NFS, the
// system directory) are not buckets.
func (b *Backend) ListBuckets(ctx context.Context) ([]store.BucketInfo, error) {
	ents, err := os.ReadDir(b.root)
	if err != nil {
		return nil, err
	}
	var out []store.BucketInfo
	for _, e := range ents {
		if !e.IsDir() || validBucket(e.Name()) != nil {
			continue
		}
		fi, err := e.Info()
		if err != nil {
			continue
		}
		out = append(out, b.bucketInfo(e.Name(), fi))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

// CreateBucket makes the bucket directory and records owner and creation time.
func (b *Backend) CreateBucket(ctx context.Context, bucket, owner string) error {
	if err := validBucket(bucket); err != nil {
		return err
	}
	p := b.bucketPath(bucket)
	defer b.invalidateBucket(ctx, bucket)
	if err := newdir.Mkdir(p, 0o755); err != nil {
		if errors.Is(err, os.ErrExist) {
			return fmt.Errorf("%w: %s", store.ErrBucketExists, bucket)
		}
		return fsErr(err)
	}
	data, _ := json.Marshal(bucketRec{Owner: owner, Created: time.Now().UTC()})
	saved := false
	if b.useXattr {
		saved = unix.Setxattr(p, bucketXattr, data, 0) == nil
	}
	if !saved {
		os.RemoveAll(b.bucketSysDir(bucket)) // leftovers of an earlier bucket of this name
		if err := b.writeFileAtomic(filepath.Join(b.bucketSysDir(bucket), "info.json"), data, true); err != nil {
			os.Remove(p)
			return err
		}
	}
	if err := fsyncDir(p); err != nil {
		return err
	}
	return fsyncDir(b.root)
}

// StatBucket returns the bucket's info or ErrNoSuchBucket (from the
// bucket state cache, bucketcache.go).
func (b *Backend) StatBucket(ctx context.Context, bucket string) (store.BucketInfo, error) {
	s, err := b.bucketState(ctx, bucket)
	if err != nil {
		return store.BucketInfo{}, err
	}
	return s.info, nil
}

// DeleteBucket removes an empty bucket. Only objects make a bucket
// non-empty (as in S3); its in-progress multipart uploads are aborted and
// reserved entries (temp files, a stray marker) are removed.
func (b *Backend) DeleteBucket(ctx context.Context, bucket string) error {
	if err := validBucket(bucket); err != nil {
		return noSuchBucketIfInvalid(err)
	}
	p := b.bucketPath(bucket)
	defer b.invalidateBucket(ctx, bucket)
	d, err := openDir(p)
	if err != nil {
		return fmt.Errorf("%w: %s", store.ErrNoSuchBucket, bucket)
	}
	ents, err := d.ReadDir(-1)
	d.Close()
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%w: %s", store.ErrNoSuchBucket, bucket)
		}
		return err
	}
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), store.ReservedPrefix) {
			return fmt.Errorf("%w: %s", store.ErrBucketNotEmpty, bucket)
		}
	}
	// Objects of the hidden area (hidden.go) count too.
	if empty, err := b.hiddenEmpty(bucket); err != nil {
		return err
	} else if !empty {
		return fmt.Errorf("%w: %s", store.ErrBucketNotEmpty, bucket)
	}
	// So do older versions and delete markers (versions.go).
	if empty, err := b.versionsEmpty(bucket); err != nil {
		return err
	} else if !empty {
		return fmt.Errorf("%w: %s", store.ErrBucketNotEmpty, bucket)
	}
	b.hidden.forget(bucket)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if err := b.removeBucketDir(p, names); err != nil {
		if errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST) {
			return fmt.Errorf("%w: %s", store.ErrBucketNotEmpty, bucket)
		}
		return fsErr(err)
	}
	// A bucket created again starts without the old uploads and records.
	b.abortUploadsOf(bucket)
	b.removeAllRetired(b.bucketSysDir(bucket))
	b.removeAllRetired(filepath.Join(b.metaDir(), bucket))
	return nil
}

// removeBucketDir removes the entries names of the bucket directory p
// (reserved ones: the caller checked there is no object), then p itself,
// and makes that durable (fsync of the data root). Without a journal every
// removed inode is held until the removal of its name is durable and then
// retired (retire.go): the entries once p is fsynced, p once the root is.
// A name that appeared meanwhile (a PUT) makes the rmdir fail (ENOTEMPTY).
func (b *Backend) removeBucketDir(p string, names []string) error {
	if !b.noJournal {
		for _, n := range names {
			os.RemoveAll(filepath.Join(p, n))
		}
		if err := syscall.Rmdir(p); err != nil {
			return err
		}
		return fsyncDir(b.root)
	}
	var held []int
	for _, n := range names {
		q := filepath.Join(p, n)
		var st unix.Stat_t
		if unix.Lstat(q, &st) != nil {
			continue
		}
		if st.Mode&unix.S_IFMT == unix.S_IFDIR {
			if fd, _ := removeTreeHeld(q, 0); fd >= 0 {
				held = append(held, fd)
			}
			continue
		}
		fd := b.holdRemoved(q)
		if err := os.Remove(q); err != nil {
			closeFds(fd)
			continue
		}
		held = append(held, fd...)
	}
	pfd, err := unix.Open(p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		closeFds(held)
		return &os.PathError{Op: "open", Path: p, Err: err}
	}
	if err := unix.Fsync(pfd); err != nil {
		closeFds(append(held, pfd))
		return &os.PathError{Op: "fsync", Path: p, Err: err}
	}
	retireFds(held) // their names are gone for good
	if err := unix.Rmdir(p); err != nil {
		unix.Close(pfd)
		return err
	}
	if err := fsyncDir(b.root); err != nil {
		unix.Close(pfd)
		return err
	}
	retireFds([]int{pfd})
	return nil
}

// validCfgName keeps config names usable as xattr and file name suffixes.
func validCfgName(name string) error {
	if name == "" || len(name) > 64 {
		return fmt.Errorf("posix: bucket config name %q must be 1-64 characters", name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return fmt.Errorf("posix: bucket config name %q may use only letters, digits, - and _", name)
		}
	}
	return nil
}

// GetBucketConfig returns the named document ("" when unset), from the
// bucket state cache (bucketcache.go).
func (b *Backend) GetBucketConfig(ctx context.Context, bucket, name string) (string, error) {
	s, err := b.bucketState(ctx, bucket)
	if err != nil {
		return "", err
	}
	if err := validCfgName(name); err != nil {
		return "", err
	}
	return s.docs[name], nil
}

// SetBucketConfig stores (value "" deletes) the named document durably.
func (b *Backend) SetBucketConfig(ctx context.Context, bucket, name, value string) error {
	if _, err := b.StatBucket(ctx, bucket); err != nil {
		return err
	}
	if err := validCfgName(name); err != nil {
		return err
	}
	// The change is done (or failed) when this runs: the next lookup,
	// this request's included, reads the bucket again.
	defer b.invalidateBucket(ctx, bucket)
	p := b.bucketPath(bucket)
	file := filepath.Join(b.bucketSysDir(bucket), "cfg-"+name)
	if value == "" {
		// A delete is as durable as a set: a removed tag set or policy
		// must not come back after a power cut.
		if b.useXattr {
			if err := unix.Removexattr(p, cfgXattrPfx+name); err == nil {
				if err := fsyncDir(p); err != nil {
					return err
				}
			}
		}
		if removed, err := b.removeFileRetired(file); removed {
			if err != nil || b.noJournal {
				return err // without a journal made durable there
			}
			return fsyncDir(filepath.Dir(file))
		}
		return nil
	}
	if b.useXattr {
		err := unix.Setxattr(p, cfgXattrPfx+name, []byte(value), 0)
		if err == nil {
			b.removeFileRetired(file) // a value that was too big before
			return fsyncDir(p)
		}
		if !errors.Is(err, syscall.E2BIG) && !errors.Is(err, syscall.ENOSPC) && !errors.Is(err, syscall.ERANGE) {
			return fsErr(err)
		}
		unix.Removexattr(p, cfgXattrPfx+name)
	}
	return b.writeFileAtomic(file, []byte(value), true)
}

var _ store.BucketConfigurer = (*Backend)(nil)
