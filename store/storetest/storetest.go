// Package storetest is the conformance suite every store.Store backend runs:
//
//	func TestConformance(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) store.Store { ... a fresh, empty store ... })
//	}
//
// It checks every method and sentinel error of store.Store, the optional
// interfaces a backend implements (groups for missing ones are skipped), S3
// listing order and paging against a reference model, invalid names, and
// that concurrent writers of one key never expose a partial object.
package storetest

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/tristore/tristore/store"
)

// Run runs the whole suite; newStore must return a fresh, empty store and
// arrange its cleanup with t.Cleanup.
func Run(t *testing.T, newStore func(t *testing.T) store.Store) {
	groups := []struct {
		name string
		fn   func(*testing.T, func(*testing.T) store.Store)
	}{
		{"Buckets", testBuckets},
		{"BucketNames", testBucketNames},
		{"PutGet", testPutGet},
		{"Ranges", testRanges},
		{"Overwrite", testOverwrite},
		{"Missing", testMissing},
		{"IncompleteBody", testIncompleteBody},
		{"InvalidKeys", testInvalidKeys},
		{"ValidKeys", testValidKeys},
		{"KeyConflict", testKeyConflict},
		{"OddKeys", testOddKeys},
		{"OddKeyShapes", testOddKeyShapes},
		{"DirMarker", testDirMarker},
		{"DeleteCleansPrefixes", testDeleteCleansPrefixes},
		{"ConcurrentPuts", testConcurrentPuts},
		{"ListDuringChurn", testListDuringChurn},
		{"ListOrder", testListOrder},
		{"ListModel", testListModel},
		{"ListEdges", testListEdges},
		{"MetaUpdater", testMetaUpdater},
		{"BucketConfig", testBucketConfig},
		{"Multipart", testMultipart},
		{"MultipartErrors", testMultipartErrors},
		{"PartChecksums", testPartChecksums},
		{"Filer", testFiler},
		{"ExclusivePut", testExclusivePut},
		{"ExclusiveComplete", testExclusiveComplete},
		{"Versions", testVersions},
		{"VersionList", testVersionList},
	}
	for _, g := range groups {
		t.Run(g.name, func(t *testing.T) { g.fn(t, newStore) })
	}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func md5hex(b []byte) string {
	s := md5.Sum(b)
	return hex.EncodeToString(s[:])
}

// withBucket returns a fresh store with bucket "bkt" created.
func withBucket(t *testing.T, newStore func(*testing.T) store.Store) (store.Store, context.Context) {
	t.Helper()
	s := newStore(t)
	ctx := ctxT(t)
	if err := s.CreateBucket(ctx, "bkt", "owner1"); err != nil {
		t.Fatalf("CreateBucket: %v", err)
	}
	return s, ctx
}

func put(t *testing.T, s store.Store, ctx context.Context, bucket, key string, data []byte) store.ObjectInfo {
	t.Helper()
	oi, err := s.Put(ctx, bucket, key, bytes.NewReader(data), int64(len(data)), store.ObjectMeta{ContentType: "application/x-test"})
	if err != nil {
		t.Fatalf("Put %s/%s: %v", bucket, key, err)
	}
	return oi
}

func get(t *testing.T, s store.Store, ctx context.Context, bucket, key string, off, n int64) ([]byte, store.ObjectInfo) {
	t.Helper()
	rc, oi, err := s.Get(ctx, bucket, key, off, n)
	if err != nil {
		t.Fatalf("Get %s/%s [%d,%d]: %v", bucket, key, off, n, err)
	}
	defer rc.Close()
	data, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("reading %s/%s: %v", bucket, key, err)
	}
	return data, oi
}

func wantErr(t *testing.T, what string, err, want error) {
	t.Helper()
	if !errors.Is(err, want) {
		t.Fatalf("%s: got error %v, want %v", what, err, want)
	}
}

// pattern returns n deterministic bytes derived from seed.
func pattern(seed, n int) []byte {
	b := make([]byte, n)
	x := uint32(seed)*2654435761 + 1
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}
