package posix_test

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tristore/tristore/store"
	"github.com/tristore/tristore/store/posix"
)

// TestListMetaStaysCurrent: listings keep the records they read
// (listmeta.go) and use one again while the file's change time, size and
// mtime are unchanged. After changes made in the tree as NFS makes them
// (content rewritten in place at the same size, rewritten at another size,
// replaced by a rename, mtime set) and through the store (Put over a key,
// UpdateMeta of user metadata and tags only), the next page, asked for at
// once, shows for every key what Stat shows: size, ETag, mtime, user
// metadata and tags -- in a watched directory and in a small one kept by
// its stamp. Without the check of the change time the UpdateMeta changes
// are listed stale.
func TestListMetaStaysCurrent(t *testing.T) {
	for _, watched := range []bool{true, false} {
		t.Run(fmt.Sprintf("watched=%v", watched), func(t *testing.T) {
			if watched {
				defer posix.SetWatchMinDirSize(posix.SetWatchMinDirSize(0))
			}
			testListMetaStaysCurrent(t)
		})
	}
}

func testListMetaStaysCurrent(t *testing.T) {
	b, ctx := newBucket(t, posix.Options{})
	dir := filepath.Join(b.Root(), "bkt", "m")
	const n = 150
	key := func(i int) string { return fmt.Sprintf("m/k%04d", i) }
	for i := range n {
		if _, err := b.Put(ctx, "bkt", key(i), strings.NewReader(fmt.Sprintf("v0-%d", i)), int64(len(fmt.Sprintf("v0-%d", i))),
			store.ObjectMeta{ContentType: "text/plain", UserMeta: map[string]string{"gen": "0"}}); err != nil {
			t.Fatal(err)
		}
	}
	list := func() []store.ObjectInfo {
		t.Helper()
		var all []store.ObjectInfo
		opts := store.ListOptions{Prefix: "m/", Limit: 64}
		for range 10 {
			res, err := b.List(ctx, "bkt", opts)
			if err != nil {
				t.Fatal(err)
			}
			all = append(all, res.Objects...)
			if !res.IsTruncated {
				break
			}
			opts.After = res.NextAfter
		}
		return all
	}
	check := func(step int) {
		t.Helper()
		got := list()
		if len(got) != n {
			t.Fatalf("step %d: %d keys listed, want %d", step, len(got), n)
		}
		for _, o := range got {
			want, err := b.Stat(ctx, "bkt", o.Key)
			if err != nil {
				t.Fatal(err)
			}
			if o.Size != want.Size || o.ETag != want.ETag || !o.ModTime.Equal(want.ModTime) ||
				!maps.Equal(o.Meta.UserMeta, want.Meta.UserMeta) || !maps.Equal(o.Meta.Tags, want.Meta.Tags) {
				t.Fatalf("step %d, %s: listed size %d etag %s mtime %v meta %v tags %v;\nStat says size %d etag %s mtime %v meta %v tags %v",
					step, o.Key, o.Size, o.ETag, o.ModTime, o.Meta.UserMeta, o.Meta.Tags, want.Size, want.ETag, want.ModTime, want.Meta.UserMeta, want.Meta.Tags)
			}
		}
	}
	// Older than the settle time (50 ms), so the records are kept.
	time.Sleep(120 * time.Millisecond)
	check(0)
	if b.ListRecordsCached() < n {
		t.Fatalf("%d records kept after listing %d settled keys", b.ListRecordsCached(), n)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for step := 1; step <= 25; step++ {
		for range 1 + rng.IntN(6) {
			i := rng.IntN(n)
			k := key(i)
			p := filepath.Join(dir, filepath.Base(k))
			data := fmt.Sprintf("v%d-%d", step, i)
			switch rng.IntN(6) {
			case 0: // rewritten in place over NFS, same size, no truncate
				f, err := os.OpenFile(p, os.O_WRONLY, 0)
				if err != nil {
					t.Fatal(err)
				}
				st, _ := f.Stat()
				buf := make([]byte, st.Size())
				for j := range buf {
					buf[j] = byte('a' + rng.IntN(26))
				}
				if _, err := f.WriteAt(buf, 0); err != nil {
					t.Fatal(err)
				}
				f.Close()
			case 1: // rewritten over NFS at another size
				if err := os.WriteFile(p, []byte(data+strings.Repeat("+", rng.IntN(9))), 0o644); err != nil {
					t.Fatal(err)
				}
			case 2: // replaced by a rename (a new inode without a record)
				tmp := p + ".tmp"
				if err := os.WriteFile(tmp, []byte(data+"-renamed"), 0o644); err != nil {
					t.Fatal(err)
				}
				if err := os.Rename(tmp, p); err != nil {
					t.Fatal(err)
				}
			case 3: // mtime set, content unchanged
				mt := time.Unix(1_700_000_000+int64(rng.IntN(1_000_000)), 0)
				if err := os.Chtimes(p, mt, mt); err != nil {
					t.Fatal(err)
				}
			case 4: // Put over the key
				if _, err := b.Put(ctx, "bkt", k, strings.NewReader(data), int64(len(data)),
					store.ObjectMeta{ContentType: "text/plain", UserMeta: map[string]string{"gen": fmt.Sprint(step)}}); err != nil {
					t.Fatal(err)
				}
			case 5: // metadata only: the content, size and mtime stay
				oi, err := b.Stat(ctx, "bkt", k)
				if err != nil {
					t.Fatal(err)
				}
				m := oi.Meta
				m.UserMeta = map[string]string{"gen": fmt.Sprint(step), "meta": "only"}
				m.Tags = map[string]string{"step": fmt.Sprint(step)}
				if _, err := b.UpdateMeta(ctx, "bkt", k, m); err != nil {
					t.Fatal(err)
				}
			}
		}
		check(step)
		if step%5 == 0 {
			time.Sleep(120 * time.Millisecond) // let the changed files settle, so their records are kept again
		}
	}
}
