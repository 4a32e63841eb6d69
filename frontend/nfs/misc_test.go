package nfs

import (
	"bytes"
	"context"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"golang.org/x/sys/unix"

	tu "github.com/tristore/tristore/internal/testutil"
	"github.com/tristore/tristore/proto/nfs3"
	"github.com/tristore/tristore/proto/sunrpc"
)

func TestPortmapGetport(t *testing.T) {
	s, addr := serveOpts(t, Options{DataDir: t.TempDir(), PortmapAddr: "127.0.0.1:0"})
	var pm net.Addr
	for i := 0; i < 500 && pm == nil; i++ {
		pm = s.PortmapAddr()
		time.Sleep(10 * time.Millisecond)
	}
	if pm == nil {
		t.Fatal("portmapper did not start")
	}
	port := uint32(addr.(*net.TCPAddr).Port)
	for _, addr := range []string{pm.String(), addr.String()} {
		c := dial(t, addr)
		for _, tc := range []struct {
			m    nfs3.Mapping
			want uint32
		}{
			{nfs3.Mapping{Prog: nfs3.ProgNFS, Vers: 3, Prot: nfs3.PortmapProto}, port},
			{nfs3.Mapping{Prog: nfs3.ProgMount, Vers: 3, Prot: nfs3.PortmapProto}, port},
			{nfs3.Mapping{Prog: nfs3.ProgNFS, Vers: 4, Prot: nfs3.PortmapProto}, 0},
			{nfs3.Mapping{Prog: nfs3.ProgNFS, Vers: 3, Prot: 17}, 0}, // UDP: not served
		} {
			var w sunrpc.Writer
			tc.m.Encode(&w)
			rep, r, err := c.raw(nfs3.ProgPortmap, nfs3.VersPortmap, nfs3.PortmapProcGetport, sunrpc.AuthNone(), w.Bytes())
			if err != nil || rep.Err() != nil {
				t.Fatalf("GETPORT: %v %v", err, rep.Err())
			}
			if got := r.Uint32(); got != tc.want {
				t.Fatalf("GETPORT %+v on %s = %d, want %d", tc.m, addr, got, tc.want)
			}
		}
	}
}

func TestAllSquashAndMountList(t *testing.T) {
	needRoot(t)
	dir := t.TempDir()
	os.Chmod(dir, 0o777)
	_, addr := testServer(t, dir, "/=rw,all_squash,anonuid=3000,anongid=3001")
	c := dial(t, addr).as(1000, 1000)
	root := c.mount("/")
	create(t, c, root, "sq")
	fi, err := os.Stat(filepath.Join(dir, "sq"))
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != 3000 || st.Gid != 3001 {
		t.Fatalf("all_squash file owned by %d:%d", st.Uid, st.Gid)
	}
	var dump nfs3.DumpRes
	c.call(nfs3.ProgMount, 3, nfs3.MountProcDump, nil, &dump)
	if len(dump.Mounts) != 1 || dump.Mounts[0].Dir != "/" || dump.Mounts[0].Host != "127.0.0.1" {
		t.Fatalf("DUMP %+v", dump)
	}
	c.call(nfs3.ProgMount, 3, nfs3.MountProcUmnt, &nfs3.DirPath{Path: "/"}, nil)
	c.call(nfs3.ProgMount, 3, nfs3.MountProcDump, nil, &dump)
	if len(dump.Mounts) != 0 {
		t.Fatalf("DUMP after UMNT %+v", dump)
	}
	c.mount("/")
	c.call(nfs3.ProgMount, 3, nfs3.MountProcUmntall, nil, nil)
	c.call(nfs3.ProgMount, 3, nfs3.MountProcDump, nil, &dump)
	if len(dump.Mounts) != 0 {
		t.Fatalf("DUMP after UMNTALL %+v", dump)
	}
	// Mounting a subdirectory of an export.
	var mk nfs3.CreateRes
	c.nfs(nfs3.ProcMkdir, &nfs3.MkdirArgs{Where: nfs3.DirOpArgs{Dir: root, Name: "subdir"}}, &mk)
	mustOK(t, "MKDIR", mk.Status)
	if fh := c.mount("/subdir"); string(fh) != string(mk.FH.FH) {
		t.Fatal("MNT of a subdirectory returned another handle")
	}
}

