package posix_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/tristore/tristore/store"
	"github.com/tristore/tristore/store/posix"
)

// verModel is what ListVersions must answer: per key its versions,
// newest first ("V:id" or "D:id").
type verModel map[string][]string

func (m verModel) add(key, e string) {
	m[key] = append([]string{e}, m[key]...)
}

func (m verModel) remove(key, id string) {
	m[key] = slices.DeleteFunc(m[key], func(e string) bool { return e[2:] == id })
	if len(m[key]) == 0 {
		delete(m, key)
	}
}

// flat is the whole listing for prefix and delimiter: "P:prefix" once per
// common prefix, else "V:key:id" / "D:key:id".
func (m verModel) flat(prefix, delim string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		if strings.HasPrefix(k, prefix) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	var out []string
	lastCP := ""
	for _, k := range keys {
		if delim != "" {
			if i := strings.Index(k[len(prefix):], delim); i >= 0 {
				cp := k[:len(prefix)+i+len(delim)]
				if cp != lastCP {
					out = append(out, "P:"+cp)
					lastCP = cp
				}
				continue
			}
		}
		for _, e := range m[k] {
			out = append(out, e[:2]+k+":"+e[2:])
		}
	}
	return out
}

func vid(oi store.ObjectInfo) string {
	if oi.VersionID == "" {
		return "null"
	}
	return oi.VersionID
}

// pageAll pages through ListVersions with limit entries per page and
// returns the entries in the model's form; it also checks IsLatest.
func pageAll(t *testing.T, b *posix.Backend, prefix, delim string, limit int) []string {
	t.Helper()
	var out []string
	opts := store.ListVersionsOptions{Prefix: prefix, Delimiter: delim, Limit: limit}
	prevKey := "" // the key of the last version listed, also across pages
	for range 10000 {
		res, err := b.ListVersions(context.Background(), "bkt", opts)
		if err != nil {
			t.Fatalf("%+v: %v", opts, err)
		}
		// Versions and prefixes in key order, as the front end merges them.
		type ent struct{ key, s string }
		var page []ent
		for _, v := range res.Versions {
			kind := "V:"
			if v.DeleteMarker {
				kind = "D:"
			}
			if v.IsLatest != (v.Key != prevKey) {
				t.Fatalf("%+v: %s %s IsLatest=%v", opts, v.Key, vid(v), v.IsLatest)
			}
			prevKey = v.Key
			page = append(page, ent{v.Key, kind + v.Key + ":" + vid(v)})
		}
		for _, cp := range res.CommonPrefixes {
			page = append(page, ent{cp, "P:" + cp})
		}
		sort.SliceStable(page, func(i, j int) bool { return page[i].key < page[j].key })
		if len(page) > limit || (res.IsTruncated && len(page) != limit) {
			t.Fatalf("%+v: %d entries, truncated %v", opts, len(page), res.IsTruncated)
		}
		for _, e := range page {
			out = append(out, e.s)
		}
		if !res.IsTruncated {
			return out
		}
		opts.KeyMarker, opts.VersionIDMarker = res.NextKeyMarker, res.NextVersionIDMarker
	}
	t.Fatal("listing did not end")
	return nil
}

// TestListVersionsPagingMatchesModel: random versioned PUTs (Enabled and
// Suspended, so null versions too), delete markers and deletes of
// versions on plain and odd keys; every page size, prefix and delimiter
// pages through exactly the model's listing (key-marker and
// version-id-marker continue where the page ended, IsLatest on the first
// entry of each key only, also when a key's versions span pages).
func TestListVersionsPagingMatchesModel(t *testing.T) {
	for _, noXattr := range []bool{false, true} { // records in xattrs or in sidecars
		t.Run(fmt.Sprint("noXattr=", noXattr), func(t *testing.T) { testListVersionsModel(t, noXattr) })
	}
}

