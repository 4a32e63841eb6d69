package posix_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tristore/tristore/internal/testutil"
	"github.com/tristore/tristore/store"
	"github.com/tristore/tristore/store/posix"
)

// Tests of behaviour specific to the directory-tree backend: on-disk
// layout, start-up cleanup, files made by other views, symlinks and FIFOs
// made over NFS, the sidecar fallback and a full disk.

func md5hex(b []byte) string {
	s := md5.Sum(b)
	return hex.EncodeToString(s[:])
}

func newBucket(t *testing.T, opts posix.Options) (*posix.Backend, context.Context) {
	t.Helper()
	b := open(t, opts)
	ctx := context.Background()
	if err := b.CreateBucket(ctx, "bkt", "me"); err != nil {
		t.Fatal(err)
	}
	return b, ctx
}

func putS(t *testing.T, b *posix.Backend, key, data string) {
	t.Helper()
	if _, err := b.Put(context.Background(), "bkt", key, strings.NewReader(data), int64(len(data)), store.ObjectMeta{ContentType: "text/plain"}); err != nil {
		t.Fatalf("Put %s: %v", key, err)
	}
}

func readAll(t *testing.T, b *posix.Backend, key string) (string, store.ObjectInfo) {
	t.Helper()
	rc, oi, err := b.Get(context.Background(), "bkt", key, 0, -1)
	if err != nil {
		t.Fatalf("Get %s: %v", key, err)
	}
	defer rc.Close()
	d, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return string(d), oi
}

func listKeys(t *testing.T, b *posix.Backend, opts store.ListOptions) []string {
	t.Helper()
	res, err := b.List(context.Background(), "bkt", opts)
	if err != nil {
		t.Fatal(err)
	}
	var ks []string
	for _, o := range res.Objects {
		ks = append(ks, o.Key)
	}
	return append(ks, res.CommonPrefixes...)
}

func TestOnDiskLayout(t *testing.T) {
	b, _ := newBucket(t, posix.Options{})
	putS(t, b, "a/b/c.txt", "hello")
	putS(t, b, "dir/", "")
	data, err := os.ReadFile(filepath.Join(b.Root(), "bkt", "a", "b", "c.txt"))
	if err != nil || string(data) != "hello" {
		t.Fatalf("object file: %q, %v", data, err)
	}
	if fi, err := os.Stat(filepath.Join(b.Root(), "bkt", "dir", ".tristore-dir")); err != nil || !fi.Mode().IsRegular() {
		t.Fatalf("marker object file: %v", err)
	}
	testutil.NeedXattr(t, b.Root())
	buf := make([]byte, 4096)
	n, err := unix.Getxattr(filepath.Join(b.Root(), "bkt", "a", "b", "c.txt"), "user.tristore.meta", buf)
	if err != nil {
		t.Fatalf("the store set no metadata xattr on a file system that has xattrs: %v", err)
	}
	if !bytes.Contains(buf[:n], []byte(md5hex([]byte("hello")))) || !bytes.Contains(buf[:n], []byte("text/plain")) {
		t.Fatalf("xattr lacks ETag/content type: %s", buf[:n])
	}
}

