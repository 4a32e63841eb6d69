package posix

import (
	"context"
	"fmt"
	"sort"
	"strings"

	"github.com/tristore/tristore/store"
)

// ListVersions lists versions and delete markers in key order, newest
// first within a key, merging the current objects (the ordinary listing,
// which pages through the tree) with the keys that have older versions
// (read from the versions area on each call: its cost grows with the
// number of versioned keys, not with the page).
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
	vkeys, err := b.versionedKeys(bucket)
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
	// The versioned keys as items (keys or common prefixes), sorted, unique.
	var vitems []string
	for _, k := range vkeys {
		if !strings.HasPrefix(k, opts.Prefix) {
			continue
		}
		it := groupOf(k)
		if len(vitems) == 0 || vitems[len(vitems)-1] != it {
			vitems = append(vitems, it)
		}
	}
	sort.Strings(vitems)
	vitems = dedupSorted(vitems)

	count := 0
	full := func() bool { return count >= limit }
	var lastKey, lastVer string
	// emitKey adds the versions of key (after the version marker when
	// skipAfter is set); it stops at the limit and reports truncation.
	emitKey := func(key string, skipAfter string) (bool, error) {
		vs, err := b.keyVersions(ctx, bucket, key)
		if err != nil {
			return false, err
		}
		start := 0
		if skipAfter != "" {
			start = -1
			for i, v := range vs {
				if verID(v.VersionID) == skipAfter {
					start = i + 1
				}
			}
			if start < 0 {
				return false, fmt.Errorf("%w: version-id-marker %q is not a version of %q", store.ErrInvalidVersion, skipAfter, key)
			}
		}
		for _, v := range vs[start:] {
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
	// Merge the current listing (paged) with vitems, both above after.
	vi := sort.SearchStrings(vitems, after)
	for vi < len(vitems) && vitems[vi] <= after {
		vi++
	}
	var page []string
	pageTrunc, pageAfter := true, after
	pi := 0
	for range 1 << 20 {
		if pi >= len(page) && pageTrunc {
			lr, err := b.List(ctx, bucket, store.ListOptions{Prefix: opts.Prefix, Delimiter: opts.Delimiter, After: pageAfter, Limit: 1000})
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
		var item string
		switch {
		case pi < len(page) && (vi >= len(vitems) || page[pi] <= vitems[vi]):
			item = page[pi]
			pi++
			if vi < len(vitems) && vitems[vi] == item {
				vi++
			}
		case vi < len(vitems):
			item = vitems[vi]
			vi++
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

// keyVersions returns every version of key, newest first: the current
// file (latest) and then the versions directory (minus the current's
// duplicate left by a crash).
func (b *Backend) keyVersions(ctx context.Context, bucket, key string) ([]store.ObjectInfo, error) {
	loc, err := b.check(bucket, key)
	if err != nil {
		return nil, err
	}
	var out []store.ObjectInfo
	cf, _, cst, crec, ok, err := b.current(ctx, loc)
	if err != nil {
		return nil, err
	}
	curID := ""
	if ok {
		cf.Close()
		out = append(out, b.versionInfo(loc, &cst, crec, true))
		curID = verID(crec.VersionID)
	}
	vs, err := b.readVersions(bucket, key)
	if err != nil {
		return nil, err
	}
	for _, e := range vs {
		if e.id == curID {
			continue
		}
		oi := e.info(bucket, key)
		oi.IsLatest = len(out) == 0
		out = append(out, oi)
	}
	return out, nil
}
