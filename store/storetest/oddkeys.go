package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"

	"github.com/tristore/tristore/store"
)

// OddKeys are keys S3 accepts that a directory tree cannot hold as plain
// paths: empty, "." and ".." segments, a leading '/', segments over 255
// bytes, the reserved prefix, a 1,024-byte key of slashes, and (put in
// this order) a key that is also a prefix of others ("x" then "x/child",
// "d/child" then "d"). Every store must keep all of them, next to plain
// keys, and list them in S3 byte order. Exported for end-to-end tests.
var OddKeys = []string{
	"/lead", "/", "//", "///x", "a//b", "a/./b", "a/../b", ".", "..", "./x", "x/.", "x/..", "trail//",
	"s/" + strings.Repeat("s", 300) + "/t", strings.Repeat("L", 256),
	"x", "x/child", "x/", "x/child/deeper",
	"d/child", "d", "d/",
	".tristore", "q/.tristore-dir", "q/.tristore-hidden", ".tristore-hidden/keys/abc", ".tristore-tmp-1",
	"q/plain", "é//ü", "a/b", "a", "a-", "a.", "a0",
	strings.Repeat("/", store.MaxKeyLen),
}

// oddData is the content stored under OddKeys[i].
func oddData(i int) []byte { return append([]byte(fmt.Sprintf("odd %d:", i)), pattern(i, i%7)...) }

