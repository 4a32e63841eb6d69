package vfs

import (
	"encoding/binary"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"
)

// The cache of open files for READ, WRITE and COMMIT.
//
// Resolving a handle (open_by_handle_at, readlink of /proc/self/fd, lstat,
// the reopen for reading through /proc under the caller's fsuid, fstat,
// close twice) was 19 % of the server's CPU at 64 KiB READs and ~5 % at
// 1 MiB ones (docs/bench/profiles/nfs-read-size.txt, nfs-read-cache.txt);
// mapping and unmapping the READ's range was another ~6 %. A READ finds
// here the descriptor an earlier READ of the same handle by the same
// caller opened, and a read-only mapping of the whole file made once.
// WRITE likewise (opened for writing as the caller), and COMMIT flushes
// through the caller's descriptor; a CREATE leaves its new file here for
// its creator (seedWrite).
//
// Correct across views: before each use an entry is checked with two
// system calls, fstat of its descriptor and lstat of the path it was
// opened under:
//   - a link count of 0 (the file was removed, or replaced by a rename
//     over its name: an S3 DELETE or overwriting PUT, another client's
//     REMOVE or RENAME) answers ErrStale, as resolve would;
//   - a changed ctime, mode, owner or group (a write, chmod, chown, ACL
//     change, rename or link: each moves ctime) drops the entry and the
//     READ resolves the handle and opens the file again, so permissions
//     are checked again as the caller and a moved file is found where it
//     is now;
//   - the path no longer naming this inode (a directory above it moved,
//     the name taken by another file while this inode keeps another link,
//     such as the second name a journal-less replace keeps in .tristore)
//     does the same.
//
// So a cached descriptor never serves data the handle no longer names.
//
// Bounded: at most fileCacheMax entries per export (and fileMapBudget
// bytes of whole-file mappings), and an entry unused
// for fileCacheIdle is closed by a sweeper that runs only while the cache
// is not empty, so a removed file's inode is not kept alive by the cache
// for more than about 1.5 x fileCacheIdle after its last READ (the store
// holds freed inodes itself on journal-less ext4, internal/fsjournal; the
// cache only delays the last close, never the durable removal). Remove
// and Rename drop the entries of the inode they remove or replace at once.
const (
	fileCacheMax  = 64
	fileCacheIdle = 2 * time.Second
	// fileMapMax: files up to this size are mapped whole, once, while the
	// export's mappings stay within fileMapBudget; other files have each
	// READ's range mapped and unmapped. (Pages a READ touched stay mapped,
	// and count in the server's RSS, until the entry closes.)
	fileMapMax    = 256 << 20
	fileMapBudget = 1 << 30
)

// openFile is a file open for reading or writing as one caller.
type openFile struct {
	fc   *fileCache
	key  string
	fd   int
	path string
	st   unix.Stat_t // at open: what validate compares
	refs int         // users + 1 while in the cache (fc.mu)
	used time.Time   // last use (fc.mu)

	mapOnce sync.Once
	m       []byte // the whole file, read-only (nil: not mapped)
}

type fileCache struct {
	opens    atomic.Int64 // files opened on a miss (tests)
	mapped   atomic.Int64 // bytes mapped whole (fileMapBudget)
	mu       sync.Mutex
	files    map[string]*openFile
	sweeping bool
	closed   bool
}

// credKey is c in a form that can prefix a cache key.
func credKey(c Cred) string {
	b := make([]byte, 0, 8+4*len(c.Groups)+1)
	b = binary.BigEndian.AppendUint32(b, c.UID)
	b = binary.BigEndian.AppendUint32(b, c.GID)
	for _, g := range c.Groups {
		b = binary.BigEndian.AppendUint32(b, g)
	}
	return string(append(b, byte(len(c.Groups))))
}

// openRead returns h's regular file open for reading as c, from the cache
// or newly opened, and its current stat. The caller releases it. On an
// error after the handle resolved (permission), st is the object's stat
// (st.Ino != 0), for the reply's attributes.
func (fs *FS) openRead(c Cred, h Handle) (*openFile, unix.Stat_t, error) {
	return fs.openCached(c, h, false)
}

