package nfspeers

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	nfsclient "github.com/tristore/tristore/client/nfs"
	"github.com/tristore/tristore/proto/nfs3"
	"github.com/tristore/tristore/store"
	"github.com/tristore/tristore/store/posix"
)

func md5hex(b []byte) string { s := md5.Sum(b); return hex.EncodeToString(s[:]) }

// TestCrossView: the object view (store API, which the S3 front end serves)
// and the NFS view of one data tree agree in both directions.
func TestCrossView(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir := t.TempDir()
	st, err := posix.Open(dir, posix.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if err := st.CreateBucket(ctx, "xview", ""); err != nil {
		t.Fatal(err)
	}
	port := startServer(t, st.Root(), "/=rw", "/xview=rw")
	c, err := nfsclient.Dial(ctx, fmt.Sprintf("127.0.0.1:%d", port), nfsclient.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Mount(ctx, "/xview"); err != nil {
		t.Fatal(err)
	}

	// 1. Object PUT -> NFS READ (nested key = nested path).
	obj := make([]byte, 1<<20+77)
	rand.Read(obj)
	if _, err := st.Put(ctx, "xview", "docs/a.bin", bytes.NewReader(obj), int64(len(obj)), store.ObjectMeta{}); err != nil {
		t.Fatal(err)
	}
	fh, attr, err := c.LookupPath(ctx, "docs/a.bin")
	if err != nil {
		t.Fatal(err)
	}
	if attr.Size != uint64(len(obj)) {
		t.Fatalf("NFS size %d, object %d", attr.Size, len(obj))
	}
	if got, err := c.ReadFile(ctx, fh); err != nil || !bytes.Equal(got, obj) {
		t.Fatalf("NFS READ of a PUT object: %v (%d bytes)", err, len(got))
	}

	// 2. NFS WRITE (UNSTABLE + COMMIT) -> object GET with the right ETag.
	dfh, _, err := c.Mkdir(ctx, c.Root(), "nfs", nfsclient.SetAttr{})
	if err != nil {
		t.Fatal(err)
	}
	ffh, _, err := c.Create(ctx, dfh, "written.bin", nfsclient.Unchecked, nfsclient.SetAttr{}, nfsclient.Verifier{})
	if err != nil {
		t.Fatal(err)
	}
	data := make([]byte, 2<<20+500)
	rand.Read(data)
	if err := c.WriteFile(ctx, ffh, data, nfsclient.Unstable); err != nil {
		t.Fatal(err)
	}
	oi, err := st.Stat(ctx, "xview", "nfs/written.bin")
	if err != nil {
		t.Fatal(err)
	}
	if oi.Size != int64(len(data)) || oi.ETag != md5hex(data) {
		t.Fatalf("object of an NFS-written file: size %d etag %s, want %d %s", oi.Size, oi.ETag, len(data), md5hex(data))
	}
	rc, oi, err := st.Get(ctx, "xview", "nfs/written.bin", 0, -1)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(rc)
	rc.Close()
	if !bytes.Equal(got, data) {
		t.Fatal("object GET of an NFS-written file differs")
	}

	// 3. An in-place NFS overwrite (same size) changes the ETag.
	copy(data[1000:], "overwritten by NFS")
	if _, err := c.Write(ctx, ffh, 1000, []byte("overwritten by NFS"), nfsclient.FileSync); err != nil {
		t.Fatal(err)
	}
	if oi, err = st.Stat(ctx, "xview", "nfs/written.bin"); err != nil || oi.ETag != md5hex(data) {
		t.Fatalf("ETag after NFS overwrite %s (%v), want %s", oi.ETag, err, md5hex(data))
	}
	lr, err := st.List(ctx, "xview", store.ListOptions{Prefix: "nfs/"})
	if err != nil || len(lr.Objects) != 1 || lr.Objects[0].Key != "nfs/written.bin" {
		t.Fatalf("List after NFS write: %+v %v", lr, err)
	}

	// 4. A PUT replaces the file (new inode): the old handle is stale, a
	// fresh LOOKUP sees the new content.
	if _, err := st.Put(ctx, "xview", "docs/a.bin", bytes.NewReader([]byte("v2")), 2, store.ObjectMeta{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Getattr(ctx, fh); !errors.Is(err, nfs3.ErrStale) {
		t.Fatalf("GETATTR of a replaced object: %v, want NFS3ERR_STALE", err)
	}
	fh2, _, err := c.LookupPath(ctx, "docs/a.bin")
	if err != nil {
		t.Fatal(err)
	}
	if got, err := c.ReadFile(ctx, fh2); err != nil || string(got) != "v2" {
		t.Fatalf("after re-PUT: %q %v", got, err)
	}
	// 5. NFS REMOVE -> the object is gone.
	if err := c.Remove(ctx, dfh, "written.bin"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Stat(ctx, "xview", "nfs/written.bin"); !errors.Is(err, store.ErrNoSuchKey) {
		t.Fatalf("Stat after NFS REMOVE: %v", err)
	}
}
