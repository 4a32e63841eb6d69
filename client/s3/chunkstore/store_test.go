package chunkstore

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	s3client "github.com/tristore/tristore/client/s3"
	"github.com/tristore/tristore/internal/testutil/s3server"
)

const (
	testAK = "TRISTORETESTROOT0001"
	testSK = "tristore-test-root-secret-0001"
	cs     = 64 << 10 // small chunks keep the tests fast
)

// env is one S3 endpoint (tristore's own front end, in-process) with a
// bucket, and the engine to reach it.
type env struct {
	t      *testing.T
	e      *s3client.Engine
	bucket string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	srv := s3server.Start(t, s3server.Config{AccessKey: testAK, SecretKey: testSK})
	e, err := s3client.New(s3client.Config{Endpoint: srv.Endpoint, AccessKey: testAK, SecretKey: testSK, PathStyle: true, Retries: s3client.NoRetries})
	if err != nil {
		t.Fatal(err)
	}
	b := "chunks"
	if _, err := e.API().CreateBucket(context.Background(), &awss3.CreateBucketInput{Bucket: &b}); err != nil {
		t.Fatal(err)
	}
	return &env{t: t, e: e, bucket: b}
}

func (v *env) cfg(cache string) Config {
	return Config{Engine: v.e, Bucket: v.bucket, Prefix: "fs", CacheDir: cache, ChunkSize: cs, Create: true,
		CacheSize: 64 << 20, WriteBackAge: time.Hour, WriteBackEvery: time.Hour, LeaseTTL: 5 * time.Second}
}

func (v *env) open(c Config) *Store {
	v.t.Helper()
	s, err := Open(context.Background(), c)
	if err != nil {
		v.t.Fatal(err)
	}
	v.t.Cleanup(func() { s.Close(context.Background()) })
	return s
}

// keys lists the object keys under fs/chunks/.
func (v *env) chunkKeys() []string {
	v.t.Helper()
	var out []string
	p := "fs/" + chunkPrefix
	res, err := v.e.API().ListObjectsV2(context.Background(), &awss3.ListObjectsV2Input{Bucket: &v.bucket, Prefix: &p})
	if err != nil {
		v.t.Fatal(err)
	}
	for _, o := range res.Contents {
		out = append(out, aws.ToString(o.Key))
	}
	return out
}

