package posix

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tristore/tristore/store"
)

// listHashLimit bounds how big a file whose ETag is stale (changed by
// another view) List rehashes inline. Bigger files (block volumes) get a
// placeholder ETag "<md5 of inode:size:mtime>-0" in listings, marked as
// not-an-MD5 by the '-'; Stat and Get always compute the real one.
const listHashLimit = 64 << 20

var errStop = errors.New("stop walk")

// floor is the lower bound of what a listing may still emit: every name
// <= s, and with cp every name starting with s (the keys of a common
// prefix already emitted), is done.
type floor struct {
	s  string
	cp bool
}

// done reports whether name is at or below the floor.
func (f floor) done(name string) bool {
	return name <= f.s || f.cp && strings.HasPrefix(name, f.s)
}

// covers reports whether every key starting with dirKey is at or below
// the floor (so that directory need not be read).
func (f floor) covers(dirKey string) bool {
	return f.cp && strings.HasPrefix(dirKey, f.s) || f.s >= dirKey && !strings.HasPrefix(f.s, dirKey)
}

// lister walks a bucket in S3 key order and collects one page, merging the
// directory walk with the sorted hidden keys (hidden.go).
type lister struct {
	b      *Backend
	ctx    context.Context
	bucket string
	opts   store.ListOptions
	limit  int
	res    store.ListResult
	count  int
	steps  int
	// group is a delimiter other than "/": the walk then visits the keys
	// under the prefix and rolls them up into common prefixes as it goes,
	// skipping past each group once it is emitted.
	group string
	delim string // the delimiter asked for ("/" or group)
	floor floor
	gen   int // bumped whenever floor moves, so walks re-seek
	// hidden are the bucket's hidden keys; hi the next one to merge.
	hidden []string
	hi     int
	// start is when the listing began (listmeta.go: records of files
	// changed since shortly before are not cached).
	start time.Time
}

// List returns one page of keys in byte-wise lexicographic order. Each
// directory's entries are sorted by the key they produce (a directory "d"
// sorts as "d/"), which makes a depth-first walk produce S3 order: "a-b"
// comes before "a/b" because '-' < '/'. Each directory is entered at the
// first entry past the page's start (binary search in a cached snapshot,
// dircache.go) and left at the end of the prefix. With delimiter "/" a
// directory under the prefix is reported as a common prefix without being
// walked, and the walk starts at the deepest directory the prefix names.
// Other delimiters group keys during the walk; once a common prefix is
// emitted the walk seeks past all its keys. Keys of the hidden area are
// merged in order; a key present in both places is listed once (the plain
// file wins, as for Get).
func (b *Backend) List(ctx context.Context, bucket string, opts store.ListOptions) (store.ListResult, error) {
	if err := validBucket(bucket); err != nil {
		return store.ListResult{}, noSuchBucketIfInvalid(err)
	}
	if err := b.bucketExists(bucket); err != nil {
		return store.ListResult{}, err
	}
	l := &lister{b: b, ctx: ctx, bucket: bucket, opts: opts, limit: opts.Limit, floor: floor{s: opts.After}, delim: opts.Delimiter, start: time.Now()}
	if opts.Delimiter != "" && opts.Delimiter != "/" {
		// Any other delimiter: no directory maps to its prefixes, so walk
		// the subtree of the prefix and group keys on the way.
		l.group, l.opts.Delimiter = opts.Delimiter, ""
	}
	if l.limit <= 0 {
		l.limit = 1000
	}
	// A start inside a common prefix (the previous page ended with it)
	// skips all of that prefix's keys.
	if d := opts.Delimiter; d != "" && strings.HasPrefix(opts.After, opts.Prefix) {
		if i := strings.Index(opts.After[len(opts.Prefix):], d); i >= 0 {
			l.floor = floor{s: opts.After[:len(opts.Prefix)+i+len(d)], cp: true}
		}
	}
	hidden, err := b.hiddenList(bucket)
	if err != nil {
		return store.ListResult{}, err
	}
	l.hidden = hidden
	l.hi = sort.SearchStrings(hidden, opts.Prefix)
	// Start in the deepest directory fully named by the prefix.
	startKey := ""
	if i := strings.LastIndexByte(opts.Prefix, '/'); i >= 0 {
		startKey = opts.Prefix[:i+1]
	}
	if startKey == "" || validKey(startKey) == nil { // else no plain key can have this prefix
		err = l.walkDir(startKey)
	}
	if err == nil {
		err = l.drainHidden("", false)
	}
	if err != nil && !errors.Is(err, errStop) {
		return store.ListResult{}, err
	}
	if !l.res.IsTruncated {
		l.res.NextAfter = ""
	}
	return l.res, nil
}

// emit adds the object or common prefix name (after the hidden entries
// that sort before it); it stops the walk once the page is full and one
// more entry proves there is more.
func (l *lister) emit(name string, oi *store.ObjectInfo) error {
	if l.floor.done(name) {
		return nil
	}
	if err := l.drainHidden(name, true); err != nil {
		return err
	}
	return l.add(name, oi)
}

