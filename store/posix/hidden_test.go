package posix_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/tristore/tristore/store"
	"github.com/tristore/tristore/store/posix"
)

// TestHiddenLayout: plain keys are plain files; the others live under
// <bucket>/.tristore-hidden/keys/ with bounded (64-byte) names, survive a
// reopen, and a leftover temp file there is removed at start and never
// listed.
func TestHiddenLayout(t *testing.T) {
	root := t.TempDir()
	b, err := posix.Open(root, posix.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	b.CreateBucket(ctx, "bkt", "")
	long := strings.Repeat("/", store.MaxKeyLen)
	for _, k := range []string{"p/q", "a//b", long, "p/q/r"} {
		putS(t, b, k, "v "+k)
	}
	if d, err := os.ReadFile(filepath.Join(root, "bkt", "p", "q")); err != nil || string(d) != "v p/q" {
		t.Fatalf("plain key p/q is not its file: %q %v", d, err)
	}
	hdir := filepath.Join(root, "bkt", ".tristore-hidden", "keys")
	ents, err := os.ReadDir(hdir)
	if err != nil || len(ents) != 3 {
		t.Fatalf("hidden area holds %v, %v; want a//b, the 1024-byte key and p/q/r", ents, err)
	}
	for _, e := range ents {
		if len(e.Name()) != 64 {
			t.Fatalf("hidden name %q is not a 64-hex-digit hash", e.Name())
		}
	}
	b.Close()
	junk := filepath.Join(hdir, ".tristore-tmp-0badc0de")
	os.WriteFile(junk, []byte("half a PUT"), 0o644)
	b2, err := posix.Open(root, posix.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()
	waitCleanup(t, b2)
	if _, err := os.Stat(junk); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("temp file in the hidden area survived Open: %v", err)
	}
	if got := strings.Join(listKeys(t, b2, store.ListOptions{}), ","); got != long+",a//b,p/q,p/q/r" {
		t.Fatalf("after reopen List = %q", got)
	}
	for _, k := range []string{"a//b", long, "p/q/r"} {
		if got, _ := readAll(t, b2, k); got != "v "+k {
			t.Fatalf("after reopen %q reads %q", k[:min(len(k), 20)], got)
		}
	}
}

// TestHiddenIndexSeesOtherProcess: a second store opened on the same tree
// (another process, e.g. `tristore volume` next to a server) adds and
// removes hidden keys; the first one's listings follow at once.
func TestHiddenIndexSeesOtherProcess(t *testing.T) {
	root := t.TempDir()
	b1, err := posix.Open(root, posix.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b1.Close()
	ctx := context.Background()
	b1.CreateBucket(ctx, "bkt", "")
	putS(t, b1, "a//1", "1")
	if got := strings.Join(listKeys(t, b1, store.ListOptions{}), ","); got != "a//1" {
		t.Fatalf("List = %q", got)
	}
	b2, err := posix.Open(root, posix.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()
	for i, step := range []struct {
		put, del, want string
	}{
		{put: "a//2", want: "a//1,a//2"},
		{del: "a//1", want: "a//2"},
		{put: "/x", want: "/x,a//2"},
	} {
		if step.put != "" {
			putS(t, b2, step.put, "v")
		} else if err := b2.Delete(ctx, "bkt", step.del); err != nil {
			t.Fatal(err)
		}
		if got := strings.Join(listKeys(t, b1, store.ListOptions{}), ","); got != step.want {
			t.Fatalf("step %d: the first store lists %q, want %q", i, got, step.want)
		}
	}
}

// TestOddKeysConcurrent: writers of a key and of keys under it race (so
// the shape of a path changes between the choice of plain or hidden and
// the rename); afterwards every key reads as its last write and is listed
// exactly once.
func TestOddKeysConcurrent(t *testing.T) {
	b, ctx := newBucket(t, posix.Options{})
	keys := []string{"r", "r/c", "r/c/d", "r/", "r//e", "s", "s/t"}
	var wg sync.WaitGroup
	errs := make(chan error, len(keys))
	for _, k := range keys {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 30 {
				v := fmt.Sprintf("%s#%d", k, i)
				if _, err := b.Put(ctx, "bkt", k, strings.NewReader(v), int64(len(v)), store.ObjectMeta{}); err != nil {
					errs <- fmt.Errorf("Put %s: %w", k, err)
					return
				}
				if i%10 == 9 && k != "r" {
					if err := b.Delete(ctx, "bkt", k); err != nil {
						errs <- fmt.Errorf("Delete %s: %w", k, err)
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if got := strings.Join(listKeys(t, b, store.ListOptions{}), ","); got != "r" {
		t.Fatalf("List = %q, want only r (all others were deleted last)", got)
	}
	if got, _ := readAll(t, b, "r"); got != "r#29" {
		t.Fatalf("r reads %q", got)
	}
	// Now write them all once more and read each back.
	for _, k := range keys {
		putS(t, b, k, "final "+k)
	}
	for _, k := range keys {
		if got, _ := readAll(t, b, k); got != "final "+k {
			t.Fatalf("%s reads %q", k, got)
		}
	}
	sorted := append([]string(nil), keys...)
	sort.Strings(sorted)
	if got := strings.Join(listKeys(t, b, store.ListOptions{}), ","); got != strings.Join(sorted, ",") {
		t.Fatalf("List = %q, want %q", got, sorted)
	}
}

// TestPlainFileWinsOverHiddenCopy: S3 stored "m" aside (m/ held other
// keys); then another view empties m/ and makes the file m. From then on
// the file is the object: GET reads it, List shows m once, DELETE removes
// both, and the old hidden copy never comes back.
func TestPlainFileWinsOverHiddenCopy(t *testing.T) {
	b, ctx := newBucket(t, posix.Options{})
	putS(t, b, "m/c", "child")
	putS(t, b, "m", "hidden m")
	dir := filepath.Join(b.Root(), "bkt", "m")
	os.Remove(filepath.Join(dir, "c"))
	os.Remove(dir)
	os.WriteFile(dir, []byte("made over NFS"), 0o644)
	if got, _ := readAll(t, b, "m"); got != "made over NFS" {
		t.Fatalf("m reads %q, want the plain file", got)
	}
	for _, opts := range []store.ListOptions{{}, {Delimiter: "/"}, {Prefix: "m"}, {Limit: 1}} {
		if got := strings.Join(listKeys(t, b, opts), ","); got != "m" {
			t.Fatalf("List %+v = %q, want m once", opts, got)
		}
	}
	if err := b.Delete(ctx, "bkt", "m"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Stat(ctx, "bkt", "m"); !errors.Is(err, store.ErrNoSuchKey) {
		t.Fatalf("after Delete Stat m = %v, want ErrNoSuchKey (no hidden copy left)", err)
	}
	if err := b.DeleteBucket(ctx, "bkt"); err != nil {
		t.Fatalf("DeleteBucket: %v", err)
	}
}

// TestPutWhenPathBecomesPrefix: the key's path is free when a PUT starts
// and holds a directory of other keys (made meanwhile by another writer)
// when the PUT renames its finished temp file: the object is then kept in
// the hidden area, and both it and the other keys read back.
func TestPutWhenPathBecomesPrefix(t *testing.T) {
	for _, opts := range []posix.Options{{}, {NoXattr: true}} {
		putWhenPathBecomesPrefix(t, opts)
	}
}

func putWhenPathBecomesPrefix(t *testing.T, opts posix.Options) {
	b, ctx := newBucket(t, opts)
	for _, mode := range []string{"put", "ifabsent"} {
		key := "race-" + mode
		other := filepath.Join(b.Root(), "bkt", key, "child")
		posix.SetHookBeforeRename(func(target string) {
			if strings.HasSuffix(target, "/"+key) {
				os.MkdirAll(filepath.Dir(other), 0o755)
				os.WriteFile(other, []byte("child"), 0o644)
			}
		})
		var err error
		if mode == "put" {
			_, err = b.Put(ctx, "bkt", key, strings.NewReader("mine"), 4, store.ObjectMeta{})
		} else {
			_, err = b.PutIfAbsent(ctx, "bkt", key, strings.NewReader("mine"), 4, store.ObjectMeta{})
		}
		posix.SetHookBeforeRename(nil)
		if err != nil {
			t.Fatalf("%s: Put whose path became a directory: %v", mode, err)
		}
		if got, _ := readAll(t, b, key); got != "mine" {
			t.Fatalf("%s: %s reads %q", mode, key, got)
		}
		if got, _ := readAll(t, b, key+"/child"); got != "child" {
			t.Fatalf("%s: %s/child reads %q", mode, key, got)
		}
		if got := strings.Join(listKeys(t, b, store.ListOptions{Prefix: key}), ","); got != key+","+key+"/child" {
			t.Fatalf("%s: List = %q", mode, got)
		}
	}
}
