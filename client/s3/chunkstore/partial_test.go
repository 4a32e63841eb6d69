package chunkstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	s3client "github.com/tristore/tristore/client/s3"
)

// gate is a transport that counts chunk GETs and, while closed, holds
// them until it opens (or their context ends): a link so slow that a
// write waiting for a chunk would never return.
type gate struct {
	next    http.RoundTripper
	gets    atomic.Int32
	closed  atomic.Bool
	noRange atomic.Bool // play a server whose ranged answers lack Content-Range
	open    chan struct{}
}

func (g *gate) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodGet && strings.Contains(r.URL.Path, "/fs/"+chunkPrefix) {
		g.gets.Add(1)
		if g.noRange.Load() {
			resp, err := g.next.RoundTrip(r)
			if err == nil {
				resp.Header.Del("Content-Range")
			}
			return resp, err
		}
		if g.closed.Load() {
			select {
			case <-g.open:
			case <-r.Context().Done():
				return nil, r.Context().Err()
			}
		}
	}
	return g.next.RoundTrip(r)
}

// gated opens the store at v with an empty cache behind a closed gate.
func gated(t *testing.T, v *env, cache string) (*Store, *gate) {
	t.Helper()
	g := &gate{next: http.DefaultTransport, open: make(chan struct{})}
	g.closed.Store(true)
	t.Cleanup(func() {
		if g.closed.Swap(false) {
			close(g.open)
		}
	})
	e, err := s3client.New(s3client.Config{Endpoint: v.e.Config().Endpoint, AccessKey: testAK, SecretKey: testSK, PathStyle: true,
		Retries: s3client.NoRetries, HTTPClient: &http.Client{Transport: g}})
	if err != nil {
		t.Fatal(err)
	}
	c := v.cfg(cache)
	c.Engine, c.PrefetchMax = e, -1
	return v.open(c), g
}

func (g *gate) release() {
	if g.closed.Swap(false) {
		close(g.open)
	}
}

// writeSoon writes like write, failing if it takes more than 5 s (it
// waits for the gate, i.e. for the network).
func writeSoon(t *testing.T, s *Store, ino uint64, p []byte, off int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if n, err := s.WriteAt(ctx, ino, p, off); err != nil || n != len(p) {
		t.Fatalf("write %d at %d with chunk GETs held: %d, %v (waits for the network)", len(p), off, n, err)
	}
}

