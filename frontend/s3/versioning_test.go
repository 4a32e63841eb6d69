package s3

import (
	"bytes"
	"encoding/xml"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tristore/tristore/iam"
	"github.com/tristore/tristore/store"
	"github.com/tristore/tristore/store/inuse"
	"github.com/tristore/tristore/store/posix"
)

// newTestServerAt is newTestServer over the data tree dir; stop closes
// server and store, so a second server can reopen dir (a restart).
func newTestServerAt(t *testing.T, dir string) (*testServer, func()) {
	t.Helper()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := posix.Open(dir, posix.Options{Log: log})
	if err != nil {
		t.Fatal(err)
	}
	users, err := iam.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(st, Options{AllowAnonymous: true, Log: log, Auth: NewSigV4Auth(users, ""), Authz: NewPolicyAuthz(),
		MaxHeaderBytes: 16 << 10, ShutdownTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	url, stop := serveTest(t, srv, st)
	return &testServer{url: url, srv: srv, st: st}, stop
}

func listVersions(t *testing.T, ts *testServer, query string) listVersionsResult {
	t.Helper()
	r := ts.do(t, "GET", query, nil, nil)
	wantStatus(t, r, 200)
	var lv listVersionsResult
	if err := xml.Unmarshal(r.body, &lv); err != nil {
		t.Fatal(err)
	}
	return lv
}

func entryLine(lv listVersionsResult) string {
	var parts []string
	for _, e := range lv.Entries {
		s := e.XMLName.Local[:1] + ":" + e.Key + ":" + e.VersionID
		if e.IsLatest {
			s += "*"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " ")
}

const enableVersioning = `<VersioningConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Status>Enabled</Status></VersioningConfiguration>`

func TestVersioningHTTP(t *testing.T) {
	dir := t.TempDir()
	ts, stop := newTestServerAt(t, dir)
	wantStatus(t, ts.do(t, "PUT", "/vbk", nil, nil), 200)
	wantStatus(t, ts.do(t, "PUT", "/vbk/k", []byte("null-version"), nil), 200)
	if r := ts.do(t, "GET", "/vbk?versioning", nil, nil); bytes.Contains(r.body, []byte("<Status>")) {
		t.Fatalf("never-versioned bucket: %s", r.body)
	}
	// Bad documents change nothing.
	wantErr(t, ts.do(t, "PUT", "/vbk?versioning", []byte("<VersioningConfiguration><Status>Enabled"), nil), 400, "MalformedXML")
	wantErr(t, ts.do(t, "PUT", "/vbk?versioning", []byte("<VersioningConfiguration><Status>On</Status></VersioningConfiguration>"), nil), 400, "MalformedXML")
	if r := ts.do(t, "GET", "/vbk?versioning", nil, nil); bytes.Contains(r.body, []byte("<Status>")) {
		t.Fatalf("after bad documents: %s", r.body)
	}
	wantErr(t, ts.do(t, "PUT", "/novbk?versioning", []byte(enableVersioning), nil), 404, "NoSuchBucket")
	wantStatus(t, ts.do(t, "PUT", "/vbk?versioning", []byte(enableVersioning), nil), 200)
	if r := ts.do(t, "GET", "/vbk?versioning", nil, nil); !bytes.Contains(r.body, []byte("<Status>Enabled</Status>")) {
		t.Fatalf("GetBucketVersioning: %s", r.body)
	}
	r1 := ts.do(t, "PUT", "/vbk/k", []byte("one"), nil)
	r2 := ts.do(t, "PUT", "/vbk/k", []byte("two"), nil)
	v1, v2 := r1.header.Get("X-Amz-Version-Id"), r2.header.Get("X-Amz-Version-Id")
	if v1 == "" || v2 == "" || v1 == v2 {
		t.Fatalf("version ids %q %q", v1, v2)
	}
	for id, want := range map[string]string{"null": "null-version", v1: "one", v2: "two"} {
		g := ts.do(t, "GET", "/vbk/k?versionId="+id, nil, nil)
		if g.status != 200 || string(g.body) != want || g.header.Get("X-Amz-Version-Id") != id {
			t.Fatalf("GET version %s: %d %q %q", id, g.status, g.body, g.header.Get("X-Amz-Version-Id"))
		}
	}
	if h := ts.do(t, "HEAD", "/vbk/k?versionId="+v1, nil, nil); h.status != 200 || h.header.Get("Content-Length") != "3" {
		t.Fatalf("HEAD version: %d %v", h.status, h.header)
	}
	wantErr(t, ts.do(t, "GET", "/vbk/k?versionId="+strings.Repeat("0", 32), nil, nil), 404, "NoSuchVersion")
	wantErr(t, ts.do(t, "GET", "/vbk/k?versionId=bogus", nil, nil), 400, "InvalidArgument")
	wantErr(t, ts.do(t, "GET", "/vbk/k?versionId=", nil, nil), 400, "InvalidArgument")
	wantErr(t, ts.do(t, "GET", "/vbk/k?torrent&versionId="+v1, nil, nil), 501, "NotImplemented")

	// DELETE adds a delete marker.
	d := ts.do(t, "DELETE", "/vbk/k", nil, nil)
	dm := d.header.Get("X-Amz-Version-Id")
	if d.status != 204 || d.header.Get("X-Amz-Delete-Marker") != "true" || dm == "" {
		t.Fatalf("DELETE: %d %v", d.status, d.header)
	}
	g := ts.do(t, "GET", "/vbk/k", nil, nil)
	wantErr(t, g, 404, "NoSuchKey")
	if g.header.Get("X-Amz-Delete-Marker") != "true" || g.header.Get("X-Amz-Version-Id") != dm {
		t.Fatalf("GET of a deleted key: %v", g.header)
	}
	wantErr(t, ts.do(t, "GET", "/vbk/k?versionId="+dm, nil, nil), 405, "MethodNotAllowed")
	lv := listVersions(t, ts, "/vbk?versions")
	if got, want := entryLine(lv), "D:k:"+dm+"* V:k:"+v2+" V:k:"+v1+" V:k:null"; got != want {
		t.Fatalf("versions:\n got %s\nwant %s", got, want)
	}
	// Paging one at a time with both markers.
	var paged []string
	q := "/vbk?versions&max-keys=1"
	for range 10 {
		p := listVersions(t, ts, q)
		paged = append(paged, entryLine(p))
		if !p.IsTruncated {
			break
		}
		q = "/vbk?versions&max-keys=1&key-marker=" + p.NextKeyMarker + "&version-id-marker=" + p.NextVersionIDMarker
	}
	if strings.Join(paged, " ") != entryLine(lv) {
		t.Fatalf("paged %v", paged)
	}
	wantErr(t, ts.do(t, "GET", "/vbk?versions&version-id-marker="+v1, nil, nil), 400, "InvalidArgument")
	wantErr(t, ts.do(t, "GET", "/vbk?versions&key-marker=k&version-id-marker=garbage", nil, nil), 400, "InvalidArgument")

	// CopyObject from an older version makes a new version.
	c := ts.do(t, "PUT", "/vbk/k", nil, map[string]string{"X-Amz-Copy-Source": "/vbk/k?versionId=" + v1})
	if c.status != 200 || c.header.Get("X-Amz-Copy-Source-Version-Id") != v1 || c.header.Get("X-Amz-Version-Id") == "" {
		t.Fatalf("copy of a version: %d %v %s", c.status, c.header, c.body)
	}
	vc := c.header.Get("X-Amz-Version-Id")
	if g := ts.do(t, "GET", "/vbk/k", nil, nil); string(g.body) != "one" || g.header.Get("X-Amz-Version-Id") != vc {
		t.Fatalf("after copy: %q %v", g.body, g.header)
	}
	wantErr(t, ts.do(t, "PUT", "/vbk/k2", nil, map[string]string{"X-Amz-Copy-Source": "/vbk/k?versionId=" + strings.Repeat("1", 32)}), 404, "NoSuchVersion")
	// Deleting the current version by ID brings the previous one back.
	wantStatus(t, ts.do(t, "DELETE", "/vbk/k?versionId="+vc, nil, nil), 204)
	wantErr(t, ts.do(t, "GET", "/vbk/k", nil, nil), 404, "NoSuchKey") // the marker is latest again
	dd := ts.do(t, "DELETE", "/vbk/k?versionId="+dm, nil, nil)
	if dd.status != 204 || dd.header.Get("X-Amz-Delete-Marker") != "true" || dd.header.Get("X-Amz-Version-Id") != dm {
		t.Fatalf("DELETE of the marker: %d %v", dd.status, dd.header)
	}
	if g := ts.do(t, "GET", "/vbk/k", nil, nil); string(g.body) != "two" {
		t.Fatalf("after removing the marker: %d %q", g.status, g.body)
	}
	// The current version is the plain file the other views see.
	if b, err := os.ReadFile(dir + "/vbk/k"); err != nil || string(b) != "two" {
		t.Fatalf("plain file: %q %v", b, err)
	}

	// DeleteObjects with and without versions.
	body := `<Delete><Object><Key>k</Key><VersionId>` + v1 + `</VersionId></Object><Object><Key>k</Key></Object></Delete>`
	r := ts.do(t, "POST", "/vbk?delete", []byte(body), nil)
	if r.status != 200 || !bytes.Contains(r.body, []byte("<VersionId>"+v1+"</VersionId>")) || !bytes.Contains(r.body, []byte("<DeleteMarker>true</DeleteMarker>")) {
		t.Fatalf("DeleteObjects: %d %s", r.status, r.body)
	}
	wantErr(t, ts.do(t, "GET", "/vbk/k?versionId="+v1, nil, nil), 404, "NoSuchVersion")

	// Multipart in a versioned bucket makes a version.
	up := ts.do(t, "POST", "/vbk/mp?uploads", nil, nil)
	var ir initiateResult
	xml.Unmarshal(up.body, &ir)
	pr := ts.do(t, "PUT", "/vbk/mp?partNumber=1&uploadId="+ir.UploadID, []byte("part"), nil)
	cm := `<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>` + pr.header.Get("ETag") + `</ETag></Part></CompleteMultipartUpload>`
	cr := ts.do(t, "POST", "/vbk/mp?uploadId="+ir.UploadID, []byte(cm), nil)
	if cr.status != 200 || cr.header.Get("X-Amz-Version-Id") == "" {
		t.Fatalf("versioned Complete: %d %v %s", cr.status, cr.header, cr.body)
	}

	// Survives a restart.
	before := entryLine(listVersions(t, ts, "/vbk?versions"))
	stop()
	ts2, _ := newTestServerAt(t, dir)
	if r := ts2.do(t, "GET", "/vbk?versioning", nil, nil); !bytes.Contains(r.body, []byte("<Status>Enabled</Status>")) {
		t.Fatalf("versioning after restart: %s", r.body)
	}
	if after := entryLine(listVersions(t, ts2, "/vbk?versions")); after != before {
		t.Fatalf("versions after restart:\n got %s\nwant %s", after, before)
	}
	// Suspended: new writes are the null version.
	wantStatus(t, ts2.do(t, "PUT", "/vbk?versioning", []byte(`<VersioningConfiguration><Status>Suspended</Status></VersioningConfiguration>`), nil), 200)
	wantStatus(t, ts2.do(t, "PUT", "/vbk/s", []byte("s1"), nil), 200)
	wantStatus(t, ts2.do(t, "PUT", "/vbk/s", []byte("s2"), nil), 200)
	if g := ts2.do(t, "GET", "/vbk/s?versionId=null", nil, nil); string(g.body) != "s2" {
		t.Fatalf("suspended null version: %q", g.body)
	}
	if got := entryLine(listVersions(t, ts2, "/vbk?versions&prefix=s")); got != "V:s:null*" {
		t.Fatalf("suspended versions: %s", got)
	}
	// A bucket with versions is not empty.
	wantErr(t, ts2.do(t, "DELETE", "/vbk", nil, nil), 409, "BucketNotEmpty")
}

// A served block volume in a versioned bucket keeps its rules: no new
// version over it, no delete marker, no delete of its version, and the
// refused requests leave no trace in the version listing.
func TestVersioningServedVolume(t *testing.T) {
	ts := newTestServer(t)
	wantStatus(t, ts.do(t, "PUT", "/vvol", nil, nil), 200)
	wantStatus(t, ts.do(t, "PUT", "/vvol?versioning", []byte(enableVersioning), nil), 200)
	p := ts.do(t, "PUT", "/vvol/disk", []byte("LUNDATA!"), nil)
	wantStatus(t, p, 200)
	served, err := inuse.Serve(filepath.Join(ts.st.(store.LocalPather).Root(), "vvol", "disk"))
	if err != nil {
		t.Fatal(err)
	}
	defer served.Close()
	wantErr(t, ts.do(t, "PUT", "/vvol/disk", []byte("x"), nil), 409, "OperationAborted")
	wantErr(t, ts.do(t, "DELETE", "/vvol/disk", nil, nil), 409, "OperationAborted")
	wantErr(t, ts.do(t, "DELETE", "/vvol/disk?versionId="+p.header.Get("X-Amz-Version-Id"), nil, nil), 409, "OperationAborted")
	if got := entryLine(listVersions(t, ts, "/vvol?versions")); got != "V:disk:"+p.header.Get("X-Amz-Version-Id")+"*" {
		t.Fatalf("versions after refused requests: %s", got)
	}
	served.Close()
	wantStatus(t, ts.do(t, "DELETE", "/vvol/disk", nil, nil), 204)
}
