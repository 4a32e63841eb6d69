package cloudfs

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	s3client "github.com/tristore/tristore/client/s3"
	"github.com/tristore/tristore/client/s3/chunkstore"
	"github.com/tristore/tristore/internal/testutil"
	"github.com/tristore/tristore/internal/testutil/s3server"
)

const (
	testAK = "TRISTORETESTROOT0001"
	testSK = "tristore-test-root-secret-0001"
	bucket = "cloudfs"
)

// helperEnv makes the test binary a mount process (the crash test kills
// it with SIGKILL); its value is a JSON helperConfig.
const helperEnv = "TRISTORE_CLOUDFS_TEST_HELPER"

type helperConfig struct {
	Endpoint, Cache, Dir, Ready string
}

func TestMain(m *testing.M) {
	if v := os.Getenv(helperEnv); v != "" {
		os.Exit(helperMain(v))
	}
	os.Exit(m.Run())
}

// helperMain mounts like `tristore mount` with write-back that never fires
// and no flush on close, signals readiness and waits to be killed.
func helperMain(v string) int {
	var hc helperConfig
	if err := json.Unmarshal([]byte(v), &hc); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	e, err := engine(hc.Endpoint)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	c := storeConfig(e, hc.Cache)
	st, err := chunkstore.Open(context.Background(), c)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	f, _ := New(st, Options{})
	if _, err := f.Mount(hc.Dir); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	os.WriteFile(hc.Ready, []byte("ok"), 0o600)
	time.Sleep(10 * time.Minute) // killed long before
	return 3
}

func engine(endpoint string) (*s3client.Engine, error) {
	return s3client.New(s3client.Config{Endpoint: endpoint, AccessKey: testAK, SecretKey: testSK, PathStyle: true, Retries: s3client.NoRetries})
}

func storeConfig(e *s3client.Engine, cache string) chunkstore.Config {
	return chunkstore.Config{Engine: e, Bucket: bucket, Prefix: "tree", CacheDir: cache, Create: true,
		ChunkSize: 256 << 10, CacheSize: 256 << 20, WriteBackAge: time.Hour, WriteBackEvery: time.Hour, LeaseTTL: 3 * time.Second}
}

type rig struct {
	t        *testing.T
	endpoint string
	e        *s3client.Engine
	fsOpts   func(*Options) // changes the mount options of later mounts
}

