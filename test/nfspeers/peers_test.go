// Package nfspeers tests tristore's NFS v3 server with other implementations'
// clients (libnfs-utils: nfs-ls, nfs-cp, nfs-cat) and checks that the S3
// (store) view and the NFS view of the same tree agree.
package nfspeers

import (
	"bytes"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tristore/tristore/internal/testutil"
	"github.com/tristore/tristore/internal/testutil/nfsserver"
)

// startServer serves dir over NFS on 127.0.0.1:0 (testutil/nfsserver)
// and returns the port.
func startServer(t testing.TB, dir string, exports ...string) int {
	t.Helper()
	return nfsserver.Start(t, nfsserver.Config{Dir: dir, Exports: exports}).Port
}

func nfsURL(port int, export, file string) string {
	return fmt.Sprintf("nfs://127.0.0.1%s?nfsport=%d&mountport=%d&version=3", pathJoin(export, file), port, port)
}

func pathJoin(export, file string) string {
	p := strings.TrimSuffix(export, "/") + "/" + strings.TrimPrefix(file, "/")
	if p == "" {
		p = "/"
	}
	return p
}

func TestLibnfsTools(t *testing.T) {
	testutil.NeedCmd(t, "nfs-ls")
	dir := t.TempDir()
	os.MkdirAll(filepath.Join(dir, "bucket1", "sub"), 0o755)
	data := make([]byte, 3<<20+123) // several 1 MiB READs/WRITEs plus a tail
	rand.Read(data)
	os.WriteFile(filepath.Join(dir, "bucket1", "sub", "blob.bin"), data, 0o644)
	os.WriteFile(filepath.Join(dir, "bucket1", "hello.txt"), []byte("hello from tristore\n"), 0o644)
	port := startServer(t, dir, "/=rw,no_root_squash", "/bucket1=rw")

	// nfs-ls of the root export and of a bucket export.
	out := testutil.Run(t, time.Minute, "nfs-ls", nfsURL(port, "/", ""))
	if !strings.Contains(out, "bucket1") {
		t.Fatalf("nfs-ls / does not show bucket1:\n%s", out)
	}
	out = testutil.Run(t, time.Minute, "nfs-ls", "-R", nfsURL(port, "/bucket1", ""))
	for _, want := range []string{"hello.txt", "sub", "blob.bin"} {
		if !strings.Contains(out, want) {
			t.Fatalf("nfs-ls -R /bucket1 lacks %s:\n%s", want, out)
		}
	}
	if strings.Contains(out, ".tristore") {
		t.Fatalf("reserved names visible:\n%s", out)
	}

	// nfs-cat
	if out := testutil.Run(t, time.Minute, "nfs-cat", nfsURL(port, "/bucket1", "hello.txt")); out != "hello from tristore\n" {
		t.Fatalf("nfs-cat: %q", out)
	}

	// nfs-cp from the server to a local file.
	local := filepath.Join(t.TempDir(), "copy.bin")
	testutil.Run(t, time.Minute, "nfs-cp", nfsURL(port, "/bucket1", "sub/blob.bin"), local)
	if got, _ := os.ReadFile(local); !bytes.Equal(got, data) {
		t.Fatalf("nfs-cp download: %d bytes, differs", len(got))
	}
	// nfs-cp from a local file to the server (new file), through the root export.
	testutil.Run(t, time.Minute, "nfs-cp", local, nfsURL(port, "/", "bucket1/uploaded.bin"))
	if got, _ := os.ReadFile(filepath.Join(dir, "bucket1", "uploaded.bin")); !bytes.Equal(got, data) {
		t.Fatalf("nfs-cp upload: %d bytes on disk, differs", len(got))
	}
	// nfs-cp creates with CREATE GUARDED, so copying onto an existing
	// name must fail with NFS3ERR_EXIST (as against knfsd) and leave it intact.
	out2, err := testutil.TryRun(time.Minute, "nfs-cp", local, nfsURL(port, "/bucket1", "hello.txt"))
	if err == nil || !strings.Contains(out2, "NFS3ERR_EXIST") {
		t.Fatalf("nfs-cp onto an existing file: err %v\n%s", err, out2)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "bucket1", "hello.txt")); string(got) != "hello from tristore\n" {
		t.Fatalf("existing file changed: %q", got)
	}
}
