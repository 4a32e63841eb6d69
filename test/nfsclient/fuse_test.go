package nfsclient

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	mathrand "math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/tristore/tristore/client/nfs"
	"github.com/tristore/tristore/fusefs/nfstree"
	"github.com/tristore/tristore/internal/testutil"
)

// mountFUSE mounts tg through nfstree on a fresh directory (over NFSv4.1
// if tg.v4 is set). The returned function unmounts (idempotent); t.Cleanup
// also unmounts, lazily if busy.
func mountFUSE(t testing.TB, tg *target, opts nfstree.Options) (string, func()) {
	dir, unmount, _ := mountFUSETree(t, tg, opts)
	return dir, unmount
}

func mountFUSETree(t testing.TB, tg *target, opts nfstree.Options) (string, func(), *nfstree.FS) {
	t.Helper()
	if tg.v4 {
		return mountFUSE4(t, tg, opts)
	}
	testutil.NeedRoot(t, "FUSE mounts (mount(2) directly) need root")
	testutil.NeedFUSE(t)
	c, _ := tg.client(t, nfs.Options{})
	tree, err := nfstree.New(c, opts)
	if err != nil {
		t.Fatal(err)
	}
	dir, unmount := mountTree(t, tree)
	return dir, unmount, tree
}

// mountTree mounts tree on a fresh directory (see mountFUSE).
func mountTree(t testing.TB, tree *nfstree.FS) (string, func()) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "mnt")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	srv, err := tree.Mount(ctxT(t), dir)
	if err != nil {
		t.Fatalf("FUSE mount: %v", err)
	}
	done := make(chan struct{})
	go func() { srv.Wait(); close(done) }()
	unmounted := false
	unmount := func() {
		if unmounted {
			return
		}
		unmounted = true
		if err := testutil.UnmountFUSE(dir, srv.Unmount, 5*time.Second); err != nil {
			t.Log(err)
		}
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			t.Errorf("FUSE server for %s did not stop", dir)
		}
	}
	t.Cleanup(unmount)
	return dir, unmount
}

// treeSums is testutil.TreeSums; a walk error fails t.
func treeSums(t *testing.T, root string) map[string]string {
	t.Helper()
	out, err := testutil.TreeSums(root)
	if err != nil {
		t.Fatalf("walking %s: %v", root, err)
	}
	return out
}

func diffSums(t *testing.T, what string, want, got map[string]string) {
	t.Helper()
	var bad []string
	for k, v := range want {
		if got[k] != v {
			bad = append(bad, fmt.Sprintf("%s: want %q got %q", k, v, got[k]))
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			bad = append(bad, fmt.Sprintf("%s: unexpected %q", k, got[k]))
		}
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		if len(bad) > 10 {
			bad = append(bad[:10], fmt.Sprintf("... and %d more", len(bad)-10))
		}
		t.Fatalf("%s: %d differences:\n%s", what, len(bad), strings.Join(bad, "\n"))
	}
}

// sourceTarball makes a tarball of a real source tree: the Go
// distribution's src/net (about 440 files and directories).
func sourceTarball(t *testing.T) (tarball, srcDir string) {
	t.Helper()
	testutil.NeedCmd(t, "tar")
	goroot := runtime.GOROOT()
	if out, err := exec.Command("go", "env", "GOROOT").Output(); err == nil {
		goroot = strings.TrimSpace(string(out))
	}
	srcDir = filepath.Join(goroot, "src", "net")
	if _, err := os.Stat(srcDir); err != nil {
		testutil.Missing(t, "no Go source tree at %s (the test tars it through the mount): %v", srcDir, err)
	}
	tarball = filepath.Join(t.TempDir(), "net.tar")
	testutil.Run(t, 2*time.Minute, "tar", "-C", filepath.Dir(srcDir), "-cf", tarball, "net")
	return tarball, srcDir
}