func newRig(t *testing.T) *rig {
	t.Helper()
	testutil.NeedFUSE(t)
	testutil.NeedRoot(t, "FUSE mounts with allow_other")
	srv := s3server.Start(t, s3server.Config{AccessKey: testAK, SecretKey: testSK})
	e, err := engine(srv.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	b := bucket
	if _, err := e.API().CreateBucket(context.Background(), &awss3.CreateBucketInput{Bucket: &b}); err != nil {
		t.Fatal(err)
	}
	return &rig{t: t, endpoint: srv.Endpoint, e: e}
}

// mounted is one in-process mount; unmount closes the store (final
// write-back) and is also the test's cleanup.
type mounted struct {
	dir   string
	st    *chunkstore.Store
	done  bool
	unmnt func() error
}

func (r *rig) mount(cache string, mods ...func(*chunkstore.Config)) *mounted {
	r.t.Helper()
	c := storeConfig(r.e, cache)
	for _, m := range mods {
		m(&c)
	}
	st, err := chunkstore.Open(context.Background(), c)
	if err != nil {
		r.t.Fatal(err)
	}
	o := Options{FlushOnClose: true}
	if r.fsOpts != nil {
		r.fsOpts(&o)
	}
	f, err := New(st, o)
	if err != nil {
		r.t.Fatal(err)
	}
	dir := r.t.TempDir()
	srv, err := f.Mount(dir)
	if err != nil {
		st.Close(context.Background())
		r.t.Fatal(err)
	}
	m := &mounted{dir: dir, st: st}
	m.unmnt = func() error {
		if m.done {
			return nil
		}
		m.done = true
		var err error
		for i := 0; i < 40; i++ {
			if err = srv.Unmount(); err == nil {
				break
			}
			time.Sleep(250 * time.Millisecond)
		}
		if err != nil {
			syscall.Unmount(dir, syscall.MNT_DETACH)
		}
		return errors.Join(err, st.Close(context.Background()))
	}
	r.t.Cleanup(func() { m.unmnt() })
	return m
}

// run runs a command in dir (testutil.RunIn, at most 2 minutes) with git
// configured for tests and returns its output.
func run(t *testing.T, dir string, name string, args ...string) string {
	t.Helper()
	env := append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "HOME="+t.TempDir(),
		"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	return testutil.RunIn(t, 2*time.Minute, dir, env, name, args...)
}

func sums(t *testing.T, dir string) map[string]string {
	t.Helper()
	s, err := testutil.TreeSums(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func sameTree(t *testing.T, got, want map[string]string) {
	t.Helper()
	if !maps.Equal(got, want) {
		n := 0
		for k, v := range want {
			if got[k] != v && n < 5 {
				t.Errorf("%s: got %q want %q", k, got[k], v)
				n++
			}
		}
		t.Fatalf("trees differ: %d vs %d entries", len(got), len(want))
	}
}

// TestTarGrepRemount: a real source tree untarred into the mount reads
// back identical, grep -r finds what it should, and a second gateway with
// an empty cache sees the same tree from the bucket alone.
func TestTarGrepRemount(t *testing.T) {
	r := newRig(t)
	testutil.NeedCmd(t, "tar")
	src := filepath.Join(runtime.GOROOT(), "src", "encoding")
	tarball := filepath.Join(t.TempDir(), "src.tar")
	run(t, "/", "tar", "-C", filepath.Dir(src), "-cf", tarball, "encoding")
	want := sums(t, src)

	m := r.mount(t.TempDir())
	run(t, m.dir, "tar", "-xf", tarball)
	sameTree(t, sums(t, filepath.Join(m.dir, "encoding")), want)
	out := run(t, m.dir, "grep", "-rl", "func NewEncoder", "encoding")
	if !strings.Contains(out, "encoding/json/stream.go") || !strings.Contains(out, "encoding/gob/encoder.go") {
		t.Fatalf("grep -r found:\n%s", out)
	}
	if err := m.unmnt(); err != nil {
		t.Fatal(err)
	}
	m2 := r.mount(t.TempDir())
	sameTree(t, sums(t, filepath.Join(m2.dir, "encoding")), want)
	// cp out and back in: a copy reads identical.
	run(t, m2.dir, "cp", "-a", "encoding", "copy")
	sameTree(t, sums(t, filepath.Join(m2.dir, "copy")), want)
}

// TestListingReadsNoData: ls -lR of a tree downloads no chunk.
func TestListingReadsNoData(t *testing.T) {
	r := newRig(t)
	m := r.mount(t.TempDir())
	for i := range 20 {
		if err := os.WriteFile(filepath.Join(m.dir, fmt.Sprintf("f%02d", i)), bytes.Repeat([]byte{byte(i + 1)}, 300<<10), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	m.unmnt()
	m2 := r.mount(t.TempDir())
	out := run(t, m2.dir, "ls", "-lR")
	if !strings.Contains(out, "307200") {
		t.Fatalf("ls -l shows no sizes:\n%s", out)
	}
	if d := m2.st.Stats().Downloads; d != 0 {
		t.Fatalf("listing downloaded %d chunks", d)
	}
}

// TestGit: git init, add, commit and fsck in the mount; after a remount
// from an empty cache the work tree is clean and the history intact.
func TestGit(t *testing.T) {
	r := newRig(t)
	testutil.NeedCmd(t, "git")
	m := r.mount(t.TempDir())
	repo := filepath.Join(m.dir, "repo")
	os.Mkdir(repo, 0o755)
	run(t, repo, "git", "init", "-q")
	for i := range 30 {
		os.WriteFile(filepath.Join(repo, fmt.Sprintf("file%d.txt", i)), []byte(strings.Repeat(fmt.Sprintf("line %d\n", i), 100+i)), 0o644)
	}
	run(t, repo, "git", "add", ".")
	run(t, repo, "git", "commit", "-qm", "first")
	os.WriteFile(filepath.Join(repo, "file0.txt"), []byte("changed\n"), 0o644)
	run(t, repo, "git", "commit", "-qam", "second")
	run(t, repo, "git", "gc", "-q")
	run(t, repo, "git", "fsck", "--full")
	head := run(t, repo, "git", "rev-parse", "HEAD")
	m.unmnt()
	m2 := r.mount(t.TempDir())
	repo = filepath.Join(m2.dir, "repo")
	run(t, repo, "git", "fsck", "--full")
	if got := run(t, repo, "git", "rev-parse", "HEAD"); got != head {
		t.Fatalf("HEAD %s after remount, was %s", got, head)
	}
	if st := run(t, repo, "git", "status", "--porcelain"); st != "" {
		t.Fatalf("work tree not clean after remount:\n%s", st)
	}
}

// TestSQLite: a database written through the mount passes integrity_check
// and keeps its rows after a remount from an empty cache.
func TestSQLite(t *testing.T) {
	r := newRig(t)
	testutil.NeedCmd(t, "sqlite3")
	m := r.mount(t.TempDir())
	db := filepath.Join(m.dir, "t.db")
	var sql strings.Builder
	sql.WriteString("CREATE TABLE t(id INTEGER PRIMARY KEY, v TEXT);\n")
	for b := 0; b < 20; b++ {
		sql.WriteString("BEGIN;\n")
		for i := 0; i < 100; i++ {
			fmt.Fprintf(&sql, "INSERT INTO t(v) VALUES('%s');\n", strings.Repeat(fmt.Sprint(b*100+i), 20))
		}
		sql.WriteString("COMMIT;\n")
	}
	sql.WriteString("DELETE FROM t WHERE id % 7 = 0;\nVACUUM;\n")
	cmd := exec.Command("sqlite3", db)
	cmd.Stdin = strings.NewReader(sql.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("sqlite3: %v\n%s", err, out)
	}
	check := func(db string) {
		if out := run(t, "/", "sqlite3", db, "PRAGMA integrity_check; SELECT count(*), sum(id) FROM t;"); out != "ok\n1715|1715715\n" {
			t.Fatalf("sqlite3 says:\n%s", out)
		}
	}
	check(db)
	m.unmnt()
	m2 := r.mount(t.TempDir())
	check(filepath.Join(m2.dir, "t.db"))
}

// TestPOSIX: rename over an open file, truncate, sparse writes, an
// unlinked file still open, hard and symbolic links, and the hard errors.
func TestPOSIX(t *testing.T) {
	r := newRig(t)
	m := r.mount(t.TempDir())
	p := func(n string) string { return filepath.Join(m.dir, n) }
	// Sparse: a write far out leaves a hole of zeros, and costs one chunk.
	f, err := os.Create(p("sparse"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("end"), 1<<30); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4096)
	if _, err := f.ReadAt(buf, 1<<29); err != nil || !bytes.Equal(buf, make([]byte, 4096)) {
		t.Fatalf("hole: %v", err)
	}
	if err := f.Truncate(5); err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(100); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p("sparse")); !bytes.Equal(b, make([]byte, 100)) {
		t.Fatalf("truncate down and up: %q", b)
	}
	// fallocate is refused, not faked.
	if err := syscall.Fallocate(int(f.Fd()), 0, 0, 1<<20); !errors.Is(err, syscall.EOPNOTSUPP) {
		t.Fatalf("fallocate: %v", err)
	}
	f.Close()
	// An open file replaced by rename keeps its data for its reader.
	os.WriteFile(p("a"), []byte("old"), 0o644)
	os.WriteFile(p("b"), []byte("new"), 0o644)
	old, err := os.Open(p("a"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(p("b"), p("a")); err != nil {
		t.Fatal(err)
	}
	if b, _ := io.ReadAll(old); string(b) != "old" {
		t.Fatalf("open replaced file reads %q", b)
	}
	old.Close()
	if b, _ := os.ReadFile(p("a")); string(b) != "new" {
		t.Fatalf("renamed file reads %q", b)
	}
	// Links.
	if err := os.Link(p("a"), p("hard")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("a", p("sym")); err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	syscall.Stat(p("hard"), &st)
	if st.Nlink != 2 {
		t.Fatalf("nlink %d", st.Nlink)
	}
	if b, _ := os.ReadFile(p("sym")); string(b) != "new" {
		t.Fatalf("symlink reads %q", b)
	}
	// Directories: rename into itself and rmdir of a non-empty one fail.
	os.MkdirAll(p("d/e"), 0o755)
	if err := os.Rename(p("d"), p("d/e/x")); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("rename into own subtree: %v", err)
	}
	if err := syscall.Rmdir(p("d")); !errors.Is(err, syscall.ENOTEMPTY) {
		t.Fatalf("rmdir non-empty: %v", err)
	}
	if err := syscall.Setxattr(p("a"), "user.x", []byte("1"), 0); err == nil {
		t.Fatal("setxattr succeeded on a store without xattrs")
	}
	// chmod persists.
	os.Chmod(p("a"), 0o600)
	m.unmnt()
	m2 := r.mount(t.TempDir())
	fi, err := os.Stat(filepath.Join(m2.dir, "a"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("after remount: %v %v", fi, err)
	}
	if fi, _ := os.Stat(filepath.Join(m2.dir, "sparse")); fi.Size() != 100 {
		t.Fatalf("sparse size %d", fi.Size())
	}
}

// TestCrashKill: a mount process killed (SIGKILL) with dirty data in its
// cache; the data is not in the bucket yet, the next mount with that cache
// uploads it, and a gateway with an empty cache then reads it identical.
// The dirty data includes partial chunks: writes into a file already in
// the bucket whose chunks the killed mount never fetched.
func TestCrashKill(t *testing.T) {
	r := newRig(t)
	cache, dir := t.TempDir(), t.TempDir()
	old := make([]byte, 700<<10)
	for i := range old {
		old[i] = byte(i*7 + i>>9)
	}
	{
		st, err := chunkstore.Open(context.Background(), storeConfig(r.e, t.TempDir()))
		if err != nil {
			t.Fatal(err)
		}
		a, err := st.Create(chunkstore.RootIno, "old", syscall.S_IFREG|0o644, 0, 0, 0, "")
		if err == nil {
			_, err = st.WriteAt(context.Background(), a.Ino, old, 0)
		}
		if err = errors.Join(err, st.Close(context.Background())); err != nil {
			t.Fatal(err)
		}
	}
	ready := filepath.Join(t.TempDir(), "ready")
	hc, _ := json.Marshal(helperConfig{Endpoint: r.endpoint, Cache: cache, Dir: dir, Ready: ready})
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), helperEnv+"="+string(hc))
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	killed := false
	t.Cleanup(func() {
		if !killed {
			cmd.Process.Kill()
			cmd.Wait()
		}
		syscall.Unmount(dir, syscall.MNT_DETACH)
	})
	for i := 0; ; i++ {
		if _, err := os.Stat(ready); err == nil {
			break
		}
		if i > 300 {
			t.Fatal("helper mount not ready in 30 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	rnd := rand.New(rand.NewPCG(5, 5))
	want := map[string][]byte{}
	for i := range 8 {
		b := make([]byte, 100<<10+rnd.IntN(700<<10))
		for j := range b {
			b[j] = byte(rnd.Uint32())
		}
		name := fmt.Sprintf("dirty%d", i)
		want[name] = b
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.Mkdir(filepath.Join(dir, "sub"), 0o755)
	if err := os.Rename(filepath.Join(dir, "dirty7"), filepath.Join(dir, "sub", "moved")); err != nil {
		t.Fatal(err)
	}
	want["sub/moved"] = want["dirty7"]
	delete(want, "dirty7")
	// Partial chunks (256 KiB): unaligned writes into chunks 0 and 1 of
	// "old", and one across the edge of chunks 1 and 2.
	f, err := os.OpenFile(filepath.Join(dir, "old"), os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	newOld := bytes.Clone(old)
	for _, off := range []int{1000, 300 << 10, 512<<10 - 777} {
		p := bytes.Repeat([]byte{byte(off)}, 5000)
		if _, err := f.WriteAt(p, int64(off)); err != nil {
			t.Fatal(err)
		}
		copy(newOld[off:], p)
	}
	f.Close()
	want["old"] = newOld
	cmd.Process.Kill()
	cmd.Wait()
	killed = true
	syscall.Unmount(dir, syscall.MNT_DETACH)

	// Nothing was written back: a reader of the bucket sees no files.
	ro := storeConfig(r.e, t.TempDir())
	ro.ReadOnly = true
	st, err := chunkstore.Open(context.Background(), ro)
	if err != nil {
		t.Fatal(err)
	}
	if ents, _ := st.ReadDir(chunkstore.RootIno); len(ents) != 1 {
		t.Fatalf("the bucket already has %d entries before recovery, want 1 (old)", len(ents))
	}
	if a, err := st.Lookup(chunkstore.RootIno, "old"); err != nil {
		t.Fatal(err)
	} else {
		b := make([]byte, len(old))
		if n, err := st.ReadAt(context.Background(), a.Ino, b, 0); n != len(old) || !bytes.Equal(b, old) {
			t.Fatalf("old changed in the bucket before recovery: %d bytes, %v", n, err)
		}
	}
	st.Close(context.Background())

	time.Sleep(3 * time.Second) // the dead mount's lease expires
	m := r.mount(cache)
	if s := m.st.Stats(); s.Recovered == 0 || s.Uploads == 0 {
		t.Fatalf("remount with the cache recovered nothing: %+v", s)
	}
	m.unmnt()
	m2 := r.mount(t.TempDir())
	for name, b := range want {
		got, err := os.ReadFile(filepath.Join(m2.dir, name))
		if err != nil || !bytes.Equal(got, b) {
			t.Fatalf("%s after crash and recovery: %d bytes, %v (want %d)", name, len(got), err, len(b))
		}
	}
}

// TestCacheFull: writes that cannot fit the cache disk fail with ENOSPC,
// and the mount keeps working for data that fits.
func TestCacheFull(t *testing.T) {
	r := newRig(t)
	cache := t.TempDir()
	testutil.MountTmpfs(t, cache, "3m", "tristore-cloudfs-test")
	m := r.mount(cache, func(c *chunkstore.Config) { c.CacheSize = 1 << 30 }) // the limit lies: the disk is smaller
	f, err := os.Create(filepath.Join(m.dir, "big"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	// Distinct chunks: identical ones would share one cache file.
	chunk := make([]byte, 256<<10)
	var werr error
	for i := 0; i < 40 && werr == nil; i++ {
		for j := range chunk {
			chunk[j] = byte(i*31 + j)
		}
		_, werr = f.Write(chunk)
	}
	if !errors.Is(werr, syscall.ENOSPC) {
		t.Fatalf("write past a full cache disk: %v, want ENOSPC", werr)
	}
	f.Close()
	os.Remove(filepath.Join(m.dir, "big"))
	// The uploaded chunks sit in the cache as clean copies; new data needs
	// them evicted although the (lying) limit is far away.
	again := bytes.Repeat([]byte{9}, 1<<20)
	if err := os.WriteFile(filepath.Join(m.dir, "after"), again, 0o644); err != nil {
		t.Fatalf("after ENOSPC and removal: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(m.dir, "after")); err != nil || !bytes.Equal(b, again) {
		t.Fatalf("read back: %v", err)
	}
}

// TestCloseInterrupted: a close(2) whose flush is interrupted (the kernel
// cancels the request's context) succeeds, since the data stays dirty in
// the cache and the write-back uploads it; fsync keeps EINTR. Without
// FUSE: the node's Flush and Fsync are called as the kernel would.
func TestCloseInterrupted(t *testing.T) {
	srv := s3server.Start(t, s3server.Config{AccessKey: testAK, SecretKey: testSK})
	e, err := engine(srv.Endpoint)
	if err != nil {
		t.Fatal(err)
	}
	b := bucket
	if _, err := e.API().CreateBucket(context.Background(), &awss3.CreateBucketInput{Bucket: &b}); err != nil {
		t.Fatal(err)
	}
	st, err := chunkstore.Open(context.Background(), storeConfig(e, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close(context.Background())
	f, err := New(st, Options{FlushOnClose: true})
	if err != nil {
		t.Fatal(err)
	}
	a, err := st.Create(chunkstore.RootIno, "f", syscall.S_IFREG|0o644, 0, 0, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	want := bytes.Repeat([]byte("interrupted close "), 40000)
	if _, err := st.WriteAt(context.Background(), a.Ino, want, 0); err != nil {
		t.Fatal(err)
	}
	n := &Node{fsys: f, ino: a.Ino}
	h := &handle{}
	h.wrote.Store(true)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if e := n.Fsync(ctx, h, 0); e != syscall.EINTR {
		t.Fatalf("interrupted fsync: %v, want EINTR", e)
	}
	if e := n.Flush(ctx, h); e != 0 {
		t.Fatalf("interrupted close: %v, want success", e)
	}
	if s := st.Stats(); s.Uploads != 0 {
		t.Fatalf("%d uploads by a cancelled flush", s.Uploads)
	}
	// The data is still there and goes up with the next write-back.
	if err := st.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	ro := storeConfig(e, t.TempDir())
	ro.ReadOnly = true
	st2, err := chunkstore.Open(context.Background(), ro)
	if err != nil {
		t.Fatal(err)
	}
	defer st2.Close(context.Background())
	got := make([]byte, len(want))
	if k, err := st2.ReadAt(context.Background(), a.Ino, got, 0); k != len(want) || !bytes.Equal(got, want) {
		t.Fatalf("after the interrupted close and write-back: %d bytes, %v", k, err)
	}
}