// openWrite is openRead for writing (O_WRONLY as c; a file CreateFile
// made for c is cached O_RDWR).
func (fs *FS) openWrite(c Cred, h Handle) (*openFile, unix.Stat_t, error) {
	return fs.openCached(c, h, true)
}

func cacheKey(c Cred, h Handle, write bool) string {
	mode := "r"
	if write {
		mode = "w"
	}
	return mode + credKey(c) + string(h)
}

// cached returns the valid cache entry for key with its current stat, or
// nil (an invalid entry is dropped; stale reports a handle whose file has
// no links left).
func (fc *fileCache) cached(key string) (f *openFile, st unix.Stat_t, stale bool) {
	fc.mu.Lock()
	f = fc.files[key]
	var base unix.Stat_t
	if f != nil {
		f.refs++
		f.used = time.Now()
		base = f.st
	}
	fc.mu.Unlock()
	if f == nil {
		return nil, st, false
	}
	ok, stale := validate(f, &base, &st)
	if ok {
		return f, st, false
	}
	fc.drop(f)
	f.release()
	return nil, st, stale
}

func (fs *FS) openCached(c Cred, h Handle, write bool) (*openFile, unix.Stat_t, error) {
	fc := &fs.files
	key := cacheKey(c, h, write)
	f, st, stale := fc.cached(key)
	if f != nil {
		return f, st, nil
	}
	if stale {
		return nil, unix.Stat_t{}, ErrStale
	}
	o, err := fs.regular(h)
	if err != nil {
		return nil, unix.Stat_t{}, err
	}
	defer o.close()
	flags := unix.O_RDONLY
	if write {
		flags = unix.O_WRONLY
	}
	fd, err := fs.openAs(c, o, flags)
	if err != nil {
		return nil, o.st, err
	}
	fc.opens.Add(1)
	if unix.Fstat(fd, &st) != nil {
		st = o.st
	}
	f = &openFile{fc: fc, key: key, fd: fd, path: o.path, st: st, refs: 1}
	fc.add(f)
	return f, st, nil
}

// seedWrite caches fd (O_RDWR; the caller keeps its own descriptor), the
// file CreateFile just made for c at path, as open for writing by c: the
// WRITE and COMMIT that follow a CREATE then need no handle resolution.
// openAs would give c the same: c owns the file, and an owner may always
// write it.
func (fs *FS) seedWrite(c Cred, h Handle, fd int, path string) {
	dup, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return
	}
	f := &openFile{fc: &fs.files, key: cacheKey(c, h, true), fd: dup, path: path, refs: 1}
	if unix.Fstat(dup, &f.st) != nil {
		unix.Close(dup)
		return
	}
	fs.files.add(f)
	f.release()
}

// rebase makes st (taken after this server's own write through f) what
// f is checked against, so its own writes, which move ctime, do not drop
// it. A change of mode, owner or group meanwhile is not absorbed: the
// next use reopens the file as the caller.
func (f *openFile) rebase(st *unix.Stat_t) {
	f.fc.mu.Lock()
	if st.Mode == f.st.Mode && st.Uid == f.st.Uid && st.Gid == f.st.Gid && st.Ino == f.st.Ino {
		f.st = *st
	}
	f.fc.mu.Unlock()
}

// validate stats f's descriptor into st and reports whether f may serve
// its handle as it is (ok), or whether the handle is stale (its inode has
// no links). Neither: f must be dropped and the handle resolved again.
// base is f's stat to compare with (copied under the cache's lock).
func validate(f *openFile, base, st *unix.Stat_t) (ok, stale bool) {
	if unix.Fstat(f.fd, st) != nil {
		return false, false
	}
	if st.Nlink == 0 {
		return false, true
	}
	if st.Ctim != base.Ctim || st.Mode != base.Mode || st.Uid != base.Uid || st.Gid != base.Gid {
		return false, false
	}
	var lst unix.Stat_t
	if unix.Lstat(f.path, &lst) != nil || lst.Ino != st.Ino || lst.Dev != st.Dev {
		return false, false
	}
	return true, false
}