func testListVersionsModel(t *testing.T, noXattr bool) {
	b, ctx := newBucket(t, posix.Options{NoXattr: noXattr})
	rng := rand.New(rand.NewPCG(13, 2))
	keys := []string{"a/1", "a/2", "a-b", "a/x/y", "b", "b/c", "a//odd", "c", "a/3"}
	m := verModel{}
	setState := func(s string) {
		if err := b.SetBucketConfig(ctx, "bkt", store.VersioningConfig, s); err != nil {
			t.Fatal(err)
		}
	}
	// Pre-versioning objects are the null version.
	for _, k := range keys[:4] {
		putS(t, b, k, "pre")
		m.add(k, "V:null")
	}
	state := store.VersioningEnabled
	setState(state)
	for range 120 {
		k := keys[rng.IntN(len(keys))]
		switch op := rng.IntN(10); {
		case op == 0:
			if state == store.VersioningEnabled {
				state = store.VersioningSuspended
			} else {
				state = store.VersioningEnabled
			}
			setState(state)
		case op <= 5:
			oi, err := b.Put(ctx, "bkt", k, strings.NewReader("x"), 1, store.ObjectMeta{})
			if err != nil {
				t.Fatal(err)
			}
			if vid(oi) == "null" {
				m.remove(k, "null")
			}
			m.add(k, "V:"+vid(oi))
		case op <= 7:
			oi, err := b.DeleteObject(ctx, "bkt", k)
			if err != nil {
				t.Fatal(err)
			}
			if vid(oi) == "null" {
				m.remove(k, "null")
			}
			m.add(k, "D:"+vid(oi))
		default:
			if len(m[k]) == 0 {
				continue
			}
			id := m[k][rng.IntN(len(m[k]))][2:]
			if _, err := b.DeleteVersion(ctx, "bkt", k, id); err != nil {
				t.Fatal(err)
			}
			m.remove(k, id)
		}
	}
	for _, prefix := range []string{"", "a", "a/", "b"} {
		for _, delim := range []string{"", "/", "-"} {
			want := m.flat(prefix, delim)
			for _, limit := range []int{1, 2, 3, 7, 1000} {
				got := pageAll(t, b, prefix, delim, limit)
				if !slices.Equal(got, want) {
					t.Fatalf("prefix %q delimiter %q limit %d:\n got %v\nwant %v", prefix, delim, limit, got, want)
				}
			}
		}
	}
	// A version-id-marker that is not a version of the key is refused.
	if _, err := b.ListVersions(ctx, "bkt", store.ListVersionsOptions{KeyMarker: "a/1", VersionIDMarker: strings.Repeat("0", 32)}); err == nil {
		t.Fatal("unknown version-id-marker accepted")
	}
}

// TestListVersionsCostBoundedByPage: once the bucket has been listed, a
// page of 10 from the middle of 200 versioned keys, or from the middle of
// one key's 120 versions, reads no directory entry from disk and about as
// many metadata records as it returns. Before, every page read every
// versioned key's directory and one record per key (200+ records), and
// all 120 records of a key to return 10 of its versions.
func TestListVersionsCostBoundedByPage(t *testing.T) {
	b, ctx := newBucket(t, posix.Options{})
	if err := b.SetBucketConfig(ctx, "bkt", store.VersioningConfig, store.VersioningEnabled); err != nil {
		t.Fatal(err)
	}
	for i := range 200 {
		k := fmt.Sprintf("k%04d", i)
		putS(t, b, k, "1")
		putS(t, b, k, "2")
		if i%3 == 0 {
			if _, err := b.DeleteObject(ctx, "bkt", k); err != nil {
				t.Fatal(err)
			}
		}
	}
	var many []string
	for range 120 {
		oi, err := b.Put(ctx, "bkt", "many", strings.NewReader("m"), 1, store.ObjectMeta{})
		if err != nil {
			t.Fatal(err)
		}
		many = append(many, oi.VersionID)
	}
	settle()
	const limit = 10
	for _, opts := range []store.ListVersionsOptions{
		{KeyMarker: "k0100", Limit: limit},
		{KeyMarker: "many", VersionIDMarker: many[60], Limit: limit},
		{Prefix: "k01", KeyMarker: "k0150", Limit: limit},
	} {
		list := func() (int64, int64, store.ListVersionsResult) {
			r0, c0 := b.RecordCounters()
			res, err := b.ListVersions(ctx, "bkt", opts)
			if err != nil {
				t.Fatal(err)
			}
			r1, c1 := b.RecordCounters()
			return r1 - r0, c1 - c0, res
		}
		list() // the first listing reads the index and the directories
		read, records, res := list()
		if len(res.Versions) != limit || !res.IsTruncated {
			t.Fatalf("%+v: %d versions, truncated %v", opts, len(res.Versions), res.IsTruncated)
		}
		if read > 0 || records > 3*limit+5 {
			t.Fatalf("%+v: a page of %d read %d directory entries and %d records (max 0 and %d)", opts, limit, read, records, 3*limit+5)
		}
	}
	// The index follows changes: a key versioned after it was read, and
	// deleted (no current file: only the index names it), is listed.
	putS(t, b, "k0100x", "1")
	if _, err := b.DeleteObject(ctx, "bkt", "k0100x"); err != nil {
		t.Fatal(err)
	}
	res, err := b.ListVersions(ctx, "bkt", store.ListVersionsOptions{KeyMarker: "k0100", Limit: 3})
	if err != nil {
		t.Fatal(err)
	}
	if got := res.Versions[0].Key + "," + res.Versions[1].Key; got != "k0100x,k0100x" || !res.Versions[0].DeleteMarker {
		t.Fatalf("after a new versioned key: %s", got)
	}
}
