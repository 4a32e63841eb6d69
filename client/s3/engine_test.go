package s3

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/tristore/tristore/internal/testutil/faultproxy"
	"github.com/tristore/tristore/internal/testutil/s3server"
)

const (
	testAK = "TRISTORETESTROOT0001"
	testSK = "tristore-test-root-secret-0001"
	chunk  = MinPartSize
)

// startServer serves frontend/s3 over posix.Open(tempdir) with SigV4 and
// the root user testAK/testSK, as test/s3peers does; it returns the
// endpoint URL.
func startServer(t *testing.T) string {
	t.Helper()
	return s3server.Start(t, s3server.Config{AccessKey: testAK, SecretKey: testSK}).Endpoint
}

func testConfig(endpoint string, par int) Config {
	return Config{Endpoint: endpoint, AccessKey: testAK, SecretKey: testSK, PathStyle: true,
		ChunkSize: chunk, Parallelism: par, BackoffBase: time.Millisecond, BackoffMax: 20 * time.Millisecond}
}

func newEngine(t *testing.T, cfg Config) *Engine {
	t.Helper()
	e, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func mkBucket(t *testing.T, e *Engine, b string) {
	t.Helper()
	if _, err := e.API().CreateBucket(context.Background(), &awss3.CreateBucketInput{Bucket: &b}); err != nil {
		t.Fatal(err)
	}
}

func randBytes(seed uint64, n int64) []byte {
	r := rand.New(rand.NewPCG(seed, 7))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// memWriterAt is an in-memory io.WriterAt of a known size.
type memWriterAt struct {
	mu  sync.Mutex
	buf []byte
}

func (m *memWriterAt) WriteAt(p []byte, off int64) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if end := off + int64(len(p)); end > int64(len(m.buf)) {
		m.buf = append(m.buf, make([]byte, end-int64(len(m.buf)))...)
	}
	return copy(m.buf[off:], p), nil
}

func TestRoundTrip(t *testing.T) {
	ep := startServer(t)
	setup := newEngine(t, testConfig(ep, 1))
	mkBucket(t, setup, "rtb")
	sizes := []int64{0, 1, chunk - 1, chunk, chunk + 1, 5*chunk + 7}
	for _, par := range []int{1, 3, 8} {
		up := newEngine(t, testConfig(ep, par))
		// Downloads also run with a smaller chunk, so range boundaries
		// fall elsewhere than part boundaries.
		dcfg := testConfig(ep, par)
		dcfg.ChunkSize = 1 << 20
		down := newEngine(t, dcfg)
		for i, size := range sizes {
			key := fmt.Sprintf("p%d/s%d", par, size)
			data := randBytes(uint64(i*10+par), size)
			res, err := up.Upload(context.Background(), "rtb", key, bytes.NewReader(data), size)
			if err != nil {
				t.Fatalf("par %d size %d: %v", par, size, err)
			}
			if res.Bytes != size || res.Retries != 0 {
				t.Errorf("par %d size %d: upload result %+v", par, size, res)
			}
			wantReq := 1
			if size > chunk {
				wantReq = 2 + int((size+chunk-1)/chunk)
			}
			if res.Requests != wantReq {
				t.Errorf("par %d size %d: %d upload requests, want %d", par, size, res.Requests, wantReq)
			}
			for _, e := range []*Engine{up, down} {
				var got memWriterAt
				res, err := e.Download(context.Background(), "rtb", key, &got)
				if err != nil {
					t.Fatalf("par %d size %d chunk %d: download: %v", par, size, e.cfg.ChunkSize, err)
				}
				if !bytes.Equal(got.buf, data) {
					t.Fatalf("par %d size %d chunk %d: downloaded %d bytes differ from the %d uploaded", par, size, e.cfg.ChunkSize, len(got.buf), len(data))
				}
				if res.Bytes != size {
					t.Errorf("download result %+v", res)
				}
			}
		}
		for _, e := range []*Engine{up, down} {
			if p := e.pool.peak.Load(); p > int64(par) || (par > 1 && p < 2) {
				t.Errorf("par %d: peak buffers in use %d", par, p)
			}
			if n := e.pool.inUse.Load(); n != 0 {
				t.Errorf("par %d: %d buffers not returned", par, n)
			}
		}
	}
}

// TestDownloadToFile writes through an *os.File, the WriterAt cp uses.
func TestDownloadToFile(t *testing.T) {
	ep := startServer(t)
	e := newEngine(t, testConfig(ep, 4))
	mkBucket(t, e, "fff")
	data := randBytes(3, 3*chunk+11)
	if _, err := e.Upload(context.Background(), "fff", "k", bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(t.TempDir(), "out"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	res, err := e.Download(context.Background(), "fff", "k", f)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(f.Name())
	if !bytes.Equal(got, data) {
		t.Fatal("file content differs")
	}
	// HEAD and 4 ranges, and the halves of ranges split at the tail.
	if res.Requests < 1+4 || res.LatencyP50Ms <= 0 || res.LatencyP99Ms < res.LatencyP50Ms || res.BandwidthBps <= 0 {
		t.Errorf("result %+v", res)
	}
	j, err := json.Marshal(res)
	if err != nil || !strings.Contains(string(j), `"latency_p99_ms"`) {
		t.Errorf("json %s %v", j, err)
	}
}

func TestMemoryBound(t *testing.T) {
	_, err := New(Config{ChunkSize: 64 << 20, Parallelism: 16, MaxMemory: 512 << 20})
	if !errors.Is(err, ErrMemoryBound) || !strings.Contains(err.Error(), "max memory") {
		t.Fatalf("64 MiB × 16 under 512 MiB: %v", err)
	}
	if _, err := New(Config{ChunkSize: 32 << 20, Parallelism: 16, MaxMemory: 512 << 20}); err != nil {
		t.Fatalf("exactly at the bound: %v", err)
	}
	// Concurrent transfers on one engine share its buffers: the peak never
	// exceeds Parallelism, whatever the number of transfers.
	ep := startServer(t)
	e := newEngine(t, testConfig(ep, 2))
	mkBucket(t, e, "mem")
	data := randBytes(5, 4*chunk+1)
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := e.Upload(context.Background(), "mem", fmt.Sprint(i), bytes.NewReader(data), int64(len(data)))
			errs <- err
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if p := e.pool.peak.Load(); p != 2 {
		t.Errorf("peak buffers %d, want exactly Parallelism 2", p)
	}
}

func TestChunkTooSmallForMultipart(t *testing.T) {
	ep := startServer(t)
	cfg := testConfig(ep, 2)
	cfg.ChunkSize = 1 << 20
	e := newEngine(t, cfg)
	mkBucket(t, e, "small")
	_, err := e.Upload(context.Background(), "small", "k", bytes.NewReader(make([]byte, 3<<20)), 3<<20)
	if err == nil || !strings.Contains(err.Error(), "minimum part size") {
		t.Fatalf("got %v", err)
	}
}

// newFaultProxy starts a fault proxy in front of the server whose first
// fail requests get mode: "503", "reset", "stall", "403", or "corrupt"
// (the first fail GETs come back with a byte flipped).
func newFaultProxy(t *testing.T, backend, mode string, fail int) *faultproxy.Proxy {
	px := faultproxy.Start(t, backend)
	px.SetRule(faultRule(mode, fail))
	return px
}

func faultRule(mode string, fail int) faultproxy.Rule {
	n := int64(fail)
	switch mode {
	case "corrupt":
		return faultproxy.FirstOf("GET", n, faultproxy.Corrupt)
	case "reset":
		return faultproxy.FirstN(n, faultproxy.Reset)
	case "stall":
		return faultproxy.FirstN(n, faultproxy.Stall)
	case "403":
		return faultproxy.FirstN(n, faultproxy.Denied)
	}
	return faultproxy.FirstN(n, faultproxy.SlowDown)
}

func TestRetries(t *testing.T) {
	ep := startServer(t)
	mkBucket(t, newEngine(t, testConfig(ep, 1)), "retry")
	data := randBytes(9, 3*chunk+5)
	for _, mode := range []string{"503", "reset"} {
		t.Run(mode, func(t *testing.T) {
			const fail = 3
			px := newFaultProxy(t, ep, mode, fail)
			cfg := testConfig(px.URL, 3)
			if mode == "reset" {
				// Go's transport silently re-sends a GET/HEAD once when a
				// reused connection dies before answering; with fresh
				// connections every reset reaches our loop and is counted.
				cfg.HTTPClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
			}
			e := newEngine(t, cfg)
			key := "k-" + mode
			res, err := e.Upload(context.Background(), "retry", key, bytes.NewReader(data), int64(len(data)))
			if err != nil {
				t.Fatalf("upload through %d faults: %v", fail, err)
			}
			if res.Retries != fail || res.Requests != 2+4+fail {
				t.Errorf("upload result %+v, want %d retries, %d requests", res, fail, 2+4+fail)
			}
			if got := px.Total(); got != int64(res.Requests) {
				t.Errorf("proxy saw %d requests, result says %d", got, res.Requests)
			}
			px.SetRule(faultRule(mode, fail))
			var got memWriterAt
			res, err = e.Download(context.Background(), "retry", key, &got)
			if err != nil {
				t.Fatalf("download through %d faults: %v", fail, err)
			}
			if !bytes.Equal(got.buf, data) {
				t.Fatal("content differs")
			}
			if res.Retries != fail || res.Requests < 1+4+fail {
				t.Errorf("download result %+v", res)
			}
			if got := px.Total(); got != int64(2+4+fail+res.Requests) {
				t.Errorf("proxy saw %d requests in all, results say %d", got, 2+4+fail+res.Requests)
			}
		})
	}
	t.Run("corrupt", func(t *testing.T) {
		// A byte flipped in transit: the stored CRC32C catches it and the
		// GET is repeated.
		small := randBytes(13, 1000)
		e := newEngine(t, testConfig(ep, 1))
		if _, err := e.Upload(context.Background(), "retry", "small", bytes.NewReader(small), 1000); err != nil {
			t.Fatal(err)
		}
		px := newFaultProxy(t, ep, "corrupt", 1)
		e = newEngine(t, testConfig(px.URL, 1))
		var got memWriterAt
		res, err := e.Download(context.Background(), "retry", "small", &got)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got.buf, small) || res.Retries != 1 || res.Requests != 3 {
			t.Errorf("equal %v, result %+v", bytes.Equal(got.buf, small), res)
		}
	})
	t.Run("stall", func(t *testing.T) {
		px := newFaultProxy(t, ep, "stall", 2)
		cfg := testConfig(px.URL, 2)
		cfg.RequestTimeout = time.Second
		cfg.Retries = 8
		e := newEngine(t, cfg)
		small := randBytes(17, 2*chunk+3)
		start := time.Now()
		res, err := e.Upload(context.Background(), "retry", "stalled", bytes.NewReader(small), int64(len(small)))
		if err != nil {
			t.Fatal(err)
		}
		// Both stalls cost a timeout and a retry; on a loaded machine a
		// 5 MiB part may also run over the second once and be retried.
		if px.Faults() != 2 || res.Retries < 2 || time.Since(start) > 15*time.Second {
			t.Errorf("%d stalls, result %+v after %v", px.Faults(), res, time.Since(start))
		}
		var got memWriterAt
		if _, err := e.Download(context.Background(), "retry", "stalled", &got); err != nil || !bytes.Equal(got.buf, small) {
			t.Fatalf("read back: %v", err)
		}
	})
	t.Run("exhausted", func(t *testing.T) {
		px := newFaultProxy(t, ep, "503", 100)
		cfg := testConfig(px.URL, 1)
		cfg.Retries = 2
		e := newEngine(t, cfg)
		res, err := e.Upload(context.Background(), "retry", "x", bytes.NewReader([]byte("hi")), 2)
		if err == nil || !strings.Contains(err.Error(), "SlowDown") || !strings.Contains(err.Error(), "s3://retry/x") {
			t.Fatalf("got %v", err)
		}
		if res.Requests != 3 || res.Retries != 2 || px.Total() != 3 {
			t.Errorf("result %+v, proxy %d", res, px.Total())
		}
	})
}

func TestNoRetryOn4xx(t *testing.T) {
	ep := startServer(t)
	mkBucket(t, newEngine(t, testConfig(ep, 1)), "bbb")
	t.Run("403", func(t *testing.T) {
		px := newFaultProxy(t, ep, "403", 100)
		e := newEngine(t, testConfig(px.URL, 2))
		res, err := e.Upload(context.Background(), "bbb", "k", bytes.NewReader([]byte("x")), 1)
		if err == nil || !strings.Contains(err.Error(), "AccessDenied") {
			t.Fatalf("got %v", err)
		}
		if res.Requests != 1 || res.Retries != 0 || px.Total() != 1 {
			t.Errorf("result %+v, proxy saw %d", res, px.Total())
		}
	})
	t.Run("NoSuchBucket", func(t *testing.T) {
		e := newEngine(t, testConfig(ep, 2))
		res, err := e.Upload(context.Background(), "nope", "k", bytes.NewReader(make([]byte, 2*chunk)), 2*chunk)
		if err == nil || !strings.Contains(err.Error(), "NoSuchBucket") {
			t.Fatalf("got %v", err)
		}
		if res.Requests != 1 || res.Retries != 0 {
			t.Errorf("result %+v", res)
		}
	})
	t.Run("NoSuchKey", func(t *testing.T) {
		e := newEngine(t, testConfig(ep, 2))
		var w memWriterAt
		res, err := e.Download(context.Background(), "bbb", "missing", &w)
		if err == nil || !strings.Contains(err.Error(), "s3://bbb/missing") {
			t.Fatalf("got %v", err)
		}
		if res.Requests != 1 || res.Retries != 0 {
			t.Errorf("result %+v", res)
		}
	})
}

// cancellingReader cancels the transfer once a read reaches at.
type cancellingReader struct {
	io.ReaderAt
	at     int64
	cancel context.CancelFunc
}

func (c *cancellingReader) ReadAt(p []byte, off int64) (int, error) {
	if off >= c.at {
		c.cancel()
	}
	return c.ReaderAt.ReadAt(p, off)
}

func TestCancelAbortsUpload(t *testing.T) {
	ep := startServer(t)
	px := newFaultProxy(t, ep, "503", 0)
	e := newEngine(t, testConfig(px.URL, 1))
	mkBucket(t, e, "ccc")
	data := randBytes(11, 4*chunk)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	r := &cancellingReader{ReaderAt: bytes.NewReader(data), at: 2 * chunk, cancel: cancel}
	_, err := e.Upload(ctx, "ccc", "k", r, int64(len(data)))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("got %v, want context.Canceled", err)
	}
	if n := px.Count("PUT partNumber"); n < 2 {
		t.Fatalf("only %d parts uploaded before the cancel; the test proves nothing", n)
	}
	if n := px.Count("DELETE uploadId"); n != 1 {
		t.Errorf("%d aborts sent, want 1", n)
	}
	out, err := e.API().ListMultipartUploads(context.Background(), &awss3.ListMultipartUploadsInput{Bucket: aws.String("ccc")})
	if err != nil {
		t.Fatal(err)
	}
	if len(out.Uploads) != 0 {
		t.Errorf("%d multipart uploads left behind", len(out.Uploads))
	}
	if _, err := e.API().HeadObject(context.Background(), &awss3.HeadObjectInput{Bucket: aws.String("ccc"), Key: aws.String("k")}); err == nil {
		t.Error("a cancelled upload published an object")
	}
}

// replacingWriter overwrites the object with other bytes on its first
// write, as another client might mid-download.
type replacingWriter struct {
	memWriterAt
	once    sync.Once
	replace func()
}

func (r *replacingWriter) WriteAt(p []byte, off int64) (int, error) {
	r.once.Do(r.replace)
	return r.memWriterAt.WriteAt(p, off)
}

func TestDownloadObjectChanged(t *testing.T) {
	ep := startServer(t)
	cfg := testConfig(ep, 1)
	cfg.ChunkSize = 1 << 20
	e := newEngine(t, cfg)
	up := newEngine(t, testConfig(ep, 1))
	mkBucket(t, e, "chg")
	data := randBytes(21, 3<<20)
	if _, err := up.Upload(context.Background(), "chg", "k", bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	w := &replacingWriter{replace: func() {
		other := randBytes(22, 3<<20)
		if _, err := up.Upload(context.Background(), "chg", "k", bytes.NewReader(other), int64(len(other))); err != nil {
			t.Error(err)
		}
	}}
	res, err := e.Download(context.Background(), "chg", "k", w)
	if !errors.Is(err, ErrChanged) || !strings.Contains(err.Error(), "s3://chg/k") {
		t.Fatalf("got %v, want ErrChanged", err)
	}
	if res.Retries != 0 || res.Bytes != 0 {
		t.Errorf("result %+v", res)
	}
}
