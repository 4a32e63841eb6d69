package s3

import (
	"bufio"
	"bytes"
	"context"
	"crypto/md5"
	"encoding/base64"
	"encoding/xml"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tristore/tristore/iam"
	"github.com/tristore/tristore/store"
	"github.com/tristore/tristore/store/posix"
)

// testServer runs a Server over a posix store in a temp dir on 127.0.0.1:0
// with anonymous full access, so raw HTTP requests need no signing.
type testServer struct {
	url string
	srv *Server
	st  store.Store
	reg *prometheus.Registry
}

func newTestServer(t testing.TB) *testServer {
	t.Helper()
	return newTestServerLog(t, slog.New(slog.NewTextHandler(io.Discard, nil)))
}

// newTestServerLog is newTestServer with the server logging to log.
func newTestServerLog(t testing.TB, log *slog.Logger) *testServer {
	t.Helper()
	dir := t.TempDir()
	st, err := posix.Open(dir, posix.Options{Log: log})
	if err != nil {
		t.Fatal(err)
	}
	users, err := iam.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	srv, err := New(st, Options{AllowAnonymous: true, Log: log, Metrics: reg,
		Auth: NewSigV4Auth(users, ""), Authz: NewPolicyAuthz(), MaxHeaderBytes: 16 << 10, ShutdownTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	url, _ := serveTest(t, srv, st)
	return &testServer{url: url, srv: srv, st: st, reg: reg}
}

type resp struct {
	status int
	header http.Header
	body   []byte
}

func (ts *testServer) do(t testing.TB, method, path string, body []byte, hdr map[string]string) resp {
	t.Helper()
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequest(method, ts.url+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range hdr {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return resp{res.StatusCode, res.Header, b}
}

// wantErr checks an S3 XML error response.
func wantErr(t *testing.T, r resp, status int, code string) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d (%s)", r.status, status, r.body)
	}
	if code == "" {
		return
	}
	var e errorResponse
	if err := xml.Unmarshal(r.body, &e); err != nil {
		t.Fatalf("error body not XML: %q", r.body)
	}
	if e.Code != code || e.RequestID == "" {
		t.Fatalf("error %q (request id %q), want %q", e.Code, e.RequestID, code)
	}
}

func wantStatus(t *testing.T, r resp, status int) {
	t.Helper()
	if r.status != status {
		t.Fatalf("status %d, want %d: %s", r.status, status, r.body)
	}
}

func TestObjectBasics(t *testing.T) {
	ts := newTestServer(t)
	wantStatus(t, ts.do(t, "PUT", "/bkt", nil, nil), 200)
	wantErr(t, ts.do(t, "PUT", "/bkt", nil, nil), 409, "BucketAlreadyOwnedByYou")
	wantErr(t, ts.do(t, "PUT", "/Bad_Name", nil, nil), 400, "InvalidBucketName")
	data := []byte("hello, tristore range world")
	r := ts.do(t, "PUT", "/bkt/dir/obj.txt", data, map[string]string{
		"Content-Type": "text/plain", "X-Amz-Meta-Color": "blue", "Cache-Control": "no-cache"})
	wantStatus(t, r, 200)
	sum := md5.Sum(data)
	if got := r.header.Get("ETag"); got != fmt.Sprintf(`"%x"`, sum) {
		t.Fatalf("ETag %s", got)
	}
	g := ts.do(t, "GET", "/bkt/dir/obj.txt", nil, nil)
	wantStatus(t, g, 200)
	if !bytes.Equal(g.body, data) || g.header.Get("Content-Type") != "text/plain" ||
		g.header.Get("X-Amz-Meta-Color") != "blue" || g.header.Get("Cache-Control") != "no-cache" {
		t.Fatalf("GET: %q %v", g.body, g.header)
	}
	// Virtual-host style addresses the same object.
	ts.srv.opts.VirtualHosts = []string{"s3.test"}
	wantStatus(t, ts.do(t, "HEAD", "/dir/obj.txt", nil, map[string]string{"Host": "bkt.s3.test"}), 200)

	// Ranges.
	g = ts.do(t, "GET", "/bkt/dir/obj.txt", nil, map[string]string{"Range": "bytes=7-14"})
	wantStatus(t, g, 206)
	if string(g.body) != "tristore" || g.header.Get("Content-Range") != fmt.Sprintf("bytes 7-14/%d", len(data)) {
		t.Fatalf("range: %q %s", g.body, g.header.Get("Content-Range"))
	}
	g = ts.do(t, "GET", "/bkt/dir/obj.txt", nil, map[string]string{"Range": "bytes=-5"})
	if string(g.body) != "world" {
		t.Fatalf("suffix range: %q", g.body)
	}
	wantErr(t, ts.do(t, "GET", "/bkt/dir/obj.txt", nil, map[string]string{"Range": "bytes=1000-"}), 416, "InvalidRange")

	// Conditionals: 412 wins over 304.
	etag := fmt.Sprintf(`"%x"`, sum)
	wantStatus(t, ts.do(t, "GET", "/bkt/dir/obj.txt", nil, map[string]string{"If-None-Match": etag}), 304)
	wantErr(t, ts.do(t, "GET", "/bkt/dir/obj.txt", nil, map[string]string{"If-Match": `"nope"`}), 412, "PreconditionFailed")
	wantErr(t, ts.do(t, "GET", "/bkt/dir/obj.txt", nil, map[string]string{"If-Match": `"nope"`, "If-None-Match": etag}), 412, "PreconditionFailed")
	wantStatus(t, ts.do(t, "GET", "/bkt/dir/obj.txt", nil, map[string]string{"If-Match": etag, "If-Unmodified-Since": "Mon, 01 Jan 2001 00:00:00 GMT"}), 200)
	wantStatus(t, ts.do(t, "GET", "/bkt/dir/obj.txt", nil, map[string]string{"If-Modified-Since": time.Now().Add(time.Hour).UTC().Format(http.TimeFormat)}), 304)
	wantErr(t, ts.do(t, "PUT", "/bkt/dir/obj.txt", []byte("x"), map[string]string{"If-None-Match": "*"}), 412, "PreconditionFailed")

	// response-* overrides.
	g = ts.do(t, "GET", "/bkt/dir/obj.txt?response-content-type=application/x-test", nil, nil)
	if g.header.Get("Content-Type") != "application/x-test" {
		t.Fatalf("override: %v", g.header)
	}
	wantStatus(t, ts.do(t, "GET", "/bkt/dir/obj.txt?versionId=null", nil, nil), 200)
	wantErr(t, ts.do(t, "GET", "/bkt/dir/obj.txt?versionId=3HL4kqtJlcpXroDTDmJ", nil, nil), 400, "InvalidArgument")
	wantErr(t, ts.do(t, "GET", "/bkt/nokey", nil, nil), 404, "NoSuchKey")
	// Keys with no plain path are stored aside (store/posix hidden area),
	// never outside the bucket: each reads back as itself.
	for _, k := range []string{"a/../../escape", ".tristore-tmp-x", "a//b", "/lead"} {
		wantStatus(t, ts.do(t, "PUT", "/bkt/"+k, []byte("odd "+k), nil), 200)
		if g := ts.do(t, "GET", "/bkt/"+k, nil, nil); g.status != 200 || string(g.body) != "odd "+k {
			t.Fatalf("GET %q = %d %q", k, g.status, g.body)
		}
	}
	wantErr(t, ts.do(t, "PUT", "/bkt/nul%00key", []byte("x"), nil), 400, "InvalidArgument")
	wantErr(t, ts.do(t, "GET", "/nobucket/k", nil, nil), 404, "NoSuchBucket")
	wantErr(t, ts.do(t, "DELETE", "/bkt", nil, nil), 409, "BucketNotEmpty")
	wantErr(t, ts.do(t, "GET", "/bkt/"+strings.Repeat("k", 1100), nil, nil), 400, "KeyTooLongError")
	wantStatus(t, ts.do(t, "DELETE", "/bkt/dir/obj.txt", nil, nil), 204)
	wantStatus(t, ts.do(t, "DELETE", "/bkt/dir/obj.txt", nil, nil), 204)
	for _, k := range []string{"a/../../escape", ".tristore-tmp-x", "a//b", "/lead", "a//b", "x/../y"} {
		wantStatus(t, ts.do(t, "DELETE", "/bkt/"+k, nil, nil), 204)
	}
	wantStatus(t, ts.do(t, "DELETE", "/bkt", nil, nil), 204)
}

func TestChecksumsRefuseBadBodies(t *testing.T) {
	ts := newTestServer(t)
	wantStatus(t, ts.do(t, "PUT", "/bk1", nil, nil), 200)
	wantStatus(t, ts.do(t, "PUT", "/bk1/k", []byte("original"), nil), 200)
	data := []byte("new content")
	wrongMD5 := md5.Sum([]byte("other"))
	wantErr(t, ts.do(t, "PUT", "/bk1/k", data, map[string]string{"Content-MD5": base64.StdEncoding.EncodeToString(wrongMD5[:])}), 400, "BadDigest")
	wantErr(t, ts.do(t, "PUT", "/bk1/k", data, map[string]string{"Content-MD5": "notbase64!"}), 400, "InvalidDigest")
	c := crc32.Checksum([]byte("other"), crc32.MakeTable(crc32.Castagnoli))
	bad := base64.StdEncoding.EncodeToString([]byte{byte(c >> 24), byte(c >> 16), byte(c >> 8), byte(c)})
	wantErr(t, ts.do(t, "PUT", "/bk1/k", data, map[string]string{"X-Amz-Checksum-Crc32c": bad}), 400, "BadDigest")
	if g := ts.do(t, "GET", "/bk1/k", nil, nil); string(g.body) != "original" {
		t.Fatalf("object changed by a refused PUT: %q", g.body)
	}
	c = crc32.Checksum(data, crc32.MakeTable(crc32.Castagnoli))
	good := base64.StdEncoding.EncodeToString([]byte{byte(c >> 24), byte(c >> 16), byte(c >> 8), byte(c)})
	okMD5 := md5.Sum(data)
	r := ts.do(t, "PUT", "/bk1/k", data, map[string]string{"X-Amz-Checksum-Crc32c": good, "Content-MD5": base64.StdEncoding.EncodeToString(okMD5[:])})
	wantStatus(t, r, 200)
	g := ts.do(t, "HEAD", "/bk1/k", nil, map[string]string{"X-Amz-Checksum-Mode": "ENABLED"})
	if g.header.Get("X-Amz-Checksum-Crc32c") != good {
		t.Fatalf("stored checksum not returned: %v", g.header)
	}
}

func TestListingPages(t *testing.T) {
	ts := newTestServer(t)
	wantStatus(t, ts.do(t, "PUT", "/lbk", nil, nil), 200)
	keys := []string{"a/1", "a/2", "b", "c/x/y", "d e+f", "z"}
	for _, k := range keys {
		wantStatus(t, ts.do(t, "PUT", "/lbk/"+k, []byte(k), nil), 200)
	}
	var got []string
	tok := ""
	for i := 0; i < 10; i++ {
		q := "/lbk?list-type=2&max-keys=2"
		if tok != "" {
			q += "&continuation-token=" + tok
		}
		r := ts.do(t, "GET", q, nil, nil)
		wantStatus(t, r, 200)
		var res listV2Result
		if err := xml.Unmarshal(r.body, &res); err != nil {
			t.Fatal(err)
		}
		for _, c := range res.Contents {
			got = append(got, c.Key)
		}
		if !res.IsTruncated {
			break
		}
		tok = res.NextContinuationToken
	}
	if strings.Join(got, ",") != strings.Join(keys, ",") {
		t.Fatalf("paged keys %v, want %v", got, keys)
	}
	r := ts.do(t, "GET", "/lbk?list-type=2&delimiter=/", nil, nil)
	var res listV2Result
	xml.Unmarshal(r.body, &res)
	if len(res.CommonPrefixes) != 2 || res.CommonPrefixes[0].Prefix != "a/" || len(res.Contents) != 3 {
		t.Fatalf("delimiter listing: %s", r.body)
	}
	r = ts.do(t, "GET", "/lbk?list-type=2&start-after=c&encoding-type=url", nil, nil)
	res = listV2Result{}
	xml.Unmarshal(r.body, &res)
	if len(res.Contents) != 3 || res.Contents[1].Key != "d+e%2Bf" {
		t.Fatalf("start-after/encoding: %s", r.body)
	}
	var v1 listV1Result
	r = ts.do(t, "GET", "/lbk?marker=b&max-keys=1", nil, nil)
	xml.Unmarshal(r.body, &v1)
	if len(v1.Contents) != 1 || v1.Contents[0].Key != "c/x/y" || !v1.IsTruncated || v1.NextMarker != "c/x/y" {
		t.Fatalf("v1: %s", r.body)
	}
	wantErr(t, ts.do(t, "GET", "/lbk?list-type=2&continuation-token=garbage", nil, nil), 400, "InvalidArgument")
	var lv listVersionsResult
	r = ts.do(t, "GET", "/lbk?versions&max-keys=4", nil, nil)
	xml.Unmarshal(r.body, &lv)
	if len(lv.Entries) != 4 || lv.Entries[0].VersionID != "null" || !lv.Entries[0].IsLatest || !lv.IsTruncated || lv.NextKeyMarker != "c/x/y" {
		t.Fatalf("versions: %s", r.body)
	}
}

func TestMultipartErrors(t *testing.T) {
	ts := newTestServer(t)
	wantStatus(t, ts.do(t, "PUT", "/mbk", nil, nil), 200)
	r := ts.do(t, "POST", "/mbk/big?uploads", nil, nil)
	wantStatus(t, r, 200)
	var ir initiateResult
	xml.Unmarshal(r.body, &ir)
	id := ir.UploadID
	p1 := bytes.Repeat([]byte{1}, 1<<20) // below MinPartSize
	r1 := ts.do(t, "PUT", "/mbk/big?partNumber=1&uploadId="+id, p1, nil)
	wantStatus(t, r1, 200)
	r2 := ts.do(t, "PUT", "/mbk/big?partNumber=2&uploadId="+id, []byte("tail"), nil)
	wantStatus(t, r2, 200)
	complete := func(parts ...string) resp {
		body := "<CompleteMultipartUpload>" + strings.Join(parts, "") + "</CompleteMultipartUpload>"
		return ts.do(t, "POST", "/mbk/big?uploadId="+id, []byte(body), nil)
	}
	part := func(n int, etag string) string {
		return fmt.Sprintf("<Part><PartNumber>%d</PartNumber><ETag>%s</ETag></Part>", n, etag)
	}
	wantErr(t, complete(part(2, r2.header.Get("ETag")), part(1, r1.header.Get("ETag"))), 400, "InvalidPartOrder")
	wantErr(t, complete(part(1, `"0000"`)), 400, "InvalidPart")
	wantErr(t, complete(part(1, r1.header.Get("ETag")), part(2, r2.header.Get("ETag"))), 400, "EntityTooSmall")
	wantErr(t, ts.do(t, "POST", "/mbk/big?uploadId="+id, []byte("<Complete"), nil), 400, "MalformedXML")
	wantErr(t, ts.do(t, "PUT", "/mbk/big?partNumber=1&uploadId=nosuch", []byte("x"), nil), 404, "NoSuchUpload")
	wantErr(t, ts.do(t, "PUT", "/mbk/big?partNumber=0&uploadId="+id, []byte("x"), nil), 400, "InvalidArgument")
	wantStatus(t, ts.do(t, "GET", "/mbk/big?uploadId="+id, nil, nil), 200)
	wantStatus(t, ts.do(t, "DELETE", "/mbk/big?uploadId="+id, nil, nil), 204)
	wantErr(t, ts.do(t, "GET", "/mbk/big?uploadId="+id, nil, nil), 404, "NoSuchUpload")
	wantErr(t, ts.do(t, "POST", "/mbk?delete", []byte("<Delete><Object>"), nil), 400, "MalformedXML")
}

// TestTruncatedBodyAndHugeHeaders sends a PUT whose body ends before its
// Content-Length and a request with oversized headers, then checks that
// nothing was published and the server still serves. The same raw PUT with
// its whole body is sent afterwards and must publish: that proves the
// truncated request reached the bucket it is checked in (a wrong path would
// make "not published" pass for the wrong reason).
func TestTruncatedBodyAndHugeHeaders(t *testing.T) {
	ts := newTestServer(t)
	wantStatus(t, ts.do(t, "PUT", "/tbk", nil, nil), 200)
	// An object under the key already: a truncated overwrite must leave it.
	wantStatus(t, ts.do(t, "PUT", "/tbk/old", []byte("before"), nil), 200)
	const size = 100000
	body := strings.Repeat("a", size)
	for _, key := range []string{"half", "old"} {
		status := rawPut(t, ts, "/tbk/"+key, size, body[:5000])
		if status == http.StatusOK {
			t.Fatalf("truncated PUT /tbk/%s answered 200", key)
		}
	}
	wantErr(t, ts.do(t, "GET", "/tbk/half", nil, nil), 404, "NoSuchKey")
	if r := ts.do(t, "GET", "/tbk/old", nil, nil); r.status != 200 || string(r.body) != "before" {
		t.Fatalf("GET /tbk/old after a truncated overwrite: %d %q, want 200 \"before\"", r.status, r.body)
	}
	if r := ts.do(t, "GET", "/tbk?list-type=2", nil, nil); r.status != 200 || bytes.Contains(r.body, []byte("<Key>half</Key>")) {
		t.Fatalf("listing after a truncated PUT: %d %s", r.status, r.body)
	}
	// Control: the same raw request with the whole body publishes.
	if status := rawPut(t, ts, "/tbk/half", size, body); status != http.StatusOK {
		t.Fatalf("complete raw PUT /tbk/half: status %d", status)
	}
	if r := ts.do(t, "GET", "/tbk/half", nil, nil); r.status != 200 || string(r.body) != body {
		t.Fatalf("GET /tbk/half after a complete PUT: status %d, %d bytes", r.status, len(r.body))
	}

	conn, err := net.Dial("tcp", strings.TrimPrefix(ts.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(conn, "GET /tbk HTTP/1.1\r\nHost: x\r\nX-Big: %s\r\n\r\n", strings.Repeat("h", 64<<10))
	conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusRequestHeaderFieldsTooLarge {
		t.Fatalf("huge header: status %d", res.StatusCode)
	}
	conn.Close()
	wantStatus(t, ts.do(t, "PUT", "/tbk/ok", []byte("fine"), nil), 200)
}

// rawPut sends a PUT with Content-Length: length and then only body, closes
// its write side (so a short body ends in EOF, as when a client dies), and
// returns the response status, or 0 when the server closed without one.
func rawPut(t *testing.T, ts *testServer, path string, length int, body string) int {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(ts.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "PUT %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", path, length, body)
	conn.(*net.TCPConn).CloseWrite()
	conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		return 0
	}
	res.Body.Close()
	return res.StatusCode
}

func TestCopyAndACL(t *testing.T) {
	ts := newTestServer(t)
	wantStatus(t, ts.do(t, "PUT", "/cbk", nil, nil), 200)
	wantStatus(t, ts.do(t, "PUT", "/cbk/src", []byte("copy me"), map[string]string{"X-Amz-Meta-A": "1", "Content-Type": "text/x-a"}), 200)
	wantStatus(t, ts.do(t, "PUT", "/cbk/dst", nil, map[string]string{"X-Amz-Copy-Source": "/cbk/src"}), 200)
	g := ts.do(t, "GET", "/cbk/dst", nil, nil)
	if string(g.body) != "copy me" || g.header.Get("X-Amz-Meta-A") != "1" {
		t.Fatalf("COPY: %q %v", g.body, g.header)
	}
	wantStatus(t, ts.do(t, "PUT", "/cbk/dst", nil, map[string]string{"X-Amz-Copy-Source": "cbk/src", "X-Amz-Metadata-Directive": "REPLACE", "X-Amz-Meta-B": "2"}), 200)
	g = ts.do(t, "HEAD", "/cbk/dst", nil, nil)
	if g.header.Get("X-Amz-Meta-A") != "" || g.header.Get("X-Amz-Meta-B") != "2" {
		t.Fatalf("REPLACE: %v", g.header)
	}
	wantErr(t, ts.do(t, "PUT", "/cbk/src", nil, map[string]string{"X-Amz-Copy-Source": "/cbk/src"}), 400, "InvalidRequest")
	wantErr(t, ts.do(t, "PUT", "/cbk/dst", nil, map[string]string{"X-Amz-Copy-Source": "/cbk/src", "X-Amz-Copy-Source-If-Match": `"x"`}), 412, "PreconditionFailed")

	wantStatus(t, ts.do(t, "PUT", "/cbk?acl", nil, map[string]string{"X-Amz-Acl": "public-read"}), 200)
	g = ts.do(t, "GET", "/cbk?acl", nil, nil)
	if !bytes.Contains(g.body, []byte(allUsersURI)) {
		t.Fatalf("bucket ACL: %s", g.body)
	}
	wantStatus(t, ts.do(t, "PUT", "/cbk?acl", g.body, nil), 200)
	wantErr(t, ts.do(t, "PUT", "/cbk?acl", []byte("<AccessControlPolicy"), nil), 400, "MalformedACLError")
	wantErr(t, ts.do(t, "GET", "/cbk?policy", nil, nil), 404, "NoSuchBucketPolicy")
	wantErr(t, ts.do(t, "PUT", "/cbk?policy", []byte("{not json"), nil), 400, "MalformedPolicy")
	pol := `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::cbk/*"}]}`
	wantStatus(t, ts.do(t, "PUT", "/cbk?policy", []byte(pol), nil), 204)
	if g := ts.do(t, "GET", "/cbk?policy", nil, nil); string(g.body) != pol {
		t.Fatalf("policy: %s", g.body)
	}
	wantStatus(t, ts.do(t, "DELETE", "/cbk?policy", nil, nil), 204)
	wantStatus(t, ts.do(t, "PUT", "/cbk/src?acl", nil, map[string]string{"X-Amz-Acl": "public-read"}), 200)
	if g := ts.do(t, "GET", "/cbk/src?acl", nil, nil); !bytes.Contains(g.body, []byte(allUsersURI)) {
		t.Fatalf("object ACL: %s", g.body)
	}
	wantErr(t, ts.do(t, "GET", "/cbk?cors", nil, nil), 404, "NoSuchCORSConfiguration")
	wantErr(t, ts.do(t, "PUT", "/cbk?cors", []byte("<CORSConfiguration/>"), nil), 400, "MalformedXML")
	wantErr(t, ts.do(t, "PUT", "/cbk/enc", []byte("x"), map[string]string{"X-Amz-Server-Side-Encryption": "aws:kms"}), 501, "NotImplemented")
	wantErr(t, ts.do(t, "GET", "/cbk/enc", nil, nil), 404, "NoSuchKey")
}

// TestGracefulShutdown starts a slow PUT, closes the server mid-request and
// checks the request still completes.
func TestGracefulShutdown(t *testing.T) {
	ts := newTestServer(t)
	wantStatus(t, ts.do(t, "PUT", "/gsk", nil, nil), 200)
	pr, pw := io.Pipe()
	req, _ := http.NewRequest("PUT", ts.url+"/gsk/slow", pr)
	req.ContentLength = 6
	type result struct {
		code int
		err  error
	}
	resc := make(chan result, 1)
	go func() {
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			resc <- result{0, err}
			return
		}
		res.Body.Close()
		resc <- result{res.StatusCode, nil}
	}()
	pw.Write([]byte("abc"))
	time.Sleep(300 * time.Millisecond)
	closed := make(chan struct{})
	go func() { ts.srv.Close(); close(closed) }()
	time.Sleep(300 * time.Millisecond)
	pw.Write([]byte("def"))
	pw.Close()
	select {
	case r := <-resc:
		if r.err != nil || r.code != 200 {
			t.Fatalf("in-flight PUT during shutdown: %d %v", r.code, r.err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("in-flight request never finished")
	}
	<-closed
	if _, _, err := ts.st.Get(context.Background(), "gsk", "slow", 0, -1); err != nil {
		t.Fatalf("object from drained request missing: %v", err)
	}
}

func TestMetricsAndErrorMapping(t *testing.T) {
	ts := newTestServer(t)
	ts.do(t, "GET", "/nob/k", nil, nil)
	mfs, err := ts.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := map[string]bool{}
	for _, mf := range mfs {
		found[mf.GetName()] = true
	}
	for _, n := range []string{"tristore_s3_requests_total", "tristore_s3_errors_total", "tristore_s3_request_duration_seconds"} {
		if !found[n] {
			t.Errorf("metric %s missing", n)
		}
	}
	cases := map[error]string{
		fmt.Errorf("w: %w", store.ErrNoSpace):     "InsufficientStorage",
		syscall.ENOSPC:                            "InsufficientStorage",
		fmt.Errorf("w: %w", store.ErrKeyConflict): "InvalidArgument",
		store.ErrInvalidPartOrder:                 "InvalidPartOrder",
		errors.New("boom"):                        "InternalError",
	}
	for e, code := range cases {
		if got := toAPIError(e).Code; got != code {
			t.Errorf("%v -> %s, want %s", e, got, code)
		}
	}
}

// fullStore fails every write with ErrNoSpace, as a full disk does.
type fullStore struct{ store.Store }

func (f fullStore) Put(ctx context.Context, bucket, key string, r io.Reader, size int64, meta store.ObjectMeta) (store.ObjectInfo, error) {
	io.CopyN(io.Discard, r, 10)
	return store.ObjectInfo{}, fmt.Errorf("posix: write: %w", store.ErrNoSpace)
}

func TestFullDiskAndSkew(t *testing.T) {
	ts := newTestServer(t)
	wantStatus(t, ts.do(t, "PUT", "/fulldisk", nil, nil), 200)
	wantStatus(t, ts.do(t, "PUT", "/fulldisk/old", []byte("acknowledged"), nil), 200)
	ts.srv.st = fullStore{ts.st}
	wantErr(t, ts.do(t, "PUT", "/fulldisk/old", []byte("replacement"), nil), 507, "InsufficientStorage")
	if g := ts.do(t, "GET", "/fulldisk/old", nil, nil); g.status != 200 || string(g.body) != "acknowledged" {
		t.Fatalf("acknowledged object after full-disk PUT: %d %q", g.status, g.body)
	}
	old := time.Now().Add(-time.Hour).UTC().Format("20060102T150405Z")
	wantErr(t, ts.do(t, "GET", "/fulldisk/old", nil, map[string]string{
		"Authorization": "AWS4-HMAC-SHA256 Credential=x/20200101/us-east-1/s3/aws4_request, SignedHeaders=host;x-amz-date, Signature=00",
		"X-Amz-Date":    old}), 403, "RequestTimeTooSkewed")
}

// TestStalledBody: a client that stops sending mid-body gets IncompleteBody
// after BodyIdleTimeout, nothing is published, and the server keeps serving.
func TestStalledBody(t *testing.T) {
	ts := newTestServer(t)
	ts.srv.opts.BodyIdleTimeout = 500 * time.Millisecond
	wantStatus(t, ts.do(t, "PUT", "/stall", nil, nil), 200)
	conn, err := net.Dial("tcp", strings.TrimPrefix(ts.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	fmt.Fprintf(conn, "PUT /stall/obj HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n%s", strings.Repeat("s", 100))
	conn.SetReadDeadline(time.Now().Add(20 * time.Second))
	res, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		t.Fatalf("no response to a stalled body: %v", err)
	}
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != 400 || !bytes.Contains(b, []byte("IncompleteBody")) {
		t.Fatalf("stalled body: %d %s", res.StatusCode, b)
	}
	wantErr(t, ts.do(t, "GET", "/stall/obj", nil, nil), 404, "NoSuchKey")
}

// serveTest serves srv on a fresh 127.0.0.1 port and returns its URL and
// stop, which stops the server (a Serve error fails the test) and closes
// st; stop runs at the end of the test too and may be called earlier (a
// restart over the same tree).
func serveTest(t testing.TB, srv *Server, st interface{ Close() error }) (string, func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("Serve: %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Error("Serve did not return after cancel")
			}
			st.Close()
		})
	}
	t.Cleanup(stop)
	return "http://" + ln.Addr().String(), stop
}
