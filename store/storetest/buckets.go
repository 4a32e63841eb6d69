package storetest

import (
	"strings"
	"testing"
	"time"

	"github.com/tristore/tristore/store"
)

func testBuckets(t *testing.T, newStore func(*testing.T) store.Store) {
	s := newStore(t)
	ctx := ctxT(t)
	before := time.Now().Add(-2 * time.Second)
	bs, err := s.ListBuckets(ctx)
	if err != nil || len(bs) != 0 {
		t.Fatalf("ListBuckets on a fresh store = %v, %v; want none", bs, err)
	}
	for _, n := range []string{"zeta", "alpha", "mid.dle-1"} {
		if err := s.CreateBucket(ctx, n, "own-"+n); err != nil {
			t.Fatalf("CreateBucket %s: %v", n, err)
		}
	}
	wantErr(t, "CreateBucket twice", s.CreateBucket(ctx, "alpha", "own-alpha"), store.ErrBucketExists)
	bs, err = s.ListBuckets(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, b := range bs {
		names = append(names, b.Name)
	}
	if strings.Join(names, ",") != "alpha,mid.dle-1,zeta" {
		t.Fatalf("ListBuckets = %v, want alpha,mid.dle-1,zeta (sorted)", names)
	}
	bi, err := s.StatBucket(ctx, "zeta")
	if err != nil {
		t.Fatal(err)
	}
	if bi.Name != "zeta" || bi.Owner != "own-zeta" {
		t.Fatalf("StatBucket = %+v, want name zeta owner own-zeta", bi)
	}
	if bi.Created.Before(before) || bi.Created.After(time.Now().Add(2*time.Second)) {
		t.Fatalf("StatBucket created %v, not around now", bi.Created)
	}
	_, err = s.StatBucket(ctx, "nope")
	wantErr(t, "StatBucket missing", err, store.ErrNoSuchBucket)

	put(t, s, ctx, "zeta", "k/deep/x", []byte("x"))
	wantErr(t, "DeleteBucket non-empty", s.DeleteBucket(ctx, "zeta"), store.ErrBucketNotEmpty)
	if err := s.Delete(ctx, "zeta", "k/deep/x"); err != nil {
		t.Fatal(err)
	}
	if mp, ok := s.(store.Multiparter); ok {
		// In-progress uploads do not keep a bucket (S3 deletes it; the uploads go).
		if _, err := mp.CreateMultipart(ctx, "zeta", "pending", store.ObjectMeta{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.DeleteBucket(ctx, "zeta"); err != nil {
		t.Fatalf("DeleteBucket emptied bucket: %v", err)
	}
	_, err = s.StatBucket(ctx, "zeta")
	wantErr(t, "StatBucket deleted", err, store.ErrNoSuchBucket)
	wantErr(t, "DeleteBucket deleted", s.DeleteBucket(ctx, "zeta"), store.ErrNoSuchBucket)
	if err := s.CreateBucket(ctx, "zeta", "other"); err != nil {
		t.Fatalf("re-creating a deleted bucket: %v", err)
	}
	if mp, ok := s.(store.Multiparter); ok {
		ups, err := mp.ListMultipartUploads(ctx, "zeta", "")
		if err != nil || len(ups) != 0 {
			t.Fatalf("re-created bucket has uploads %v, %v; want none", ups, err)
		}
	}
	bi, err = s.StatBucket(ctx, "zeta")
	if err != nil || bi.Owner != "other" {
		t.Fatalf("re-created bucket = %+v, %v; want owner other", bi, err)
	}
	res, err := s.List(ctx, "zeta", store.ListOptions{})
	if err != nil || len(res.Objects) != 0 {
		t.Fatalf("re-created bucket lists %v, %v; want empty", res.Objects, err)
	}
}

func testBucketNames(t *testing.T, newStore func(*testing.T) store.Store) {
	s := newStore(t)
	ctx := ctxT(t)
	bad := []string{"", "ab", strings.Repeat("a", 64), "Upper", "under_score", "-lead", "trail-", ".dot", "dot.",
		"a..b", "192.168.1.1", "has space", "a/b", "..", "sl/ash", "bad\x00nul", "émoji"}
	for _, n := range bad {
		wantErr(t, "CreateBucket "+n, s.CreateBucket(ctx, n, "o"), store.ErrInvalidBucketName)
	}
	good := []string{"abc", strings.Repeat("b", 63), "a-b.c-d", "123", "1.2.3", "x1-2"}
	for _, n := range good {
		if err := s.CreateBucket(ctx, n, "o"); err != nil {
			t.Fatalf("CreateBucket %q: %v", n, err)
		}
	}
	bs, err := s.ListBuckets(ctx)
	if err != nil || len(bs) != len(good) {
		t.Fatalf("ListBuckets = %d buckets, %v; want %d", len(bs), err, len(good))
	}
}
