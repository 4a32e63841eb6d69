package nfspeers

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tristore/tristore/internal/testutil"
)

// TestServeCLI runs the real `tristore serve` with NFS exports given as
// flags and talks to it with libnfs: the front end's registration, flag
// parsing and shutdown on SIGTERM.
func TestServeCLI(t *testing.T) {
	testutil.NeedCmd(t, "nfs-ls")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	bin := testutil.TristoreBin(ctx, t)
	data := t.TempDir()
	os.MkdirAll(filepath.Join(data, "bkt"), 0o755)
	os.WriteFile(filepath.Join(data, "bkt", "obj.txt"), []byte("object body"), 0o644)
	srv := testutil.StartServe(t, testutil.ServeOptions{Bin: bin, Data: data, On: []string{"nfs"},
		Args: []string{"--nfs-export", "/=rw,clients=127.0.0.0/8,no_root_squash", "--nfs-export", "/bkt=ro"}})
	nfsAddr := srv.Addrs["nfs"]
	port := nfsAddr[strings.LastIndex(nfsAddr, ":")+1:]
	url := func(p string) string {
		return "nfs://127.0.0.1" + p + "?nfsport=" + port + "&mountport=" + port + "&version=3"
	}
	if out := testutil.Run(t, time.Minute, "nfs-cat", url("/bkt/obj.txt")); out != "object body" {
		t.Fatalf("nfs-cat through serve: %q", out)
	}
	if out := testutil.Run(t, time.Minute, "nfs-ls", url("/")); !strings.Contains(out, "bkt") {
		t.Fatalf("nfs-ls through serve: %q", out)
	}
	// /bkt is exported read-only: the longest matching export wins.
	src := filepath.Join(t.TempDir(), "src")
	os.WriteFile(src, []byte("x"), 0o644)
	out, err := testutil.TryRun(time.Minute, "nfs-cp", src, url("/bkt/new.txt"))
	if err == nil || !strings.Contains(out, "NFS3ERR_ROFS") {
		t.Fatalf("write to a ro export: %v %s", err, out)
	}
	if !srv.Stop() {
		t.Fatalf("serve did not stop on SIGTERM\n%s", srv.Log())
	}
	if err := srv.Err(); err != nil {
		t.Fatalf("serve after SIGTERM: %v\n%s", err, srv.Log())
	}
}
