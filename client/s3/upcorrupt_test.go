package s3

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
)

// flipTransport flips one byte in the middle of the body of the first n
// requests whose method is PUT (after the SDK signed them and computed
// their checksums: damage in transit).
type flipTransport struct {
	n    atomic.Int64
	base http.RoundTripper
}

func (f *flipTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method == http.MethodPut && r.Body != nil && f.n.Add(-1) >= 0 {
		b, err := io.ReadAll(r.Body)
		r.Body.Close()
		if err != nil {
			return nil, err
		}
		if len(b) > 0 {
			b[len(b)/2] ^= 0x20
		}
		r = r.Clone(r.Context())
		r.Body = io.NopCloser(bytes.NewReader(b))
		r.GetBody = nil
	}
	return f.base.RoundTrip(r)
}

// TestUploadDamagedInTransit: a PUT whose bytes are damaged on the way is
// refused by the server (it checks the CRC32C the client sent, or the
// payload's SHA-256 the request was signed with), the client sends the
// part again, and the object stored is the client's bytes.
func TestUploadDamagedInTransit(t *testing.T) {
	ep := startServer(t)
	mkBucket(t, newEngine(t, testConfig(ep, 2)), "dmg")
	for _, size := range []int64{1000, 2*chunk + 17} {
		ft := &flipTransport{base: http.DefaultTransport}
		ft.n.Store(1)
		cfg := testConfig(ep, 2)
		cfg.HTTPClient = &http.Client{Transport: ft}
		e := newEngine(t, cfg)
		data := randBytes(uint64(size), size)
		key := "k" + strings.Repeat("x", int(size%7))
		res, err := e.Upload(context.Background(), "dmg", key, bytes.NewReader(data), size)
		if err != nil {
			t.Fatalf("upload of %d bytes with one damaged PUT: %v", size, err)
		}
		if res.Retries != 1 {
			t.Errorf("size %d: %d retries, want 1", size, res.Retries)
		}
		var got memWriterAt
		if _, err := newEngine(t, testConfig(ep, 2)).Download(context.Background(), "dmg", key, &got); err != nil || !bytes.Equal(got.buf, data) {
			t.Fatalf("size %d: stored object differs (%v)", size, err)
		}
	}
}
