package posix

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/tristore/tristore/store"
)

// ListVersions lists versions and delete markers in key order, newest
// first within a key, merging the current objects (the ordinary listing,
// which pages through the tree) with the keys that have older versions
// (the bucket's version index, versions_index.go). Both are entered at the
// page's start and read no further than the page needs: the listing is
// asked for one more item than the page still has room for, the index is
// entered by binary search and skips a common prefix's keys once it is
// emitted, and each key's versions come from a sorted snapshot of its
// directory, one record read per version returned. So a page costs in
// proportion to the page, not to the bucket (TestListVersionsCostBoundedByPage).
func (b *Backend) ListVersions(ctx context.Context, bucket string, opts store.ListVersionsOptions) (store.ListVersionsResult, error) {
	var res store.ListVersionsResult
	if err := validBucket(bucket); err != nil {
		return res, noSuchBucketIfInvalid(err)
	}
	if err := b.bucketExists(bucket); err != nil {
		return res, err
	}
	limit := opts.Limit
	if limit <= 0 {
		limit = 1000
	}
	if opts.VersionIDMarker != "" && !validVersionID(opts.VersionIDMarker) {
		return res, fmt.Errorf("%w: version-id-marker %q", store.ErrInvalidVersion, opts.VersionIDMarker)
	}
	vkeys, err := b.versionKeys(bucket)
	if err != nil {
		return res, err
	}
	// groupOf is the item a key is listed as: itself or its common prefix.
	groupOf := func(k string) string {
		if opts.Delimiter == "" {
			return k
		}
		if i := strings.Index(k[len(opts.Prefix):], opts.Delimiter); i >= 0 {
			return k[:len(opts.Prefix)+i+len(opts.Delimiter)]
		}
		return k
	}
	isPrefix := func(item string) bool {
		return opts.Delimiter != "" && strings.HasSuffix(item, opts.Delimiter) && groupOf(item) == item &&
			len(item) > len(opts.Prefix)
	}

	count := 0
	full := func() bool { return count >= limit }
	var lastKey, lastVer string
	// emitKey adds the versions of key (after version skipAfter when set);
	// it stops at the limit and reports truncation.
	emitKey := func(key string, skipAfter string) (bool, error) {
		vs, found, err := b.keyVersionsPage(ctx, bucket, key, skipAfter, limit-count+1)
		if err != nil {
			return false, err
		}
		if !found {
			return false, fmt.Errorf("%w: version-id-marker %q is not a version of %q", store.ErrInvalidVersion, skipAfter, key)
		}
		for _, v := range vs {
			if full() {
				res.IsTruncated = true
				return true, nil
			}
			res.Versions = append(res.Versions, v)
			count++
			lastKey, lastVer = key, verID(v.VersionID)
		}
		return false, nil
	}
	after := opts.KeyMarker
	if opts.VersionIDMarker != "" && opts.KeyMarker != "" && strings.HasPrefix(opts.KeyMarker, opts.Prefix) {
		if stop, err := emitKey(opts.KeyMarker, opts.VersionIDMarker); err != nil || stop {
			return b.finishVersions(res, lastKey, lastVer), err
		}
	}
	// The versioned keys as items above after, lazily: vi is the next key
	// to look at; a group at or below after is skipped whole.
	vi := sort.SearchStrings(vkeys, max(opts.Prefix, after))
	skipGroup := func(it string) {
		if e := afterPrefix(it); e != "" {
			vi = sort.SearchStrings(vkeys, e)
		} else {
			vi = len(vkeys)
		}
	}
	peekV := func() (string, bool) {
		for vi < len(vkeys) {
			k := vkeys[vi]
			if !strings.HasPrefix(k, opts.Prefix) {
				vi = len(vkeys)
				break
			}
			it := groupOf(k)
			if it > after {
				return it, true
			}
			if it != k {
				skipGroup(it)
			} else {
				vi++
			}
		}
		return "", false
	}
	takeV := func(it string) {
		if isPrefix(it) {
			skipGroup(it)
		} else {
			vi++
		}
	}
	// Merge the current listing (paged, no more than the page needs) with
	// the versioned keys, both above after.
	var page []string
	pageTrunc, pageAfter := true, after
	pi := 0
	for range 1 << 22 {
		if pi >= len(page) && pageTrunc {
			lr, err := b.List(ctx, bucket, store.ListOptions{Prefix: opts.Prefix, Delimiter: opts.Delimiter, After: pageAfter, Limit: min(limit-count+1, 1000)})
			if err != nil {
				return res, err
			}
			page = page[:0]
			for _, o := range lr.Objects {
				page = append(page, o.Key)
			}
			page = append(page, lr.CommonPrefixes...)
			sort.Strings(page)
			pi, pageTrunc, pageAfter = 0, lr.IsTruncated, lr.NextAfter
		}
		vit, vok := peekV()
		var item string
		switch {
		case pi < len(page) && (!vok || page[pi] <= vit):
			item = page[pi]
			pi++
			if vok && vit == item {
				takeV(vit)
			}
		case vok:
			item = vit
			takeV(vit)
		default:
			return b.finishVersions(res, lastKey, lastVer), nil
		}
		if isPrefix(item) {
			if full() {
				res.IsTruncated = true
				return b.finishVersions(res, lastKey, lastVer), nil
			}
			res.CommonPrefixes = append(res.CommonPrefixes, item)
			count++
			lastKey, lastVer = item, ""
			continue
		}
		if stop, err := emitKey(item, ""); err != nil || stop {
			return b.finishVersions(res, lastKey, lastVer), err
		}
	}
	return res, fmt.Errorf("posix: version listing of %s did not end", bucket)
}

