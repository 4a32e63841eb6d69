package posix_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tristore/tristore/store"
	"github.com/tristore/tristore/store/posix"
)

// TestDirFsyncGroupCommit: N PUTs renaming into one directory at once share
// its fsyncs (fewer than N, counted through the committer's hooks, not by
// timing), and every PUT still returns only after an fsync of the directory
// that began after its rename and ended before the PUT returned.
//
// The first fsync is held until all N PUTs have asked for one, so the other
// N-1 must be served by a later round: with one fsync per call there would
// be N.
func TestDirFsyncGroupCommit(t *testing.T) { dirGroupCommit(t, false) }

// TestDirFsyncGroupCommitDelete: the same for N Deletes in one directory
// (their unlinks' fsyncs go through the same committer; with one fsync per
// Delete, as before, there are N).
func TestDirFsyncGroupCommitDelete(t *testing.T) { dirGroupCommit(t, true) }

func dirGroupCommit(t *testing.T, del bool) {
	const n = 16
	ctx := context.Background()
	b := open(t, posix.Options{})
	if err := b.CreateBucket(ctx, "bkt", ""); err != nil {
		t.Fatal(err)
	}
	// The directory exists before the concurrent PUTs: each then makes one
	// rename into it and asks for one fsync of it. (It stays: warm is not
	// deleted, so no Delete removes it as an empty parent.)
	if _, err := b.Put(ctx, "bkt", "d/warm", strings.NewReader("x"), 1, store.ObjectMeta{}); err != nil {
		t.Fatal(err)
	}
	if del {
		for i := range n {
			key := fmt.Sprintf("k%02d", i)
			if _, err := b.Put(ctx, "bkt", "d/"+key, strings.NewReader(key), int64(len(key)), store.ObjectMeta{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	dir := filepath.Join(b.Root(), "bkt", "d")

	// The event log: one sequence for renames, fsync starts and ends, and
	// PUT returns.
	var mu sync.Mutex
	seq := 0
	renamed := map[string]int{} // key -> seq after its rename
	returned := map[string]int{}
	type span struct{ start, end int }
	var fsyncs []span
	running := 0 // fsyncs under way
	joins := 0
	allJoined := make(chan struct{})
	release := make(chan struct{})
	first := true

	changedHook := func(target string) {
		mu.Lock()
		defer mu.Unlock()
		seq++
		renamed[filepath.Base(target)] = seq
	}
	if del {
		posix.SetHookAfterUnlink(changedHook)
	} else {
		posix.SetHookAfterRename(changedHook)
	}
	posix.SetDirSyncHooks(func(d string) { // join, under the committer's lock
		if d != dir {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if joins++; joins == n {
			close(allJoined)
		}
	}, func(d string) func() { // start
		if d != dir {
			return nil
		}
		// The span starts here, before the hold: a held fsync stands for a
		// slow one under way while the others rename and ask.
		mu.Lock()
		hold := first
		first = false
		if running > 0 {
			t.Errorf("two fsyncs of %s at once", d)
		}
		running++
		seq++
		fsyncs = append(fsyncs, span{start: seq})
		i := len(fsyncs) - 1
		mu.Unlock()
		if hold {
			select {
			case <-allJoined:
			case <-time.After(20 * time.Second):
				t.Error("not all PUTs/Deletes asked for a directory fsync within 20 s")
			}
			<-release
		}
		return func() {
			mu.Lock()
			defer mu.Unlock()
			running--
			seq++
			fsyncs[i].end = seq
		}
	})
	t.Cleanup(func() {
		posix.SetHookAfterRename(nil)
		posix.SetHookAfterUnlink(nil)
		posix.SetDirSyncHooks(nil, nil)
	})

	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := fmt.Sprintf("k%02d", i)
			var err error
			if del {
				err = b.Delete(ctx, "bkt", "d/"+key)
			} else {
				_, err = b.Put(ctx, "bkt", "d/"+key, strings.NewReader(key), int64(len(key)), store.ObjectMeta{})
			}
			mu.Lock()
			seq++
			returned[key] = seq
			mu.Unlock()
			if err != nil {
				errs <- err
			}
		}()
	}
	go func() {
		// Let the held fsync go once everyone asked (or the wait timed out).
		select {
		case <-allJoined:
		case <-time.After(20 * time.Second):
		}
		close(release)
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	mu.Lock()
	defer mu.Unlock()
	if len(fsyncs) >= n {
		t.Errorf("%d PUTs/Deletes (delete=%v) in one directory made %d fsyncs of it, want fewer", n, del, len(fsyncs))
	}
	t.Logf("%d ops (delete=%v), %d directory fsyncs", n, del, len(fsyncs))
	for i := range n {
		key := fmt.Sprintf("k%02d", i)
		r, ok := renamed[key]
		if !ok {
			t.Errorf("%s: no rename seen", key)
			continue
		}
		covered := false
		for _, f := range fsyncs {
			if f.start > r && f.end > 0 && f.end < returned[key] {
				covered = true
			}
		}
		if !covered {
			t.Errorf("%s (renamed at %d, returned at %d): no fsync began after its rename and ended before it returned (fsyncs %v)", key, r, returned[key], fsyncs)
		}
	}
}
