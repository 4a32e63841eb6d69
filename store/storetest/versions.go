package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/tristore/tristore/store"
)

// versioner returns s as a Versioner with a bucket "bkt" whose versioning
// state is set to state, or skips.
func versioner(t *testing.T, s store.Store) (store.Versioner, store.BucketConfigurer) {
	t.Helper()
	v, ok := s.(store.Versioner)
	bc, ok2 := s.(store.BucketConfigurer)
	if !ok || !ok2 {
		t.Skip("store does not implement store.Versioner and store.BucketConfigurer")
	}
	return v, bc
}

func readVersion(t *testing.T, v store.Versioner, bucket, key, id string) ([]byte, store.ObjectInfo) {
	t.Helper()
	rc, oi, err := v.GetVersion(ctxT(t), bucket, key, id, 0, -1)
	if err != nil {
		t.Fatalf("GetVersion(%s, %q): %v", key, id, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return b, oi
}

func vid(oi store.ObjectInfo) string {
	if oi.VersionID == "" {
		return "null"
	}
	return oi.VersionID
}

func testVersions(t *testing.T, newStore func(*testing.T) store.Store) {
	s, ctx := withBucket(t, newStore)
	v, bc := versioner(t, s)
	p0 := put(t, s, ctx, "bkt", "d/k", []byte("zero"))
	if p0.VersionID != "" {
		t.Fatalf("unversioned PUT got version %q", p0.VersionID)
	}
	if b, _ := readVersion(t, v, "bkt", "d/k", "null"); string(b) != "zero" {
		t.Fatalf("null version of an unversioned object = %q", b)
	}
	if err := bc.SetBucketConfig(ctx, "bkt", store.VersioningConfig, store.VersioningEnabled); err != nil {
		t.Fatal(err)
	}
	p1 := put(t, s, ctx, "bkt", "d/k", []byte("one"))
	p2 := put(t, s, ctx, "bkt", "d/k", []byte("two"))
	if p1.VersionID == "" || p2.VersionID == "" || p1.VersionID == p2.VersionID {
		t.Fatalf("version IDs %q %q", p1.VersionID, p2.VersionID)
	}
	for id, want := range map[string]string{"null": "zero", p1.VersionID: "one", p2.VersionID: "two", "": "two"} {
		if b, _ := readVersion(t, v, "bkt", "d/k", id); string(b) != want {
			t.Fatalf("version %q = %q, want %q", id, b, want)
		}
	}
	if b, _ := get(t, s, ctx, "bkt", "d/k", 0, -1); string(b) != "two" {
		t.Fatalf("current = %q", b)
	}
	// Bad IDs.
	_, _, err := v.GetVersion(ctx, "bkt", "d/k", "not-a-version", 0, -1)
	wantErr(t, "malformed version", err, store.ErrInvalidVersion)
	_, err = v.StatVersion(ctx, "bkt", "d/k", strings.Repeat("0", 32))
	wantErr(t, "missing version", err, store.ErrNoSuchVersion)

	// A delete adds a marker; the versions stay.
	dm, err := v.DeleteObject(ctx, "bkt", "d/k")
	if err != nil || !dm.DeleteMarker || dm.VersionID == "" {
		t.Fatalf("delete on versioned bucket: %+v %v", dm, err)
	}
	_, err = s.Stat(ctx, "bkt", "d/k")
	wantErr(t, "stat after delete marker", err, store.ErrNoSuchKey)
	mi, err := v.StatVersion(ctx, "bkt", "d/k", "")
	if !errors.Is(err, store.ErrDeleteMarker) || mi.VersionID != dm.VersionID || !mi.IsLatest {
		t.Fatalf("latest after delete: %+v %v", mi, err)
	}
	lr, err := v.ListVersions(ctx, "bkt", store.ListVersionsOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got := []string{}
	for _, o := range lr.Versions {
		got = append(got, fmt.Sprintf("%s:%s:%v:%v", o.Key, vid(o), o.IsLatest, o.DeleteMarker))
	}
	want := []string{"d/k:" + dm.VersionID + ":true:true", "d/k:" + p2.VersionID + ":false:false",
		"d/k:" + p1.VersionID + ":false:false", "d/k:null:false:false"}
	if strings.Join(got, " ") != strings.Join(want, " ") {
		t.Fatalf("versions:\n got %v\nwant %v", got, want)
	}
	// The bucket is not empty while versions exist.
	wantErr(t, "DeleteBucket with versions", s.DeleteBucket(ctx, "bkt"), store.ErrBucketNotEmpty)

	// Removing the marker makes the newest version current again.
	if _, err := v.DeleteVersion(ctx, "bkt", "d/k", dm.VersionID); err != nil {
		t.Fatal(err)
	}
	if b, oi := get(t, s, ctx, "bkt", "d/k", 0, -1); string(b) != "two" || oi.VersionID != p2.VersionID {
		t.Fatalf("after removing the marker: %q %q", b, oi.VersionID)
	}
	// Removing the current version promotes the previous one.
	if _, err := v.DeleteVersion(ctx, "bkt", "d/k", p2.VersionID); err != nil {
		t.Fatal(err)
	}
	if b, oi := get(t, s, ctx, "bkt", "d/k", 0, -1); string(b) != "one" || oi.VersionID != p1.VersionID {
		t.Fatalf("after removing the current version: %q %q", b, oi.VersionID)
	}
	_, err = v.StatVersion(ctx, "bkt", "d/k", p2.VersionID)
	wantErr(t, "removed version", err, store.ErrNoSuchVersion)
	// Removing a version that is not there changes nothing.
	if _, err := v.DeleteVersion(ctx, "bkt", "d/k", p2.VersionID); err != nil {
		t.Fatal(err)
	}
	_, err = v.DeleteVersion(ctx, "bkt", "d/k", "bad")
	wantErr(t, "DeleteVersion malformed", err, store.ErrInvalidVersion)

	// Suspended: new writes are the null version, replacing the old null.
	if err := bc.SetBucketConfig(ctx, "bkt", store.VersioningConfig, store.VersioningSuspended); err != nil {
		t.Fatal(err)
	}
	pn := put(t, s, ctx, "bkt", "d/k", []byte("suspended"))
	if pn.VersionID != "" {
		t.Fatalf("suspended PUT got version %q", pn.VersionID)
	}
	if b, _ := readVersion(t, v, "bkt", "d/k", "null"); string(b) != "suspended" {
		t.Fatalf("null version after suspended PUT = %q", b)
	}
	if b, _ := readVersion(t, v, "bkt", "d/k", p1.VersionID); string(b) != "one" {
		t.Fatalf("version 1 after suspended PUT = %q", b)
	}
	pn2 := put(t, s, ctx, "bkt", "d/k", []byte("suspended2"))
	lr, err = v.ListVersions(ctx, "bkt", store.ListVersionsOptions{})
	if err != nil || len(lr.Versions) != 2 || vid(lr.Versions[0]) != "null" || lr.Versions[1].VersionID != p1.VersionID || pn2.VersionID != "" {
		t.Fatalf("after two suspended PUTs: %+v %v", lr.Versions, err)
	}
	// A suspended delete is a null marker replacing the null version.
	dm2, err := v.DeleteObject(ctx, "bkt", "d/k")
	if err != nil || !dm2.DeleteMarker || dm2.VersionID != "" {
		t.Fatalf("suspended delete: %+v %v", dm2, err)
	}
	lr, _ = v.ListVersions(ctx, "bkt", store.ListVersionsOptions{})
	if len(lr.Versions) != 2 || !lr.Versions[0].DeleteMarker || vid(lr.Versions[0]) != "null" {
		t.Fatalf("after suspended delete: %+v", lr.Versions)
	}

	// Per-version metadata (Object Lock fields) is kept per version.
	until := time.Now().Add(time.Hour).UTC().Truncate(time.Second)
	m := store.ObjectMeta{LockMode: "GOVERNANCE", LockUntil: until, LegalHold: true}
	if _, err := v.UpdateVersionMeta(ctx, "bkt", "d/k", p1.VersionID, m); err != nil {
		t.Fatal(err)
	}
	oi, err := v.StatVersion(ctx, "bkt", "d/k", p1.VersionID)
	if err != nil || oi.Meta.LockMode != "GOVERNANCE" || !oi.Meta.LockUntil.Equal(until) || !oi.Meta.LegalHold {
		t.Fatalf("lock fields: %+v %v", oi.Meta, err)
	}
	// Emptying every version empties the bucket.
	for _, o := range lr.Versions {
		if _, err := v.DeleteVersion(ctx, "bkt", "d/k", vid(o)); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeleteBucket(ctx, "bkt"); err != nil {
		t.Fatalf("DeleteBucket after removing every version: %v", err)
	}
}

// testVersionList pages through versions of many keys with every page
// size and compares with the one-page listing; also delimiters and
// multipart and odd (hidden) keys.
func testVersionList(t *testing.T, newStore func(*testing.T) store.Store) {
	s, ctx := withBucket(t, newStore)
	v, bc := versioner(t, s)
	put(t, s, ctx, "bkt", "a", []byte("a0"))
	if err := bc.SetBucketConfig(ctx, "bkt", store.VersioningConfig, store.VersioningEnabled); err != nil {
		t.Fatal(err)
	}
	keys := []string{"a", "b/x", "b/y", "c", "a//odd"}
	for i := range 3 {
		for _, k := range keys {
			put(t, s, ctx, "bkt", k, []byte(fmt.Sprintf("%s-%d", k, i)))
		}
	}
	if _, err := v.DeleteObject(ctx, "bkt", "c"); err != nil {
		t.Fatal(err)
	}
	if _, err := v.DeleteObject(ctx, "bkt", "b/y"); err != nil {
		t.Fatal(err)
	}
	if mp, ok := s.(store.Multiparter); ok {
		id, err := mp.CreateMultipart(ctx, "bkt", "a", store.ObjectMeta{})
		if err != nil {
			t.Fatal(err)
		}
		pi, err := mp.PutPart(ctx, "bkt", "a", id, 1, bytes.NewReader([]byte("mp")), 2)
		if err != nil {
			t.Fatal(err)
		}
		oi, err := mp.CompleteMultipart(ctx, "bkt", "a", id, []store.CompletePart{{Number: 1, ETag: pi.ETag}})
		if err != nil || oi.VersionID == "" {
			t.Fatalf("versioned Complete: %+v %v", oi, err)
		}
	}
	all, err := v.ListVersions(ctx, "bkt", store.ListVersionsOptions{})
	if err != nil || all.IsTruncated {
		t.Fatal(err, all.IsTruncated)
	}
	line := func(o store.ObjectInfo) string { return o.Key + "@" + vid(o) }
	var want []string
	for _, o := range all.Versions {
		want = append(want, line(o))
	}
	// a: null + 3 + multipart, a//odd 3, b/x 3, b/y 3 + marker, c 3 + marker
	if len(want) != 5+3+3+4+4 {
		t.Fatalf("%d versions: %v", len(want), want)
	}
	for i := 1; i < len(want); i++ {
		if all.Versions[i].Key < all.Versions[i-1].Key {
			t.Fatalf("not in key order: %v", want)
		}
	}
	for size := 1; size <= 7; size++ {
		var got []string
		o := store.ListVersionsOptions{Limit: size}
		for range 100 {
			r, err := v.ListVersions(ctx, "bkt", o)
			if err != nil {
				t.Fatal(err)
			}
			if len(r.Versions) > size {
				t.Fatalf("page of %d > %d", len(r.Versions), size)
			}
			for _, x := range r.Versions {
				got = append(got, line(x))
			}
			if !r.IsTruncated {
				break
			}
			o.KeyMarker, o.VersionIDMarker = r.NextKeyMarker, r.NextVersionIDMarker
		}
		if strings.Join(got, " ") != strings.Join(want, " ") {
			t.Fatalf("pages of %d:\n got %v\nwant %v", size, got, want)
		}
	}
	d, err := v.ListVersions(ctx, "bkt", store.ListVersionsOptions{Delimiter: "/"})
	if err != nil || strings.Join(d.CommonPrefixes, ",") != "a/,b/" {
		t.Fatalf("delimiter: %v %v", d.CommonPrefixes, err)
	}
	for _, o := range d.Versions {
		if o.Key != "a" && o.Key != "c" {
			t.Fatalf("delimiter listing has %q", o.Key)
		}
	}
	_, err = v.ListVersions(ctx, "bkt", store.ListVersionsOptions{KeyMarker: "a", VersionIDMarker: "zz"})
	wantErr(t, "bad version-id-marker", err, store.ErrInvalidVersion)
}
