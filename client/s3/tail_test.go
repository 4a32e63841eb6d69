package s3

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// slowBody hands out at most step bytes per tick: one slow connection.
type slowBody struct {
	io.ReadCloser
	step int
	tick time.Duration
}

func (b *slowBody) Read(p []byte) (int, error) {
	time.Sleep(b.tick)
	return b.ReadCloser.Read(p[:min(len(p), b.step)])
}

// TestDownloadTailSplit: the first GET of the object's first range crawls
// (16 KiB per 100 ms, 160 KiB/s) while the others run at loopback speed.
// An idle stream takes over what that range has left, so the download
// ends long before the crawling GET could bring its 2 MiB (~13 s); with
// NoTailSplit it waits for it. The bytes are checked either way.
func TestDownloadTailSplit(t *testing.T) {
	ep := startServer(t)
	setup := newEngine(t, testConfig(ep, 4))
	mkBucket(t, setup, "tail")
	const part = 2 << 20
	data := randBytes(21, 4*part)
	if _, err := setup.Upload(context.Background(), "tail", "k", bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(ep)
	rp := httputil.NewSingleHostReverseProxy(u)
	var slowed atomic.Int32
	rp.ModifyResponse = func(r *http.Response) error {
		if r.Request.Method == http.MethodGet && strings.HasPrefix(r.Request.Header.Get("Range"), "bytes=0-") && slowed.Add(1) == 1 {
			r.Body = &slowBody{ReadCloser: r.Body, step: 16 << 10, tick: 100 * time.Millisecond}
		}
		return nil
	}
	px := httptest.NewServer(rp)
	t.Cleanup(px.Close)
	for _, split := range []bool{true, false} {
		if !split && testing.Short() {
			continue
		}
		slowed.Store(0)
		cfg := testConfig(px.URL, 4)
		cfg.ChunkSize = part
		cfg.NoTailSplit = !split
		e := newEngine(t, cfg)
		var got memWriterAt
		start := time.Now()
		res, err := e.Download(context.Background(), "tail", "k", &got)
		took := time.Since(start)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.buf, data) {
			t.Fatalf("split %v: content differs", split)
		}
		t.Logf("split %v: %v, %d requests", split, took, res.Requests)
		if split && (took > 4*time.Second || res.Requests < 1+4+1) {
			t.Errorf("with the tail split: %v and %d requests, want under 4 s and a split range", took, res.Requests)
		}
		if !split && took < 8*time.Second {
			t.Errorf("without the split the download took %v: the slow range did not slow it (test broken?)", took)
		}
	}
}