// testUntarRemount untars a real source tree through the FUSE mount,
// checks every file against the source, unmounts, mounts again with a new
// client and checks again, and checks the server's disk.
func testUntarRemount(t *testing.T, tg *target) {
	tarball, srcDir := sourceTarball(t)
	want := treeSums(t, srcDir)
	mnt, unmount := mountFUSE(t, tg, nfstree.Options{})
	bucket := filepath.Join(mnt, "untar")
	if err := os.Mkdir(bucket, 0o755); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	testutil.Run(t, 5*time.Minute, "tar", "-C", bucket, "-xf", tarball) // through FUSE
	t.Logf("%s: untar of %d entries took %v", tg.Name, len(want), time.Since(start))
	diffSums(t, "after untar", want, treeSums(t, filepath.Join(bucket, "net")))
	unmount()

	mnt2, unmount2 := mountFUSE(t, tg, nfstree.Options{})
	diffSums(t, "after remount", want, treeSums(t, filepath.Join(mnt2, "untar", "net")))
	diffSums(t, "on the server's disk", want, treeSums(t, filepath.Join(tg.Dir, "untar", "net")))
	testutil.Run(t, 5*time.Minute, "rm", "-rf", filepath.Join(mnt2, "untar")) // through FUSE
	if _, err := os.Stat(filepath.Join(tg.Dir, "untar")); !os.IsNotExist(err) {
		t.Fatalf("tree still on the server after rm -rf: %v", err)
	}
	unmount2()
}

