package nfsclient

import (
	"context"
	"errors"
	"net"
	"os"
	"testing"
	"time"

	"github.com/tristore/tristore/client/nfs"
	"github.com/tristore/tristore/internal/testutil"
	"github.com/tristore/tristore/internal/testutil/nfsserver"
)

// target is an NFS server a test talks to: ours or ganesha.
type target struct {
	Name      string
	Addr      string // NFS host:port
	MountAddr string // MOUNT host:port ("" = same)
	Export    string // MOUNT path
	Dir       string // exported directory on local disk
	Dial      nfs.DialFunc
	Mknod     bool
	ns        string // network namespace the server lives in ("" = host)
	v4        bool   // FUSE mounts (mountFUSE) use NFSv4.1

	ours *nfsserver.Server // ours only
}

// startOurs runs tristore's NFS front end in-process on 127.0.0.1:0
// (testutil/nfsserver), exporting a fresh data directory ("/" export).
func startOurs(t testing.TB, dataDir string, exports ...string) *target {
	t.Helper()
	ours := nfsserver.Start(t, nfsserver.Config{Dir: dataDir, Exports: exports})
	return &target{Name: "tristore", Addr: ours.Addr, Export: "/", Dir: ours.Dir, Dial: (&net.Dialer{}).DialContext, Mknod: true, ours: ours}
}

// stop stops our server (an outage); serve starts it again on the same
// address.
func (tg *target) stop() { tg.ours.Stop() }

func (tg *target) serve(t testing.TB) { tg.ours.Start(t) }

// restart stops our server and starts a new one on the same address and
// data directory: a server reboot (new write verifier).
func (tg *target) restart(t testing.TB) {
	t.Helper()
	if tg.ours == nil {
		t.Fatal("restart: only our own server can be restarted in-process")
	}
	tg.ours.Restart(t)
}

func ganeshaTarget(t testing.TB) *target {
	g := startGanesha(t, "")
	return &target{Name: "ganesha", Addr: g.NFSAddr, MountAddr: g.MntAddr, Export: g.Export, Dir: g.Export, Dial: g.Dialer(), Mknod: true, ns: g.NS}
}

// client dials and mounts tg; closed in t.Cleanup.
func (tg *target) client(t testing.TB, opts nfs.Options) (*nfs.Client, nfs.FH) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	opts.MountAddr = tg.MountAddr
	opts.Dial = tg.Dial
	c, err := nfs.Dial(ctx, tg.Addr, opts)
	if err != nil {
		t.Fatalf("dial %s: %v", tg.Name, err)
	}
	t.Cleanup(func() { c.Close() })
	root, err := c.Mount(ctx, tg.Export)
	if err != nil {
		t.Fatalf("mount %s:%s: %v", tg.Name, tg.Export, err)
	}
	return c, root
}

var _ = errors.Is

// startOursProcess runs `tristore serve` (this test binary in CLI mode) as
// a separate process, NFS only, like ganesha runs: for benchmarks, so the
// server does not share the test's (and FUSE daemon's) Go runtime.
func startOursProcess(t testing.TB, dataDir string) *target {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	srv := testutil.StartServe(t, testutil.ServeOptions{Bin: self, Data: dataDir, On: []string{"nfs"},
		Args: []string{"--log-level", "warn"}, Env: []string{"TRISTORE_TEST_CLI=1"}})
	return &target{Name: "tristore", Addr: srv.Addrs["nfs"], Export: "/", Dir: dataDir, Dial: (&net.Dialer{}).DialContext}
}