func randBytes(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func mkfile(t *testing.T, s *Store, name string) uint64 {
	t.Helper()
	in, err := s.Create(RootIno, name, syscall.S_IFREG|0o644, 0, 0, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	return in.Ino
}

func lookup(t *testing.T, s *Store, name string) uint64 {
	t.Helper()
	in, err := s.Lookup(RootIno, name)
	if err != nil {
		t.Fatalf("lookup %s: %v", name, err)
	}
	return in.Ino
}

func readAll(t *testing.T, s *Store, ino uint64) []byte {
	t.Helper()
	a, err := s.Getattr(ino)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, a.Size)
	n, err := s.ReadAt(context.Background(), ino, b, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		t.Fatal(err)
	}
	if int64(n) != a.Size {
		t.Fatalf("read %d of %d bytes", n, a.Size)
	}
	return b
}

func write(t *testing.T, s *Store, ino uint64, p []byte, off int64) {
	t.Helper()
	if n, err := s.WriteAt(context.Background(), ino, p, off); err != nil || n != len(p) {
		t.Fatalf("write %d at %d: %d, %v", len(p), off, n, err)
	}
}

// TestRoundTrip: unaligned writes across chunk edges read back the same,
// before and after Sync, and from a second gateway with an empty cache
// (everything fetched from the bucket and verified).
func TestRoundTrip(t *testing.T) {
	v := newEnv(t)
	s := v.open(v.cfg(t.TempDir()))
	ino := mkfile(t, s, "f")
	want := randBytes(99, 5*cs+123)
	write(t, s, ino, want, 0)
	r := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 40; i++ {
		off := r.IntN(len(want) - 1)
		n := 1 + r.IntN(min(len(want)-off, 2*cs))
		p := randBytes(uint64(i), n)
		copy(want[off:], p)
		write(t, s, ino, p, int64(off))
	}
	if got := readAll(t, s, ino); !bytes.Equal(got, want) {
		t.Fatal("read back differs before sync")
	}
	if err := s.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, s, ino); !bytes.Equal(got, want) {
		t.Fatal("read back differs after sync")
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	s2 := v.open(v.cfg(t.TempDir()))
	if got := readAll(t, s2, lookup(t, s2, "f")); !bytes.Equal(got, want) {
		t.Fatal("fresh gateway reads different bytes")
	}
	if st := s2.Stats(); st.Downloads != 6 {
		t.Fatalf("fresh gateway downloaded %d chunks, want 6", st.Downloads)
	}
}

// TestSparse: a hole costs no object and no request; an all-zero write
// does not make one either.
func TestSparse(t *testing.T) {
	v := newEnv(t)
	s := v.open(v.cfg(t.TempDir()))
	ino := mkfile(t, s, "sparse")
	write(t, s, ino, []byte("head"), 0)
	write(t, s, ino, make([]byte, cs), 10*cs) // zeros: a hole
	write(t, s, ino, []byte("tail"), 1000*cs)
	if err := s.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if k := v.chunkKeys(); len(k) != 2 {
		t.Fatalf("%d chunk objects for a file with two non-zero chunks: %v", len(k), k)
	}
	s.Close(context.Background())
	s2 := v.open(v.cfg(t.TempDir()))
	ino = lookup(t, s2, "sparse")
	b := make([]byte, 8)
	if _, err := s2.ReadAt(context.Background(), ino, b, 500*cs); err != nil || !bytes.Equal(b, make([]byte, 8)) {
		t.Fatalf("hole reads %q, %v", b, err)
	}
	if st := s2.Stats(); st.Downloads != 0 {
		t.Fatalf("reading a hole downloaded %d chunks", st.Downloads)
	}
	if _, err := s2.ReadAt(context.Background(), ino, b[:4], 1000*cs); err != nil || string(b[:4]) != "tail" {
		t.Fatalf("tail reads %q, %v", b[:4], err)
	}
}

// TestCrashRecovery: dirty data of a gateway that dies without writing
// back (as kill -9 would leave it) is not in the bucket, and the next Open
// with the same cache finds it, uploads it and publishes it.
func TestCrashRecovery(t *testing.T) {
	v := newEnv(t)
	cache := t.TempDir()
	c := v.cfg(cache)
	c.LeaseTTL = 3 * time.Second
	s, err := Open(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	want := randBytes(7, 3*cs+17)
	ino := mkfile(t, s, "dirty")
	write(t, s, ino, want, 0)
	gen := s.Generation()
	s.Abandon()
	if k := v.chunkKeys(); len(k) != 0 {
		t.Fatalf("chunks uploaded before any write-back: %v", k)
	}
	// The dead gateway's lease still stands: a second gateway is refused.
	if _, err := Open(context.Background(), v.cfg(t.TempDir())); !errors.Is(err, ErrLeased) {
		t.Fatalf("open while the dead gateway's lease runs: %v, want ErrLeased", err)
	}
	time.Sleep(3 * time.Second)
	s2 := v.open(c)
	if st := s2.Stats(); st.Recovered != 4 || st.Uploads != 4 {
		t.Fatalf("recovery: %+v, want 4 dirty chunks found and uploaded", st)
	}
	if s2.Generation() <= gen {
		t.Fatalf("generation %d after recovery, was %d: nothing published", s2.Generation(), gen)
	}
	s2.Close(context.Background())
	s3 := v.open(v.cfg(t.TempDir()))
	if got := readAll(t, s3, lookup(t, s3, "dirty")); !bytes.Equal(got, want) {
		t.Fatal("recovered data differs")
	}
}

// TestWriteBack: dirty chunks are uploaded once older than WriteBackAge,
// not before, without any Sync.
func TestWriteBack(t *testing.T) {
	v := newEnv(t)
	c := v.cfg(t.TempDir())
	c.WriteBackAge, c.WriteBackEvery = 2*time.Second, 50*time.Millisecond
	s := v.open(c)
	ino := mkfile(t, s, "wb")
	write(t, s, ino, randBytes(3, cs), 0)
	start := time.Now()
	time.Sleep(300 * time.Millisecond)
	if n := s.Stats().Uploads; n != 0 && time.Since(start) < 2*time.Second {
		t.Fatalf("%d uploads before the chunk was old enough", n)
	}
	deadline := time.Now().Add(10 * time.Second)
	for s.Stats().Uploads == 0 || s.Stats().Publishes < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("no write-back within 10 s: %+v", s.Stats())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestPrefetchWindow: the window doubles with each chunk read in order
// (2^(i-1)), is capped, and a jump resets it.
func TestPrefetchWindow(t *testing.T) {
	st := &istate{lastIdx: -2}
	var got []int
	for _, idx := range []int64{0, 1, 2, 3, 4, 5, 6, 20, 21, 21, 22} {
		got = append(got, st.advance(idx, idx, 8))
	}
	want := []int{0, 1, 2, 4, 8, 8, 8, 0, 1, 1, 2}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("windows %v, want %v", got, want)
		}
	}
}

// TestPrefetch: reading a file in order from an empty cache fetches chunks
// ahead, and later reads hit them; with prefetching off nothing is.
func TestPrefetch(t *testing.T) {
	v := newEnv(t)
	s := v.open(v.cfg(t.TempDir()))
	ino := mkfile(t, s, "seq")
	want := randBytes(9, 32*cs)
	write(t, s, ino, want, 0)
	s.Close(context.Background())
	for _, pf := range []int{0, -1} {
		c := v.cfg(t.TempDir())
		c.PrefetchMax = pf
		s := v.open(c)
		ino := lookup(t, s, "seq")
		got := make([]byte, len(want))
		for off := 0; off < len(want); off += 16 << 10 {
			if _, err := s.ReadAt(context.Background(), ino, got[off:off+16<<10], int64(off)); err != nil {
				t.Fatal(err)
			}
		}
		if !bytes.Equal(got, want) {
			t.Fatal("sequential read differs")
		}
		st := s.Stats()
		if pf == 0 && (st.Prefetched == 0 || st.PrefetchHits == 0 || st.Misses >= 32) {
			t.Fatalf("prefetch on: %+v", st)
		}
		if pf < 0 && (st.Prefetched != 0 || st.Misses != 32) {
			t.Fatalf("prefetch off: %+v", st)
		}
		s.Close(context.Background())
	}
}

// TestCacheLimitSurvivesRestart: the cache stays within its size, and a
// restarted gateway finds the cached chunks again (no download).
func TestCacheLimitSurvivesRestart(t *testing.T) {
	v := newEnv(t)
	cache := t.TempDir()
	c := v.cfg(cache)
	c.CacheSize = 6 * cs
	c.PrefetchMax = -1
	s := v.open(c)
	ino := mkfile(t, s, "big")
	want := randBytes(11, 16*cs)
	write(t, s, ino, want, 0) // over the limit: written back early
	if err := s.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, s, ino); !bytes.Equal(got, want) {
		t.Fatal("differs")
	}
	if clean, dirty := s.cache.usage(); clean+dirty > c.CacheSize {
		t.Fatalf("cache holds %d bytes, limit %d", clean+dirty, c.CacheSize)
	}
	s.Close(context.Background())
	s2 := v.open(c)
	if clean, _ := s2.cache.usage(); clean < 4*cs {
		t.Fatalf("restart found %d cached bytes", clean)
	}
	b := make([]byte, cs)
	if _, err := s2.ReadAt(context.Background(), lookup(t, s2, "big"), b, 15*cs); err != nil || !bytes.Equal(b, want[15*cs:]) {
		t.Fatal(err)
	}
	if st := s2.Stats(); st.Downloads != 0 || st.Hits != 1 {
		t.Fatalf("last chunk after restart: %+v, want a hit", st)
	}
}