// TestNoSpace fills a tiny tmpfs and expects NFS3ERR_NOSPC, with the
// server still serving afterwards.
func TestNoSpace(t *testing.T) {
	needRoot(t)
	dir := t.TempDir()
	tu.MountTmpfs(t, dir, "256k", "tristore-nfs-nospc")
	_, addr := testServer(t, dir)
	c := dial(t, addr)
	root := c.mount("/")
	f := create(t, c, root, "big")
	chunk := make([]byte, 64<<10)
	var st nfs3.Status
	for i := 0; i < 16; i++ {
		var res nfs3.WriteRes
		c.nfs(nfs3.ProcWrite, &nfs3.WriteArgs{FH: f, Offset: uint64(i) * uint64(len(chunk)), Count: uint32(len(chunk)), Stable: nfs3.FileSync, Data: chunk}, &res)
		if st = res.Status; st != nfs3.OK {
			if res.Wcc.After.Attr == nil {
				t.Fatal("failed WRITE without wcc_data")
			}
			break
		}
	}
	wantStatus(t, "WRITE to a full file system", st, nfs3.ErrNoSpc)
	var ga nfs3.GetattrRes
	c.nfs(nfs3.ProcGetattr, &nfs3.GetattrArgs{FH: f}, &ga)
	mustOK(t, "GETATTR after NOSPC", ga.Status)
}