// mapping returns the whole file mapped read-only, made at the first call
// from the size then (nil if it is empty, too large or cannot be mapped).
func (f *openFile) mapping(size int64) []byte {
	f.mapOnce.Do(func() {
		if size <= 0 || size > fileMapMax {
			return
		}
		if f.fc.mapped.Add(size) > fileMapBudget {
			f.fc.mapped.Add(-size)
			return
		}
		if m, err := unix.Mmap(f.fd, 0, int(size), unix.PROT_READ, unix.MAP_SHARED); err == nil {
			f.m = m
		} else {
			f.fc.mapped.Add(-size)
		}
	})
	return f.m
}

// release ends one use of f; the last closes it.
func (f *openFile) release() {
	f.fc.mu.Lock()
	f.refs--
	last := f.refs == 0
	f.fc.mu.Unlock()
	if last {
		if f.m != nil {
			unix.Munmap(f.m)
			f.fc.mapped.Add(-int64(len(f.m)))
		}
		unix.Close(f.fd)
	}
}

// add puts f (one use held by the caller) in the cache, replacing an entry
// of the same key and evicting the least recently used beyond the bound.
func (fc *fileCache) add(f *openFile) {
	var out []*openFile
	fc.mu.Lock()
	if fc.closed {
		fc.mu.Unlock()
		return
	}
	if fc.files == nil {
		fc.files = make(map[string]*openFile)
	}
	f.used = time.Now()
	if old := fc.files[f.key]; old != nil {
		out = append(out, old)
	}
	fc.files[f.key] = f
	f.refs++
	for len(fc.files) > fileCacheMax {
		var lru *openFile
		for _, e := range fc.files {
			if lru == nil || e.used.Before(lru.used) {
				lru = e
			}
		}
		delete(fc.files, lru.key)
		out = append(out, lru)
	}
	if !fc.sweeping {
		fc.sweeping = true
		go fc.sweep()
	}
	fc.mu.Unlock()
	for _, e := range out {
		e.release()
	}
}

// drop removes f from the cache if it is there.
func (fc *fileCache) drop(f *openFile) {
	fc.mu.Lock()
	in := fc.files[f.key] == f
	if in {
		delete(fc.files, f.key)
	}
	fc.mu.Unlock()
	if in {
		f.release()
	}
}

// dropIno removes every entry of inode ino (a file Remove or Rename is
// taking away), so the cache does not keep it open.
func (fc *fileCache) dropIno(ino uint64) {
	fc.mu.Lock()
	out := fc.takeLocked(func(e *openFile) bool { return e.st.Ino == ino })
	fc.mu.Unlock()
	releaseAll(out)
}

// takeLocked removes the entries match selects and returns them, to be
// released (releaseAll) once fc.mu is let go; fc.mu is held.
func (fc *fileCache) takeLocked(match func(*openFile) bool) []*openFile {
	var out []*openFile
	for k, e := range fc.files {
		if match(e) {
			delete(fc.files, k)
			out = append(out, e)
		}
	}
	return out
}

func releaseAll(out []*openFile) {
	for _, e := range out {
		e.release()
	}
}

// empty reports whether nothing is cached (so callers can skip work).
func (fc *fileCache) empty() bool {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	return len(fc.files) == 0
}

// sweep closes entries unused for fileCacheIdle, every half of it, and
// stops when the cache is empty.
func (fc *fileCache) sweep() {
	for {
		time.Sleep(fileCacheIdle / 2)
		fc.mu.Lock()
		now := time.Now()
		out := fc.takeLocked(func(e *openFile) bool { return now.Sub(e.used) >= fileCacheIdle })
		done := len(fc.files) == 0
		if done {
			fc.sweeping = false
		}
		fc.mu.Unlock()
		releaseAll(out)
		if done {
			return
		}
	}
}

// close empties the cache for good (FS.Close).
func (fc *fileCache) close() {
	fc.mu.Lock()
	fc.closed = true
	out := fc.takeLocked(func(*openFile) bool { return true })
	fc.mu.Unlock()
	releaseAll(out)
}

// cachedFiles is the number of open files cached (tests).
func (fs *FS) cachedFiles() int {
	fs.files.mu.Lock()
	defer fs.files.mu.Unlock()
	return len(fs.files.files)
}

var pageSize = uint64(os.Getpagesize())