func testOddKeys(t *testing.T, newStore func(*testing.T) store.Store) {
	s, ctx := withBucket(t, newStore)
	for i, k := range OddKeys {
		put(t, s, ctx, "bkt", k, oddData(i))
	}
	for i, k := range OddKeys {
		got, oi := get(t, s, ctx, "bkt", k, 0, -1)
		if !bytes.Equal(got, oddData(i)) || oi.Key != k || oi.ETag != md5hex(oddData(i)) {
			t.Fatalf("Get %s: %q as key %s ETag %s", quoteKey(k), got, quoteKey(oi.Key), oi.ETag)
		}
		if oi, err := s.Stat(ctx, "bkt", k); err != nil || oi.Size != int64(len(oddData(i))) || oi.Key != k {
			t.Fatalf("Stat %s = %+v, %v", quoteKey(k), oi, err)
		}
		if got, _ := get(t, s, ctx, "bkt", k, 2, 3); !bytes.Equal(got, oddData(i)[2:5]) {
			t.Fatalf("ranged Get %s = %q", quoteKey(k), got)
		}
	}
	want := append([]string(nil), OddKeys...)
	sort.Strings(want)
	checkList(t, s, ctx, store.ListOptions{}, want, nil)
	res, err := s.List(ctx, "bkt", store.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range res.Objects {
		i := indexOf(OddKeys, o.Key)
		if o.Size != int64(len(oddData(i))) || o.ETag != md5hex(oddData(i)) {
			t.Fatalf("listed %s: size %d ETag %s", quoteKey(o.Key), o.Size, o.ETag)
		}
	}
	compareWithModel(t, s, OddKeys,
		[]string{"", "/", "//", "a", "a/", "a//", "x", "x/", "x/child", "q/", ".", "d", "s/", "é/"},
		[]string{"", "/", "a/", "a//b", "x", "x/", "x/child", "d/", "\xff"},
		[]string{"", "/", "//", ".", "child", "a/"})

	// Overwrite, metadata and a missing neighbour of odd keys.
	put(t, s, ctx, "bkt", "a//b", []byte("new"))
	if got, _ := get(t, s, ctx, "bkt", "a//b", 0, -1); string(got) != "new" {
		t.Fatalf("overwritten a//b reads %q", got)
	}
	checkList(t, s, ctx, store.ListOptions{Prefix: "a//"}, []string{"a//b"}, nil)
	if mu, ok := s.(store.MetaUpdater); ok {
		meta := store.ObjectMeta{ContentType: "text/odd", Tags: map[string]string{"t": "v"}}
		if _, err := mu.UpdateMeta(ctx, "bkt", "x/..", meta); err != nil {
			t.Fatalf("UpdateMeta x/..: %v", err)
		}
		if oi, err := s.Stat(ctx, "bkt", "x/.."); err != nil || oi.Meta.Tags["t"] != "v" || oi.Meta.ContentType != "text/odd" {
			t.Fatalf("after UpdateMeta Stat x/.. = %+v, %v", oi.Meta, err)
		}
	}
	for _, k := range []string{"a//c", "/nope", "x/child/other", "d/none"} {
		_, _, err := s.Get(ctx, "bkt", k, 0, -1)
		wantErr(t, "Get missing "+quoteKey(k), err, store.ErrNoSuchKey)
		wantErr(t, "Delete missing "+quoteKey(k), s.Delete(ctx, "bkt", k), store.ErrNoSuchKey)
	}

	// Delete every key; the bucket is not empty until the last one goes.
	for i, k := range OddKeys {
		if err := s.DeleteBucket(ctx, "bkt"); !errors.Is(err, store.ErrBucketNotEmpty) {
			t.Fatalf("DeleteBucket with %d keys left = %v", len(OddKeys)-i, err)
		}
		if err := s.Delete(ctx, "bkt", k); err != nil {
			t.Fatalf("Delete %s: %v", quoteKey(k), err)
		}
		_, err := s.Stat(ctx, "bkt", k)
		wantErr(t, "Stat deleted "+quoteKey(k), err, store.ErrNoSuchKey)
		wantErr(t, "Delete again "+quoteKey(k), s.Delete(ctx, "bkt", k), store.ErrNoSuchKey)
		rest := append([]string(nil), OddKeys[i+1:]...)
		sort.Strings(rest)
		if i%9 == 0 {
			checkList(t, s, ctx, store.ListOptions{}, rest, nil)
		}
	}
	checkList(t, s, ctx, store.ListOptions{}, nil, nil)
	if err := s.DeleteBucket(ctx, "bkt"); err != nil {
		t.Fatalf("DeleteBucket after deleting every odd key: %v", err)
	}
}

// testOddKeyShapes: a key and the "directory" of other keys can both
// exist in any order, each readable and deletable on its own, and a key
// stored aside while its path was taken is still one key when the path
// frees up and it is written again.
func testOddKeyShapes(t *testing.T, newStore func(*testing.T) store.Store) {
	s, ctx := withBucket(t, newStore)
	put(t, s, ctx, "bkt", "m", []byte("file m"))
	put(t, s, ctx, "bkt", "m/c", []byte("under m"))
	put(t, s, ctx, "bkt", "m/c/d", []byte("under m/c"))
	checkList(t, s, ctx, store.ListOptions{}, []string{"m", "m/c", "m/c/d"}, nil)
	checkList(t, s, ctx, store.ListOptions{Delimiter: "/"}, []string{"m"}, []string{"m/"})
	checkList(t, s, ctx, store.ListOptions{Prefix: "m/", Delimiter: "/"}, []string{"m/c"}, []string{"m/c/"})
	if err := s.Delete(ctx, "bkt", "m"); err != nil {
		t.Fatal(err)
	}
	put(t, s, ctx, "bkt", "m/c", []byte("again"))
	if got, _ := get(t, s, ctx, "bkt", "m/c", 0, -1); string(got) != "again" {
		t.Fatalf("m/c reads %q", got)
	}
	checkList(t, s, ctx, store.ListOptions{}, []string{"m/c", "m/c/d"}, nil)
	for _, k := range []string{"m/c", "m/c/d"} {
		if err := s.Delete(ctx, "bkt", k); err != nil {
			t.Fatal(err)
		}
	}
	checkList(t, s, ctx, store.ListOptions{}, nil, nil)

	if mp, ok := s.(store.Multiparter); ok {
		put(t, s, ctx, "bkt", "mp/x", []byte("x"))
		for _, k := range []string{"mp", "mp//y", "mp/x/."} {
			id, err := mp.CreateMultipart(ctx, "bkt", k, store.ObjectMeta{ContentType: "text/mp"})
			if err != nil {
				t.Fatalf("CreateMultipart %s: %v", k, err)
			}
			a, b := pattern(1, store.MinPartSize), []byte("tail of "+k)
			if _, err := mp.PutPart(ctx, "bkt", k, id, 1, bytes.NewReader(a), int64(len(a))); err != nil {
				t.Fatal(err)
			}
			if _, err := mp.PutPart(ctx, "bkt", k, id, 2, bytes.NewReader(b), int64(len(b))); err != nil {
				t.Fatal(err)
			}
			oi, err := mp.CompleteMultipart(ctx, "bkt", k, id, []store.CompletePart{cp(1, md5hex(a)), cp(2, md5hex(b))})
			if err != nil || oi.ETag != multipartETag(a, b) {
				t.Fatalf("Complete %s = %+v, %v", k, oi, err)
			}
			if got, _ := get(t, s, ctx, "bkt", k, 0, -1); !bytes.Equal(got, append(a, b...)) {
				t.Fatalf("multipart %s reads %d bytes", k, len(got))
			}
		}
		checkList(t, s, ctx, store.ListOptions{}, []string{"mp", "mp//y", "mp/x", "mp/x/."}, nil)
	}
	if ep, ok := s.(store.ExclusivePutter); ok {
		for _, k := range []string{"mp", "mp//y", "ex//new"} {
			_, err := ep.PutIfAbsent(ctx, "bkt", k, strings.NewReader("z"), 1, store.ObjectMeta{})
			if k == "ex//new" {
				if err != nil {
					t.Fatalf("PutIfAbsent new odd key: %v", err)
				}
				continue
			}
			wantErr(t, "PutIfAbsent existing "+k, err, store.ErrPreconditionFailed)
		}
	}
	if fl, ok := s.(store.Filer); ok {
		put(t, s, ctx, "bkt", "vol//odd", []byte("0123456789"))
		f, err := fl.OpenFile(ctx, "bkt", "vol//odd", os.O_RDWR, 0)
		if err != nil {
			t.Fatalf("OpenFile existing odd key: %v", err)
		}
		if _, err := f.WriteAt([]byte("AB"), 3); err != nil {
			t.Fatal(err)
		}
		f.Close()
		got, oi := get(t, s, ctx, "bkt", "vol//odd", 0, -1)
		if string(got) != "012AB56789" || oi.ETag != md5hex(got) {
			t.Fatalf("after WriteAt vol//odd reads %q ETag %s", got, oi.ETag)
		}
	}
}

// compareWithModel lists keys (already stored) with every prefix, start
// and delimiter given, at several page sizes and page by page, comparing
// each page with the S3 model.
func compareWithModel(t *testing.T, s store.Store, keys, prefixes, afters, delims []string) {
	t.Helper()
	ctx := ctxT(t)
	for _, delim := range delims {
		for _, p := range prefixes {
			for _, after := range afters {
				for _, limit := range []int{0, 1, 3} {
					opts := store.ListOptions{Prefix: p, Delimiter: delim, After: after, Limit: limit}
					for page := 0; page < 100; page++ {
						wo, wc, wt, wn := model(keys, opts)
						res, err := s.List(ctx, "bkt", opts)
						if err != nil {
							t.Fatalf("List %+v: %v", opts, err)
						}
						var got []string
						for _, o := range res.Objects {
							got = append(got, o.Key)
						}
						if fmt.Sprint(got) != fmt.Sprint(wo) || fmt.Sprint(res.CommonPrefixes) != fmt.Sprint(wc) || res.IsTruncated != wt || (wt && res.NextAfter != wn) {
							t.Fatalf("List %+v:\n got %q %q truncated=%v next=%q\nwant %q %q truncated=%v next=%q",
								opts, got, res.CommonPrefixes, res.IsTruncated, res.NextAfter, wo, wc, wt, wn)
						}
						if !res.IsTruncated || limit == 0 {
							break
						}
						opts.After = res.NextAfter
					}
				}
			}
		}
	}
}