func (l *lister) add(name string, oi *store.ObjectInfo) error {
	if l.count == l.limit {
		l.res.IsTruncated = true
		return errStop
	}
	l.count++
	if oi != nil {
		l.res.Objects = append(l.res.Objects, *oi)
	} else {
		l.res.CommonPrefixes = append(l.res.CommonPrefixes, name)
	}
	l.res.NextAfter = name
	l.floor = floor{s: name, cp: oi == nil}
	l.gen++
	return nil
}

// drainHidden emits the hidden entries (keys, or the common prefixes they
// fall in) that sort before bound (all of them when !bounded). A hidden
// key equal to bound is skipped: the plain file of the same key wins.
func (l *lister) drainHidden(bound string, bounded bool) error {
	p, d := l.opts.Prefix, l.delim
	for l.hi < len(l.hidden) {
		l.b.dirs.visited.Add(1)
		k := l.hidden[l.hi]
		if !strings.HasPrefix(k, p) {
			if k > p {
				l.hi = len(l.hidden) // past the prefix
				return nil
			}
			l.hi++
			continue
		}
		if l.floor.done(k) {
			l.hi = max(l.hi+1, l.seekHidden())
			continue
		}
		name, cp := k, false
		if d != "" {
			if i := strings.Index(k[len(p):], d); i >= 0 {
				name, cp = k[:len(p)+i+len(d)], true
			}
		}
		if l.floor.done(name) {
			l.hi++
			continue
		}
		if bounded && name >= bound {
			if name == bound && !cp {
				l.hi++
			}
			return nil
		}
		if cp {
			if err := l.add(name, nil); err != nil {
				return err
			}
			continue // the floor now skips the rest of the group
		}
		hp := l.b.hiddenPath(l.bucket, k)
		oi, ok := l.info(k, filepath.Dir(hp), filepath.Base(hp), -1, true)
		if ok {
			if err := l.add(k, &oi); err != nil {
				return err
			}
		}
		l.hi++
	}
	return nil
}

// seekHidden is the index of the first hidden key past the floor.
func (l *lister) seekHidden() int {
	f := l.floor
	return sort.Search(len(l.hidden), func(i int) bool {
		k := l.hidden[i]
		return k > f.s && !(f.cp && strings.HasPrefix(k, f.s))
	})
}

// seek is the index of the first item of the directory holding keys dk...
// that may still produce an entry: past the floor, and not before the
// prefix (a directory on the way to either is kept: it is walked).
func (l *lister) seek(items itemList, dk string) int {
	first := func(pred func(key string) bool) int {
		return items.Search(func(it dirItem) bool { return pred(dk + it.sk) })
	}
	contains := func(i int, s string) bool {
		if i == 0 {
			return false
		}
		it := items.At(i - 1)
		return it.isDir && strings.HasPrefix(s, dk+it.sk)
	}
	f := l.floor
	i := first(func(k string) bool { return k > f.s && !(f.cp && strings.HasPrefix(k, f.s)) })
	if contains(i, f.s) {
		i--
	}
	p := l.opts.Prefix
	j := first(func(k string) bool { return k >= p })
	if contains(j, p) {
		j--
	}
	return max(i, j)
}

// walkDir lists the directory holding keys that start with dk ("" or
// ending in '/'). Its own marker object (key dk) comes first.
func (l *lister) walkDir(dk string) error {
	if err := l.ctx.Err(); err != nil {
		return err
	}
	dir := filepath.Join(l.b.bucketPath(l.bucket), filepath.FromSlash(dk))
	snap, d, ok, err := l.b.snapshotOpen(dir, dk != "")
	if err != nil || !ok {
		return err
	}
	defer d.Close()
	dfd := int(d.Fd())
	p := l.opts.Prefix
	if snap.hasMarker && strings.HasPrefix(dk, p) {
		if err := l.emitFile(dk, dir, dfd, dirMarker); err != nil {
			return err
		}
	}
	items := snap.items
	n := items.Len()
	for i, gen := l.seek(items, dk), l.gen; i < n; i++ {
		if l.gen != gen { // the floor moved: skip what it covers
			i, gen = max(i, l.seek(items, dk)), l.gen
			if i >= n {
				break
			}
		}
		l.b.dirs.visited.Add(1)
		if l.steps++; l.steps%256 == 0 {
			if err := l.ctx.Err(); err != nil {
				return err
			}
		}
		it := items.At(i)
		key := dk + it.sk
		if !strings.HasPrefix(key, p) && !strings.HasPrefix(p, key) {
			if key > p {
				break // past the prefix
			}
			continue
		}
		if !it.isDir {
			if err := l.emitFile(key, dir, dfd, it.sk); err != nil {
				return err
			}
			if l.floor == (floor{s: key}) {
				gen = l.gen // the floor is this key: the next item is past it, no seek needed
			}
			continue
		}
		if l.floor.covers(key) {
			continue
		}
		if strings.HasPrefix(p, key) {
			if err := l.walkDir(key); err != nil {
				return err
			}
			continue
		}
		if j := strings.Index(key[len(p):], l.delim); l.delim != "" && j >= 0 {
			// Every key under this directory falls in one common prefix
			// (with "/" the directory itself): report it without walking.
			cp := key[:len(p)+j+len(l.delim)]
			if l.floor.done(cp) {
				continue
			}
			// A directory with no object in it (made over NFS, or
			// left by a crash) is no prefix of any key.
			ok, err := l.hasObject(filepath.Join(dir, it.name()), 0)
			if err != nil {
				return err
			}
			if ok {
				if err := l.emit(cp, nil); err != nil {
					return err
				}
			}
			continue
		}
		if err := l.walkDir(key); err != nil {
			return err
		}
	}
	return nil
}