// TestLease: a second gateway is refused while the first holds the lease
// and may open once it is released.
func TestLease(t *testing.T) {
	v := newEnv(t)
	s := v.open(v.cfg(t.TempDir()))
	_, err := Open(context.Background(), v.cfg(t.TempDir()))
	if !errors.Is(err, ErrLeased) || !strings.Contains(err.Error(), "holds it until") {
		t.Fatalf("second gateway: %v", err)
	}
	c := v.cfg(t.TempDir())
	c.ReadOnly = true
	ro := v.open(c) // readers need no lease
	if _, err := ro.Create(RootIno, "x", syscall.S_IFREG, 0, 0, 0, ""); !errors.Is(err, ErrReadOnly) {
		t.Fatalf("create on a read-only open: %v", err)
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	v.open(v.cfg(t.TempDir()))
}

// TestConflict: a manifest replaced by someone else is never published
// over; the error says so.
func TestConflict(t *testing.T) {
	v := newEnv(t)
	s := v.open(v.cfg(t.TempDir()))
	k := "fs/" + manifestKey
	out, err := v.e.API().GetObject(context.Background(), &awss3.GetObjectInput{Bucket: &v.bucket, Key: &k})
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(out.Body)
	out.Body.Close()
	m, err := decodeManifest(raw)
	if err != nil {
		t.Fatal(err)
	}
	m.Generation += 5
	enc, _ := m.encode()
	if _, err := v.e.API().PutObject(context.Background(), &awss3.PutObjectInput{Bucket: &v.bucket, Key: &k, Body: bytes.NewReader(enc)}); err != nil {
		t.Fatal(err)
	}
	mkfile(t, s, "late")
	if err := s.Sync(context.Background()); !errors.Is(err, ErrConflict) {
		t.Fatalf("sync over a foreign manifest: %v", err)
	}
}

// TestCorruptChunk: a chunk object whose bytes were changed is refused
// (ErrCorrupt), not served.
func TestCorruptChunk(t *testing.T) {
	v := newEnv(t)
	s := v.open(v.cfg(t.TempDir()))
	write(t, s, mkfile(t, s, "c"), randBytes(5, cs), 0)
	s.Close(context.Background())
	keys := v.chunkKeys()
	if len(keys) != 1 {
		t.Fatal(keys)
	}
	if _, err := v.e.API().PutObject(context.Background(), &awss3.PutObjectInput{Bucket: &v.bucket, Key: &keys[0], Body: bytes.NewReader(randBytes(6, cs))}); err != nil {
		t.Fatal(err)
	}
	s2 := v.open(v.cfg(t.TempDir()))
	b := make([]byte, 10)
	if _, err := s2.ReadAt(context.Background(), lookup(t, s2, "c"), b, 0); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("read of a modified chunk: %v", err)
	}
}

