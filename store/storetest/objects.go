package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tristore/tristore/store"
)

func testPutGet(t *testing.T, newStore func(*testing.T) store.Store) {
	s, ctx := withBucket(t, newStore)
	data := pattern(1, 100_000)
	meta := store.ObjectMeta{
		ContentType: "text/x-special",
		UserMeta:    map[string]string{"color": "blue", "empty": ""},
		Headers:     map[string]string{"Cache-Control": "no-cache", "Content-Disposition": "attachment"},
		Checksums:   map[string]string{"CRC32C": "AAAAAA=="},
		ACL:         "public-read",
		Owner:       "owner1",
		Tags:        map[string]string{"project": "blue", "note": "a b/c@d", "empty": ""},
	}
	before := time.Now().Add(-2 * time.Second)
	oi, err := s.Put(ctx, "bkt", "dir/sub/obj.bin", bytes.NewReader(data), int64(len(data)), meta)
	if err != nil {
		t.Fatal(err)
	}
	if oi.ETag != md5hex(data) || oi.Size != int64(len(data)) || oi.Key != "dir/sub/obj.bin" || oi.Bucket != "bkt" {
		t.Fatalf("Put info = %+v; want ETag %s size %d", oi, md5hex(data), len(data))
	}
	if oi.ModTime.Before(before) || oi.ModTime.After(time.Now().Add(2*time.Second)) {
		t.Fatalf("ModTime %v not around now", oi.ModTime)
	}
	got, gi := get(t, s, ctx, "bkt", "dir/sub/obj.bin", 0, -1)
	if !bytes.Equal(got, data) {
		t.Fatalf("Get returned %d bytes, not the %d put", len(got), len(data))
	}
	checkMeta(t, "Get", gi, meta)
	si, err := s.Stat(ctx, "bkt", "dir/sub/obj.bin")
	if err != nil {
		t.Fatal(err)
	}
	checkMeta(t, "Stat", si, meta)
	if si.ETag != oi.ETag || si.Size != oi.Size || !si.ModTime.Equal(gi.ModTime) {
		t.Fatalf("Stat %+v disagrees with Put %+v / Get %+v", si, oi, gi)
	}
	if si.Parts != nil {
		t.Fatalf("single PUT has parts %v", si.Parts)
	}

	// size < 0 reads to EOF; an empty object is fine.
	oi, err = s.Put(ctx, "bkt", "streamed", io.MultiReader(strings.NewReader("abc"), strings.NewReader("def")), -1, store.ObjectMeta{})
	if err != nil || oi.Size != 6 || oi.ETag != md5hex([]byte("abcdef")) {
		t.Fatalf("Put size -1 = %+v, %v", oi, err)
	}
	oi = put(t, s, ctx, "bkt", "empty", nil)
	if oi.Size != 0 || oi.ETag != "d41d8cd98f00b204e9800998ecf8427e" {
		t.Fatalf("empty object info %+v", oi)
	}
	got, gi = get(t, s, ctx, "bkt", "empty", 0, -1)
	if len(got) != 0 || gi.Size != 0 {
		t.Fatalf("empty object read %d bytes, size %d", len(got), gi.Size)
	}

	if err := s.Delete(ctx, "bkt", "dir/sub/obj.bin"); err != nil {
		t.Fatal(err)
	}
	_, err = s.Stat(ctx, "bkt", "dir/sub/obj.bin")
	wantErr(t, "Stat after Delete", err, store.ErrNoSuchKey)
	wantErr(t, "Delete twice", s.Delete(ctx, "bkt", "dir/sub/obj.bin"), store.ErrNoSuchKey)
}

