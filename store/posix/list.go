package posix

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/tristore/tristore/store"
)

// listHashLimit bounds how big a file whose ETag is stale (changed by
// another view) List rehashes inline. Bigger files (block volumes) get a
// placeholder ETag "<md5 of inode:size:mtime>-0" in listings, marked as
// not-an-MD5 by the '-'; Stat and Get always compute the real one.
const listHashLimit = 64 << 20

var errStop = errors.New("stop walk")

// lister walks a bucket in S3 key order and collects one page.
type lister struct {
	b      *Backend
	ctx    context.Context
	bucket string
	opts   store.ListOptions
	limit  int
	res    store.ListResult
	count  int
	steps  int
	// group is a delimiter other than "/": the walk then visits every key
	// under the prefix and rolls keys up into common prefixes as it goes.
	group  string
	lastCP string
}

// emit adds an object or common prefix; it stops the walk once the page is
// full and one more entry proves there is more.
func (l *lister) emit(name string, oi *store.ObjectInfo) error {
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
	return nil
}

// List returns one page of keys in byte-wise lexicographic order. Each
// directory's entries are sorted by the key they produce (a directory "d"
// sorts as "d/"), which makes a depth-first walk produce S3 order: "a-b"
// comes before "a/b" because '-' < '/'. With delimiter "/" a directory under
// the prefix is reported as a common prefix without being walked, and the
// walk starts at the deepest directory the prefix names. Other delimiters
// than "/" are supported by grouping during a full walk of the prefix.
func (b *Backend) List(ctx context.Context, bucket string, opts store.ListOptions) (store.ListResult, error) {
	if err := validBucket(bucket); err != nil {
		return store.ListResult{}, noSuchBucketIfInvalid(err)
	}
	if err := b.bucketExists(bucket); err != nil {
		return store.ListResult{}, err
	}
	l := &lister{b: b, ctx: ctx, bucket: bucket, opts: opts, limit: opts.Limit}
	if opts.Delimiter != "" && opts.Delimiter != "/" {
		// Any other delimiter: no directory maps to its prefixes, so walk
		// the whole subtree of the prefix and group keys on the way.
		l.group, l.opts.Delimiter = opts.Delimiter, ""
	}
	if l.limit <= 0 {
		l.limit = 1000
	}
	// Start in the deepest directory fully named by the prefix.
	startKey := ""
	if i := strings.LastIndexByte(opts.Prefix, '/'); i >= 0 {
		startKey = opts.Prefix[:i+1]
		if validKey(startKey) != nil {
			return l.res, nil // no stored key can have this prefix
		}
	}
	err := l.walkDir(startKey)
	if err != nil && !errors.Is(err, errStop) {
		return store.ListResult{}, err
	}
	if !l.res.IsTruncated {
		l.res.NextAfter = ""
	}
	return l.res, nil
}

type dirItem struct {
	name  string
	key   string // key of the file, or "<dir>/" for a directory
	isDir bool
}

// walkDir lists the directory holding keys that start with dk ("" or
// ending in '/'). Its own marker object (key dk) comes first.
func (l *lister) walkDir(dk string) error {
	if err := l.ctx.Err(); err != nil {
		return err
	}
	dir := filepath.Join(l.b.bucketPath(l.bucket), filepath.FromSlash(dk))
	d, err := openDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
			return nil
		}
		return err
	}
	ents, err := d.ReadDir(-1)
	d.Close()
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil // removed (its last object deleted) while we listed
		}
		return err
	}
	items := make([]dirItem, 0, len(ents))
	hasMarker := false
	for _, e := range ents {
		n := e.Name()
		if strings.HasPrefix(n, store.ReservedPrefix) {
			if n == dirMarker && dk != "" && e.Type().IsRegular() {
				hasMarker = true
			}
			continue
		}
		switch {
		case e.IsDir():
			items = append(items, dirItem{name: n, key: dk + n + "/", isDir: true})
		case e.Type().IsRegular():
			items = append(items, dirItem{name: n, key: dk + n})
		}
		// symlinks, devices, sockets are not objects
	}
	sort.Slice(items, func(i, j int) bool { return items[i].key < items[j].key })

	p, after := l.opts.Prefix, l.opts.After
	if hasMarker && strings.HasPrefix(dk, p) && dk > after {
		if err := l.emitFile(dk, filepath.Join(dir, dirMarker)); err != nil {
			return err
		}
	}
	for _, it := range items {
		if !it.isDir {
			if it.key <= after || !strings.HasPrefix(it.key, p) {
				continue
			}
			if err := l.emitFile(it.key, filepath.Join(dir, it.name)); err != nil {
				return err
			}
			continue
		}
		// Every key in the subtree starts with it.key; all are <= after
		// when after sorts past it.key without extending it.
		if after >= it.key && !strings.HasPrefix(after, it.key) {
			continue
		}
		switch {
		case strings.HasPrefix(p, it.key):
			if err := l.walkDir(it.key); err != nil {
				return err
			}
		case strings.HasPrefix(it.key, p):
			if l.opts.Delimiter == "/" {
				if it.key > after {
					// A directory with no object in it (made over NFS, or
					// left by a crash) is no prefix of any key.
					ok, err := l.hasObject(filepath.Join(dir, it.name), 0)
					if err != nil {
						return err
					}
					if !ok {
						continue
					}
					if err := l.emit(it.key, nil); err != nil {
						return err
					}
				}
				continue
			}
			if err := l.walkDir(it.key); err != nil {
				return err
			}
		}
	}
	return nil
}

// emitFile stats one file and emits it as an object. A file that vanished
// meanwhile is skipped.
func (l *lister) emitFile(key, path string) error {
	if l.group != "" {
		if i := strings.Index(key[len(l.opts.Prefix):], l.group); i >= 0 {
			// Keys come in order, so one common prefix's keys are contiguous.
			cp := key[:len(l.opts.Prefix)+i+len(l.group)]
			if cp <= l.opts.After || cp == l.lastCP {
				return nil
			}
			l.lastCP = cp
			return l.emit(cp, nil)
		}
	}
	l.steps++
	if l.steps%256 == 0 {
		if err := l.ctx.Err(); err != nil {
			return err
		}
	}
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG {
		return nil
	}
	rec := l.b.readRecord(path, nil, st.Ino)
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
			nr, err := l.b.refresh(l.ctx, path, nil, &st, rec)
			if err != nil {
				return nil // vanished or unreadable: not listed
			}
			rec = nr
		}
	}
	oi := rec.info(l.bucket, key, &st)
	return l.emit(key, &oi)
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