func TestCleanupAtOpen(t *testing.T) {
	root := t.TempDir()
	b, err := posix.Open(root, posix.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	b.CreateBucket(ctx, "bkt", "me")
	putS(t, b, "x/y", "keep")
	mp := store.Multiparter(b)
	id, err := mp.CreateMultipart(ctx, "bkt", "up", store.ObjectMeta{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := mp.PutPart(ctx, "bkt", "up", id, 1, strings.NewReader("part"), 4); err != nil {
		t.Fatal(err)
	}
	b.Close()
	leftovers := []string{
		filepath.Join(root, "bkt", ".tristore-tmp-deadbeef"),
		filepath.Join(root, "bkt", "x", ".tristore-tmp-0123"),
		filepath.Join(root, ".tristore", "multipart", id, ".tristore-tmp-77"),
		filepath.Join(root, ".tristore", "tmp", "scratch"),
		filepath.Join(root, ".tristore", "meta", ".tristore-tmp-1"),
	}
	iamFile := filepath.Join(root, ".tristore", "iam", ".tristore-tmp-not-mine")
	os.MkdirAll(filepath.Dir(iamFile), 0o700)
	for _, p := range append(leftovers, iamFile) {
		if err := os.WriteFile(p, []byte("junk"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	orphan := filepath.Join(root, ".tristore", "multipart", strings.Repeat("ab", 16)) // no info.json
	os.MkdirAll(orphan, 0o755)
	leftovers = append(leftovers, orphan)
	b2, err := posix.Open(root, posix.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()
	waitCleanup(t, b2)
	for _, p := range leftovers {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("leftover %s still there (%v)", p, err)
		}
	}
	if _, err := os.Stat(iamFile); err != nil {
		t.Errorf("cleanup touched the iam directory: %v", err)
	}
	if got, _ := readAll(t, b2, "x/y"); got != "keep" {
		t.Fatalf("object lost: %q", got)
	}
	ps, _, err := b2.ListParts(ctx, "bkt", "up", id)
	if err != nil || len(ps) != 1 || ps[0].ETag != md5hex([]byte("part")) {
		t.Fatalf("upload did not survive reopening: %+v, %v", ps, err)
	}
	oi, err := b2.CompleteMultipart(ctx, "bkt", "up", id, []store.CompletePart{{Number: 1, ETag: ps[0].ETag}})
	if err != nil || oi.Size != 4 {
		t.Fatalf("Complete after reopen: %+v, %v", oi, err)
	}
}

func TestReservedNamesHidden(t *testing.T) {
	b, ctx := newBucket(t, posix.Options{})
	putS(t, b, "a", "1")
	root := b.Root()
	os.WriteFile(filepath.Join(root, "bkt", ".tristore-tmp-x"), []byte("t"), 0o644)
	os.WriteFile(filepath.Join(root, "bkt", ".tristore-other"), []byte("t"), 0o644)
	os.Mkdir(filepath.Join(root, "NotABucket"), 0o755)
	os.Mkdir(filepath.Join(root, "ab"), 0o755)
	os.WriteFile(filepath.Join(root, "file-at-top"), []byte("t"), 0o644)
	if ks := listKeys(t, b, store.ListOptions{}); strings.Join(ks, ",") != "a" {
		t.Fatalf("List shows %q, want only a", ks)
	}
	bs, err := b.ListBuckets(ctx)
	if err != nil || len(bs) != 1 || bs[0].Name != "bkt" {
		t.Fatalf("ListBuckets = %+v, %v; want only bkt", bs, err)
	}
	// Reserved entries do not keep a bucket from being deleted.
	if err := b.Delete(ctx, "bkt", "a"); err != nil {
		t.Fatal(err)
	}
	if err := b.DeleteBucket(ctx, "bkt"); err != nil {
		t.Fatalf("DeleteBucket with only reserved entries: %v", err)
	}
}

func TestForeignFiles(t *testing.T) {
	for _, nx := range []bool{false, true} {
		b, ctx := newBucket(t, posix.Options{NoXattr: nx})
		p := filepath.Join(b.Root(), "bkt", "nfs", "made.txt")
		os.MkdirAll(filepath.Dir(p), 0o755)
		os.WriteFile(p, []byte("written over nfs"), 0o644)
		oi, err := b.Stat(ctx, "bkt", "nfs/made.txt")
		if err != nil || oi.ETag != md5hex([]byte("written over nfs")) || oi.Meta.ContentType != "application/octet-stream" {
			t.Fatalf("foreign file Stat = %+v, %v", oi, err)
		}
		if ks := listKeys(t, b, store.ListOptions{}); strings.Join(ks, ",") != "nfs/made.txt" {
			t.Fatalf("List = %q", ks)
		}
		// Rewritten in place with the same size by another view: a new mtime
		// makes the ETag be recomputed, the content type is kept.
		putS(t, b, "obj", "AAAA")
		q := filepath.Join(b.Root(), "bkt", "obj")
		os.WriteFile(q, []byte("BBBB"), 0o644)
		future := time.Now().Add(time.Hour)
		os.Chtimes(q, future, future)
		got, oi := readAll(t, b, "obj")
		if got != "BBBB" || oi.ETag != md5hex([]byte("BBBB")) || oi.Meta.ContentType != "text/plain" {
			t.Fatalf("after foreign rewrite: %q %+v", got, oi)
		}
		// Replaced by a different file (rename over it): the old metadata
		// does not apply to the new inode in sidecar mode, and in xattr mode
		// the new file simply has none.
		tmp := filepath.Join(b.Root(), "bkt", "other")
		os.WriteFile(tmp, []byte("CCCC"), 0o644)
		os.Chtimes(tmp, future, future) // same size and mtime as the old version
		os.Rename(tmp, q)
		oi, err = b.Stat(ctx, "bkt", "obj")
		if err != nil || oi.ETag != md5hex([]byte("CCCC")) || oi.Meta.ContentType != "application/octet-stream" {
			t.Fatalf("after foreign replace (noxattr=%v): %+v, %v", nx, oi, err)
		}
	}
}

func TestSymlinksAndFIFOsNotFollowed(t *testing.T) {
	b, ctx := newBucket(t, posix.Options{})
	outside := t.TempDir()
	secret := filepath.Join(outside, "secret")
	os.WriteFile(secret, []byte("secret"), 0o644)
	root := filepath.Join(b.Root(), "bkt")
	os.Symlink(secret, filepath.Join(root, "filelink"))
	os.Symlink(outside, filepath.Join(root, "dirlink"))
	if err := syscall.Mkfifo(filepath.Join(root, "fifo"), 0o644); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for _, k := range []string{"filelink", "dirlink/secret", "fifo"} {
			if _, _, err := b.Get(ctx, "bkt", k, 0, -1); !errors.Is(err, store.ErrNoSuchKey) {
				t.Errorf("Get %s = %v, want ErrNoSuchKey", k, err)
			}
			if _, err := b.Stat(ctx, "bkt", k); !errors.Is(err, store.ErrNoSuchKey) {
				t.Errorf("Stat %s = %v, want ErrNoSuchKey", k, err)
			}
			if err := b.Delete(ctx, "bkt", k); !errors.Is(err, store.ErrNoSuchKey) {
				t.Errorf("Delete %s = %v, want ErrNoSuchKey", k, err)
			}
			if _, err := b.OpenFile(ctx, "bkt", k, os.O_RDWR, 0); err == nil {
				t.Errorf("OpenFile %s succeeded", k)
			}
		}
		// The key's plain path goes through a symlink: it is kept in the
		// hidden area instead, never written through the link.
		if _, err := b.Put(ctx, "bkt", "dirlink/new", strings.NewReader("x"), 1, store.ObjectMeta{}); err != nil {
			t.Errorf("Put through a symlinked directory = %v, want it stored aside", err)
		}
		if _, err := b.OpenFile(ctx, "bkt", "dirlink/new2", os.O_RDWR|os.O_CREATE, 0o644); err == nil {
			t.Errorf("OpenFile O_CREATE through a symlinked directory succeeded")
		}
		if ks := listKeys(t, b, store.ListOptions{}); strings.Join(ks, ",") != "dirlink/new" {
			t.Errorf("List shows %q, want only dirlink/new", ks)
		}
		if ks := listKeys(t, b, store.ListOptions{Prefix: "dirlink/"}); strings.Join(ks, ",") != "dirlink/new" {
			t.Errorf("List inside a symlinked dir shows %q", ks)
		}
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		// Unblock a FIFO open so the goroutine can end, then fail.
		f, _ := os.OpenFile(filepath.Join(root, "fifo"), os.O_RDWR, 0)
		if f != nil {
			f.Close()
		}
		t.Fatal("an operation blocked on a FIFO")
	}
	if d, _ := os.ReadFile(secret); string(d) != "secret" {
		t.Fatal("file outside the tree changed")
	}
	if ents, _ := os.ReadDir(outside); len(ents) != 1 {
		t.Fatalf("files created outside the tree: %v", ents)
	}
}

func TestBigMetadataUsesSidecar(t *testing.T) {
	b, ctx := newBucket(t, posix.Options{})
	meta := store.ObjectMeta{ContentType: "x/y", UserMeta: map[string]string{"big": strings.Repeat("v", 16000)}}
	if _, err := b.Put(ctx, "bkt", "k", strings.NewReader("data"), 4, meta); err != nil {
		t.Fatal(err)
	}
	oi, err := b.Stat(ctx, "bkt", "k")
	if err != nil || oi.Meta.UserMeta["big"] != meta.UserMeta["big"] || oi.ETag != md5hex([]byte("data")) {
		t.Fatalf("big metadata lost: %v", err)
	}
	// Overwriting with small metadata must not resurrect the big one.
	putS(t, b, "k", "new")
	oi, _ = b.Stat(ctx, "bkt", "k")
	if oi.Meta.UserMeta["big"] != "" || oi.Meta.ContentType != "text/plain" {
		t.Fatalf("stale sidecar metadata applied: %+v", oi.Meta.ContentType)
	}
	if err := b.Delete(ctx, "bkt", "k"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(b.Root(), ".tristore", "meta", "bkt", "k.json")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("sidecar survived Delete: %v", err)
	}
}

func TestSidecarFollowsDelete(t *testing.T) {
	b, ctx := newBucket(t, posix.Options{NoXattr: true})
	putS(t, b, "p/q/r", "x")
	sc := filepath.Join(b.Root(), ".tristore", "meta", "bkt", "p", "q", "r.json")
	if _, err := os.Stat(sc); err != nil {
		t.Fatalf("sidecar missing: %v", err)
	}
	if err := b.Delete(ctx, "bkt", "p/q/r"); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(b.Root(), ".tristore", "meta", "bkt", "p")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("empty sidecar directories left: %v", err)
	}
	if _, err := os.Stat(filepath.Join(b.Root(), "bkt", "p")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("empty object directories left: %v", err)
	}
}

func TestGetReadsOneVersionAcrossOverwrite(t *testing.T) {
	b, ctx := newBucket(t, posix.Options{})
	old := strings.Repeat("old!", 100000)
	putS(t, b, "k", old)
	rc, oi, err := b.Get(ctx, "bkt", "k", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	putS(t, b, "k", "new")
	d, err := io.ReadAll(rc)
	if err != nil || string(d) != old || oi.ETag != md5hex([]byte(old)) {
		t.Fatalf("open reader switched versions (%d bytes, %v)", len(d), err)
	}
}

// TestPutDeleteRace: Deletes remove empty parents while Puts create them.
func TestPutDeleteRace(t *testing.T) {
	b, ctx := newBucket(t, posix.Options{})
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				key := "deep/a/b/" + string(rune('a'+w)) + string(rune('a'+i%3))
				if _, err := b.Put(ctx, "bkt", key, strings.NewReader("v"), 1, store.ObjectMeta{}); err != nil {
					errs <- err
					return
				}
				if err := b.Delete(ctx, "bkt", key); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if ks := listKeys(t, b, store.ListOptions{}); len(ks) != 0 {
		t.Fatalf("left %q", ks)
	}
	if _, err := os.Stat(filepath.Join(b.Root(), "bkt", "deep")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("empty directories left behind: %v", err)
	}
}

// TestNoSpace fills a small tmpfs: Put fails with ErrNoSpace, leaves no temp
// file and the old object intact, and the store keeps working.
func TestNoSpace(t *testing.T) {
	testutil.NeedRoot(t, "mounts a small tmpfs to fill it")
	mnt := t.TempDir()
	testutil.MountTmpfs(t, mnt, "1m", "tristore-nospace")
	b2, err := posix.Open(mnt, posix.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b2.Close()
	ctx := context.Background()
	if err := b2.CreateBucket(ctx, "bkt", "me"); err != nil {
		t.Fatal(err)
	}
	if _, err := b2.Put(ctx, "bkt", "k", strings.NewReader("old"), 3, store.ObjectMeta{}); err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte("x"), 4<<20)
	_, err = b2.Put(ctx, "bkt", "k", bytes.NewReader(big), int64(len(big)), store.ObjectMeta{})
	if !errors.Is(err, store.ErrNoSpace) {
		t.Fatalf("Put on a full disk = %v, want ErrNoSpace", err)
	}
	ents, _ := os.ReadDir(filepath.Join(mnt, "bkt"))
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), ".tristore-tmp-") {
			t.Fatalf("temp file %s left after ENOSPC", e.Name())
		}
	}
	rc, _, err := b2.Get(ctx, "bkt", "k", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	d, _ := io.ReadAll(rc)
	rc.Close()
	if string(d) != "old" {
		t.Fatalf("old object changed to %q", d)
	}
	if _, err := b2.Put(ctx, "bkt", "k2", strings.NewReader("fits"), 4, store.ObjectMeta{}); err != nil {
		t.Fatalf("small Put after ENOSPC: %v", err)
	}
}

func TestPunchHoleFreesBlocks(t *testing.T) {
	b, ctx := newBucket(t, posix.Options{})
	f, err := b.OpenFile(ctx, "bkt", "lun", os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.WriteAt(bytes.Repeat([]byte{1}, 1<<20), 0)
	f.Sync()
	p := filepath.Join(b.Root(), "bkt", "lun")
	var before, after unix.Stat_t
	unix.Stat(p, &before)
	if err := f.(store.HolePuncher).PunchHole(0, 1<<20); err != nil {
		t.Fatal(err)
	}
	unix.Stat(p, &after)
	if after.Size != 1<<20 || after.Blocks >= before.Blocks {
		t.Fatalf("punch hole: size %d blocks %d -> %d", after.Size, before.Blocks, after.Blocks)
	}
}

// TestSecondOpenKeepsLiveTempFiles: a second opener of a tree that is in
// use (e.g. `tristore volume create` next to a running server) must not
// remove the server's in-flight temp files; the first opener after the
// last one closed does.
func TestSecondOpenKeepsLiveTempFiles(t *testing.T) {
	root := t.TempDir()
	first, err := posix.Open(root, posix.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	first.CreateBucket(ctx, "bkt", "")
	waitCleanup(t, first) // its own start-up walk is over
	live := filepath.Join(root, "bkt", ".tristore-tmp-live")
	os.WriteFile(live, []byte("in flight"), 0o644)
	second, err := posix.Open(root, posix.Options{})
	if err != nil {
		t.Fatal(err)
	}
	waitCleanup(t, second) // closed at once: it shares the tree
	if _, err := os.Stat(live); err != nil {
		t.Fatalf("second Open removed a live temp file: %v", err)
	}
	if _, err := second.Put(ctx, "bkt", "k", strings.NewReader("x"), 1, store.ObjectMeta{}); err != nil {
		t.Fatal(err)
	}
	second.Close()
	first.Close()
	third, err := posix.Open(root, posix.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer third.Close()
	waitCleanup(t, third)
	if _, err := os.Stat(live); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("leftover temp file not removed once the tree was free: %v", err)
	}
}

// TestEmptyDirectoriesAreNoPrefixes: directories made over NFS without
// objects in them are not common prefixes (S3 has no empty prefixes).
func TestEmptyDirectoriesAreNoPrefixes(t *testing.T) {
	b, _ := newBucket(t, posix.Options{})
	root := filepath.Join(b.Root(), "bkt")
	os.MkdirAll(filepath.Join(root, "empty"), 0o755)
	os.MkdirAll(filepath.Join(root, "nested", "a", "b"), 0o755)
	os.MkdirAll(filepath.Join(root, "tmponly"), 0o755)
	os.WriteFile(filepath.Join(root, "tmponly", ".tristore-tmp-x"), nil, 0o644)
	os.MkdirAll(filepath.Join(root, "deep", "a", "b"), 0o755)
	os.MkdirAll(filepath.Join(root, "deep", "c"), 0o755)
	os.WriteFile(filepath.Join(root, "deep", "a", "b", "file"), []byte("x"), 0o644)
	putS(t, b, "marker/", "")
	if got := listKeys(t, b, store.ListOptions{Delimiter: "/"}); strings.Join(got, ",") != "deep/,marker/" {
		t.Fatalf("common prefixes %q, want deep/,marker/", got)
	}
	if got := listKeys(t, b, store.ListOptions{Prefix: "deep/", Delimiter: "/"}); strings.Join(got, ",") != "deep/a/" {
		t.Fatalf("common prefixes under deep/ %q, want deep/a/", got)
	}
	if got := listKeys(t, b, store.ListOptions{}); strings.Join(got, ",") != "deep/a/b/file,marker/" {
		t.Fatalf("keys %q", got)
	}
}