func checkMeta(t *testing.T, what string, oi store.ObjectInfo, want store.ObjectMeta) {
	t.Helper()
	m := oi.Meta
	if m.ContentType != want.ContentType || m.ACL != want.ACL || m.Owner != want.Owner {
		t.Fatalf("%s meta %+v, want %+v", what, m, want)
	}
	for _, pair := range []struct{ got, want map[string]string }{{m.UserMeta, want.UserMeta}, {m.Headers, want.Headers}, {m.Checksums, want.Checksums}, {m.Tags, want.Tags}} {
		if len(pair.got) != len(pair.want) {
			t.Fatalf("%s meta %+v, want %+v", what, m, want)
		}
		for k, v := range pair.want {
			if g, ok := pair.got[k]; !ok || g != v {
				t.Fatalf("%s meta %+v, want %+v", what, m, want)
			}
		}
	}
}

func testRanges(t *testing.T, newStore func(*testing.T) store.Store) {
	s, ctx := withBucket(t, newStore)
	data := pattern(2, 5000)
	put(t, s, ctx, "bkt", "r", data)
	cases := []struct{ off, n, from, to int64 }{
		{0, -1, 0, 5000}, {0, 1, 0, 1}, {10, 100, 10, 110}, {4999, -1, 4999, 5000}, {4990, 100, 4990, 5000}, {1234, 0, 1234, 1234}, {0, 5000, 0, 5000},
	}
	for _, c := range cases {
		got, oi := get(t, s, ctx, "bkt", "r", c.off, c.n)
		if !bytes.Equal(got, data[c.from:c.to]) {
			t.Fatalf("Get(off=%d, n=%d) returned %d bytes, want bytes [%d,%d)", c.off, c.n, len(got), c.from, c.to)
		}
		if oi.Size != 5000 {
			t.Fatalf("ranged Get reports size %d, want the object size 5000", oi.Size)
		}
	}
	for _, off := range []int64{5000, 5001, 1 << 40, -1} {
		_, _, err := s.Get(ctx, "bkt", "r", off, -1)
		wantErr(t, "Get past end", err, store.ErrInvalidRange)
	}
}

func testOverwrite(t *testing.T, newStore func(*testing.T) store.Store) {
	s, ctx := withBucket(t, newStore)
	put(t, s, ctx, "bkt", "k", []byte("first version, longer"))
	oi, err := s.Put(ctx, "bkt", "k", strings.NewReader("second"), 6, store.ObjectMeta{ContentType: "text/plain", UserMeta: map[string]string{"v": "2"}})
	if err != nil {
		t.Fatal(err)
	}
	got, gi := get(t, s, ctx, "bkt", "k", 0, -1)
	if string(got) != "second" || gi.ETag != oi.ETag || gi.ETag != md5hex([]byte("second")) || gi.Meta.ContentType != "text/plain" || gi.Meta.UserMeta["v"] != "2" {
		t.Fatalf("after overwrite: %q %+v", got, gi)
	}
}