// testPostmark runs PostMark (500 files, 2000 transactions) in the mount.
func testPostmark(t *testing.T, tg *target) {
	pm := testutil.NeedCmd(t, "postmark")
	mnt, _ := mountFUSE(t, tg, nfstree.Options{})
	work := filepath.Join(mnt, "postmark")
	if err := os.Mkdir(work, 0o755); err != nil {
		t.Fatal(err)
	}
	cfgFile := filepath.Join(t.TempDir(), "pm.cfg")
	cfg := fmt.Sprintf("set location %s\nset number 500\nset transactions 2000\nset size 500 10000\nset subdirectories 5\nset seed 42\nrun\nquit\n", work)
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(pm, cfgFile)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Run(); err != nil {
		t.Fatalf("postmark: %v\n%s", err, out.String())
	}
	o := out.String()
	t.Logf("%s: postmark took %v", tg.Name, time.Since(start))
	for _, want := range []string{"Creating files...Done", "Performing transactions", "Deleting files...Done", "transactions (", "created ("} {
		if !strings.Contains(o, want) {
			t.Fatalf("postmark output lacks %q:\n%s", want, o)
		}
	}
	if strings.Contains(strings.ToLower(o), "error") {
		t.Fatalf("postmark reported errors:\n%s", o)
	}
	// PostMark deletes everything it made; nothing may be left on the
	// server (a file unlinked while its RELEASE was still in flight may
	// linger under a hidden name for a moment: wait, bounded).
	var left string
	for i := 0; i < 100; i++ {
		left = ""
		ents, err := os.ReadDir(filepath.Join(tg.Dir, "postmark"))
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range ents {
			sub, _ := os.ReadDir(filepath.Join(tg.Dir, "postmark", e.Name()))
			if !e.IsDir() || len(sub) != 0 {
				left = fmt.Sprintf("%s (%d entries)", e.Name(), len(sub))
			}
		}
		if left == "" {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if left != "" {
		t.Fatalf("postmark left %s on the server", left)
	}
	for _, line := range strings.Split(o, "\n") {
		if strings.Contains(line, "transactions (") || strings.Contains(line, "Time:") || strings.Contains(line, "megabytes") {
			t.Logf("postmark: %s", strings.TrimSpace(line))
		}
	}
}

// testAccessForms writes through the three access forms and checks what
// the server stored, plus metadata operations through the kernel.
func testAccessForms(t *testing.T, tg *target) {
	mnt, _ := mountFUSE(t, tg, nfstree.Options{})
	b := filepath.Join(mnt, "forms")
	if err := os.Mkdir(b, 0o755); err != nil {
		t.Fatal(err)
	}
	data := randBytes(t, 3<<20+17)
	for _, form := range []struct {
		name  string
		flags int
	}{{"default", 0}, {"sync", syscall.O_SYNC}, {"dsync", syscall.O_DSYNC}, {"direct", syscall.O_DIRECT}} {
		p := filepath.Join(b, form.name)
		f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_TRUNC|form.flags, 0o644)
		if err != nil {
			t.Fatalf("%s: open: %v", form.name, err)
		}
		// O_DIRECT needs aligned buffers and sizes on most file systems;
		// FUSE direct_io does not, which is part of what is tested.
		for off := 0; off < len(data); off += 256 << 10 {
			if _, err := f.Write(data[off:min(off+256<<10, len(data))]); err != nil {
				t.Fatalf("%s: write: %v", form.name, err)
			}
		}
		if form.name != "default" {
			// Write-through forms: on the server before close.
			disk, err := os.ReadFile(filepath.Join(tg.Dir, "forms", form.name))
			if err != nil || !bytes.Equal(disk, data) {
				t.Fatalf("%s: server has %d bytes before close (%v), want all %d", form.name, len(disk), err, len(data))
			}
		} else if err := f.Sync(); err != nil {
			t.Fatalf("fsync: %v", err)
		}
		if err := f.Close(); err != nil {
			t.Fatalf("%s: close: %v", form.name, err)
		}
		disk, err := os.ReadFile(filepath.Join(tg.Dir, "forms", form.name))
		if err != nil || !bytes.Equal(disk, data) {
			t.Fatalf("%s: server has %d bytes after close (%v), want %d", form.name, len(disk), err, len(data))
		}
		back, err := os.ReadFile(p)
		if err != nil || !bytes.Equal(back, data) {
			t.Fatalf("%s: read back through FUSE: %d bytes, %v", form.name, len(back), err)
		}
	}
	// Default form: size is right while data is still buffered.
	p := filepath.Join(b, "buffered")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data[:100000]); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(p); err != nil || fi.Size() != 100000 {
		t.Fatalf("stat while buffered: %v %v", fi, err)
	}
	f.Close()

	// Metadata through the kernel.
	if err := os.Symlink("default", filepath.Join(b, "ln")); err != nil {
		t.Fatal(err)
	}
	if tgt, err := os.Readlink(filepath.Join(b, "ln")); err != nil || tgt != "default" {
		t.Fatalf("readlink %q %v", tgt, err)
	}
	if err := os.Link(filepath.Join(b, "sync"), filepath.Join(b, "hard")); err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	if err := syscall.Stat(filepath.Join(b, "hard"), &st); err != nil || st.Nlink != 2 {
		t.Fatalf("hard link nlink %d %v", st.Nlink, err)
	}
	if err := os.Rename(filepath.Join(b, "hard"), filepath.Join(mnt, "hard-moved")); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(filepath.Join(b, "direct"), 1000); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(tg.Dir, "forms", "direct")); err != nil || fi.Size() != 1000 {
		t.Fatalf("truncate not on server: %v %v", fi, err)
	}
	if err := os.Chmod(filepath.Join(b, "default"), 0o600); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(filepath.Join(tg.Dir, "forms", "default")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("chmod not on server: %v %v", fi, err)
	}
	err = os.Remove(b)
	if !errors.Is(err, syscall.ENOTEMPTY) {
		t.Fatalf("rmdir of a non-empty dir: %v", err)
	}
	if _, err := os.Stat(filepath.Join(b, "nope")); !os.IsNotExist(err) {
		t.Fatalf("stat of a missing file: %v", err)
	}
	var sfs syscall.Statfs_t
	if err := syscall.Statfs(mnt, &sfs); err != nil || sfs.Blocks == 0 {
		t.Fatalf("statfs: %+v %v", sfs, err)
	}
	ents, err := os.ReadDir(b)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	if got := strings.Join(names, ","); got != "buffered,default,direct,dsync,ln,sync" {
		t.Fatalf("readdir: %s", got)
	}
	if err := os.RemoveAll(b); err != nil {
		t.Fatal(err)
	}
	_ = fuse.FOPEN_DIRECT_IO
}

func forEachTarget(t *testing.T, f func(t *testing.T, tg *target)) {
	t.Run("tristore", func(t *testing.T) { f(t, startOurs(t, "")) })
	t.Run("ganesha", func(t *testing.T) { f(t, ganeshaTarget(t)) })
}

func TestFUSEUntarRemount(t *testing.T) { forEachTarget(t, testUntarRemount) }
func TestFUSEPostmark(t *testing.T)     { forEachTarget(t, testPostmark) }
func TestFUSEAccessForms(t *testing.T)  { forEachTarget(t, testAccessForms) }

