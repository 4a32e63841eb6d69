// Package faultproxy is a small HTTP proxy on 127.0.0.1 for S3 fault tests:
// it forwards every request to a backend, except those a test's rule picks,
// which it answers with a 503 SlowDown, a 500 InternalError, a TCP reset or
// a stall. It counts requests by shape ("PUT partNumber", "GET", ...) and
// the most it saw in flight at once, so tests can assert what a client did.
package faultproxy

import (
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Fault is what the proxy does with one request.
type Fault int

const (
	Pass     Fault = iota // forward to the backend
	SlowDown              // 503 with an S3 SlowDown error body
	Internal              // 500 with an S3 InternalError body
	Reset                 // close the connection with a TCP RST, no answer
	Stall                 // answer nothing until the client gives up (at most StallLimit)
	Denied                // 403 with an S3 AccessDenied body
	Corrupt               // forward, but flip one byte in the middle of the answer's body
)

// StallLimit bounds a Stall, so a client without timeouts cannot hang a test.
const StallLimit = 20 * time.Second

// Rule decides a request's fault; shape is Shape(r), n counts requests of
// that shape so far (1 for the first).
type Rule func(shape string, n int64, r *http.Request) Fault

// Proxy is a running fault proxy.
type Proxy struct {
	URL  string // http://127.0.0.1:port
	Host string // 127.0.0.1:port

	mu       sync.Mutex
	rule     Rule
	counts   map[string]int64
	total    atomic.Int64
	faults   atomic.Int64
	inflight atomic.Int64
	peak     atomic.Int64
}

// Start serves a proxy to backend (an http:// URL) until the test ends.
func Start(t testing.TB, backend string) *Proxy {
	t.Helper()
	u, err := url.Parse(backend)
	if err != nil {
		t.Fatal(err)
	}
	rp := httputil.NewSingleHostReverseProxy(u)
	p := &Proxy{counts: map[string]int64{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := p.inflight.Add(1)
		defer p.inflight.Add(-1)
		for {
			old := p.peak.Load()
			if n <= old || p.peak.CompareAndSwap(old, n) {
				break
			}
		}
		p.total.Add(1)
		shape := Shape(r)
		p.mu.Lock()
		p.counts[shape]++
		c, rule := p.counts[shape], p.rule
		p.mu.Unlock()
		f := Pass
		if rule != nil {
			f = rule(shape, c, r)
		}
		if f != Pass {
			p.faults.Add(1)
		}
		if f != Pass && f != Corrupt {
			io.Copy(io.Discard, io.LimitReader(r.Body, 256<<20))
		}
		switch f {
		case Pass:
			rp.ServeHTTP(w, r) // Host stays the proxy's, as the client signed it
		case SlowDown:
			s3Error(w, 503, "SlowDown", "Please reduce your request rate.")
		case Internal:
			s3Error(w, 500, "InternalError", "We encountered an internal error. Please try again.")
		case Denied:
			s3Error(w, 403, "AccessDenied", "Access Denied")
		case Corrupt:
			rec := httptest.NewRecorder()
			rp.ServeHTTP(rec, r)
			body := rec.Body.Bytes()
			if len(body) > 0 {
				body[len(body)/2] ^= 0x40
			}
			for k, v := range rec.Header() {
				w.Header()[k] = v
			}
			w.WriteHeader(rec.Code)
			w.Write(body)
		case Reset:
			reset(w)
		case Stall:
			select {
			case <-r.Context().Done():
			case <-time.After(StallLimit):
				reset(w) // never an empty answer that looks like success
			}
		}
	}))
	t.Cleanup(srv.Close)
	p.URL = srv.URL
	p.Host = srv.Listener.Addr().String()
	return p
}

// reset closes the request's connection with a TCP RST.
func reset(w http.ResponseWriter) {
	if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
		conn.(*net.TCPConn).SetLinger(0)
		conn.Close()
	}
}

func s3Error(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><Error><Code>`+code+`</Code><Message>`+msg+`</Message></Error>`)
}

// Shape names a request by method and the S3 sub-resource that tells the
// operation apart: "PUT partNumber" (UploadPart), "POST uploads" (Create),
// "POST uploadId" (Complete), "DELETE uploadId" (Abort), "GET uploadId"
// (ListParts), "GET uploads" (ListMultipartUploads), else just the method.
func Shape(r *http.Request) string {
	q := r.URL.Query()
	for _, k := range []string{"partNumber", "uploads", "uploadId"} {
		if q.Has(k) {
			return r.Method + " " + k
		}
	}
	return r.Method
}

// SetRule replaces the rule (nil: pass everything).
func (p *Proxy) SetRule(r Rule) {
	p.mu.Lock()
	p.rule = r
	p.mu.Unlock()
}

// Count is the number of requests of one shape so far.
func (p *Proxy) Count(shape string) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.counts[shape]
}

// ResetCounts forgets the counts and the peak (not the rule).
func (p *Proxy) ResetCounts() {
	p.mu.Lock()
	p.counts = map[string]int64{}
	p.mu.Unlock()
	p.total.Store(0)
	p.faults.Store(0)
	p.peak.Store(0)
}

// Total is every request so far; Faults those the rule answered.
func (p *Proxy) Total() int64  { return p.total.Load() }
func (p *Proxy) Faults() int64 { return p.faults.Load() }

// Peak is the most requests the proxy had in flight at once.
func (p *Proxy) Peak() int64 { return p.peak.Load() }

// FirstN faults the first n requests (of any shape) with f, then passes.
func FirstN(n int64, f Fault) Rule {
	var seen atomic.Int64
	return func(string, int64, *http.Request) Fault {
		if seen.Add(1) <= n {
			return f
		}
		return Pass
	}
}

// FirstOf faults the first n requests of shape with f, then passes.
func FirstOf(shape string, n int64, f Fault) Rule {
	return func(s string, c int64, _ *http.Request) Fault {
		if s == shape && c <= n {
			return f
		}
		return Pass
	}
}

// Always faults every request of shape (every request when shape is "")
// with f.
func Always(shape string, f Fault) Rule {
	return func(s string, _ int64, _ *http.Request) Fault {
		if shape == "" || s == shape {
			return f
		}
		return Pass
	}
}

// After passes the first n requests of shape, then faults every later one.
func After(shape string, n int64, f Fault) Rule {
	return func(s string, c int64, _ *http.Request) Fault {
		if s == shape && c > n {
			return f
		}
		return Pass
	}
}