func testMissing(t *testing.T, newStore func(*testing.T) store.Store) {
	s, ctx := withBucket(t, newStore)
	_, err := s.Put(ctx, "nobucket", "k", strings.NewReader("x"), 1, store.ObjectMeta{})
	wantErr(t, "Put to missing bucket", err, store.ErrNoSuchBucket)
	_, _, err = s.Get(ctx, "nobucket", "k", 0, -1)
	wantErr(t, "Get from missing bucket", err, store.ErrNoSuchBucket)
	_, err = s.Stat(ctx, "nobucket", "k")
	wantErr(t, "Stat in missing bucket", err, store.ErrNoSuchBucket)
	wantErr(t, "Delete in missing bucket", s.Delete(ctx, "nobucket", "k"), store.ErrNoSuchBucket)
	_, err = s.List(ctx, "nobucket", store.ListOptions{})
	wantErr(t, "List missing bucket", err, store.ErrNoSuchBucket)

	_, _, err = s.Get(ctx, "bkt", "nokey", 0, -1)
	wantErr(t, "Get missing key", err, store.ErrNoSuchKey)
	_, err = s.Stat(ctx, "bkt", "no/such/key")
	wantErr(t, "Stat missing key", err, store.ErrNoSuchKey)
	wantErr(t, "Delete missing key", s.Delete(ctx, "bkt", "nokey"), store.ErrNoSuchKey)
	// A prefix of existing keys is not itself a key.
	put(t, s, ctx, "bkt", "p/q/r", []byte("x"))
	for _, k := range []string{"p", "p/q", "p/", "p/q/"} {
		_, err = s.Stat(ctx, "bkt", k)
		wantErr(t, "Stat of prefix "+k, err, store.ErrNoSuchKey)
		_, _, err = s.Get(ctx, "bkt", k, 0, -1)
		wantErr(t, "Get of prefix "+k, err, store.ErrNoSuchKey)
		wantErr(t, "Delete of prefix "+k, s.Delete(ctx, "bkt", k), store.ErrNoSuchKey)
	}
	got, _ := get(t, s, ctx, "bkt", "p/q/r", 0, -1)
	if string(got) != "x" {
		t.Fatalf("p/q/r changed: %q", got)
	}
	// Keys "under" an object are missing keys, not errors of another kind.
	for _, k := range []string{"p/q/r/s", "p/q/r/", "p/q/r/s/t"} {
		_, err = s.Stat(ctx, "bkt", k)
		wantErr(t, "Stat under an object "+k, err, store.ErrNoSuchKey)
		_, _, err = s.Get(ctx, "bkt", k, 0, -1)
		wantErr(t, "Get under an object "+k, err, store.ErrNoSuchKey)
		wantErr(t, "Delete under an object "+k, s.Delete(ctx, "bkt", k), store.ErrNoSuchKey)
	}
	res, err := s.List(ctx, "bkt", store.ListOptions{Prefix: "p/q/r/"})
	if err != nil || len(res.Objects)+len(res.CommonPrefixes) != 0 {
		t.Fatalf("List under an object = %+v, %v; want empty", res, err)
	}
}

// shortReader yields its data and then a given error.
type errReader struct {
	r   io.Reader
	err error
}

func (e *errReader) Read(p []byte) (int, error) {
	n, err := e.r.Read(p)
	if err == io.EOF {
		return n, e.err
	}
	return n, err
}

var errClient = errors.New("client went away")

// lastErrReader returns all its data in one Read together with err.
type lastErrReader struct {
	data []byte
	err  error
	done bool
}

func (l *lastErrReader) Read(p []byte) (int, error) {
	if l.done {
		return 0, l.err
	}
	l.done = true
	return copy(p, l.data), l.err
}

func testIncompleteBody(t *testing.T, newStore func(*testing.T) store.Store) {
	s, ctx := withBucket(t, newStore)
	put(t, s, ctx, "bkt", "k", []byte("original"))
	_, err := s.Put(ctx, "bkt", "k", strings.NewReader("short"), 100, store.ObjectMeta{})
	wantErr(t, "Put with short body", err, store.ErrIncompleteBody)
	_, err = s.Put(ctx, "bkt", "k", &errReader{strings.NewReader("partial"), errClient}, 100, store.ObjectMeta{})
	wantErr(t, "Put with failing reader", err, errClient)
	// A reader that fails together with its last bytes, or on the Read
	// after them (as checksum-verifying readers do), must fail the Put.
	_, err = s.Put(ctx, "bkt", "k", &lastErrReader{data: []byte("complete"), err: errClient}, 8, store.ObjectMeta{})
	wantErr(t, "Put with error returned with the last bytes", err, errClient)
	_, err = s.Put(ctx, "bkt", "k", &errReader{strings.NewReader("complete"), errClient}, 8, store.ObjectMeta{})
	wantErr(t, "Put with error after the last byte (size known)", err, errClient)
	_, err = s.Put(ctx, "bkt", "k", &errReader{strings.NewReader("complete"), errClient}, -1, store.ObjectMeta{})
	wantErr(t, "Put with error after the last byte (size unknown)", err, errClient)
	_, err = s.Put(ctx, "bkt", "new/key", strings.NewReader("short"), 100, store.ObjectMeta{})
	wantErr(t, "Put new key with short body", err, store.ErrIncompleteBody)
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.Put(cctx, "bkt", "k", bytes.NewReader(pattern(3, 3<<20)), 3<<20, store.ObjectMeta{}); err == nil {
		t.Fatal("Put with a cancelled context succeeded")
	}
	got, _ := get(t, s, ctx, "bkt", "k", 0, -1)
	if string(got) != "original" {
		t.Fatalf("failed Puts changed the object to %q", got)
	}
	_, err = s.Stat(ctx, "bkt", "new/key")
	wantErr(t, "Stat of a key whose Put failed", err, store.ErrNoSuchKey)
	res, err := s.List(ctx, "bkt", store.ListOptions{})
	if err != nil || len(res.Objects) != 1 || res.Objects[0].Key != "k" || len(res.CommonPrefixes) != 0 {
		t.Fatalf("after failed Puts List = %+v, %v; want only k", res, err)
	}
}