// TestGarbage: chunks a new manifest no longer names are deleted after
// it is published; chunks shared by two files are stored once.
func TestGarbage(t *testing.T) {
	v := newEnv(t)
	s := v.open(v.cfg(t.TempDir()))
	a, b := mkfile(t, s, "a"), mkfile(t, s, "b")
	same := randBytes(1, cs)
	write(t, s, a, same, 0)
	write(t, s, b, same, 0)
	write(t, s, a, randBytes(2, cs), cs)
	if err := s.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if k := v.chunkKeys(); len(k) != 2 {
		t.Fatalf("%d objects, want 2 (one shared)", len(k))
	}
	write(t, s, a, randBytes(3, cs), cs) // replaces a's second chunk
	if err := s.Unlink(RootIno, "b"); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if k := v.chunkKeys(); len(k) != 2 {
		t.Fatalf("%d objects after overwrite, want 2", len(k))
	}
	if err := s.Truncate(context.Background(), a, 0); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	if k := v.chunkKeys(); len(k) != 0 {
		t.Fatalf("objects left after truncating to 0: %v", k)
	}
}

// TestTruncate: shrinking into a chunk zeroes its tail, so growing again
// reads zeros there, also from a fresh gateway.
func TestTruncate(t *testing.T) {
	v := newEnv(t)
	s := v.open(v.cfg(t.TempDir()))
	ino := mkfile(t, s, "t")
	want := randBytes(4, 3*cs)
	write(t, s, ino, want, 0)
	s.Sync(context.Background())
	if err := s.Truncate(context.Background(), ino, cs+100); err != nil {
		t.Fatal(err)
	}
	if err := s.Truncate(context.Background(), ino, 3*cs); err != nil {
		t.Fatal(err)
	}
	copy(want[cs+100:], make([]byte, 2*cs))
	if got := readAll(t, s, ino); !bytes.Equal(got, want) {
		t.Fatal("truncate then grow: tail is not zeros")
	}
	s.Close(context.Background())
	s2 := v.open(v.cfg(t.TempDir()))
	if got := readAll(t, s2, lookup(t, s2, "t")); !bytes.Equal(got, want) {
		t.Fatal("fresh gateway: tail is not zeros")
	}
}