// seed makes files named names of 3 chunks + 100 bytes each in the
// bucket and returns their bytes.
func seed(t *testing.T, v *env, names ...string) map[string][]byte {
	t.Helper()
	s := v.open(v.cfg(t.TempDir()))
	out := map[string][]byte{}
	for i, n := range names {
		b := randBytes(uint64(100+i), 3*cs+100)
		write(t, s, mkfile(t, s, n), b, 0)
		out[n] = b
	}
	if err := s.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestWriteUncachedChunk: writes into chunks the cache does not hold make
// no GET and do not wait for one (the chunk GETs are held); a read of the
// written bytes needs none either; a read of a byte not written fetches
// the chunk and sees the merge; Sync uploads merged chunks (one GET each)
// and a chunk whose writes covered it all with none; a fresh gateway reads
// exactly base + writes.
func TestWriteUncachedChunk(t *testing.T) {
	v := newEnv(t)
	want := seed(t, v, "a", "b")
	s, g := gated(t, v, t.TempDir())
	ctx := context.Background()
	a, b := lookup(t, s, "a"), lookup(t, s, "b")

	// a: scattered writes into chunks 0 and 1, one across their edge.
	for _, w := range []struct {
		off int64
		n   int
	}{{100, 10}, {cs - 5, 20}, {cs + 3000, 4096}, {2000, 1}} {
		p := randBytes(uint64(w.off), w.n)
		writeSoon(t, s, a, p, w.off)
		copy(want["a"][w.off:], p)
	}
	// b: chunk 1 overwritten in three pieces (no single write is whole),
	// and the short last chunk's tail rewritten past its end.
	for _, w := range [][2]int64{{cs + 1000, cs - 1000}, {cs, 400}, {cs + 400, 600}, {3*cs + 50, 200}} {
		p := randBytes(uint64(w[0]), int(w[1]))
		writeSoon(t, s, b, p, w[0])
		if end := w[0] + w[1]; end > int64(len(want["b"])) {
			want["b"] = append(want["b"], make([]byte, end-int64(len(want["b"])))...)
		}
		copy(want["b"][w[0]:], p)
	}
	if n := g.gets.Load(); n != 0 {
		t.Fatalf("%d chunk GETs for writes", n)
	}
	got := make([]byte, 4096)
	if _, err := s.ReadAt(ctx, a, got, cs+3000); err != nil || !bytes.Equal(got, want["a"][cs+3000:cs+3000+4096]) {
		t.Fatalf("read of written bytes: %v", err)
	}
	if n := g.gets.Load(); n != 0 {
		t.Fatalf("%d chunk GETs reading bytes that were all written", n)
	}

	g.release()
	got = make([]byte, 300)
	if _, err := s.ReadAt(ctx, a, got, 0); err != nil || !bytes.Equal(got, want["a"][:300]) {
		t.Fatalf("read across base and written bytes: %v, same %v", err, bytes.Equal(got, want["a"][:300]))
	}
	if n := g.gets.Load(); n != 1 {
		t.Fatalf("%d chunk GETs for a read of an unwritten byte, want 1", n)
	}
	if err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	// a's chunk 1 and b's last chunk needed their bases; a's chunk 0 was
	// fetched by the read, b's chunk 1 was wholly overwritten.
	if n := g.gets.Load(); n != 3 {
		t.Fatalf("%d chunk GETs after Sync, want 3", n)
	}
	for _, n := range []string{"a", "b"} {
		if got := readAll(t, s, lookup(t, s, n)); !bytes.Equal(got, want[n]) {
			t.Fatalf("%s reads different bytes after Sync", n)
		}
	}
	s.Close(ctx)
	s2 := v.open(v.cfg(t.TempDir()))
	for _, n := range []string{"a", "b"} {
		if got := readAll(t, s2, lookup(t, s2, n)); !bytes.Equal(got, want[n]) {
			t.Fatalf("%s: a fresh gateway reads different bytes", n)
		}
	}
}

// TestPartialCrash: a gateway killed with partial chunks (written, not
// fetched, not uploaded) and a truncate into one: the next Open with its
// cache completes them from the bucket, uploads and publishes; a fresh
// gateway reads base + writes, with zeros where the truncate cut.
func TestPartialCrash(t *testing.T) {
	v := newEnv(t)
	want := seed(t, v, "p", "q")
	cache := t.TempDir()
	s, g := gated(t, v, cache)
	p, q := lookup(t, s, "p"), lookup(t, s, "q")
	w1 := randBytes(1, 3000)
	writeSoon(t, s, p, w1, cs+777)
	copy(want["p"][cs+777:], w1)
	w2 := randBytes(2, 100)
	writeSoon(t, s, q, w2, 2*cs+10)
	copy(want["q"][2*cs+10:], w2)
	// Truncate into q's partial chunk, then grow: zeros past the cut,
	// and the base's bytes there must not come back.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	if err := s.Truncate(ctx, q, 2*cs+60); err != nil {
		t.Fatal(err)
	}
	if err := s.Truncate(ctx, q, 3*cs); err != nil {
		t.Fatal(err)
	}
	cancel()
	want["q"] = append(want["q"][:2*cs+60], make([]byte, cs-60)...)
	if n := g.gets.Load(); n != 0 {
		t.Fatalf("%d chunk GETs for writes and truncates", n)
	}
	s.Abandon()
	g.release()
	time.Sleep(5 * time.Second) // the dead gateway's lease expires
	s2 := v.open(v.cfg(cache))
	if st := s2.Stats(); st.Recovered != 2 || st.Uploads != 2 {
		t.Fatalf("recovery: %+v, want 2 dirty chunks found and uploaded", st)
	}
	s2.Close(context.Background())
	s3 := v.open(v.cfg(t.TempDir()))
	for _, n := range []string{"p", "q"} {
		if got := readAll(t, s3, lookup(t, s3, n)); !bytes.Equal(got, want[n]) {
			t.Fatalf("%s: recovered data differs", n)
		}
	}
}

// TestSpans: the missing-range arithmetic.
func TestSpans(t *testing.T) {
	m := []span{{0, 100}}
	m = without(m, 10, 20)
	m = without(m, 90, 200)
	if !sameSpans(m, []span{{0, 10}, {20, 90}}) {
		t.Fatalf("without: %v", m)
	}
	if !overlaps(m, 15, 25) || overlaps(m, 10, 20) || overlaps(m, 90, 91) {
		t.Fatal("overlaps")
	}
	if c := cut(m, 30); !sameSpans(c, []span{{0, 10}, {20, 30}}) {
		t.Fatalf("cut: %v", c)
	}
	if c := without(m, 0, 100); len(c) != 0 {
		t.Fatalf("all covered: %v", c)
	}
}

