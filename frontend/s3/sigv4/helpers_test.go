package sigv4

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"io"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"
)

// staticCreds is an in-test Credentials.
type staticCreds map[string]string

func (c staticCreds) SecretFor(_ context.Context, ak string) (string, error) {
	if s, ok := c[ak]; ok {
		return s, nil
	}
	return "", ErrUnknownAccessKey
}

const (
	docAK     = "AKIAIOSFODNN7EXAMPLE"
	docSecret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
)

var docCreds = staticCreds{docAK: docSecret}

func fixedClock(t time.Time) func() time.Time { return func() time.Time { return t } }

// wantCode asserts err is an *Error with the given S3 code.
func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("want *Error %s, got %v", code, err)
	}
	if e.Code != code {
		t.Fatalf("want %s, got %s (%s)", code, e.Code, e.Message)
	}
}

// recorder is an httptest handler that verifies, reads the body and
// answers like a tiny S3 PutObject/GetObject, remembering what it got.
type recorder struct {
	v  *Verifier
	mu sync.Mutex
	// results
	bodies   map[string][]byte
	payloads []string
	trailers []http.Header
	errs     []string
}

func newRecorder(v *Verifier) *recorder { return &recorder{v: v, bodies: map[string][]byte{}} }

type s3err struct {
	XMLName xml.Name `xml:"Error"`
	Code    string
	Message string
}

func (rc *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	fail := func(err error) {
		var e *Error
		if !errors.As(err, &e) {
			e = &Error{Code: "InternalError", Status: 500, Message: err.Error()}
		}
		rc.mu.Lock()
		rc.errs = append(rc.errs, e.Code)
		rc.mu.Unlock()
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(e.Status)
		xml.NewEncoder(w).Encode(s3err{Code: e.Code, Message: e.Message})
	}
	res, err := rc.v.Verify(r)
	if err != nil {
		fail(err)
		return
	}
	body, err := io.ReadAll(r.Body)
	if err != nil {
		fail(err)
		return
	}
	rc.mu.Lock()
	rc.payloads = append(rc.payloads, res.Payload)
	rc.trailers = append(rc.trailers, r.Trailer.Clone())
	switch r.Method {
	case http.MethodPut:
		rc.bodies[r.URL.Path] = body
		rc.mu.Unlock()
		sum := md5.Sum(body)
		w.Header().Set("ETag", `"`+hex.EncodeToString(sum[:])+`"`)
		w.WriteHeader(200)
	case http.MethodGet, http.MethodHead:
		b, ok := rc.bodies[r.URL.Path]
		rc.mu.Unlock()
		if !ok {
			w.WriteHeader(404)
			return
		}
		sum := md5.Sum(b)
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("Content-Length", strconv.Itoa(len(b)))
		w.Header().Set("ETag", `"`+hex.EncodeToString(sum[:])+`"`)
		w.Header().Set("Last-Modified", time.Now().UTC().Format(http.TimeFormat))
		w.Write(b)
	default:
		rc.mu.Unlock()
		w.WriteHeader(200)
	}
}

// body returns what was stored at path (under the lock: the server runs in
// other goroutines).
func (rc *recorder) body(path string) []byte {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return rc.bodies[path]
}

// last returns the latest payload mode and trailer, and the errors so far.
func (rc *recorder) last() (string, http.Header, []string) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	p, tr := "", http.Header(nil)
	if n := len(rc.payloads); n > 0 {
		p, tr = rc.payloads[n-1], rc.trailers[n-1]
	}
	return p, tr, append([]string(nil), rc.errs...)
}

// snapshot copies the payload modes seen so far.
func (rc *recorder) snapshot() []string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return append([]string(nil), rc.payloads...)
}