// TestNamespace: the namespace operations keep POSIX rules and survive a
// restart through the bucket alone.
func TestNamespace(t *testing.T) {
	v := newEnv(t)
	s := v.open(v.cfg(t.TempDir()))
	d, err := s.Create(RootIno, "d", syscall.S_IFDIR|0o755, 0, 0, 0, "")
	if err != nil {
		t.Fatal(err)
	}
	sub, _ := s.Create(d.Ino, "sub", syscall.S_IFDIR|0o755, 0, 0, 0, "")
	f, _ := s.Create(d.Ino, "f", syscall.S_IFREG|0o600, 0, 1000, 1000, "")
	if _, err := s.Create(d.Ino, "f", syscall.S_IFREG, 0, 0, 0, ""); !errors.Is(err, ErrExist) {
		t.Fatalf("create twice: %v", err)
	}
	if _, err := s.Create(RootIno, "ln", syscall.S_IFLNK|0o777, 0, 0, 0, "d/f"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Link(f.Ino, RootIno, "hard"); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		err  error
		call func() error
	}{
		{ErrNotEmpty, func() error { return s.Rmdir(RootIno, "d") }},
		{ErrIsDir, func() error { return s.Unlink(RootIno, "d") }},
		{ErrNotDir, func() error { return s.Rmdir(RootIno, "hard") }},
		{ErrInvalid, func() error { return s.Rename(RootIno, "d", sub.Ino, "x", 0) }},
		{ErrExist, func() error { return s.Rename(RootIno, "ln", RootIno, "hard", RenameNoReplace) }},
		{ErrNotDir, func() error { return s.Rename(RootIno, "d", RootIno, "hard", 0) }},
		{ErrNameTooLong, func() error {
			_, err := s.Create(RootIno, strings.Repeat("n", 256), syscall.S_IFREG, 0, 0, 0, "")
			return err
		}},
	} {
		if err := c.call(); !errors.Is(err, c.err) {
			t.Fatalf("got %v, want %v", err, c.err)
		}
	}
	if err := s.Rename(d.Ino, "sub", RootIno, "moved", 0); err != nil {
		t.Fatal(err)
	}
	if err := s.Rename(RootIno, "hard", RootIno, "ln", RenameExchange); err != nil {
		t.Fatal(err)
	}
	write(t, s, f.Ino, []byte("data"), 0)
	s.Close(context.Background())
	s2 := v.open(v.cfg(t.TempDir()))
	ents, _ := s2.ReadDir(RootIno)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name)
	}
	if strings.Join(names, ",") != "d,hard,ln,moved" {
		t.Fatalf("root after restart: %v", names)
	}
	ln, _ := s2.Lookup(RootIno, "ln")
	hard, _ := s2.Lookup(RootIno, "hard")
	root, _ := s2.Getattr(RootIno)
	dd, _ := s2.Getattr(d.Ino)
	if ln.Ino != f.Ino || ln.Nlink != 2 || ln.UID != 1000 || hard.Mode&syscall.S_IFMT != syscall.S_IFLNK || root.Nlink != 4 || dd.Nlink != 2 {
		t.Fatalf("ln %+v hard %+v root nlink %d d nlink %d", ln, hard, root.Nlink, dd.Nlink)
	}
	if got := readAll(t, s2, ln.Ino); string(got) != "data" {
		t.Fatalf("hard link reads %q", got)
	}
	// An unlinked file stays readable while open, and goes at release.
	s2.Open(ln.Ino)
	s2.Unlink(RootIno, "ln")
	s2.Unlink(d.Ino, "f")
	if got := readAll(t, s2, ln.Ino); string(got) != "data" {
		t.Fatal("open unlinked file unreadable")
	}
	s2.Release(ln.Ino)
	if _, err := s2.Getattr(ln.Ino); !errors.Is(err, ErrNotExist) {
		t.Fatalf("released unlinked inode: %v", err)
	}
}

// TestBadEndpoint: wrong credentials, a missing bucket and a refused
// memory bound are clear errors at Open.
func TestBadEndpoint(t *testing.T) {
	v := newEnv(t)
	bad, _ := s3client.New(s3client.Config{Endpoint: v.e.Config().Endpoint, AccessKey: testAK, SecretKey: "wrong", PathStyle: true, Retries: s3client.NoRetries})
	c := v.cfg(t.TempDir())
	c.Engine = bad
	if _, err := Open(context.Background(), c); !errors.Is(err, ErrDenied) {
		t.Fatalf("wrong secret: %v", err)
	}
	c = v.cfg(t.TempDir())
	c.Bucket = "nosuch"
	if _, err := Open(context.Background(), c); !errors.Is(err, ErrNoBucket) {
		t.Fatalf("missing bucket: %v", err)
	}
	c = v.cfg(t.TempDir())
	c.Create = false
	if _, err := Open(context.Background(), c); !errors.Is(err, ErrNoStore) {
		t.Fatalf("no store, no create: %v", err)
	}
	c = v.cfg(t.TempDir())
	c.MaxMemory, c.Parallelism = 4*cs, 8
	if _, err := Open(context.Background(), c); !errors.Is(err, s3client.ErrMemoryBound) {
		t.Fatalf("memory bound: %v", err)
	}
}

