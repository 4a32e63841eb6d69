package chunkstore

import (
	"context"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	s3client "github.com/tristore/tristore/client/s3"
)

// holdPuts holds chunk PUTs until open is closed.
type holdPuts struct {
	next http.RoundTripper
	open chan struct{}
	held atomic.Int32 // chunk PUTs that came to the hold
}

func (h *holdPuts) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPut && strings.Contains(r.URL.Path, "/fs/"+chunkPrefix) {
		h.held.Add(1)
		select {
		case <-h.open:
		case <-r.Context().Done():
			return nil, r.Context().Err()
		}
	}
	return h.next.RoundTrip(r)
}

// TestEarlyWriteBack: once dirty chunks fill more than half the cache
// limit, the oldest are uploaded in the background (write-back age or
// not) until they fill a quarter, and no write waits for it: writes of
// three whole chunks into a cache of four return while every chunk PUT is
// held; once PUTs go through, the dirty data drains to a quarter without
// another write, and the file reads back the same. Before, nothing went
// up until dirty data alone passed the limit, and then the write that
// passed it waited for every dirty chunk's upload (at the paper's scale
// on the realistic link: 0.8 s per write with 4 MiB chunks, 5.8 s with
// 16 MiB; BENCHMARKS.md).
func TestEarlyWriteBack(t *testing.T) {
	v := newEnv(t)
	h := &holdPuts{next: http.DefaultTransport, open: make(chan struct{})}
	released := false
	release := func() {
		if !released {
			released = true
			close(h.open)
		}
	}
	t.Cleanup(release)
	e, err := s3client.New(s3client.Config{Endpoint: v.e.Config().Endpoint, AccessKey: testAK, SecretKey: testSK, PathStyle: true,
		Retries: s3client.NoRetries, HTTPClient: &http.Client{Transport: h}})
	if err != nil {
		t.Fatal(err)
	}
	c := v.cfg(t.TempDir())
	c.Engine, c.CacheSize = e, 4*cs
	s := v.open(c)
	ino := mkfile(t, s, "f")
	want := randBytes(7, 3*cs)
	for i := int64(0); i < 3; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		n, err := s.WriteAt(ctx, ino, want[i*cs:(i+1)*cs], i*cs)
		cancel()
		if err != nil || n != cs {
			t.Fatalf("write of chunk %d with chunk PUTs held: %d, %v (waits for an upload)", i, n, err)
		}
	}
	release()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, dirty := s.cache.usage()
		st := s.Stats()
		if dirty <= cs && st.Uploads >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("10 s after the PUTs went through: %d dirty bytes (limit %d), %d uploads; want at most a quarter of the limit dirty", dirty, c.CacheSize, st.Uploads)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if got := readAll(t, s, ino); string(got) != string(want) {
		t.Fatal("the file reads different bytes after the early write-back")
	}
}