// TestShutdownWithOpenConnections: cancelling Serve's context stops the
// server promptly even while clients keep idle connections open, and those
// connections are closed.
func TestShutdownWithOpenConnections(t *testing.T) {
	s, err := New(Options{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	c := dial(t, ln.Addr().String())
	c.mount("/")
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Serve returned %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Serve did not return after cancel with an idle connection open")
	}
	s.Close()
	c.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.br.ReadByte(); err == nil {
		t.Fatal("client connection still open after shutdown")
	}
	if _, err := net.DialTimeout("tcp", ln.Addr().String(), 2*time.Second); err == nil {
		t.Fatal("listener still accepting after shutdown")
	}
}

// TestLargeReads covers large READs: whole, up to rtmax (4 MiB, above the
// 1 MiB wtmax), partial at EOF, past EOF, unaligned lengths (XDR padding).
func TestLargeReads(t *testing.T) {
	dir := t.TempDir()
	_, addr := testServer(t, dir)
	c := dial(t, addr)
	root := c.mount("/")
	data := make([]byte, 5<<20+3)
	for i := range data {
		data[i] = byte(i*7 + i>>11)
	}
	os.WriteFile(filepath.Join(dir, "big"), data, 0o644)
	fh := lookup(c, root, "big").FH
	var fi nfs3.FsinfoRes
	c.nfs(nfs3.ProcFsinfo, &nfs3.GetattrArgs{FH: root}, &fi)
	if fi.RtMax != 4<<20 {
		t.Fatalf("FSINFO rtmax %d, want 4 MiB", fi.RtMax)
	}
	for _, tc := range []struct {
		off   uint64
		count uint32
		n     int
		eof   bool
	}{
		{0, 1 << 20, 1 << 20, false},
		{1 << 20, 2 << 20, 2 << 20, false},
		{1 << 20, 4 << 20, 4 << 20, false},
		{0, 8 << 20, 4 << 20, false}, // capped at rtmax
		{3 << 20, 4 << 20, 2<<20 + 3, true},
		{5 << 20, 1 << 20, 3, true}, // unaligned tail
		{5<<20 - 5, 100 << 10, 8, true},
		{6 << 20, 1 << 20, 0, true}, // past EOF
	} {
		got, eof := read(t, c, fh, tc.off, tc.count)
		if len(got) != tc.n || eof != tc.eof {
			t.Fatalf("READ(%d, %d): %d bytes eof %v, want %d eof %v", tc.off, tc.count, len(got), eof, tc.n, tc.eof)
		}
		if tc.n > 0 && !bytes.Equal(got, data[tc.off:tc.off+uint64(tc.n)]) {
			t.Fatalf("READ(%d, %d): wrong data", tc.off, tc.count)
		}
	}
	// The connection is still in sync after all that.
	var ga nfs3.GetattrRes
	c.nfs(nfs3.ProcGetattr, &nfs3.GetattrArgs{FH: fh}, &ga)
	mustOK(t, "GETATTR", ga.Status)
}

func TestMetrics(t *testing.T) {
	s, addr := serveOpts(t, Options{DataDir: t.TempDir(), Metrics: prometheus.NewRegistry()})
	c := dial(t, addr.String())
	root := c.mount("/")
	var ga nfs3.GetattrRes
	c.nfs(nfs3.ProcGetattr, &nfs3.GetattrArgs{FH: root}, &ga)
	c.nfs(nfs3.ProcGetattr, &nfs3.GetattrArgs{FH: root}, &ga)
	n := testutil.ToFloat64(s.metrics.calls.WithLabelValues("nfs", "GETATTR", "SUCCESS"))
	if n != 2 {
		t.Fatalf("GETATTR counter %v, want 2", n)
	}
	if testutil.ToFloat64(s.metrics.calls.WithLabelValues("mount", "MNT", "SUCCESS")) != 1 {
		t.Fatal("MNT not counted")
	}
}

// A READ over 1 MiB that is copied (data not in the page cache, so not
// written from a mapping) holds a 4 MiB buffer until its reply is sent, so
// it takes that from the server's call-memory budget (MaxInFlightBytes);
// when the budget has no room it is answered short, with 1 MiB (the client
// asks again for the rest), and the budget is given back after each reply.
func TestLargeReadMemoryBudget(t *testing.T) {
	dir := t.TempDir()
	data := make([]byte, 6<<20)
	for i := range data {
		data[i] = byte(i*13 + i>>12)
	}
	p := filepath.Join(dir, "big")
	os.WriteFile(p, data, 0o644)
	f, err := os.Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.Sync()
	drop := func() {
		t.Helper()
		for try := 0; ; try++ {
			unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED)
			n := tu.ResidentPages(t, p, len(data))
			if n == 0 {
				return
			}
			if try == 50 {
				t.Fatalf("%d pages still cached after FADV_DONTNEED", n)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	for _, tc := range []struct {
		budget int64
		n      int
	}{
		{3 << 20, 1 << 20}, // no room for a 4 MiB buffer: short READ
		{5 << 20, 4 << 20}, // room for one at a time
	} {
		s, addr := serveOpts(t, Options{DataDir: dir, MaxInFlightBytes: tc.budget})
		c := dial(t, addr.String())
		fh := lookup(c, c.mount("/"), "big").FH
		for i := 0; i < 3; i++ { // the budget comes back after each reply
			drop()
			got, eof := read(t, c, fh, 1<<20, 4<<20)
			if len(got) != tc.n || eof || !bytes.Equal(got, data[1<<20:1<<20+tc.n]) {
				t.Fatalf("budget %d MiB, READ %d: %d bytes (eof %v), want %d", tc.budget>>20, i, len(got), eof, tc.n)
			}
		}
		// The server gives the budget back just after the reply leaves.
		back := false
		for end := time.Now().Add(5 * time.Second); !back && time.Now().Before(end); time.Sleep(time.Millisecond) {
			back = s.mem.TryAcquire(tc.budget)
		}
		if !back {
			t.Fatalf("budget %d MiB: not all given back after the READs", tc.budget>>20)
		}
		s.mem.Release(tc.budget)
	}
}
