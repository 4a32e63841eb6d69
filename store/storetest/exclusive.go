package storetest

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"sync"
	"testing"
	"time"

	"github.com/tristore/tristore/store"
)

// gatedReader blocks its first Read until gate is closed, so racing
// writers all get past any early existence check before one publishes:
// the race is then decided by the store's atomic publish alone.
type gatedReader struct {
	gate <-chan struct{}
	r    io.Reader
	once bool
}

func (g *gatedReader) Read(p []byte) (int, error) {
	if !g.once {
		g.once = true
		select {
		case <-g.gate:
		case <-time.After(30 * time.Second):
			return 0, errors.New("gate never opened")
		}
	}
	return g.r.Read(p)
}

func testExclusivePut(t *testing.T, newStore func(*testing.T) store.Store) {
	s, ctx := withBucket(t, newStore)
	ep, ok := s.(store.ExclusivePutter)
	if !ok {
		t.Skip("store does not implement store.ExclusivePutter")
	}
	first := pattern(31, 3000)
	oi, err := ep.PutIfAbsent(ctx, "bkt", "x/new", bytes.NewReader(first), int64(len(first)), store.ObjectMeta{ContentType: "text/one"})
	if err != nil {
		t.Fatalf("PutIfAbsent of a new key: %v", err)
	}
	if oi.ETag != md5hex(first) || oi.Size != int64(len(first)) {
		t.Fatalf("PutIfAbsent = %+v", oi)
	}
	second := pattern(32, 500)
	_, err = ep.PutIfAbsent(ctx, "bkt", "x/new", bytes.NewReader(second), int64(len(second)), store.ObjectMeta{ContentType: "text/two"})
	wantErr(t, "PutIfAbsent over an existing key", err, store.ErrPreconditionFailed)
	got, gi := get(t, s, ctx, "bkt", "x/new", 0, -1)
	if !bytes.Equal(got, first) || gi.ETag != md5hex(first) || gi.Meta.ContentType != "text/one" {
		t.Fatalf("losing PutIfAbsent changed the object: %d bytes, %+v", len(got), gi)
	}

	// A short body leaves the key absent, so a later PutIfAbsent wins.
	_, err = ep.PutIfAbsent(ctx, "bkt", "short", bytes.NewReader(second), int64(len(second))+10, store.ObjectMeta{})
	wantErr(t, "PutIfAbsent short body", err, store.ErrIncompleteBody)
	if _, err := s.Stat(ctx, "bkt", "short"); !errors.Is(err, store.ErrNoSuchKey) {
		t.Fatalf("after a short PutIfAbsent Stat = %v, want ErrNoSuchKey", err)
	}
	if _, err := ep.PutIfAbsent(ctx, "bkt", "short", bytes.NewReader(second), int64(len(second)), store.ObjectMeta{}); err != nil {
		t.Fatalf("PutIfAbsent after a short one: %v", err)
	}

	// Deleting makes the key absent again.
	if err := s.Delete(ctx, "bkt", "x/new"); err != nil {
		t.Fatal(err)
	}
	if _, err := ep.PutIfAbsent(ctx, "bkt", "x/new", bytes.NewReader(second), int64(len(second)), store.ObjectMeta{}); err != nil {
		t.Fatalf("PutIfAbsent after Delete: %v", err)
	}
	_, err = ep.PutIfAbsent(ctx, "nobucket", "k", bytes.NewReader(second), int64(len(second)), store.ObjectMeta{})
	wantErr(t, "PutIfAbsent missing bucket", err, store.ErrNoSuchBucket)
	// A key that is also a prefix of other keys is a key like any other.
	if _, err := ep.PutIfAbsent(ctx, "bkt", "x", bytes.NewReader(second), int64(len(second)), store.ObjectMeta{}); err != nil {
		t.Fatalf("PutIfAbsent of a prefix of other keys: %v", err)
	}
	_, err = ep.PutIfAbsent(ctx, "bkt", "x", bytes.NewReader(second), int64(len(second)), store.ObjectMeta{})
	wantErr(t, "PutIfAbsent again onto x", err, store.ErrPreconditionFailed)

	// Racing writers: exactly one wins per key, and the key holds its body.
	const writers, keys, size = 8, 4, 128 << 10
	for k := range keys {
		key := fmt.Sprintf("race/%d", k)
		gate := make(chan struct{})
		bodies := make([][]byte, writers)
		errs := make([]error, writers)
		infos := make([]store.ObjectInfo, writers)
		var wg sync.WaitGroup
		for w := range writers {
			bodies[w] = pattern(100+k*writers+w, size)
			wg.Add(1)
			go func() {
				defer wg.Done()
				r := &gatedReader{gate: gate, r: bytes.NewReader(bodies[w])}
				infos[w], errs[w] = ep.PutIfAbsent(ctx, "bkt", key, r, size, store.ObjectMeta{})
			}()
		}
		time.Sleep(50 * time.Millisecond) // let the writers reach the body
		close(gate)
		wg.Wait()
		winner := -1
		for w, err := range errs {
			switch {
			case err == nil:
				if winner >= 0 {
					t.Fatalf("%s: writers %d and %d both won", key, winner, w)
				}
				winner = w
			case !errors.Is(err, store.ErrPreconditionFailed):
				t.Fatalf("%s: writer %d: %v, want ErrPreconditionFailed", key, w, err)
			}
		}
		if winner < 0 {
			t.Fatalf("%s: no writer won", key)
		}
		got, gi := get(t, s, ctx, "bkt", key, 0, -1)
		if !bytes.Equal(got, bodies[winner]) || gi.ETag != md5hex(bodies[winner]) || infos[winner].ETag != gi.ETag {
			t.Fatalf("%s: stored object is not the winner's (%d bytes, ETag %s)", key, len(got), gi.ETag)
		}
	}
	res, err := s.List(ctx, "bkt", store.ListOptions{Prefix: "race/"})
	if err != nil || len(res.Objects) != keys {
		t.Fatalf("List race/ = %d objects, %v; want %d", len(res.Objects), err, keys)
	}
}

