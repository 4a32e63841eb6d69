package nfsclient

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"testing"
	"time"

	"github.com/tristore/tristore/client/nfs"
	nfsserver "github.com/tristore/tristore/frontend/nfs"
	"github.com/tristore/tristore/internal/testutil"
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

	// ours only
	exports []nfsserver.Export
	srv     *nfsserver.Server
	ln      net.Listener
	served  chan error
}

// startOurs runs tristore's NFS front end in-process on 127.0.0.1:0,
// exporting a fresh data directory ("/" export).
func startOurs(t testing.TB, dataDir string, exports ...string) *target {
	t.Helper()
	if dataDir == "" {
		dataDir = t.TempDir()
	}
	tg := &target{Name: "tristore", Export: "/", Dir: dataDir, Dial: (&net.Dialer{}).DialContext, Mknod: true}
	for _, e := range exports {
		ex, err := nfsserver.ParseExport(e)
		if err != nil {
			t.Fatal(err)
		}
		tg.exports = append(tg.exports, ex)
	}
	tg.serve(t, "127.0.0.1:0")
	t.Cleanup(func() { tg.stop() })
	return tg
}

func (tg *target) serve(t testing.TB, addr string) {
	t.Helper()
	srv, err := nfsserver.New(nfsserver.Options{DataDir: tg.Dir, Exports: tg.exports, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		t.Fatalf("frontend/nfs.New: %v", err)
	}
	var ln net.Listener
	// Rebinding the same port right after a close can race with the old
	// socket's teardown: retry briefly (bounded).
	for i := 0; i < 50; i++ {
		if ln, err = net.Listen("tcp", addr); err == nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("listen %s: %v", addr, err)
	}
	tg.srv, tg.ln, tg.served = srv, ln, make(chan error, 1)
	tg.Addr = ln.Addr().String()
	go func() { tg.served <- srv.Serve(context.Background(), ln) }()
}

func (tg *target) stop() {
	if tg.srv == nil {
		return
	}
	tg.srv.Close()
	tg.ln.Close()
	select {
	case <-tg.served:
	case <-time.After(30 * time.Second):
	}
	tg.srv = nil
}

// restart stops our server and starts a new one on the same address and
// data directory: a server reboot (new write verifier).
func (tg *target) restart(t testing.TB) {
	t.Helper()
	if tg.Name != "tristore" {
		t.Fatal("restart: only our own server can be restarted in-process")
	}
	addr := tg.Addr
	tg.stop()
	tg.serve(t, addr)
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