// TestGrowPastStaleTail: a manifest may name a last chunk whose object
// holds bytes past the file's size (published in the middle of a
// truncate); growing the file, by truncate or by a write further on, must
// read zeros there, not the old bytes.
func TestGrowPastStaleTail(t *testing.T) {
	v := newEnv(t)
	s := v.open(v.cfg(t.TempDir()))
	ctx := context.Background()
	a, b := mkfile(t, s, "a"), mkfile(t, s, "b")
	full := randBytes(8, cs)
	write(t, s, a, full, 0)
	write(t, s, b, full, 0)
	if err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	// The state a publish during a truncate leaves: the full chunk named,
	// the size already 10.
	s.mu.Lock()
	for _, ino := range []uint64{a, b} {
		at := attrs(s.m.Inodes[ino])
		at.Size = 10
		if err := s.record(&rec{O: "i", I: at}); err != nil {
			t.Fatal(err)
		}
	}
	s.mu.Unlock()
	if err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	s.Close(ctx)
	s2 := v.open(v.cfg(t.TempDir()))
	a, b = lookup(t, s2, "a"), lookup(t, s2, "b")
	if err := s2.Truncate(ctx, a, cs); err != nil {
		t.Fatal(err)
	}
	write(t, s2, b, []byte("x"), 3*cs)
	want := append(append([]byte{}, full[:10]...), make([]byte, cs-10)...)
	if got := readAll(t, s2, a); !bytes.Equal(got, want) {
		t.Fatal("truncate up exposed bytes past the old size")
	}
	if got := readAll(t, s2, b)[:cs]; !bytes.Equal(got, want) {
		t.Fatal("a write further on exposed bytes past the old size")
	}
}

// TestAppendDuringWriteBack: appends racing a write-back that runs all
// the time lose nothing: a chunk read for upload before the append's size
// is recorded must stay dirty, not become a clean copy cut at the old size.
func TestAppendDuringWriteBack(t *testing.T) {
	v := newEnv(t)
	c := v.cfg(t.TempDir())
	c.WriteBackAge, c.WriteBackEvery = time.Nanosecond, time.Millisecond
	s := v.open(c)
	ino := mkfile(t, s, "log")
	r := rand.New(rand.NewPCG(3, 3))
	var want []byte
	for i := 0; i < 400; i++ {
		p := randBytes(uint64(i), 1+r.IntN(3000))
		write(t, s, ino, p, int64(len(want)))
		want = append(want, p...)
	}
	if err := s.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	s.Close(context.Background())
	s2 := v.open(v.cfg(t.TempDir()))
	if got := readAll(t, s2, lookup(t, s2, "log")); !bytes.Equal(got, want) {
		n := 0
		for n < len(got) && got[n] == want[n] {
			n++
		}
		t.Fatalf("appends lost: first difference at byte %d of %d", n, len(want))
	}
}

// TestReadWithCacheFullOfDirtyData: a cache whose limit is taken up by
// dirty chunks still serves reads of clean chunks (the one just fetched
// stays, or the read is served from its own download), never EIO.
func TestReadWithCacheFullOfDirtyData(t *testing.T) {
	v := newEnv(t)
	c := v.cfg(t.TempDir())
	s := v.open(c)
	ro := mkfile(t, s, "ro")
	want := randBytes(5, 8*cs)
	write(t, s, ro, want, 0)
	if err := s.Sync(context.Background()); err != nil {
		t.Fatal(err)
	}
	s.Close(context.Background())
	c = v.cfg(t.TempDir())
	c.CacheSize = 4 * cs
	s2 := v.open(c)
	w := mkfile(t, s2, "w")
	// Dirty chunks fill the limit (a write-back would only start when
	// they exceed it).
	write(t, s2, w, randBytes(6, 4*cs), 0)
	if got := readAll(t, s2, lookup(t, s2, "ro")); !bytes.Equal(got, want) {
		t.Fatal("read with a cache full of dirty data differs")
	}
}
