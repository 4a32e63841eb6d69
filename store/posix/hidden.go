package posix

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tristore/tristore/store"
)

// The hidden area keeps the objects whose key has no plain path in the
// bucket directory, so that every key S3 accepts can be stored while every
// key that does map to a path stays a plain file the other views see:
//
//	DATA/<bucket>/.tristore-hidden/keys/<sha256 hex of key>
//	    content of the key; its metadata record (xattr or sidecar) holds the
//	    full key, so the name is bounded (64 bytes) and the key is recovered
//	    from the file (Backend.hiddenKeyOf checks that it hashes to the name)
//	DATA/<bucket>/.tristore-hidden/versions/
//	    reserved for older versions of objects (versioning, not built yet)
//
// A key goes there when it has no plain path (an empty, "." or ".."
// segment, a segment over 255 bytes or one starting with .tristore, a
// leading '/'), or when its plain path is taken by the other shape: "x"
// while the directory x/ holds other keys, or "x/child" (or "x/") while the
// file x exists. Whichever of the two comes second is hidden.
//
// Lookups try the plain path first and the hidden one second; a Put whose
// plain path is free writes the plain file and then removes a hidden copy
// of the same key (a crash between the two leaves both, and the plain file
// wins everywhere: Get, List, Delete removes both). So a key lives in one
// place as far as any reader can tell, and a key whose plain path is
// created by another view (NFS) after S3 stored it hidden is served from
// the file the other view made.
//
// Listings merge the sorted hidden keys (hiddenIndex, below) with the
// directory walk. Names starting with .tristore are invisible to NFS and
// FUSE (vfs), so the hidden area never shows there.
const (
	hiddenDirName = ".tristore-hidden"
	hiddenKeysDir = "keys"
)

// hiddenKeys is the directory holding bucket's hidden keys.
func (b *Backend) hiddenKeys(bucket string) string {
	return filepath.Join(b.bucketPath(bucket), hiddenDirName, hiddenKeysDir)
}

func hiddenName(key string) string {
	sum := sha256.Sum256([]byte(key))
	return hex.EncodeToString(sum[:])
}

// hiddenPath is the file that holds key in the hidden area.
func (b *Backend) hiddenPath(bucket, key string) string {
	return filepath.Join(b.hiddenKeys(bucket), hiddenName(key))
}

// hiddenKeyOf reads the key stored with the hidden file p; ok is false
// when p is not a hidden object (no record, or its key does not hash to
// p's name).
func (b *Backend) hiddenKeyOf(p string) (string, bool) {
	var st unix.Stat_t
	if unix.Lstat(p, &st) != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return "", false
	}
	rec := b.readRecord(p, nil, st.Ino)
	if rec == nil || rec.Key == "" || hiddenName(rec.Key) != filepath.Base(p) {
		return "", false
	}
	return rec.Key, true
}

// hiddenIndex keeps, per bucket, the sorted keys of the hidden area, so a
// listing merges them without reading the area each time. It follows the
// rule of the directory snapshots (dircache.go): it is reused only while
// the area's directory keeps the stamp it had when it was read, and only
// if that stamp was already settled then. Any change (this process's own
// hidden writes and deletes, or another process opening the same tree;
// NFS cannot see the area) makes the next listing read it again, which
// costs one metadata read per hidden key.
type hiddenIndex struct {
	mu      sync.Mutex
	buckets map[string]*hiddenSet
	// gen counts the entry changes of any hidden area by this process
	// (bumped before each one), so a Put that saw no hidden area in its
	// bucket's state can tell whether one may have been filled since
	// (bucketcache.go, dropHidden).
	gen atomic.Int64
}

type hiddenSet struct {
	mu     sync.Mutex
	keys   []string // sorted; never modified in place (listings keep it)
	stamp  dirStamp
	loaded bool
}

func (h *hiddenIndex) set(bucket string) *hiddenSet {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.buckets == nil {
		h.buckets = map[string]*hiddenSet{}
	}
	s := h.buckets[bucket]
	if s == nil {
		s = &hiddenSet{}
		h.buckets[bucket] = s
	}
	return s
}

// forget drops a bucket's index (the bucket was deleted).
func (h *hiddenIndex) forget(bucket string) {
	h.mu.Lock()
	delete(h.buckets, bucket)
	h.mu.Unlock()
}

// hiddenAround returns a wrapper for the one system call (a rename into
// or an unlink from the hidden area of bucket) that changes an entry:
// it runs under the bucket's index lock, so a listing never reads the area
// half way through it, and drops the index. Only that call runs under the
// lock (fsyncs stay outside).
func (b *Backend) hiddenAround(bucket string) func(do func() error) error {
	return func(do func() error) error {
		b.hidden.gen.Add(1)
		s := b.hidden.set(bucket)
		s.mu.Lock()
		defer s.mu.Unlock()
		s.loaded = false
		return do()
	}
}

// hiddenList returns the sorted hidden keys of bucket (a copy-free view:
// callers must not modify it). A missing area is an empty list.
func (b *Backend) hiddenList(bucket string) ([]string, error) {
	s := b.hidden.set(bucket)
	s.mu.Lock()
	defer s.mu.Unlock()
	dir := b.hiddenKeys(bucket)
	now := time.Now()
	st, err := statStamp(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ENOTDIR) {
			s.keys, s.loaded = nil, false
			return nil, nil
		}
		return nil, err
	}
	if s.loaded && st == s.stamp {
		return s.keys, nil
	}
	// The stamp was read before the directory: a change while reading
	// makes it differ next time, so the area is read again then.
	d, err := openDir(dir)
	if err != nil {
		return nil, nil
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	b.dirs.read.Add(int64(len(names)))
	if err != nil {
		return nil, err
	}
	keys := make([]string, 0, len(names))
	for _, n := range names {
		if strings.HasPrefix(n, store.ReservedPrefix) {
			continue // a PUT in progress
		}
		if k, ok := b.hiddenKeyOf(filepath.Join(dir, n)); ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	s.keys, s.stamp, s.loaded = keys, st, st.settled(now)
	return keys, nil
}

// hiddenEmpty reports whether bucket's hidden area holds no object.
func (b *Backend) hiddenEmpty(bucket string) (bool, error) {
	keys, err := b.hiddenList(bucket)
	return len(keys) == 0, err
}