func testInvalidKeys(t *testing.T, newStore func(*testing.T) store.Store) {
	s, ctx := withBucket(t, newStore)
	// Only what S3 itself refuses (and NUL, which XML 1.0 listings cannot
	// carry); every other shape is stored (testOddKeys).
	long := strings.Repeat("a", 255)
	bad := []string{
		"", "a\x00b", "\x00",
		strings.Repeat(long+"/", 4) + "abcde", // 1025 bytes
		strings.Repeat("/", store.MaxKeyLen+1),
	}
	for _, k := range bad {
		_, err := s.Put(ctx, "bkt", k, strings.NewReader("x"), 1, store.ObjectMeta{})
		wantErr(t, "Put "+quoteKey(k), err, store.ErrInvalidKey)
		_, _, err = s.Get(ctx, "bkt", k, 0, -1)
		wantErr(t, "Get "+quoteKey(k), err, store.ErrInvalidKey)
		_, err = s.Stat(ctx, "bkt", k)
		wantErr(t, "Stat "+quoteKey(k), err, store.ErrInvalidKey)
		wantErr(t, "Delete "+quoteKey(k), s.Delete(ctx, "bkt", k), store.ErrInvalidKey)
	}
	res, err := s.List(ctx, "bkt", store.ListOptions{})
	if err != nil || len(res.Objects)+len(res.CommonPrefixes) != 0 {
		t.Fatalf("after refused Puts List = %+v, %v; want empty", res, err)
	}
}

func quoteKey(k string) string {
	if len(k) > 40 {
		return fmt.Sprintf("%q…(%d bytes)", k[:20], len(k))
	}
	return fmt.Sprintf("%q", k)
}

func testValidKeys(t *testing.T, newStore func(*testing.T) store.Store) {
	s, ctx := withBucket(t, newStore)
	long := strings.Repeat("a", 255)
	keys := []string{
		strings.Repeat(long+"/", 3) + long[:254] + "/z", // exactly 1024 bytes
		"with space", "ünïcödé/名前", "a.b", "...", "..a", "a..", "-", "tab\there", "percent%2F", "back\\slash", "x:y", "trail.",
	}
	for i, k := range keys {
		data := pattern(10+i, 10+i)
		put(t, s, ctx, "bkt", k, data)
		got, oi := get(t, s, ctx, "bkt", k, 0, -1)
		if !bytes.Equal(got, data) || oi.Key != k {
			t.Fatalf("key %q: read back %d bytes as %q", k, len(got), oi.Key)
		}
	}
	res, err := s.List(ctx, "bkt", store.ListOptions{})
	if err != nil || len(res.Objects) != len(keys) {
		t.Fatalf("List = %d objects, %v; want %d", len(res.Objects), err, len(keys))
	}
}