// emitFile emits the file of key (or the common prefix it falls in), name
// in the directory dir, open as dfd. A file that vanished meanwhile is
// skipped.
func (l *lister) emitFile(key, dir string, dfd int, name string) error {
	if l.group != "" {
		if i := strings.Index(key[len(l.opts.Prefix):], l.group); i >= 0 {
			return l.emit(key[:len(l.opts.Prefix)+i+len(l.group)], nil)
		}
	}
	if l.floor.done(key) {
		return nil
	}
	oi, ok := l.info(key, dir, name, dfd, false)
	if !ok {
		return nil
	}
	return l.emit(key, &oi)
}

// info stats one object file for a listing, name in the directory dir
// (open as dfd, or -1); ok is false when it vanished, is not a regular
// file, or (hidden) does not hold key.
func (l *lister) info(key, dir, name string, dfd int, hidden bool) (store.ObjectInfo, bool) {
	var st unix.Stat_t
	var err error
	if dfd >= 0 {
		err = unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	} else {
		err = unix.Lstat(filepath.Join(dir, name), &st)
	}
	if err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return store.ObjectInfo{}, false
	}
	rec := l.b.listRecord(dir, name, &st, l.start)
	if hidden && (rec == nil || rec.Key != key) {
		return store.ObjectInfo{}, false
	}
	if !rec.fresh(&st) {
		if st.Size > listHashLimit {
			nr := &record{}
			if rec != nil {
				*nr = *rec
			}
			sum := md5.Sum(fmt.Appendf(nil, "%d:%d:%d", st.Ino, st.Size, st.Mtim.Nano()))
			nr.ETag, nr.Parts = hex.EncodeToString(sum[:])+"-0", nil
			rec = nr
		} else {
			nr, err := l.b.refresh(l.ctx, filepath.Join(dir, name), nil, &st, rec)
			if err != nil {
				return store.ObjectInfo{}, false // vanished or unreadable: not listed
			}
			rec = nr
		}
	}
	return ownInfo(rec.info(l.bucket, key, &st)), true
}

// ownInfo gives oi maps of its own: a record may be the cached one
// (listmeta.go), which nobody may change through what List returns.
func ownInfo(oi store.ObjectInfo) store.ObjectInfo {
	m := &oi.Meta
	m.UserMeta, m.Headers, m.Checksums, m.Tags, m.Encryption = maps.Clone(m.UserMeta), maps.Clone(m.Headers), maps.Clone(m.Checksums), maps.Clone(m.Tags), maps.Clone(m.Encryption)
	for i := range oi.Parts {
		oi.Parts[i].Checksums = maps.Clone(oi.Parts[i].Checksums)
	}
	return oi
}

// hasObject reports whether the directory tree at dir holds at least one
// object (a regular file or a directory marker). It reads directories in
// small batches and stops at the first object, so the usual cost is one
// short readdir.
func (l *lister) hasObject(dir string, depth int) (bool, error) {
	if err := l.ctx.Err(); err != nil {
		return false, err
	}
	if depth > store.MaxKeyLen/2 {
		return false, nil // deeper than any key can reach
	}
	d, err := openDir(dir)
	if err != nil {
		return false, nil // vanished or not a plain directory: nothing listable
	}
	defer d.Close()
	var subdirs []string
	for range 1 << 20 {
		ents, err := d.ReadDir(64)
		l.b.dirs.read.Add(int64(len(ents)))
		for _, e := range ents {
			n := e.Name()
			switch {
			case n == dirMarker && e.Type().IsRegular():
				return true, nil
			case strings.HasPrefix(n, store.ReservedPrefix):
			case e.Type().IsRegular():
				return true, nil
			case e.IsDir():
				subdirs = append(subdirs, n)
			}
		}
		if err != nil || len(ents) == 0 {
			break
		}
	}
	for _, n := range subdirs {
		ok, err := l.hasObject(filepath.Join(dir, n), depth+1)
		if ok || err != nil {
			return ok, err
		}
	}
	return false, nil
}