// TestFetchParts: with FetchParts a chunk download is that many ranged
// GETs (parts of at least MinFetchPart), for whole chunks, a short last
// chunk, a partial chunk's base and a chunk object longer than the file
// (a stale tail: the open-ended last part brings it whole, so the hash
// matches); every read is right.
func TestFetchParts(t *testing.T) {
	v := newEnv(t)
	const big = 4 * MinFetchPart
	c := v.cfg(t.TempDir())
	c.ChunkSize = big
	s := v.open(c)
	ctx := context.Background()
	want := map[string][]byte{"f": randBytes(1, 2*big+MinFetchPart+5), "stale": randBytes(2, big)}
	for n, b := range want {
		write(t, s, mkfile(t, s, n), b, 0)
	}
	if err := s.Sync(ctx); err != nil {
		t.Fatal(err)
	}
	// The stale tail: the manifest says 10 bytes, the object holds big.
	stale := lookup(t, s, "stale")
	s.mu.Lock()
	at := attrs(s.m.Inodes[stale])
	at.Size = 10
	if err := s.record(&rec{O: "i", I: at}); err != nil {
		t.Fatal(err)
	}
	s.mu.Unlock()
	want["stale"] = want["stale"][:10]
	if err := s.Close(ctx); err != nil {
		t.Fatal(err)
	}

	g := &gate{next: http.DefaultTransport, open: make(chan struct{})}
	e, err := s3client.New(s3client.Config{Endpoint: v.e.Config().Endpoint, AccessKey: testAK, SecretKey: testSK, PathStyle: true,
		Retries: s3client.NoRetries, HTTPClient: &http.Client{Transport: g}})
	if err != nil {
		t.Fatal(err)
	}
	c = v.cfg(t.TempDir())
	c.Engine, c.PrefetchMax, c.FetchParts = e, -1, 4
	s2 := v.open(c)
	f := lookup(t, s2, "f")
	if got := readAll(t, s2, f); !bytes.Equal(got, want["f"]) {
		t.Fatal("f reads different bytes")
	}
	// Chunks of 4, 4 and 1 parts (the last is MinFetchPart+5 bytes).
	if n := g.gets.Load(); n != 9 {
		t.Fatalf("%d chunk GETs for f, want 9", n)
	}
	if got := readAll(t, s2, lookup(t, s2, "stale")); !bytes.Equal(got, want["stale"]) {
		t.Fatal("stale reads different bytes")
	}
	// A partial chunk's base comes in parts too, and merges right.
	g.gets.Store(0)
	c3 := v.cfg(t.TempDir())
	c3.Engine, c3.PrefetchMax, c3.FetchParts = e, -1, 4
	s2.Close(ctx)
	s3 := v.open(c3)
	f = lookup(t, s3, "f")
	p := randBytes(3, 100)
	write(t, s3, f, p, big+7)
	copy(want["f"][big+7:], p)
	if got := readAll(t, s3, f); !bytes.Equal(got, want["f"]) {
		t.Fatal("f reads different bytes after a partial write")
	}
	if n := g.gets.Load(); n != 9 {
		t.Fatalf("%d chunk GETs reading f with a partial chunk, want 9", n)
	}
	// A server whose ranged answers are not what was asked: each chunk
	// comes by one more, whole GET.
	s3.Close(ctx)
	g.noRange.Store(true)
	g.gets.Store(0)
	c4 := c3
	c4.CacheDir = t.TempDir()
	s4 := v.open(c4)
	if got := readAll(t, s4, lookup(t, s4, "f")); !bytes.Equal(got, want["f"]) {
		t.Fatal("f reads different bytes from a server that ignores ranges")
	}
	if n := g.gets.Load(); n != 11 {
		t.Fatalf("%d chunk GETs from a server that ignores ranges, want 11 (4+1, 4+1, 1)", n)
	}
}