// testKeyConflict: "a" and "a/b" are both stored, in either order (as
// in S3), although a directory tree cannot hold both as plain paths.
func testKeyConflict(t *testing.T, newStore func(*testing.T) store.Store) {
	s, ctx := withBucket(t, newStore)
	try := func(first, second string) {
		put(t, s, ctx, "bkt", first, []byte("first"))
		_, err := s.Put(ctx, "bkt", second, strings.NewReader("second"), 6, store.ObjectMeta{})
		if err != nil {
			t.Fatalf("Put %s after %s: %v", second, first, err)
		} else if got, _ := get(t, s, ctx, "bkt", second, 0, -1); string(got) != "second" {
			t.Fatalf("%s reads %q", second, got)
		}
		if got, _ := get(t, s, ctx, "bkt", first, 0, -1); string(got) != "first" {
			t.Fatalf("%s changed to %q", first, got)
		}
	}
	try("a", "a/b")
	try("c/d", "c")
	try("e/f/g", "e/f")
	try("h", "h/")
	if f, ok := s.(store.Filer); ok {
		_, err := f.OpenFile(ctx, "bkt", "a/x/y", os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			wantErr(t, "OpenFile under an object", err, store.ErrKeyConflict)
		}
	}
}

func testDirMarker(t *testing.T, newStore func(*testing.T) store.Store) {
	s, ctx := withBucket(t, newStore)
	put(t, s, ctx, "bkt", "d/", nil)
	put(t, s, ctx, "bkt", "d/x", []byte("x"))
	put(t, s, ctx, "bkt", "d/e/", []byte("marker with content"))
	put(t, s, ctx, "bkt", "d-", []byte("dash"))
	got, oi := get(t, s, ctx, "bkt", "d/e/", 0, -1)
	if string(got) != "marker with content" || oi.Key != "d/e/" {
		t.Fatalf("marker d/e/ read %q as %q", got, oi.Key)
	}
	checkList(t, s, ctx, store.ListOptions{}, []string{"d-", "d/", "d/e/", "d/x"}, nil)
	checkList(t, s, ctx, store.ListOptions{Delimiter: "/"}, []string{"d-"}, []string{"d/"})
	checkList(t, s, ctx, store.ListOptions{Prefix: "d/", Delimiter: "/"}, []string{"d/", "d/x"}, []string{"d/e/"})
	if err := s.Delete(ctx, "bkt", "d/"); err != nil {
		t.Fatal(err)
	}
	checkList(t, s, ctx, store.ListOptions{}, []string{"d-", "d/e/", "d/x"}, nil)
	if err := s.Delete(ctx, "bkt", "d/x"); err != nil {
		t.Fatal(err)
	}
	if err := s.Delete(ctx, "bkt", "d/e/"); err != nil {
		t.Fatal(err)
	}
	checkList(t, s, ctx, store.ListOptions{Delimiter: "/"}, []string{"d-"}, nil)
}

func testDeleteCleansPrefixes(t *testing.T, newStore func(*testing.T) store.Store) {
	s, ctx := withBucket(t, newStore)
	put(t, s, ctx, "bkt", "x/y/z/deep", []byte("1"))
	put(t, s, ctx, "bkt", "x/keep", []byte("2"))
	if err := s.Delete(ctx, "bkt", "x/y/z/deep"); err != nil {
		t.Fatal(err)
	}
	checkList(t, s, ctx, store.ListOptions{Prefix: "x/", Delimiter: "/"}, []string{"x/keep"}, nil)
	if err := s.Delete(ctx, "bkt", "x/keep"); err != nil {
		t.Fatal(err)
	}
	checkList(t, s, ctx, store.ListOptions{Delimiter: "/"}, nil, nil)
	// The freed name can now be an object.
	put(t, s, ctx, "bkt", "x", []byte("3"))
	if err := s.DeleteBucket(ctx, "bkt"); !errors.Is(err, store.ErrBucketNotEmpty) {
		t.Fatalf("DeleteBucket = %v, want ErrBucketNotEmpty", err)
	}
	if err := s.Delete(ctx, "bkt", "x"); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteBucket(ctx, "bkt"); err != nil {
		t.Fatalf("DeleteBucket after deleting nested keys: %v", err)
	}
}

