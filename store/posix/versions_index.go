package posix

import (
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tristore/tristore/store"
)

// ListObjectVersions must cost in proportion to the page, like List
// (dircache.go). Reading the whole versions area for each page (one
// directory and one record per versioned key) made every page cost as much
// as the bucket's versioned keys; so the sorted keys that have a versions
// directory are kept per bucket (versionIndex) and a page seeks in them,
// and the versions of one key are read from a sorted snapshot of its
// directory (the directory cache), one record per version the page
// returns.
//
// The index follows the rule of the other snapshots: it is reused only
// while the versions directory (DATA/<bucket>/.tristore-hidden/versions)
// keeps the stamp it had when it was read, and only if that stamp was
// already settled then. A key's directory is created when its first older
// version or marker is kept and removed with its last one, and both change
// that stamp. A directory that held no complete record when the index was
// read (made, but its first version not yet renamed in) is remembered and
// looked at again on each listing until it names its key or is gone.

// versionIndex holds the versioned keys of each bucket.
type versionIndex struct {
	mu      sync.Mutex
	buckets map[string]*verKeySet
	records atomic.Int64 // metadata records read (readRecord), for the listing-cost tests
}

type verKeySet struct {
	mu         sync.Mutex
	keys       []string // sorted; never modified in place (listings keep it)
	unresolved []string // hash directories without a complete record yet
	stamp      dirStamp
	loaded     bool
}

func (x *versionIndex) set(bucket string) *verKeySet {
	x.mu.Lock()
	defer x.mu.Unlock()
	if x.buckets == nil {
		x.buckets = map[string]*verKeySet{}
	}
	s := x.buckets[bucket]
	if s == nil {
		s = &verKeySet{}
		x.buckets[bucket] = s
	}
	return s
}

// keyOfVersionDir returns the key whose versions directory is dir (named
// h), from the first complete record in it.
func (b *Backend) keyOfVersionDir(dir, h string) (string, bool) {
	dd, err := openDir(dir)
	if err != nil {
		return "", false
	}
	names, _ := dd.Readdirnames(-1)
	dd.Close()
	b.dirs.read.Add(int64(len(names)))
	for _, n := range names {
		if strings.HasPrefix(n, store.ReservedPrefix) {
			continue
		}
		p := filepath.Join(dir, n)
		var st unix.Stat_t
		if unix.Lstat(p, &st) != nil {
			continue
		}
		if rec := b.readRecord(p, nil, st.Ino); rec != nil && rec.Key != "" && hiddenName(rec.Key) == h {
			return rec.Key, true
		}
	}
	return "", false
}

// versionKeys returns the sorted keys of bucket that have a versions
// directory (a view callers must not modify). A key may be listed whose
// directory has just lost its last version; callers find no versions for it.
func (b *Backend) versionKeys(bucket string) ([]string, error) {
	s := b.vers.set(bucket)
	s.mu.Lock()
	defer s.mu.Unlock()
	root := b.versionsDir(bucket)
	now := time.Now()
	st, err := statStamp(root)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ENOTDIR) {
			s.keys, s.unresolved, s.loaded = nil, nil, false
			return nil, nil
		}
		return nil, err
	}
	if s.loaded && st == s.stamp {
		if len(s.unresolved) > 0 {
			b.resolvePending(s, root)
		}
		return s.keys, nil
	}
	// The stamp was read before the directory: a change while reading
	// makes it differ next time, so the area is read again then.
	hashes, err := versionNames(root)
	if err != nil {
		return nil, err
	}
	b.dirs.read.Add(int64(len(hashes)))
	var keys, pending []string
	for _, h := range hashes {
		if strings.HasPrefix(h, store.ReservedPrefix) {
			continue
		}
		if k, ok := b.keyOfVersionDir(filepath.Join(root, h), h); ok {
			keys = append(keys, k)
		} else {
			pending = append(pending, h)
		}
	}
	sort.Strings(keys)
	s.keys, s.unresolved, s.stamp, s.loaded = keys, pending, st, st.settled(now)
	return keys, nil
}

// resolvePending looks again at the directories that named no key when
// the index was read: one that names its key now joins the keys (a new
// slice: listings may hold the old one), one that is gone is dropped.
func (b *Backend) resolvePending(s *verKeySet, root string) {
	var still []string
	var add []string
	for _, h := range s.unresolved {
		dir := filepath.Join(root, h)
		if k, ok := b.keyOfVersionDir(dir, h); ok {
			add = append(add, k)
		} else if _, err := os.Lstat(dir); err == nil {
			still = append(still, h)
		}
	}
	s.unresolved = still
	if len(add) == 0 {
		return
	}
	keys := append(append(make([]string, 0, len(s.keys)+len(add)), s.keys...), add...)
	sort.Strings(keys)
	s.keys = dedupSorted(keys)
}

// idSeq is the creation sequence an ID names (its first 16 hex digits);
// ok is false for "null", whose age is only in its record.
func idSeq(id string) (int64, bool) {
	if len(id) != 32 {
		return 0, false
	}
	n, err := strconv.ParseUint(id[:16], 16, 63)
	return int64(n), err == nil
}

// afterPrefix is the least string above every string starting with p
// ("" when there is none).
func afterPrefix(p string) string {
	for i := len(p) - 1; i >= 0; i-- {
		if p[i] != 0xff {
			return p[:i] + string([]byte{p[i] + 1})
		}
	}
	return ""
}