func (b *Backend) finishVersions(res store.ListVersionsResult, key, ver string) store.ListVersionsResult {
	if res.IsTruncated {
		res.NextKeyMarker, res.NextVersionIDMarker = key, ver
	}
	return res
}

func dedupSorted(s []string) []string {
	out := s[:0]
	for i, v := range s {
		if i == 0 || v != s[i-1] {
			out = append(out, v)
		}
	}
	return out
}

// keyVersionsPage returns up to n versions of key, newest first: the
// current file (latest) and then the versions directory (minus the
// current's duplicate left by a crash), starting after version afterID
// ("" = from the latest); found reports whether afterID is a version of
// key. Version IDs sort by age (their first 16 hex digits are the
// creation sequence), so the directory's sorted snapshot walked backwards
// is newest first; only the null version's place needs its record. One
// record is read per entry returned (and per incomplete entry passed).
func (b *Backend) keyVersionsPage(ctx context.Context, bucket, key, afterID string, n int) ([]store.ObjectInfo, bool, error) {
	loc, err := b.check(bucket, key)
	if err != nil {
		return nil, false, err
	}
	var out []store.ObjectInfo
	found := afterID == ""
	cf, _, cst, crec, ok, err := b.current(ctx, loc)
	if err != nil {
		return nil, false, err
	}
	curID := ""
	if ok {
		cf.Close()
		curID = verID(crec.VersionID)
		switch {
		case afterID == "":
			out = append(out, b.versionInfo(loc, &cst, crec, true))
		case afterID == curID:
			found = true
		}
	}
	dir := b.versionDir(bucket, key)
	snap, exists, err := b.snapshot(dir, false)
	if err != nil {
		return nil, false, fsErr(err)
	}
	if !exists {
		return out, found, nil
	}
	items := snap.items
	// entry reads and checks one file of the directory.
	entry := func(name string) (verEntry, bool) {
		e := verEntry{id: name, path: filepath.Join(dir, name)}
		if unix.Lstat(e.path, &e.st) != nil || e.st.Mode&unix.S_IFMT != unix.S_IFREG {
			return e, false
		}
		e.rec = b.readRecord(e.path, nil, e.st.Ino)
		return e, e.rec != nil && e.rec.Key == key && verID(e.rec.VersionID) == name
	}
	// IDs sort below "null" ('n' is above every hex digit).
	hexEnd := items.Search(func(it dirItem) bool { return it.sk >= nullVersion })
	var null verEntry
	hasNull := false
	if hexEnd < items.Len() && items.At(hexEnd).sk == nullVersion && nullVersion != curID {
		null, hasNull = entry(nullVersion)
	}
	i := hexEnd - 1 // next ID entry, walking down (newer to older)
	nullPending := hasNull
	if afterID != "" && !found {
		switch {
		case afterID == nullVersion:
			found = hasNull
			i = sort.Search(hexEnd, func(j int) bool { return items.At(j).sk >= fmt.Sprintf("%016x", null.seq()) }) - 1
			nullPending = false
		default:
			j := sort.Search(hexEnd, func(j int) bool { return items.At(j).sk >= afterID })
			if j < hexEnd && items.At(j).sk == afterID && afterID != curID {
				_, found = entry(afterID)
			}
			i = j - 1
			if s, ok := idSeq(afterID); ok && hasNull {
				nullPending = null.seq() < s
			}
		}
		if !found {
			return nil, false, nil
		}
	}
	next := func() (string, bool) {
		for i >= 0 && (items.At(i).isDir || !validVersionID(items.At(i).sk)) {
			i--
		}
		if nullPending {
			s := int64(-1 << 63)
			if i >= 0 {
				s, _ = idSeq(items.At(i).sk)
			}
			if null.seq() > s {
				nullPending = false
				return nullVersion, true
			}
		}
		if i < 0 {
			return "", false
		}
		name := items.At(i).sk
		i--
		return name, true
	}
	for len(out) < n {
		name, more := next()
		if !more {
			break
		}
		if name == curID {
			continue
		}
		e, valid := null, true
		if name != nullVersion {
			e, valid = entry(name)
		}
		if !valid {
			continue
		}
		oi := e.info(bucket, key)
		oi.IsLatest = !ok && afterID == "" && len(out) == 0
		out = append(out, oi)
	}
	return out, found, nil
}
