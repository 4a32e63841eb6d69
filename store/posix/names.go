package posix

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/tristore/tristore/store"
	"github.com/tristore/tristore/store/newdir"
)

// validBucket applies S3's bucket naming rules: 3-63 characters of lower-case
// letters, digits, '.' and '-', starting and ending with a letter or digit,
// no two adjacent periods, and not shaped like an IPv4 address. These rules
// also keep bucket names safe as directory names (no '/', no leading '.').
func validBucket(name string) error {
	if len(name) < 3 || len(name) > 63 {
		return fmt.Errorf("%w: %q must be 3-63 characters", store.ErrInvalidBucketName, name)
	}
	for i := 0; i < len(name); i++ {
		c := name[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '-') {
			return fmt.Errorf("%w: %q has a character other than a-z 0-9 . -", store.ErrInvalidBucketName, name)
		}
	}
	if !isAlnum(name[0]) || !isAlnum(name[len(name)-1]) {
		return fmt.Errorf("%w: %q must start and end with a letter or digit", store.ErrInvalidBucketName, name)
	}
	if strings.Contains(name, "..") || strings.Contains(name, ".-") || strings.Contains(name, "-.") {
		return fmt.Errorf("%w: %q has adjacent periods or a period next to a hyphen", store.ErrInvalidBucketName, name)
	}
	if a, err := netip.ParseAddr(name); err == nil && a.Is4() {
		return fmt.Errorf("%w: %q looks like an IP address", store.ErrInvalidBucketName, name)
	}
	return nil
}

func isAlnum(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }

// validKey reports whether key maps to a plain path inside the bucket
// (nil) or must live in the hidden area (hidden.go). A key is split at
// '/'; every component must be non-empty, not "." or "..", at most 255
// bytes, free of NUL and not start with the reserved prefix. The one
// exception is a single trailing '/': such a "directory marker" key is
// stored as the file <dir>/.tristore-dir.
func validKey(key string) error {
	if err := anyKey(key); err != nil {
		return err
	}
	k := strings.TrimSuffix(key, "/")
	if k == "" {
		return fmt.Errorf("%w: key %q has an empty path component", store.ErrInvalidKey, key)
	}
	for c := range strings.SplitSeq(k, "/") {
		switch {
		case c == "":
			return fmt.Errorf("%w: key %q has an empty path component", store.ErrInvalidKey, key)
		case c == "." || c == "..":
			return fmt.Errorf("%w: key %q has a %q path component", store.ErrInvalidKey, key, c)
		case len(c) > 255:
			return fmt.Errorf("%w: key %q has a path component over 255 bytes", store.ErrInvalidKey, key)
		case strings.HasPrefix(c, store.ReservedPrefix):
			return fmt.Errorf("%w: key %q uses the reserved prefix %s", store.ErrInvalidKey, key, store.ReservedPrefix)
		}
	}
	return nil
}

// anyKey refuses what no object can have: the empty key, a key over
// S3's 1,024 bytes and a key with NUL (S3 lists keys in XML 1.0, which
// cannot carry it). Every other key is stored, plain or hidden.
func anyKey(key string) error {
	if key == "" {
		return fmt.Errorf("%w: empty key", store.ErrInvalidKey)
	}
	if len(key) > store.MaxKeyLen {
		return fmt.Errorf("%w: key longer than %d bytes", store.ErrInvalidKey, store.MaxKeyLen)
	}
	if strings.IndexByte(key, 0) >= 0 {
		return fmt.Errorf("%w: key contains NUL", store.ErrInvalidKey)
	}
	return nil
}

// objPath returns the file holding key (validated) in bucket.
func (b *Backend) objPath(bucket, key string) string {
	if strings.HasSuffix(key, "/") {
		return filepath.Join(b.root, bucket, filepath.FromSlash(key), dirMarker)
	}
	return filepath.Join(b.root, bucket, filepath.FromSlash(key))
}

func (b *Backend) bucketPath(bucket string) string { return filepath.Join(b.root, bucket) }

// keyLoc says where the object of a key may live: its plain path (when
// the key maps to one) and its file in the hidden area. Readers try plain
// first (see hidden.go).
type keyLoc struct {
	bucket, key string
	plain       string // "" when the key has no plain path
	hidden      string
	// noHidden: the bucket had no hidden area in the state Put read
	// (bucketcache.go) and hiddenGen was hiddenIndex.gen then, so unless
	// the generation moved, no hidden copy of the key can exist.
	noHidden  bool
	hiddenGen int64
}

// check validates bucket and key and returns where the key may live.
func (b *Backend) check(bucket, key string) (keyLoc, error) {
	if err := validBucket(bucket); err != nil {
		return keyLoc{}, noSuchBucketIfInvalid(err)
	}
	if err := anyKey(key); err != nil {
		return keyLoc{}, err
	}
	loc := keyLoc{bucket: bucket, key: key, hidden: b.hiddenPath(bucket, key)}
	if validKey(key) == nil {
		loc.plain = b.objPath(bucket, key)
	}
	return loc, nil
}

