package nfsclient

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tristore/tristore/client/nfs"
	"github.com/tristore/tristore/proto/nfs4"
)

// v4path is where tg's export is in its NFSv4 namespace.
func (tg *target) v4path() string {
	if tg.Name == "ganesha" {
		return "/export"
	}
	return "/"
}

func (tg *target) client4(t testing.TB) *nfs.Client4 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c, err := nfs.Dial4(ctx, tg.Addr, nfs.Options{Dial: tg.Dial})
	if err != nil {
		t.Fatalf("NFSv4.1 session with %s: %v", tg.Name, err)
	}
	t.Cleanup(func() { c.Close(context.Background()) })
	return c
}

// testClient4 runs the v4.1 client's operations and checks each result on
// the server's disk.
func testClient4(t *testing.T, tg *target) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := tg.client4(t)
	root, fa, err := c.LookupPath(ctx, tg.v4path())
	if err != nil || fa.Type != nfs4.TypeDir {
		t.Fatalf("LookupPath(%s): %v %+v", tg.v4path(), err, fa)
	}
	calls := c.Calls()
	if err := c.WriteSmall(ctx, root, "small", []byte("four kib or less"), 0o640); err != nil {
		t.Fatalf("WriteSmall: %v", err)
	}
	data, eof, err := c.ReadSmall(ctx, root, "small")
	if err != nil || string(data) != "four kib or less" || !eof {
		t.Fatalf("ReadSmall: %q %v %v", data, eof, err)
	}
	if n := c.Calls() - calls; n != 2 {
		t.Fatalf("write+read of a small file took %d round trips, want 2", n)
	}
	if b, err := os.ReadFile(filepath.Join(tg.Dir, "small")); err != nil || string(b) != "four kib or less" {
		t.Fatalf("on disk: %q %v", b, err)
	}
	st, err := c.Stat(ctx, root, "small")
	if err != nil || st.Size != 16 || st.Mode != 0o640 {
		t.Fatalf("Stat: %+v %v", st, err)
	}
	d, err := c.Mkdir(ctx, root, "dir", 0o755)
	if err != nil {
		t.Fatalf("Mkdir: %v", err)
	}
	if _, err := c.Create(ctx, d, "empty", 0o600); err != nil {
		t.Fatalf("Create: %v", err)
	}
	if _, err := c.Create(ctx, d, "empty", 0o600); !errors.Is(err, nfs.ErrExist) {
		t.Fatalf("second GUARDED create: %v, want ErrExist", err)
	}
	ents, err := c.Readdir(ctx, d, nil)
	if err != nil || len(ents) != 1 || ents[0].Name != "empty" {
		t.Fatalf("Readdir: %+v %v", ents, err)
	}
	if err := c.Remove(ctx, d, "empty"); err != nil {
		t.Fatalf("Remove: %v", err)
	}
	if _, err := c.Stat(ctx, d, "empty"); !errors.Is(err, nfs.ErrNoEnt) {
		t.Fatalf("Stat after Remove: %v, want ErrNoEnt", err)
	}
	big := bytes.Repeat([]byte("0123456789abcdef"), 5<<20/16+3)
	if err := os.WriteFile(filepath.Join(tg.Dir, "big"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := c.ReadFile(ctx, root, "big")
	if err != nil || !bytes.Equal(got, big) {
		t.Fatalf("ReadFile of %d bytes: got %d bytes, equal %v, %v", len(big), len(got), bytes.Equal(got, big), err)
	}
}

func TestClient4VsTristore(t *testing.T) { testClient4(t, startOurs(t, "")) }
func TestClient4VsGanesha(t *testing.T)  { testClient4(t, ganeshaTarget(t)) }

// TestV3V4OneTree: what a v3 client writes a v4.1 client reads, and the
// other way round, on one server and one tree.
func TestV3V4OneTree(t *testing.T) {
	tg := startOurs(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c3, root3 := tg.client(t, nfs.Options{})
	c4 := tg.client4(t)
	root4, _, err := c4.LookupPath(ctx, "/")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(root3, root4) {
		t.Fatalf("the root has two handles: v3 %x, v4 %x", root3, root4)
	}
	fh, _, err := c3.Create(ctx, root3, "from3", nfs.Unchecked, nfs.SetAttr{}, nfs.Verifier{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c3.Write(ctx, fh, 0, []byte("written over v3"), nfs.FileSync); err != nil {
		t.Fatal(err)
	}
	if b, _, err := c4.ReadSmall(ctx, root4, "from3"); err != nil || string(b) != "written over v3" {
		t.Fatalf("v4 read of a v3 write: %q %v", b, err)
	}
	if err := c4.WriteSmall(ctx, root4, "from4", []byte("written over v4.1"), 0o644); err != nil {
		t.Fatal(err)
	}
	fh4, _, err := c3.Lookup(ctx, root3, "from4")
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 100)
	n, _, err := c3.Read(ctx, fh4, 0, buf)
	if err != nil || string(buf[:n]) != "written over v4.1" {
		t.Fatalf("v3 read of a v4 write: %q %v", buf[:n], err)
	}
}