// TestFUSEServerRestart: data written through the default (write-back)
// form and already sent UNSTABLE must survive a server restart that
// happens before close: COMMIT sees the new verifier and the mount resends.
// Reads and new files keep working over the reconnected client.
func TestFUSEServerRestart(t *testing.T) { testServerRestart(t, startOurs(t, "")) }

func testServerRestart(t *testing.T, tg *target) {
	mnt, _, tree := mountFUSETree(t, tg, nfstree.Options{WriteBehind: 256 << 10})
	if err := os.Mkdir(filepath.Join(mnt, "r"), 0o755); err != nil {
		t.Fatal(err)
	}
	data := randBytes(t, 3<<20+5)
	p := filepath.Join(mnt, "r", "f")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		t.Fatal(err)
	}
	tg.restart(t)
	restarted := time.Now()
	if err := f.Close(); err != nil {
		t.Fatalf("close after a server restart: %v", err)
	}
	if commits, resends := tree.Stats(); resends == 0 || commits == 0 {
		t.Fatalf("after a restart between WRITE and COMMIT: %d commits, %d resends; want a resend", commits, resends)
	}
	if disk, err := os.ReadFile(filepath.Join(tg.Dir, "r", "f")); err != nil || !bytes.Equal(disk, data) {
		t.Fatalf("server has %d bytes (%v), want %d", len(disk), err, len(data))
	}
	if back, err := os.ReadFile(p); err != nil || !bytes.Equal(back, data) {
		t.Fatalf("read back after restart: %d bytes, %v", len(back), err)
	}
	if err := os.WriteFile(filepath.Join(mnt, "r", "g"), []byte("after"), 0o644); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(restarted); tg.v4 && d > 20*time.Second {
		// v4.1: the new session has the old owner ID, so its
		// RECLAIM_COMPLETE ends the restarted server's grace period
		// (else a create waits for the whole period, 90 s).
		t.Fatalf("v4.1: the create after the restart waited %v (grace period not ended by our reclaim)", d)
	}
}