// testConcurrentPuts: writers overwrite one key with whole versions while
// readers check that every Get returns exactly one version whose ETag is
// the one reported.
func testConcurrentPuts(t *testing.T, newStore func(*testing.T) store.Store) {
	s, ctx := withBucket(t, newStore)
	const writers, rounds, size = 6, 5, 192 << 10
	versions := map[string]bool{}
	var vdata [][]byte
	for w := range writers {
		for r := range rounds {
			d := pattern(1000+w*rounds+r, size)
			vdata = append(vdata, d)
			versions[md5hex(d)] = true
		}
	}
	put(t, s, ctx, "bkt", "hot", vdata[0])
	var wg sync.WaitGroup
	errs := make(chan error, 100)
	stop := make(chan struct{})
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := range rounds {
				d := vdata[w*rounds+r]
				if _, err := s.Put(ctx, "bkt", "hot", bytes.NewReader(d), size, store.ObjectMeta{}); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	var rg sync.WaitGroup
	for range 3 {
		rg.Add(1)
		go func() {
			defer rg.Done()
			deadline := time.Now().Add(time.Minute)
			for i := 0; i < 10000 && time.Now().Before(deadline); i++ {
				select {
				case <-stop:
					return
				default:
				}
				rc, oi, err := s.Get(ctx, "bkt", "hot", 0, -1)
				if err != nil {
					errs <- err
					return
				}
				d, err := io.ReadAll(rc)
				rc.Close()
				if err != nil {
					errs <- err
					return
				}
				if h := md5hex(d); !versions[h] || h != oi.ETag || len(d) != size {
					errs <- errors.New("reader saw a mixed or partial version")
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	rg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	got, oi := get(t, s, ctx, "bkt", "hot", 0, -1)
	if !versions[md5hex(got)] || oi.ETag != md5hex(got) {
		t.Fatal("final object is not one whole version")
	}
}

// testListDuringChurn lists while other goroutines create and delete keys:
// List must not fail, and every object it returns must be one that exists
// at some point with its right size.
func testListDuringChurn(t *testing.T, newStore func(*testing.T) store.Store) {
	s, ctx := withBucket(t, newStore)
	for i := range 20 {
		put(t, s, ctx, "bkt", fmt.Sprintf("stable/%02d", i), []byte("stable"))
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 10)
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 200; i++ {
				select {
				case <-stop:
					return
				default:
				}
				k := fmt.Sprintf("churn/%d/%d/obj", w, i%5)
				if _, err := s.Put(ctx, "bkt", k, strings.NewReader("churn!"), 6, store.ObjectMeta{}); err != nil {
					errs <- err
					return
				}
				if err := s.Delete(ctx, "bkt", k); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	deadline := time.Now().Add(30 * time.Second)
	for i := 0; i < 50 && time.Now().Before(deadline); i++ {
		for _, opts := range []store.ListOptions{{}, {Delimiter: "/"}, {Prefix: "churn/"}, {Limit: 3, After: "churn/0"}} {
			res, err := s.List(ctx, "bkt", opts)
			if err != nil {
				close(stop)
				wg.Wait()
				t.Fatalf("List %+v during churn: %v", opts, err)
			}
			for _, o := range res.Objects {
				if (strings.HasPrefix(o.Key, "stable/") && o.Size != 6) || (strings.HasPrefix(o.Key, "churn/") && o.Size != 6) {
					close(stop)
					wg.Wait()
					t.Fatalf("List returned %q with size %d", o.Key, o.Size)
				}
			}
		}
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	res, err := s.List(ctx, "bkt", store.ListOptions{Delimiter: "/"})
	if err != nil || len(res.Objects) != 0 || fmt.Sprint(res.CommonPrefixes) != "[stable/]" {
		t.Fatalf("after churn List = %+v, %v; want only the stable/ prefix", res, err)
	}
}
