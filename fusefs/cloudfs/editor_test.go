package cloudfs

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tristore/tristore/client/s3/chunkstore"
	"github.com/tristore/tristore/internal/testutil"
)

// TestEditorFsync: an editor (vim, non-interactive, which writes with
// its backup dance and fsyncs the file) edits a file in the mount, and
// a program writes a file, fsyncs it, renames it over another and fsyncs
// the directory (the usual safe save). With write-back an hour away and
// the mount still up, a second gateway (read-only, its own empty cache)
// reads both files' new bytes from the bucket: fsync(2) published the
// data and the names, as promised.
func TestEditorFsync(t *testing.T) {
	r := newRig(t)
	testutil.NeedCmd(t, "vim")
	m := r.mount(t.TempDir())
	p := func(n string) string { return filepath.Join(m.dir, n) }
	lines := strings.Repeat("a line of the document\n", 5000) // > one chunk
	if err := os.WriteFile(p("doc.txt"), []byte(lines+"last line\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run(t, m.dir, "vim", "-Es", "-u", "NONE", "-i", "NONE", "-n", "-c", "%s/last line/edited by vim/", "-c", "wq", "doc.txt")
	wantDoc := lines + "edited by vim\n"
	if b, err := os.ReadFile(p("doc.txt")); err != nil || string(b) != wantDoc {
		t.Fatalf("through the mount after vim: %v, %d bytes", err, len(b))
	}

	wantCfg := bytes.Repeat([]byte("new settings\n"), 30000)
	if err := os.WriteFile(p("cfg"), []byte("old settings\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(p("cfg.tmp"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(wantCfg); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatalf("fsync: %v", err)
	}
	f.Close()
	if err := os.Rename(p("cfg.tmp"), p("cfg")); err != nil {
		t.Fatal(err)
	}
	d, err := os.Open(m.dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := d.Sync(); err != nil {
		t.Fatalf("fsync of the directory: %v", err)
	}
	d.Close()

	ro := storeConfig(r.e, t.TempDir())
	ro.ReadOnly, ro.Create = true, false
	st, err := chunkstore.Open(context.Background(), ro)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close(context.Background())
	for name, want := range map[string][]byte{"doc.txt": []byte(wantDoc), "cfg": wantCfg} {
		in, err := st.Lookup(chunkstore.RootIno, name)
		if err != nil {
			t.Fatalf("a second gateway: %s: %v", name, err)
		}
		got := make([]byte, in.Size)
		if n, err := st.ReadAt(context.Background(), in.Ino, got, 0); int64(n) != in.Size || (err != nil && n == 0) || !bytes.Equal(got, want) {
			t.Fatalf("a second gateway reads %s: %d of %d bytes, %v, same %v", name, n, len(want), err, bytes.Equal(got, want))
		}
	}
	if _, err := st.Lookup(chunkstore.RootIno, "cfg.tmp"); err == nil {
		t.Fatal("a second gateway still sees cfg.tmp")
	}
}