// testUnlinkOpen: a file unlinked while open stays readable and writable
// through its descriptor (silly rename) and is gone at the last close;
// directory listings carry "." and "..".
func testUnlinkOpen(t *testing.T, tg *target) {
	mnt, _ := mountFUSE(t, tg, nfstree.Options{})
	d := filepath.Join(mnt, "silly")
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(d, "f")
	if err := os.WriteFile(p, []byte("still here"), 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(p, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); !os.IsNotExist(err) {
		t.Fatalf("stat after unlink: %v", err)
	}
	buf := make([]byte, 10)
	if n, err := f.ReadAt(buf, 0); err != nil || string(buf[:n]) != "still here" {
		t.Fatalf("read through the fd after unlink: %q %v", buf[:n], err)
	}
	if _, err := f.WriteAt([]byte("STILL"), 0); err != nil {
		t.Fatalf("write through the fd after unlink: %v", err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	// FUSE sends RELEASE asynchronously after close(2): wait for it (bounded).
	var ents []os.DirEntry
	for i := 0; i < 100; i++ {
		if ents, err = os.ReadDir(filepath.Join(tg.Dir, "silly")); err != nil || len(ents) == 0 {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil || len(ents) != 0 {
		t.Fatalf("server dir after last close: %d entries (%v)", len(ents), err)
	}
	out, err := testutil.TryRun(time.Minute, "ls", "-a", d)
	if err != nil || strings.Join(strings.Fields(out), " ") != ". .." {
		t.Fatalf("ls -a of an empty dir: %q %v", out, err)
	}
}

func TestFUSEUnlinkOpen(t *testing.T) { forEachTarget(t, testUnlinkOpen) }

// testRandomIO drives random writes, reads, truncates, reopens and a second
// descriptor through the default (write-back) form and checks every read
// and the final file on the server against an in-memory model.
func testRandomIO(t *testing.T, tg *target) {
	mnt, _ := mountFUSE(t, tg, nfstree.Options{WriteBehind: 512 << 10})
	d := filepath.Join(mnt, "fsx")
	if err := os.Mkdir(d, 0o755); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(d, "f")
	f, err := os.OpenFile(p, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { f.Close() }()
	g, err := os.Open(p) // a second, read-only descriptor
	if err != nil {
		t.Fatal(err)
	}
	defer func() { g.Close() }()
	rng := mathrand.New(mathrand.NewPCG(1, 2))
	var model []byte
	const maxSize = 3 << 20
	for op := 0; op < 400; op++ {
		switch k := rng.IntN(10); {
		case k < 4: // write
			off := rng.IntN(maxSize)
			n := 1 + rng.IntN(300<<10)
			buf := make([]byte, n)
			for i := range buf {
				buf[i] = byte(rng.Uint32())
			}
			if _, err := f.WriteAt(buf, int64(off)); err != nil {
				t.Fatalf("op %d write %d@%d: %v", op, n, off, err)
			}
			if off+n > len(model) {
				model = append(model, make([]byte, off+n-len(model))...)
			}
			copy(model[off:], buf)
		case k < 7: // read through either descriptor
			rd := f
			if k == 6 {
				rd = g
			}
			off := rng.IntN(maxSize)
			n := 1 + rng.IntN(200<<10)
			buf := make([]byte, n)
			got, err := rd.ReadAt(buf, int64(off))
			if err != nil && err != io.EOF {
				t.Fatalf("op %d read %d@%d: %v", op, n, off, err)
			}
			want := []byte{}
			if off < len(model) {
				want = model[off:min(off+n, len(model))]
			}
			if !bytes.Equal(buf[:got], want) {
				t.Fatalf("op %d read %d@%d via fd %d: got %d bytes, want %d (or contents differ)", op, n, off, k-3, got, len(want))
			}
		case k == 7: // truncate
			sz := rng.IntN(maxSize)
			if err := f.Truncate(int64(sz)); err != nil {
				t.Fatalf("op %d truncate %d: %v", op, sz, err)
			}
			if sz < len(model) {
				model = model[:sz]
			} else {
				model = append(model, make([]byte, sz-len(model))...)
			}
		case k == 8: // stat
			fi, err := os.Stat(p)
			if err != nil || fi.Size() != int64(len(model)) {
				t.Fatalf("op %d stat: size %v (%v), want %d", op, fi.Size(), err, len(model))
			}
		default: // close and reopen (commit; close-to-open)
			if err := f.Close(); err != nil {
				t.Fatalf("op %d close: %v", op, err)
			}
			if f, err = os.OpenFile(p, os.O_RDWR, 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	disk, err := os.ReadFile(filepath.Join(tg.Dir, "fsx", "f"))
	if err != nil || !bytes.Equal(disk, model) {
		t.Fatalf("server file: %d bytes (%v), model %d bytes", len(disk), err, len(model))
	}
}

func TestFUSERandomIO(t *testing.T) { forEachTarget(t, testRandomIO) }

// TestFUSEUntarAcrossRestarts: tar keeps extracting through the mount while
// our server is restarted twice underneath it; the client reconnects,
// re-sends lost calls (and judges lost non-idempotent ones, see
// client/nfs/dirops.go), and the tree comes out complete and correct.
func TestFUSEUntarAcrossRestarts(t *testing.T) {
	tarball, srcDir := sourceTarball(t)
	want := treeSums(t, srcDir)
	tg := startOurs(t, "")
	mnt, _ := mountFUSE(t, tg, nfstree.Options{})
	if err := os.Mkdir(filepath.Join(mnt, "rs"), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("tar", "-C", filepath.Join(mnt, "rs"), "-xf", tarball)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	during := 0 // restarts while tar was still running
	for i := 0; i < 2; i++ {
		select {
		case err := <-done:
			done <- err
			i = 2
			continue
		case <-time.After(150 * time.Millisecond):
		}
		tg.restart(t)
		during++
	}
	if err := <-done; err != nil {
		t.Fatalf("tar across server restarts: %v\n%s", err, out.String())
	}
	if during == 0 {
		t.Fatal("tar finished before the first restart; the test proved nothing")
	}
	t.Logf("%d server restarts during tar", during)
	diffSums(t, "after untar across restarts", want, treeSums(t, filepath.Join(mnt, "rs", "net")))
	diffSums(t, "on the server's disk", want, treeSums(t, filepath.Join(tg.Dir, "rs", "net")))
}

// TestFUSEOwnership: a file a non-root process creates through the mount
// belongs to that process's uid/gid on the server, and the kernel enforces
// permissions from the attributes (default_permissions).
func TestFUSEOwnership(t *testing.T) { testOwnership(t, false) }

// testOwnership is TestFUSEOwnership, over v4.1 if v4.
func testOwnership(t *testing.T, v4 bool) {
	testutil.NeedRoot(t, "switching to another uid needs root")
	tg := startOurs(t, "")
	tg.v4 = v4
	mnt, _ := mountFUSE(t, tg, nfstree.Options{})
	// Let uid 65534 reach the mount point through the test's temp dirs.
	for d := filepath.Dir(mnt); d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
		os.Chmod(d, 0o755)
	}
	shared := filepath.Join(mnt, "shared")
	if err := os.Mkdir(shared, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(shared, 0o777); err != nil {
		t.Fatal(err)
	}
	private := filepath.Join(mnt, "private")
	if err := os.Mkdir(private, 0o700); err != nil {
		t.Fatal(err)
	}
	asNobody := func(script string) error {
		cmd := exec.Command("/bin/sh", "-c", script)
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
		out, err := cmd.CombinedOutput()
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	}
	if err := asNobody("echo hi > " + shared + "/mine && mkdir " + shared + "/d"); err != nil {
		t.Fatalf("nobody creating in a 0777 dir: %v", err)
	}
	for _, name := range []string{"mine", "d"} {
		var st syscall.Stat_t
		if err := syscall.Stat(filepath.Join(tg.Dir, "shared", name), &st); err != nil {
			t.Fatal(err)
		}
		if st.Uid != 65534 || st.Gid != 65534 {
			t.Fatalf("%s on the server is owned by %d:%d, want 65534:65534", name, st.Uid, st.Gid)
		}
	}
	if err := asNobody("echo hi > " + private + "/x"); err == nil {
		t.Fatal("nobody could create a file in a 0700 root directory")
	}
}

// TestFUSECallerCreds: with CallerCreds every process's own uid/gid reach
// the server, so a root_squash export squashes root but not other users,
// and the server, not a SETATTR from the mount, sets owners.
func TestFUSECallerCreds(t *testing.T) { testCallerCreds(t, false) }

// testCallerCreds is TestFUSECallerCreds, over v4.1 if v4.
func testCallerCreds(t *testing.T, v4 bool) {
	testutil.NeedRoot(t, "switching to another uid needs root")
	data := t.TempDir()
	if err := os.Chmod(data, 0o777); err != nil {
		t.Fatal(err)
	}
	tg := startOurs(t, data, "/=rw,clients=127.0.0.0/8,root_squash,anonuid=65534,anongid=65534")
	tg.v4 = v4
	mnt, _ := mountFUSE(t, tg, nfstree.Options{CallerCreds: true})
	for d := filepath.Dir(mnt); d != "/" && d != os.TempDir(); d = filepath.Dir(d) {
		os.Chmod(d, 0o755)
	}
	// root is squashed to 65534 by the server.
	if err := os.Mkdir(filepath.Join(mnt, "shared"), 0o777); err != nil {
		t.Fatal(err)
	}
	os.Chmod(filepath.Join(mnt, "shared"), 0o777)
	owner := func(rel string) (uint32, uint32) {
		var st syscall.Stat_t
		if err := syscall.Stat(filepath.Join(tg.Dir, rel), &st); err != nil {
			t.Fatal(err)
		}
		return st.Uid, st.Gid
	}
	if u, g := owner("shared"); u != 65534 || g != 65534 {
		t.Fatalf("root's mkdir on a root_squash export owned by %d:%d, want 65534:65534", u, g)
	}
	cmd := exec.Command("/bin/sh", "-c", "echo hi > "+filepath.Join(mnt, "shared", "u1234")+" && cat "+filepath.Join(mnt, "shared", "u1234"))
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 1234, Gid: 4321}}
	if out, err := cmd.CombinedOutput(); err != nil || string(out) != "hi\n" {
		t.Fatalf("uid 1234 writing through the mount: %v %q", err, out)
	}
	if u, g := owner("shared/u1234"); u != 1234 || g != 4321 {
		t.Fatalf("file of uid 1234 owned by %d:%d on the server", u, g)
	}
}