// noSuchBucketIfInvalid: an object operation naming a bucket that could not
// exist gets ErrNoSuchBucket, as S3 answers.
func noSuchBucketIfInvalid(err error) error {
	return fmt.Errorf("%w (%v)", store.ErrNoSuchBucket, err)
}

// bucketExists returns ErrNoSuchBucket unless the bucket directory exists
// (a symlink is not a bucket).
func (b *Backend) bucketExists(bucket string) error {
	if isDirNoSymlinks(b.bucketPath(bucket)) != nil {
		return fmt.Errorf("%w: %s", store.ErrNoSuchBucket, bucket)
	}
	return nil
}

// missing maps an error opening an object to ErrNoSuchBucket or
// ErrNoSuchKey, or to the file system error translated by fsErr.
func (b *Backend) missing(err error, bucket, key string) error {
	if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.EISDIR) ||
		errors.Is(err, syscall.ELOOP) || errors.Is(err, errNotRegular) {
		if e := b.bucketExists(bucket); e != nil {
			return e
		}
		return fmt.Errorf("%w: %s/%s", store.ErrNoSuchKey, bucket, key)
	}
	return fsErr(err)
}

// fsErr translates file system errors that have a store sentinel.
func fsErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return fmt.Errorf("%w: %v", store.ErrNoSpace, err)
	case errors.Is(err, syscall.EROFS):
		return fmt.Errorf("%w: %v", store.ErrReadOnly, err)
	case errors.Is(err, syscall.ENAMETOOLONG):
		return fmt.Errorf("%w: %v", store.ErrInvalidKey, err)
	}
	return err
}

func randomHex(n int) string {
	buf := make([]byte, n)
	rand.Read(buf)
	return hex.EncodeToString(buf)
}

// mkdirParents creates dir (inside the bucket directory bdir) and any
// missing parents. A path component that exists as a file (or a symlink,
// which is never followed) is a key conflict. It returns the parents whose
// entries changed (to fsync them).
func mkdirParents(bdir, dir string) ([]string, error) {
	err := isDirNoSymlinks(dir)
	if err == nil {
		return nil, nil
	}
	if errors.Is(err, syscall.ENOTDIR) || errors.Is(err, syscall.ELOOP) {
		return nil, fmt.Errorf("%w: %s or a parent is an object, not a prefix", store.ErrKeyConflict, dir)
	}
	if dir == bdir || len(dir) <= len(bdir) {
		return nil, err
	}
	if !errors.Is(err, os.ErrNotExist) {
		return nil, fsErr(err)
	}
	parent := filepath.Dir(dir)
	changed, err := mkdirParents(bdir, parent)
	if err != nil {
		return nil, err
	}
	// A concurrent Put may create dir (EEXIST) and a concurrent Delete may
	// then remove it again before we look: only a non-directory that stays
	// there is a conflict. Bounded retries.
	for range 20 {
		err := newdir.Mkdir(dir, 0o755)
		if err == nil {
			return append(changed, parent), nil
		}
		if errors.Is(err, syscall.ENOTDIR) {
			return nil, fmt.Errorf("%w: a parent of %s is an object", store.ErrKeyConflict, dir)
		}
		if errors.Is(err, os.ErrNotExist) {
			// The parent vanished under a concurrent Delete: make it again.
			c, err := mkdirParents(bdir, parent)
			if err != nil {
				return nil, err
			}
			changed = append(changed, c...)
			continue
		}
		if !errors.Is(err, os.ErrExist) {
			return nil, fsErr(err)
		}
		serr := isDirNoSymlinks(dir)
		if serr == nil {
			return changed, nil
		}
		if !errors.Is(serr, os.ErrNotExist) {
			return nil, fmt.Errorf("%w: %s is an object, not a prefix", store.ErrKeyConflict, dir)
		}
	}
	return nil, fmt.Errorf("%s: directory kept vanishing under concurrent deletes: %w", dir, store.ErrKeyConflict)
}

// removeEmptyParents removes empty directories from dir up to (not
// including) the bucket directory, stopping at the first non-empty one.
//
// On a file system without a journal (internal/fsjournal) a removal is
// not ordered before the reuse of what it frees: a removed directory's
// inode, given to a new object and fsynced with it, could sit under the
// old prefix's name after a power cut (the key "a/b" showing another
// object's content), and its stale block could be claimed twice. There
// each removed directory is held open until the first directory kept has
// been fsynced, and is then written as deleted before it is let go
// (fsjournal.Retire).
func (b *Backend) removeEmptyParents(bdir, dir string) {
	careful := b.noJournal
	var held []int
	for i := 0; i < 1100 && len(dir) > len(bdir) && strings.HasPrefix(dir, bdir+string(filepath.Separator)); i++ {
		fd := -1
		if careful {
			fd, _ = unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		}
		if err := syscall.Rmdir(dir); err != nil {
			if fd >= 0 {
				unix.Close(fd)
			}
			break
		}
		if fd >= 0 {
			held = append(held, fd)
		}
		dir = filepath.Dir(dir)
	}
	if len(held) > 0 {
		fsyncDir(dir) // best effort, as the removal itself
		retireFds(held)
	}
}
