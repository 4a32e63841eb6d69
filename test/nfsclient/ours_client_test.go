package nfsclient

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/tristore/tristore/client/nfs"
)

// TestClientVsTristore runs every procedure of our client against our own
// server (frontend/nfs, in-process on 127.0.0.1).
func TestClientVsTristore(t *testing.T) {
	tg := startOurs(t, "")
	c, root := tg.client(t, nfs.Options{})
	runProcedureSuite(t, c, root, serverUnderTest{Dir: tg.Dir, Mknod: tg.Mknod})
}

// TestUnstableResendAfterRestart: data written UNSTABLE, then the server
// restarts (new write verifier) before COMMIT; the client must notice the
// verifier change at COMMIT, resend everything and commit again.
func TestUnstableResendAfterRestart(t *testing.T) {
	tg := startOurs(t, "")
	c, root := tg.client(t, nfs.Options{Wsize: 64 << 10})
	ctx := ctxT(t)
	dir, _, err := c.Mkdir(ctx, root, "bucket", nfs.SetAttr{})
	if err != nil {
		t.Fatal(err)
	}
	fh, _, err := c.Create(ctx, dir, "f", nfs.Unchecked, nfs.SetAttr{}, nfs.Verifier{})
	if err != nil {
		t.Fatal(err)
	}
	data := randBytes(t, 1<<20+333)
	u := nfs.NewUnstable(c, fh)
	if err := u.WriteAt(ctx, data, 0, false); err != nil {
		t.Fatal(err)
	}
	if u.Pending() != len(data) {
		t.Fatalf("pending %d, want %d", u.Pending(), len(data))
	}
	tg.restart(t)
	if err := u.Commit(ctx); err != nil {
		t.Fatalf("commit across a restart: %v", err)
	}
	if u.Resends() == 0 {
		t.Fatal("verifier changed across the restart but nothing was resent")
	}
	if u.Pending() != 0 {
		t.Fatalf("pending %d after commit", u.Pending())
	}
	got, err := os.ReadFile(filepath.Join(tg.Dir, "bucket", "f"))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("server disk has %d bytes (%v), want %d written", len(got), err, len(data))
	}
	if c.Reconnects() < 2 {
		t.Fatalf("client did not reconnect after the restart (connections: %d)", c.Reconnects())
	}
}
