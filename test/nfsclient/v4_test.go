package nfsclient

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tristore/tristore/client/nfs"
	"github.com/tristore/tristore/internal/testutil"
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

// testCLI4 runs the nfs commands with ?version=4.1 and bench-ops with both
// versions; url4 maps a path to the v4 URL, url3 to the v3 one.
func testCLI4(t *testing.T, tg *target, ns string, url4, url3 func(p string) string) {
	tmp := t.TempDir()
	data := randBytes(t, 3<<20+7)
	local := filepath.Join(tmp, "in.bin")
	if err := os.WriteFile(local, data, 0o644); err != nil {
		t.Fatal(err)
	}
	runCLI(t, ns, nil, "nfs", "mkdir", url4("/cli4"))
	runCLI(t, ns, nil, "nfs", "put", "--mode", "0600", local, url4("/cli4/in.bin"))
	fi, err := os.Stat(filepath.Join(tg.Dir, "cli4", "in.bin"))
	if err != nil || fi.Size() != int64(len(data)) || fi.Mode().Perm() != 0o600 {
		t.Fatalf("nfs put over v4.1: %v %v", fi, err)
	}
	if out := runCLI(t, ns, nil, "nfs", "ls", "-l", url4("/cli4")); !strings.Contains(string(out), "in.bin") || !strings.Contains(string(out), "3145735") {
		t.Fatalf("nfs ls -l over v4.1:\n%s", out)
	}
	if got := runCLI(t, ns, nil, "nfs", "cat", url4("/cli4/in.bin")); !bytes.Equal(got, data) {
		t.Fatalf("nfs cat over v4.1: %d bytes, want %d", len(got), len(data))
	}
	for _, v := range []struct {
		version string
		url     string
		create  float64 // round trips per create
	}{{"4.1", url4("/cli4"), 1}, {"3", url3("/cli4"), 2}} {
		var res struct {
			Ops []struct {
				Op         string  `json:"op"`
				Ops        int     `json:"ops"`
				RoundTrips float64 `json:"round_trips_per_op"`
			} `json:"ops"`
		}
		out := runCLI(t, ns, nil, "nfs", "bench-ops", "--json", "--version", v.version, "--files", "5", "--big", "2MiB", v.url)
		if err := json.Unmarshal(out, &res); err != nil || len(res.Ops) != 4 || res.Ops[0].Op != "create" || res.Ops[0].RoundTrips != v.create {
			t.Fatalf("bench-ops --version %s: %s (%v)", v.version, out, err)
		}
	}
	if ents, _ := os.ReadDir(filepath.Join(tg.Dir, "cli4")); len(ents) != 1 {
		t.Fatalf("bench-ops left files behind: %d entries", len(ents))
	}
	runCLI(t, ns, nil, "nfs", "rm", url4("/cli4/in.bin"))
	runCLI(t, ns, nil, "nfs", "rm", url4("/cli4"))
	if _, err := os.Stat(filepath.Join(tg.Dir, "cli4")); !os.IsNotExist(err) {
		t.Fatalf("nfs rm over v4.1: cli4 still there (%v)", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if o, err := tristoreCmd(ctx, ns, "nfs", "cat", url4("/missing")).CombinedOutput(); err == nil || !strings.Contains(string(o), "NFS3ERR_NOENT") && !strings.Contains(string(o), "no such") {
		t.Fatalf("cat of a missing file over v4.1: %v %s", err, o)
	}
	// A command that speaks only v3 refuses version=4.1 instead of using v3.
	if o, err := tristoreCmd(ctx, ns, "nfs", "bench", url4("/")).CombinedOutput(); err == nil || !strings.Contains(string(o), "speaks NFS v3 only") {
		t.Fatalf("nfs bench with version=4.1: %v %s", err, o)
	}
}

func TestCLIv4VsTristore(t *testing.T) {
	tg := startOurs(t, "")
	testCLI4(t, tg, "", func(p string) string { return "nfs://" + tg.Addr + p + "?version=4.1" },
		func(p string) string { return "nfs://" + tg.Addr + p })
}

func TestCLIv4VsGanesha(t *testing.T) {
	tg := ganeshaTarget(t)
	mp := "?mountport=" + strings.TrimPrefix(tg.MountAddr, "127.0.0.1:")
	testCLI4(t, tg, tg.ns, func(p string) string { return "nfs://" + tg.Addr + "/export" + p + "?version=4.1" },
		func(p string) string { return "nfs://" + tg.Addr + tg.Export + p + mp })
}

// TestV4GraceAfterKill: a client's open and byte-range lock survive a
// kill -9 of the server through the grace period. After the restart a
// newcomer's OPEN and LOCK wait (GRACE); the old client (same owner)
// reclaims both with CLAIM_PREVIOUS and reclaim=true, ends its reclaim, and
// then the newcomer opens but finds the reclaimed lock in its way.
func TestV4GraceAfterKill(t *testing.T) {
	testutil.NeedRoot(t, "open_by_handle_at")
	data := t.TempDir()
	bin := testutil.TristoreBin(context.Background(), t)
	args := []string{"--log-level", "warn", "--nfs4-lease", "10s", "--nfs4-grace", "60s"}
	srv := testutil.StartServe(t, testutil.ServeOptions{Bin: bin, Data: data, On: []string{"nfs"}, Args: args})
	if err := os.WriteFile(filepath.Join(data, "held"), make([]byte, 4096), 0o666); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dial := func(addr, owner string, reclaim bool) *nfs.Client4 {
		t.Helper()
		c, err := nfs.Dial4(ctx, addr, nfs.Options{V4Owner: owner, V4Reclaim: reclaim, Timeout: 10 * time.Second})
		if err != nil {
			t.Fatalf("Dial4 %s: %v", owner, err)
		}
		t.Cleanup(func() { c.Close(context.Background()) })
		return c
	}
	owner := func(c *nfs.Client4, s string) nfs4.Owner { return nfs4.Owner{ClientID: c.ClientID(), Owner: []byte(s)} }
	lockOp := func(c *nfs.Client4, open nfs4.Stateid, reclaim bool, res *nfs4.LockRes) nfs.Op4 {
		return nfs.Op4{Op: nfs4.OpLock, Args: &nfs4.LockArgs{Type: nfs4.WriteLT, Reclaim: reclaim, Offset: 0, Length: 100,
			Locker: nfs4.Locker{New: true, OpenStateid: open, LockOwner: owner(c, "lock-owner")}}, Res: res}
	}
	old := dial(srv.Addrs["nfs"], "grace-test-old", false)
	root, _, err := old.LookupPath(ctx, "/")
	if err != nil {
		t.Fatal(err)
	}
	var open nfs4.OpenRes
	var fh nfs4.GetFHRes
	if err := old.Compound(ctx, nfs.Op4{Op: nfs4.OpPutFH, Args: &nfs4.PutFHArgs{FH: root}},
		nfs.Op4{Op: nfs4.OpOpen, Args: &nfs4.OpenArgs{ShareAccess: nfs4.ShareAccessBoth, Owner: owner(old, "open-owner"), Claim: nfs4.ClaimNull, Name: "held"}, Res: &open},
		nfs.Op4{Op: nfs4.OpGetFH, Args: &nfs4.NoArgs{}, Res: &fh},
		lockOp(old, nfs4.Stateid{Seqid: 1}, false, &nfs4.LockRes{})); err != nil {
		t.Fatalf("OPEN+LOCK: %v", err)
	}
	srv.Kill()
	srv = testutil.StartServe(t, testutil.ServeOptions{Bin: bin, Data: data, On: []string{"nfs"}, Args: args})
	addr := srv.Addrs["nfs"]
	newcomer := dial(addr, "grace-test-new", false)
	openNew := func() error {
		return newcomer.Compound(ctx, nfs.Op4{Op: nfs4.OpPutFH, Args: &nfs4.PutFHArgs{FH: root}},
			nfs.Op4{Op: nfs4.OpOpen, Args: &nfs4.OpenArgs{ShareAccess: nfs4.ShareAccessBoth, Owner: owner(newcomer, "n"), Claim: nfs4.ClaimNull, Name: "held"}, Res: &nfs4.OpenRes{}},
			lockOp(newcomer, nfs4.Stateid{Seqid: 1}, false, &nfs4.LockRes{}))
	}
	if err := openNew(); !errors.Is(err, nfs4.ErrGrace) {
		t.Fatalf("a newcomer's OPEN in the grace period: %v, want GRACE", err)
	}
	back := dial(addr, "grace-test-old", true)
	if err := back.Compound(ctx, nfs.Op4{Op: nfs4.OpPutFH, Args: &nfs4.PutFHArgs{FH: fh.FH}},
		nfs.Op4{Op: nfs4.OpOpen, Args: &nfs4.OpenArgs{ShareAccess: nfs4.ShareAccessBoth, Owner: owner(back, "open-owner"), Claim: nfs4.ClaimPrevious}, Res: &nfs4.OpenRes{}},
		lockOp(back, nfs4.Stateid{Seqid: 1}, true, &nfs4.LockRes{})); err != nil {
		t.Fatalf("reclaiming the open and the lock: %v", err)
	}
	if err := back.ReclaimComplete(ctx); err != nil {
		t.Fatal(err)
	}
	err = openNew()
	var op *nfs.OpError
	if !errors.Is(err, nfs4.ErrDenied) || !errors.As(err, &op) || op.Op != "LOCK" {
		t.Fatalf("the newcomer after the grace period: %v, want its OPEN to work and its LOCK to be DENIED by the reclaimed lock", err)
	}
}
