package vfs

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/tristore/tristore/store"
	"github.com/tristore/tristore/store/posix"
	"github.com/tristore/tristore/store/storetest"
)

// TestS3KeysSeenOverNFS: of a bucket holding every odd key shape, the
// NFS view (this package) shows exactly the keys that are plain paths,
// each as its file with its content, and never the store's hidden area
// (docs/nfs.md "Which S3 keys NFS shows").
func TestS3KeysSeenOverNFS(t *testing.T) {
	modes(t, func(t *testing.T, dir string, open func() *FS) {
		st, err := posix.Open(dir, posix.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer st.Close()
		ctx := context.Background()
		if err := st.CreateBucket(ctx, "bkt", ""); err != nil {
			t.Fatal(err)
		}
		body := func(k string) []byte { return []byte("body of " + k) }
		for _, k := range storetest.OddKeys {
			if _, err := st.Put(ctx, "bkt", k, bytes.NewReader(body(k)), int64(len(body(k))), store.ObjectMeta{}); err != nil {
				t.Fatalf("Put %q: %v", k, err)
			}
		}
		fs := open()
		bkt, _, _, err := fs.Lookup(root, fs.Root(), "bkt")
		if err != nil {
			t.Fatal(err)
		}
		var files []string
		var walk func(h Handle, path string, depth int)
		walk = func(h Handle, path string, depth int) {
			if depth > 10 {
				t.Fatalf("tree deeper than any plain key: %s", path)
			}
			ents, eof, _, err := fs.ReadDir(root, h, 0, 1000, true)
			if err != nil || !eof {
				t.Fatalf("ReadDir %s: %v eof=%v", path, err, eof)
			}
			for _, e := range ents {
				p := path + e.Name
				if e.Type == TypeDir {
					walk(e.Handle, p+"/", depth+1)
					continue
				}
				files = append(files, p)
				got := make([]byte, 100)
				n, _, _, err := fs.Read(root, e.Handle, 0, got)
				if err != nil || !bytes.Equal(got[:n], body(p)) {
					t.Fatalf("file %s reads %q, %v; want the object's body", p, got[:n], err)
				}
			}
		}
		walk(bkt, "", 0)
		sort.Strings(files)
		want := []string{"a-", "a.", "a/b", "a0", "d/child", "q/plain", "x"}
		if fmt.Sprint(files) != fmt.Sprint(want) {
			t.Fatalf("NFS shows files %q, want the plain keys %q", files, want)
		}
		for _, n := range []string{".tristore-hidden", ".tristore-dir"} {
			if _, _, _, err := fs.Lookup(root, bkt, n); !errors.Is(err, unix.ENOENT) {
				t.Fatalf("Lookup %s: %v, want ENOENT", n, err)
			}
		}
		if _, _, _, err := fs.Mkdir(root, bkt, ".tristore-hidden2", SetAttr{}); err == nil {
			t.Fatal("Mkdir of a reserved name succeeded")
		}
	})
}
