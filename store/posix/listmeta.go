package posix

import (
	"encoding/json"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// A listing page needs, per key, the file's stat (size, mtime) and its
// record (ETag, owner, ...: the metadata xattr, JSON). Reading and
// decoding the xattr was about a third of a 1,000-key page's CPU time
// (profile: docs/bench/profiles/s3-list-nested-*), so listings keep the
// records they read (recCache), by inode, and use one again only while the
// file's change time, size and mtime are those it was read with. Every
// change of the record (setxattr), of the content (write, truncate) or of
// the inode (link, chmod) sets the change time, which no caller can set
// back, whichever view made the change (S3, NFS, FUSE, another process).
// As for directory stamps (dircache.go: stampSettle), a record is kept only
// if the file's change time was already older than stampSettle when the
// listing began: a change in the same clock tick as that time would leave
// it unchanged. Records are kept only when they come from the xattr (a
// sidecar file is changed without touching the object's change time) and
// describe the current content (rec.fresh); the others are read every time,
// as before. The per-key lstat stays: it is what proves the record current.

// recCacheMax bounds the records kept (about 400 bytes each).
const recCacheMax = 1 << 17

// recKey names one inode; recStamp is the state its record was read in.
type recKey struct{ dev, ino uint64 }

type recStamp struct {
	ctime, mtime, size int64
}

type recEnt struct {
	st  recStamp
	rec *record // never changed once cached (callers copy before changing)
}

// recCache keeps the records in two generations: lookups promote an entry
// from old to cur; when cur is full, it becomes old and the previous old is
// dropped. At most 2*(recCacheMax/2) entries, no per-entry list.
type recCache struct {
	mu  sync.Mutex
	cur map[recKey]recEnt
	old map[recKey]recEnt
}

func stampOfFile(st *unix.Stat_t) recStamp {
	return recStamp{ctime: st.Ctim.Nano(), mtime: st.Mtim.Nano(), size: st.Size}
}

// get is the record cached for the file whose stat is st, or nil.
func (c *recCache) get(st *unix.Stat_t) *record {
	k := recKey{st.Dev, st.Ino}
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.cur[k]
	if !ok {
		if e, ok = c.old[k]; !ok {
			return nil
		}
		delete(c.old, k)
		c.add(k, e)
	}
	if e.st != stampOfFile(st) {
		delete(c.cur, k)
		return nil
	}
	return e.rec
}

// put keeps rec, read from the file whose stat is st (taken before the
// record was read) during a listing begun at start.
func (c *recCache) put(st *unix.Stat_t, rec *record, start time.Time) {
	if st.Ctim.Nano() >= start.Add(-stampSettle).UnixNano() {
		return // changed too recently for its change time to prove anything
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.add(recKey{st.Dev, st.Ino}, recEnt{st: stampOfFile(st), rec: rec})
}

func (c *recCache) add(k recKey, e recEnt) {
	if c.cur == nil || len(c.cur) >= recCacheMax/2 {
		c.old, c.cur = c.cur, make(map[recKey]recEnt, 1024)
	}
	c.cur[k] = e
}

// len is the number of records kept (tests).
func (c *recCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.cur) + len(c.old)
}

// listRecord is readRecord for a listing: the record of the file name in
// dir whose stat is st, from the cache when it is current, else read (and
// cached when it came from the xattr and matches the content).
func (b *Backend) listRecord(dir, name string, st *unix.Stat_t, start time.Time) *record {
	if !b.useXattr {
		return b.readRecord(filepath.Join(dir, name), nil, st.Ino)
	}
	if r := b.dirs.recs.get(st); r != nil {
		return r
	}
	p := filepath.Join(dir, name)
	b.vers.records.Add(1) // counted for the listing-cost tests
	if data, err := getxattr(p, nil, metaXattr); err == nil {
		var r record
		if json.Unmarshal(data, &r) == nil {
			if r.fresh(st) {
				b.dirs.recs.put(st, &r, start)
			}
			return &r
		}
	}
	for _, r := range b.readSidecar(p) {
		if r.Ino == st.Ino {
			return &r
		}
	}
	return nil
}
