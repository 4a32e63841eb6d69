package s3

import (
	"bufio"
	"bytes"
	"context"
	"encoding/xml"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tristore/tristore/store"
)

// rawRequest sends raw bytes on a new connection and reads one response.
func rawRequest(t *testing.T, ts *testServer, raw string) (*http.Response, []byte) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(ts.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := io.WriteString(conn, raw); err != nil {
		t.Fatal(err)
	}
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("reading the answer to %.40q: %v", raw, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res, b
}

// TestHTTPLayerErrorsInXML: the errors net/http answers itself, before
// any handler (malformed request line, bad header, headers too large,
// unknown transfer coding), reach the client as S3 XML errors (they were
// plain text), and the server keeps serving.
func TestHTTPLayerErrorsInXML(t *testing.T) {
	ts := newTestServer(t)
	wantStatus(t, ts.do(t, "PUT", "/hle", nil, nil), 200)
	for _, c := range []struct {
		name, raw string
		status    int
		code      string
	}{
		{"request line", "GARBAGE\r\n\r\n", 400, "BadRequest"},
		{"header line", "GET /hle HTTP/1.1\r\nHost: x\r\nNo colon here\r\n\r\n", 400, "BadRequest"},
		{"no host", "GET /hle HTTP/1.1\r\n\r\n", 400, "BadRequest"},
		{"headers too large", "GET /hle HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("h", 64<<10) + "\r\n\r\n", 431, "RequestHeaderSectionTooLarge"},
		{"transfer coding", "PUT /hle/k HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 501, "NotImplemented"},
	} {
		t.Run(c.name, func(t *testing.T) {
			res, body := rawRequest(t, ts, c.raw)
			if res.StatusCode != c.status || res.Header.Get("Content-Type") != "application/xml" {
				t.Fatalf("status %d content-type %q, want %d XML: %s", res.StatusCode, res.Header.Get("Content-Type"), c.status, body)
			}
			var e errorResponse
			if err := xml.Unmarshal(body, &e); err != nil || e.Code != c.code || e.RequestID == "" || e.Message == "" {
				t.Fatalf("body %q (err %v), want S3 error %s", body, err, c.code)
			}
			if res.Header.Get("X-Amz-Request-Id") != e.RequestID {
				t.Fatalf("x-amz-request-id %q, body RequestId %q", res.Header.Get("X-Amz-Request-Id"), e.RequestID)
			}
		})
	}
	// Unknown routes and methods are S3 XML from the handler.
	wantErr(t, ts.do(t, "PATCH", "/hle/k", []byte("x"), nil), 405, "MethodNotAllowed")
	wantErr(t, ts.do(t, "GET", "/nosuchbucket/k", nil, nil), 404, "NoSuchBucket")
	// Normal answers, including a sendfile GET, pass through untouched.
	data := bytes.Repeat([]byte("0123456789"), 100_000)
	wantStatus(t, ts.do(t, "PUT", "/hle/big", data, nil), 200)
	if r := ts.do(t, "GET", "/hle/big", nil, nil); r.status != 200 || !bytes.Equal(r.body, data) {
		t.Fatalf("GET after HTTP-layer errors: %d, %d bytes", r.status, len(r.body))
	}
}

// syncBuffer is a bytes.Buffer safe for the server's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// failingStat makes Stat fail as a broken disk would (a server fault).
type failingStat struct{ store.Store }

func (f failingStat) Stat(ctx context.Context, bucket, key string) (store.ObjectInfo, error) {
	return store.ObjectInfo{}, errors.New("stat: input/output error")
}

// TestErrorLogLevels: client errors (4xx, 501 for a feature not
// implemented, malformed HTTP) are logged at DEBUG, never ERROR; a server
// fault (500) is logged at ERROR.
func TestErrorLogLevels(t *testing.T) {
	var buf syncBuffer
	ts := newTestServerLog(t, slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	wantStatus(t, ts.do(t, "PUT", "/lvl", nil, nil), 200)
	wantErr(t, ts.do(t, "GET", "/lvl/missing", nil, nil), 404, "NoSuchKey")
	wantErr(t, ts.do(t, "PUT", "/lvl?cors", []byte("<CORSConfiguration/>"), nil), 400, "MalformedXML")
	wantErr(t, ts.do(t, "PUT", "/lvl/k", []byte("x"), map[string]string{"X-Amz-Server-Side-Encryption": "aws:kms"}), 501, "NotImplemented")
	wantErr(t, ts.do(t, "GET", "/lvl?cors", nil, nil), 404, "NoSuchCORSConfiguration")
	rawRequest(t, ts, "GARBAGE\r\n\r\n")
	logs := buf.String()
	if strings.Contains(logs, "level=ERROR") {
		t.Fatalf("client errors logged at ERROR:\n%s", logs)
	}
	for _, code := range []string{"NoSuchKey", "NotImplemented", "NoSuchCORSConfiguration", "BadRequest"} {
		if !strings.Contains(logs, "code="+code) {
			t.Errorf("no DEBUG line with code=%s:\n%s", code, logs)
		}
	}
	wantStatus(t, ts.do(t, "PUT", "/lvl/obj", []byte("x"), nil), 200)
	ts.srv.st = failingStat{ts.st}
	wantErr(t, ts.do(t, "GET", "/lvl/obj?tagging", nil, nil), 500, "InternalError")
	var errLines []string
	for _, l := range strings.Split(buf.String(), "\n") {
		if strings.Contains(l, "level=ERROR") {
			errLines = append(errLines, l)
		}
	}
	if len(errLines) != 1 || !strings.Contains(errLines[0], "code=InternalError") || !strings.Contains(errLines[0], "input/output error") {
		t.Fatalf("want one ERROR line for the 500, got %d:\n%s", len(errLines), strings.Join(errLines, "\n"))
	}
}

// TestParseNetHTTPError: only net/http's own error shapes are rewritten;
// a handler's response (Date header, sorted headers) never matches.
func TestParseNetHTTPError(t *testing.T) {
	for _, c := range []struct {
		in     string
		status int
	}{
		{"HTTP/1.1 431 Request Header Fields Too Large" + netHTTPErrorHeaders + "431 Request Header Fields Too Large", 431},
		{"HTTP/1.1 400 Bad Request: missing required Host header" + netHTTPErrorHeaders + "400 Bad Request: missing required Host header", 400},
		{plainHTTPSError, 400},
		{"HTTP/1.1 400 Bad Request\r\nConnection: close\r\nContent-Type: text/plain; charset=utf-8\r\nDate: x\r\n\r\nhi", 0},
		{"HTTP/1.1 200 OK" + netHTTPErrorHeaders + "fine", 0},
		{"<?xml", 0},
	} {
		status, _, ok := parseNetHTTPError([]byte(c.in))
		if status != c.status || ok != (c.status != 0) {
			t.Errorf("%.50q: status %d ok %v, want %d", c.in, status, ok, c.status)
		}
	}
}
