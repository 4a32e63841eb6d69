package s3

import (
	"bytes"
	"strings"
	"testing"
)

// TestVersionedSubresources: versionId on Get/Put/DeleteObjectTagging,
// Get/PutObjectAcl and GetObjectAttributes acts on that version, answers
// x-amz-version-id, refuses a delete marker with 405 (404 NoSuchKey when
// the marker is the latest and no version is named), an unknown version
// with 404 NoSuchVersion and a malformed one with 400; the tags and ACL
// of a version survive it becoming noncurrent and a restart. Before,
// every one of these requests was 501 NotImplemented.
func TestVersionedSubresources(t *testing.T) {
	dir := t.TempDir()
	ts, stop := newTestServerAt(t, dir)
	wantStatus(t, ts.do(t, "PUT", "/vsub", nil, nil), 200)
	wantStatus(t, ts.do(t, "PUT", "/vsub?versioning", []byte(enableVersioning), nil), 200)
	v1 := ts.do(t, "PUT", "/vsub/k", []byte("one"), nil).header.Get("X-Amz-Version-Id")
	tagDoc := func(k, v string) []byte {
		return []byte(`<Tagging><TagSet><Tag><Key>` + k + `</Key><Value>` + v + `</Value></Tag></TagSet></Tagging>`)
	}
	// Tag v1 while it is current, by ID; then v2 replaces it.
	r := ts.do(t, "PUT", "/vsub/k?tagging&versionId="+v1, tagDoc("gen", "first"), nil)
	if r.status != 200 || r.header.Get("X-Amz-Version-Id") != v1 {
		t.Fatalf("PutObjectTagging v1: %d %v %s", r.status, r.header, r.body)
	}
	wantStatus(t, ts.do(t, "PUT", "/vsub/k?acl&versionId="+v1, nil, map[string]string{"X-Amz-Acl": "public-read"}), 200)
	v2 := ts.do(t, "PUT", "/vsub/k", []byte("second"), map[string]string{"X-Amz-Tagging": "gen=second"}).header.Get("X-Amz-Version-Id")
	// Tag the noncurrent v1 again (replacing its set) and check each version.
	wantStatus(t, ts.do(t, "PUT", "/vsub/k?tagging&versionId="+v1, tagDoc("gen", "old"), nil), 200)
	check := func(ts *testServer) {
		t.Helper()
		for vid, want := range map[string]string{v1: "<Value>old</Value>", v2: "<Value>second</Value>", "": "<Value>second</Value>"} {
			q := "/vsub/k?tagging"
			if vid != "" {
				q += "&versionId=" + vid
			}
			g := ts.do(t, "GET", q, nil, nil)
			wantVid := vid
			if vid == "" {
				wantVid = v2
			}
			if g.status != 200 || !bytes.Contains(g.body, []byte(want)) || g.header.Get("X-Amz-Version-Id") != wantVid {
				t.Fatalf("GetObjectTagging %q: %d %v %s", vid, g.status, g.header, g.body)
			}
		}
		a1 := ts.do(t, "GET", "/vsub/k?acl&versionId="+v1, nil, nil)
		a2 := ts.do(t, "GET", "/vsub/k?acl&versionId="+v2, nil, nil)
		if a1.status != 200 || !bytes.Contains(a1.body, []byte("AllUsers")) || a1.header.Get("X-Amz-Version-Id") != v1 {
			t.Fatalf("GetObjectAcl v1: %d %v %s", a1.status, a1.header, a1.body)
		}
		if a2.status != 200 || bytes.Contains(a2.body, []byte("AllUsers")) {
			t.Fatalf("GetObjectAcl v2 (private): %d %s", a2.status, a2.body)
		}
		at := ts.do(t, "GET", "/vsub/k?attributes&versionId="+v1, nil, map[string]string{"X-Amz-Object-Attributes": "ObjectSize,ETag"})
		if at.status != 200 || !bytes.Contains(at.body, []byte("<ObjectSize>3</ObjectSize>")) || at.header.Get("X-Amz-Version-Id") != v1 {
			t.Fatalf("GetObjectAttributes v1: %d %v %s", at.status, at.header, at.body)
		}
	}
	check(ts)
	// DeleteObjectTagging of the noncurrent version only.
	d := ts.do(t, "DELETE", "/vsub/k?tagging&versionId="+v1, nil, nil)
	if d.status != 204 || d.header.Get("X-Amz-Version-Id") != v1 {
		t.Fatalf("DeleteObjectTagging v1: %d %v %s", d.status, d.header, d.body)
	}
	if g := ts.do(t, "GET", "/vsub/k?tagging&versionId="+v1, nil, nil); !bytes.Contains(g.body, []byte("<TagSet></TagSet>")) {
		t.Fatalf("v1 tags after delete: %s", g.body)
	}
	wantStatus(t, ts.do(t, "PUT", "/vsub/k?tagging&versionId="+v1, tagDoc("gen", "old"), nil), 200)

	// Unknown and malformed IDs; nothing changes.
	unknown := strings.Repeat("0", 32)
	for _, c := range []struct{ method, q string }{
		{"GET", "tagging"}, {"PUT", "tagging"}, {"DELETE", "tagging"}, {"GET", "acl"}, {"PUT", "acl"}, {"GET", "attributes"},
	} {
		var body []byte
		if c.method == "PUT" && c.q == "tagging" {
			body = tagDoc("x", "y")
		}
		h := map[string]string{"X-Amz-Object-Attributes": "ETag"}
		wantErr(t, ts.do(t, c.method, "/vsub/k?"+c.q+"&versionId="+unknown, body, h), 404, "NoSuchVersion")
		wantErr(t, ts.do(t, c.method, "/vsub/k?"+c.q+"&versionId=bogus", body, h), 400, "InvalidArgument")
	}

	// A delete marker: by ID 405 with x-amz-delete-marker; as latest 404.
	dm := ts.do(t, "DELETE", "/vsub/k", nil, nil).header.Get("X-Amz-Version-Id")
	for _, q := range []string{"tagging", "acl", "attributes"} {
		g := ts.do(t, "GET", "/vsub/k?"+q+"&versionId="+dm, nil, map[string]string{"X-Amz-Object-Attributes": "ETag"})
		wantErr(t, g, 405, "MethodNotAllowed")
		if g.header.Get("X-Amz-Delete-Marker") != "true" || g.header.Get("X-Amz-Version-Id") != dm {
			t.Fatalf("%s of a marker: %v", q, g.header)
		}
		g = ts.do(t, "GET", "/vsub/k?"+q, nil, map[string]string{"X-Amz-Object-Attributes": "ETag"})
		wantErr(t, g, 404, "NoSuchKey")
		if g.header.Get("X-Amz-Delete-Marker") != "true" {
			t.Fatalf("%s of a deleted key: %v", q, g.header)
		}
	}
	wantErr(t, ts.do(t, "PUT", "/vsub/k?tagging&versionId="+dm, tagDoc("a", "b"), nil), 405, "MethodNotAllowed")
	wantErr(t, ts.do(t, "PUT", "/vsub/k?acl&versionId="+dm, nil, map[string]string{"X-Amz-Acl": "private"}), 405, "MethodNotAllowed")
	// Removing the marker makes v2 current again, its tags intact.
	wantStatus(t, ts.do(t, "DELETE", "/vsub/k?versionId="+dm, nil, nil), 204)

	// Survives a restart.
	stop()
	ts2, _ := newTestServerAt(t, dir)
	check(ts2)
}