func testExclusiveComplete(t *testing.T, newStore func(*testing.T) store.Store) {
	s, ctx := withBucket(t, newStore)
	ec, ok := s.(store.ExclusiveCompleter)
	mp, ok2 := s.(store.Multiparter)
	if !ok || !ok2 {
		t.Skip("store does not implement store.ExclusiveCompleter and store.Multiparter")
	}
	old := put(t, s, ctx, "bkt", "mp", pattern(41, 100))
	id, err := mp.CreateMultipart(ctx, "bkt", "mp", store.ObjectMeta{})
	if err != nil {
		t.Fatal(err)
	}
	part := pattern(42, 1000)
	pi, err := mp.PutPart(ctx, "bkt", "mp", id, 1, bytes.NewReader(part), int64(len(part)))
	if err != nil {
		t.Fatal(err)
	}
	_, err = ec.CompleteMultipartIfAbsent(ctx, "bkt", "mp", id, []store.CompletePart{cp(1, pi.ETag)})
	wantErr(t, "CompleteMultipartIfAbsent over an existing key", err, store.ErrPreconditionFailed)
	if _, gi := get(t, s, ctx, "bkt", "mp", 0, -1); gi.ETag != old.ETag {
		t.Fatalf("losing complete changed the object: ETag %s, want %s", gi.ETag, old.ETag)
	}
	if _, _, err := mp.ListParts(ctx, "bkt", "mp", id); err != nil {
		t.Fatalf("upload gone after a failed conditional complete: %v", err)
	}
	if err := s.Delete(ctx, "bkt", "mp"); err != nil {
		t.Fatal(err)
	}
	oi, err := ec.CompleteMultipartIfAbsent(ctx, "bkt", "mp", id, []store.CompletePart{cp(1, pi.ETag)})
	if err != nil {
		t.Fatalf("CompleteMultipartIfAbsent of an absent key: %v", err)
	}
	if want := multipartETag(part); oi.ETag != want {
		t.Fatalf("ETag %s, want %s", oi.ETag, want)
	}
	if got, _ := get(t, s, ctx, "bkt", "mp", 0, -1); !bytes.Equal(got, part) {
		t.Fatal("completed object has the wrong content")
	}
}