// TestPartialLostBase: a gateway killed with a partial chunk whose base
// object someone else then deletes. The next Open starts anyway (it
// refused before), uploads and publishes the other recovered chunk, and
// keeps the lost chunk's written bytes readable and its record on disk;
// a read that needs the base fails with ErrBaseLost, the upload is
// refused naming the file and the base (nothing with zeros in the base's
// place is uploaded), again at the next Open; writing the missing bytes
// makes the chunk whole and then it uploads.
func TestPartialLostBase(t *testing.T) {
	v := newEnv(t)
	want := seed(t, v, "p", "r")
	cache := t.TempDir()
	ctx := context.Background()
	s, g := gated(t, v, cache)
	p, r := lookup(t, s, "p"), lookup(t, s, "r")
	s.mu.Lock()
	base := s.m.Inodes[p].Chunks[1]
	s.mu.Unlock()
	w1 := randBytes(1, 3000)
	writeSoon(t, s, p, w1, cs+777)
	w2 := randBytes(2, 100)
	writeSoon(t, s, r, w2, 2*cs+10)
	copy(want["r"][2*cs+10:], w2)
	s.Abandon()
	g.release()
	key := "fs/" + chunkKey(base)
	if _, err := v.e.API().DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: &v.bucket, Key: &key}); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * time.Second) // the dead gateway's lease expires
	s2, err := Open(ctx, v.cfg(cache))
	if err != nil {
		t.Fatalf("Open with a partial chunk whose base is gone: %v", err)
	}
	t.Cleanup(func() { s2.Close(ctx) })
	if st := s2.Stats(); st.Recovered != 2 || st.Uploads != 1 {
		t.Fatalf("recovery: %+v, want 2 dirty chunks found and 1 uploaded", st)
	}
	read := func(s *Store, off int64, n int) ([]byte, error) {
		b := make([]byte, n)
		_, err := s.ReadAt(ctx, p, b, off)
		return b, err
	}
	if b, err := read(s2, cs+777, len(w1)); err != nil || !bytes.Equal(b, w1) {
		t.Fatalf("read of the written bytes: %v, same %v", err, bytes.Equal(b, w1))
	}
	for _, off := range []int64{0, 2 * cs} {
		if b, err := read(s2, off, 100); err != nil || !bytes.Equal(b, want["p"][off:off+100]) {
			t.Fatalf("read at %d (another chunk): %v", off, err)
		}
	}
	for _, off := range []int64{cs, cs + 777 + 3000} {
		if _, err := read(s2, off, 10); !errors.Is(err, ErrBaseLost) {
			t.Fatalf("read at %d needing the lost base: %v, want ErrBaseLost", off, err)
		}
	}
	err = s2.Flush(ctx, p, true)
	if !errors.Is(err, ErrBaseLost) || !strings.Contains(err.Error(), "/p") || !strings.Contains(err.Error(), base) {
		t.Fatalf("fsync of the file with a lost base: %v, want ErrBaseLost naming /p and %s", err, base)
	}
	rec := filepath.Join(s2.CacheDir(), "partial", fmt.Sprintf("%d.1", p))
	dirty := filepath.Join(s2.CacheDir(), "dirty", fmt.Sprintf("%d.1", p))
	for _, f := range []string{rec, dirty} {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("the lost chunk's %s is gone: %v", f, err)
		}
	}
	// What was published: r's recovered chunk; p's chunk 1 still names
	// the lost base (no chunk with zeros in its place went up).
	ro := v.cfg(t.TempDir())
	ro.ReadOnly, ro.Create = true, false
	fresh := v.open(ro)
	if got := readAll(t, fresh, lookup(t, fresh, "r")); !bytes.Equal(got, want["r"]) {
		t.Fatal("r: a fresh gateway reads different bytes")
	}
	fresh.mu.Lock()
	c1 := fresh.m.Inodes[p].Chunks[1]
	fresh.mu.Unlock()
	if c1 != base {
		t.Fatalf("p's chunk 1 published as %s, want the lost base %s", c1, base)
	}
	if err := s2.Close(ctx); !errors.Is(err, ErrBaseLost) {
		t.Fatalf("Close with a lost base: %v, want ErrBaseLost", err)
	}
	// The next Open (no wait: the lease was released) finds it again.
	s3 := v.open(v.cfg(cache))
	if b, err := read(s3, cs+777, len(w1)); err != nil || !bytes.Equal(b, w1) {
		t.Fatalf("after reopening, read of the written bytes: %v", err)
	}
	if _, err := read(s3, cs, 10); !errors.Is(err, ErrBaseLost) {
		t.Fatalf("after reopening, read needing the lost base: %v", err)
	}
	// Writing every missing byte makes the chunk whole: it uploads.
	w3 := randBytes(3, cs)
	write(t, s3, p, w3, cs)
	copy(want["p"][cs:], w3)
	if err := s3.Sync(ctx); err != nil {
		t.Fatalf("Sync after the missing bytes were written: %v", err)
	}
	if _, err := os.Stat(rec); !os.IsNotExist(err) {
		t.Fatalf("record of the completed chunk: %v", err)
	}
	s3.Close(ctx)
	s4 := v.open(v.cfg(t.TempDir()))
	if got := readAll(t, s4, lookup(t, s4, "p")); !bytes.Equal(got, want["p"]) {
		t.Fatal("p: a fresh gateway reads different bytes")
	}
}
