package s3

import (
	"encoding/xml"
	"testing"
)

// TestNullVersionHeader: GET and HEAD of the null version (written while
// versioning is Suspended, or before it was first enabled) carry
// x-amz-version-id: null in a bucket whose versioning is Enabled or
// Suspended, as AWS answers; before, they carried no header. A bucket that
// never had versioning sends none, and writes in a Suspended bucket (PUT,
// CompleteMultipartUpload) send none, as AWS's PutObject reference shows.
func TestNullVersionHeader(t *testing.T) {
	ts := newTestServer(t)
	vid := func(r resp) string { return r.header.Get("X-Amz-Version-Id") }
	wantStatus(t, ts.do(t, "PUT", "/nvb", nil, nil), 200)
	if p := ts.do(t, "PUT", "/nvb/old", []byte("old"), nil); p.status != 200 || vid(p) != "" {
		t.Fatalf("PUT, never versioned: %d %q", p.status, vid(p))
	}
	for _, m := range []string{"GET", "HEAD"} {
		if g := ts.do(t, m, "/nvb/old", nil, nil); g.status != 200 || vid(g) != "" {
			t.Fatalf("%s, never versioned: %d version %q", m, g.status, vid(g))
		}
	}
	suspend := `<VersioningConfiguration><Status>Suspended</Status></VersioningConfiguration>`
	wantStatus(t, ts.do(t, "PUT", "/nvb?versioning", []byte(suspend), nil), 200)
	if p := ts.do(t, "PUT", "/nvb/s", []byte("s1"), nil); p.status != 200 || vid(p) != "" {
		t.Fatalf("PUT, suspended: %d %q (AWS sends no version ID)", p.status, vid(p))
	}
	// A multipart object written while Suspended is the null version too.
	up := ts.do(t, "POST", "/nvb/mp?uploads", nil, nil)
	var ir initiateResult
	if err := xml.Unmarshal(up.body, &ir); err != nil {
		t.Fatal(err)
	}
	pr := ts.do(t, "PUT", "/nvb/mp?partNumber=1&uploadId="+ir.UploadID, []byte("part"), nil)
	cm := `<CompleteMultipartUpload><Part><PartNumber>1</PartNumber><ETag>` + pr.header.Get("ETag") + `</ETag></Part></CompleteMultipartUpload>`
	if c := ts.do(t, "POST", "/nvb/mp?uploadId="+ir.UploadID, []byte(cm), nil); c.status != 200 || vid(c) != "" {
		t.Fatalf("Complete, suspended: %d %q", c.status, vid(c))
	}
	check := func(state string) {
		t.Helper()
		for _, path := range []string{"/nvb/s", "/nvb/old", "/nvb/mp", "/nvb/s?versionId=null"} {
			for _, m := range []string{"GET", "HEAD"} {
				if g := ts.do(t, m, path, nil, nil); g.status != 200 || vid(g) != "null" {
					t.Fatalf("%s %s, %s: %d version %q, want null", m, path, state, g.status, vid(g))
				}
			}
		}
		if g := ts.do(t, "GET", "/nvb/s", nil, map[string]string{"Range": "bytes=1-"}); g.status != 206 || vid(g) != "null" {
			t.Fatalf("ranged GET, %s: %d version %q", state, g.status, vid(g))
		}
	}
	check("Suspended")
	wantStatus(t, ts.do(t, "PUT", "/nvb?versioning", []byte(enableVersioning), nil), 200)
	check("Enabled")
	// A new version in an Enabled bucket is named by its own ID.
	p := ts.do(t, "PUT", "/nvb/s", []byte("s2"), nil)
	if p.status != 200 || vid(p) == "" || vid(p) == "null" {
		t.Fatalf("PUT, enabled: %d %q", p.status, vid(p))
	}
	if g := ts.do(t, "HEAD", "/nvb/s", nil, nil); vid(g) != vid(p) {
		t.Fatalf("HEAD of the new version: %q, want %q", vid(g), vid(p))
	}
	if g := ts.do(t, "GET", "/nvb/s?versionId=null", nil, nil); g.status != 200 || string(g.body) != "s1" || vid(g) != "null" {
		t.Fatalf("GET versionId=null: %d %q %q", g.status, g.body, vid(g))
	}
}
