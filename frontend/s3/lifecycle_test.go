package s3

import (
	"bytes"
	"encoding/xml"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tristore/tristore/store"
	"github.com/tristore/tristore/store/inuse"
)

func lcDoc(rules ...string) []byte {
	return []byte(`<LifecycleConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/">` + strings.Join(rules, "") + `</LifecycleConfiguration>`)
}

// TestLifecycleConfig: a configuration round-trips; every refused one
// gets S3's code and leaves the stored configuration unchanged.
func TestLifecycleConfig(t *testing.T) {
	ts := newTestServer(t)
	wantStatus(t, ts.do(t, "PUT", "/lcc", nil, nil), 200)
	wantErr(t, ts.do(t, "GET", "/lcc?lifecycle", nil, nil), 404, "NoSuchLifecycleConfiguration")
	good := lcDoc(
		`<Rule><ID>logs</ID><Filter><Prefix>logs/</Prefix></Filter><Status>Enabled</Status><Expiration><Days>30</Days></Expiration></Rule>`,
		`<Rule><ID>tagged</ID><Filter><And><Prefix>tmp/</Prefix><Tag><Key>k</Key><Value>v</Value></Tag><ObjectSizeGreaterThan>10</ObjectSizeGreaterThan></And></Filter><Status>Disabled</Status><Expiration><Date>2030-01-01T00:00:00Z</Date></Expiration></Rule>`,
		`<Rule><ID>mpu</ID><Prefix></Prefix><Status>Enabled</Status><AbortIncompleteMultipartUpload><DaysAfterInitiation>7</DaysAfterInitiation></AbortIncompleteMultipartUpload><NoncurrentVersionExpiration><NoncurrentDays>3</NoncurrentDays></NoncurrentVersionExpiration></Rule>`,
		`<Rule><ID>dm</ID><Filter></Filter><Status>Enabled</Status><Expiration><ExpiredObjectDeleteMarker>true</ExpiredObjectDeleteMarker></Expiration></Rule>`,
	)
	wantStatus(t, ts.do(t, "PUT", "/lcc?lifecycle", good, nil), 200)
	g := ts.do(t, "GET", "/lcc?lifecycle", nil, nil)
	wantStatus(t, g, 200)
	for _, want := range []string{"<ID>logs</ID>", "<Prefix>logs/</Prefix>", "<Days>30</Days>", "<Key>k</Key>", "<Date>2030-01-01T00:00:00Z</Date>",
		"<DaysAfterInitiation>7</DaysAfterInitiation>", "<NoncurrentDays>3</NoncurrentDays>", "<ExpiredObjectDeleteMarker>true</ExpiredObjectDeleteMarker>", "<Status>Disabled</Status>"} {
		if !bytes.Contains(g.body, []byte(want)) {
			t.Fatalf("GetBucketLifecycleConfiguration lacks %s: %s", want, g.body)
		}
	}
	exp := `<Status>Enabled</Status><Expiration><Days>1</Days></Expiration>`
	bad := []struct {
		doc    []byte
		status int
		code   string
	}{
		{nil, 400, "MalformedXML"},
		{[]byte("<LifecycleConfiguration>"), 400, "MalformedXML"},
		{lcDoc(), 400, "MalformedXML"},
		{lcDoc(`<Rule><Filter/><Status>Enabled</Status><Expiraton><Days>1</Days></Expiraton></Rule>`), 400, "MalformedXML"},                   // unknown element
		{lcDoc(`<Rule><Filter/><Status>Enabled</Status><Expiration><Days>1</Days><Hours>2</Hours></Expiration></Rule>`), 400, "MalformedXML"}, // unknown field
		{lcDoc(`<Rule><Filter/><Status>On</Status><Expiration><Days>1</Days></Expiration></Rule>`), 400, "MalformedXML"},
		{lcDoc(`<Rule><Status>Enabled</Status><Expiration><Days>1</Days></Expiration></Rule>`), 400, "MalformedXML"}, // no Filter or Prefix
		{lcDoc(`<Rule><Prefix>a</Prefix><Filter/>` + exp + `</Rule>`), 400, "MalformedXML"},
		{lcDoc(`<Rule><Filter><Prefix>a</Prefix><Tag><Key>k</Key><Value>v</Value></Tag></Filter>` + exp + `</Rule>`), 400, "MalformedXML"},
		{lcDoc(`<Rule><Filter/><Status>Enabled</Status><Expiration><Days>0</Days></Expiration></Rule>`), 400, "InvalidArgument"},
		{lcDoc(`<Rule><Filter/><Status>Enabled</Status><Expiration><Days>x</Days></Expiration></Rule>`), 400, "MalformedXML"},
		{lcDoc(`<Rule><Filter/><Status>Enabled</Status><Expiration><Date>2030-01-01T12:00:00Z</Date></Expiration></Rule>`), 400, "InvalidArgument"},
		{lcDoc(`<Rule><Filter/><Status>Enabled</Status><Expiration><Days>1</Days><Date>2030-01-01T00:00:00Z</Date></Expiration></Rule>`), 400, "MalformedXML"},
		{lcDoc(`<Rule><Filter/><Status>Enabled</Status><Expiration><Days>1</Days><ExpiredObjectDeleteMarker>true</ExpiredObjectDeleteMarker></Expiration></Rule>`), 400, "InvalidArgument"},
		{lcDoc(`<Rule><Filter/><Status>Enabled</Status></Rule>`), 400, "InvalidRequest"},
		{lcDoc(`<Rule><ID>a</ID><Filter/>`+exp+`</Rule>`, `<Rule><ID>a</ID><Filter/>`+exp+`</Rule>`), 400, "InvalidArgument"},
		{lcDoc(`<Rule><Filter><Tag><Key>k</Key><Value>v</Value></Tag></Filter><Status>Enabled</Status><AbortIncompleteMultipartUpload><DaysAfterInitiation>1</DaysAfterInitiation></AbortIncompleteMultipartUpload></Rule>`), 400, "InvalidRequest"},
		{lcDoc(`<Rule><Filter/><Status>Enabled</Status><AbortIncompleteMultipartUpload><DaysAfterInitiation>-1</DaysAfterInitiation></AbortIncompleteMultipartUpload></Rule>`), 400, "InvalidArgument"},
		{lcDoc(`<Rule><Filter><Tag><Key>aws:x</Key><Value>v</Value></Tag></Filter>` + exp + `</Rule>`), 400, "InvalidTag"},
		{lcDoc(`<Rule><Filter/><Status>Enabled</Status><Transition><Days>1</Days><StorageClass>GLACIER</StorageClass></Transition></Rule>`), 501, "NotImplemented"},
	}
	for i, b := range bad {
		wantErr(t, ts.do(t, "PUT", "/lcc?lifecycle", b.doc, nil), b.status, b.code)
		if g2 := ts.do(t, "GET", "/lcc?lifecycle", nil, nil); !bytes.Equal(g2.body, g.body) {
			t.Fatalf("refused document %d changed the configuration: %s", i, g2.body)
		}
	}
	wantStatus(t, ts.do(t, "DELETE", "/lcc?lifecycle", nil, nil), 204)
	wantErr(t, ts.do(t, "GET", "/lcc?lifecycle", nil, nil), 404, "NoSuchLifecycleConfiguration")
}

// TestLifecycleExpiry runs the worker with a 300 ms day: Days and Date
// expirations with prefix, tag and And filters act on the objects they
// select and no others, incomplete uploads are aborted, a disabled rule
// does nothing, and a served volume is never expired.
func TestLifecycleExpiry(t *testing.T) {
	const day = 300 * time.Millisecond
	t.Setenv(lifecycleEnv, day.String())
	ts := newTestServer(t)
	wantStatus(t, ts.do(t, "PUT", "/lce", nil, nil), 200)
	put := func(key, tags string) {
		h := map[string]string{}
		if tags != "" {
			h["X-Amz-Tagging"] = tags
		}
		wantStatus(t, ts.do(t, "PUT", "/lce/"+key, []byte("data of "+key), h), 200)
	}
	start := time.Now() // before any object is written: none can expire before start+Days
	for _, k := range []string{"logs/a", "logs/b/c", "other/a", "old/x", "dis/x", "vol/disk", "tmp/untagged"} {
		put(k, "")
	}
	put("tmp/tagged", "k=v&z=1")
	put("tmp/wrongvalue", "k=w")
	up := func(key string) string {
		r := ts.do(t, "POST", "/lce/"+key+"?uploads", nil, nil)
		wantStatus(t, r, 200)
		var ir initiateResult
		xml.Unmarshal(r.body, &ir)
		return ir.UploadID
	}
	up("up/x")
	keepUp := up("keep/x")
	served, err := inuse.Serve(filepath.Join(ts.st.(store.LocalPather).Root(), "lce", "vol", "disk"))
	if err != nil {
		t.Fatal(err)
	}
	defer served.Close()
	doc := lcDoc(
		`<Rule><ID>logs</ID><Filter><Prefix>logs/</Prefix></Filter><Status>Enabled</Status><Expiration><Days>2</Days></Expiration></Rule>`,
		`<Rule><ID>tag</ID><Filter><And><Prefix>tmp/</Prefix><Tag><Key>k</Key><Value>v</Value></Tag></And></Filter><Status>Enabled</Status><Expiration><Days>1</Days></Expiration></Rule>`,
		`<Rule><ID>old</ID><Filter><Prefix>old/</Prefix></Filter><Status>Enabled</Status><Expiration><Date>2020-01-01T00:00:00Z</Date></Expiration></Rule>`,
		`<Rule><ID>future</ID><Filter><Prefix>other/</Prefix></Filter><Status>Enabled</Status><Expiration><Date>2999-01-01T00:00:00Z</Date></Expiration></Rule>`,
		`<Rule><ID>dis</ID><Filter><Prefix>dis/</Prefix></Filter><Status>Disabled</Status><Expiration><Days>1</Days></Expiration></Rule>`,
		`<Rule><ID>vol</ID><Filter><Prefix>vol/</Prefix></Filter><Status>Enabled</Status><Expiration><Days>1</Days></Expiration></Rule>`,
		`<Rule><ID>mpu</ID><Filter><Prefix>up/</Prefix></Filter><Status>Enabled</Status><AbortIncompleteMultipartUpload><DaysAfterInitiation>1</DaysAfterInitiation></AbortIncompleteMultipartUpload></Rule>`,
	)
	wantStatus(t, ts.do(t, "PUT", "/lce?lifecycle", doc, nil), 200)

	// The Date rule acts at once (the date is past); Days rules not before their time.
	gone := func(key string) bool { return ts.do(t, "HEAD", "/lce/"+key, nil, nil).status == 404 }
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !cond(); {
			if time.Now().After(deadline) {
				t.Fatalf("timed out waiting for %s", what)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitFor("old/x to expire by Date", func() bool { return gone("old/x") })
	if time.Since(start) < 2*day-30*time.Millisecond && gone("logs/a") {
		t.Fatal("logs/a expired before its 2 days")
	}
	waitFor("logs/ to expire", func() bool { return gone("logs/a") && gone("logs/b/c") })
	if el := time.Since(start); el < 2*day-30*time.Millisecond {
		t.Fatalf("logs expired after %v, before 2 days of %v", el, day)
	}
	waitFor("tmp/tagged to expire", func() bool { return gone("tmp/tagged") })
	waitFor("up/x to be aborted", func() bool {
		return !bytes.Contains(ts.do(t, "GET", "/lce?uploads", nil, nil).body, []byte("<Key>up/x</Key>"))
	})
	time.Sleep(3 * day) // several more scans
	for _, k := range []string{"other/a", "dis/x", "tmp/untagged", "tmp/wrongvalue", "vol/disk"} {
		if gone(k) {
			t.Errorf("%s expired, but no enabled rule selects it (or it is a served volume)", k)
		}
	}
	if !bytes.Contains(ts.do(t, "GET", "/lce?uploads", nil, nil).body, []byte(keepUp)) {
		t.Error("the upload outside the rule's prefix was aborted")
	}
	// Once the volume is no longer served it is an ordinary object.
	served.Close()
	waitFor("vol/disk to expire once not served", func() bool { return gone("vol/disk") })
}

// TestLifecycleVersions: on a versioned bucket NoncurrentVersionExpiration
// removes noncurrent versions a day after they were replaced, keeping
// NewerNoncurrentVersions of them; ExpiredObjectDeleteMarker then removes
// a delete marker left alone; the current versions stay.
func TestLifecycleVersions(t *testing.T) {
	const day = 300 * time.Millisecond
	t.Setenv(lifecycleEnv, day.String())
	ts := newTestServer(t)
	wantStatus(t, ts.do(t, "PUT", "/lcv", nil, nil), 200)
	wantStatus(t, ts.do(t, "PUT", "/lcv?versioning", []byte(`<VersioningConfiguration><Status>Enabled</Status></VersioningConfiguration>`), nil), 200)
	for i := range 4 {
		wantStatus(t, ts.do(t, "PUT", "/lcv/keep", []byte{byte('a' + i)}, nil), 200)
	}
	wantStatus(t, ts.do(t, "PUT", "/lcv/gone", []byte("x"), nil), 200)
	wantStatus(t, ts.do(t, "DELETE", "/lcv/gone", nil, nil), 204)
	count := func(key string) (versions, markers int) {
		body := ts.do(t, "GET", "/lcv?versions&prefix="+key, nil, nil).body
		return bytes.Count(body, []byte("<Version>")), bytes.Count(body, []byte("<DeleteMarker>"))
	}
	if v, m := count("keep"); v != 4 || m != 0 {
		t.Fatalf("before: keep has %d versions, %d markers", v, m)
	}
	if v, m := count("gone"); v != 1 || m != 1 {
		t.Fatalf("before: gone has %d versions, %d markers", v, m)
	}
	wantStatus(t, ts.do(t, "PUT", "/lcv?lifecycle", lcDoc(
		`<Rule><ID>nc</ID><Filter/><Status>Enabled</Status><NoncurrentVersionExpiration><NoncurrentDays>1</NoncurrentDays><NewerNoncurrentVersions>1</NewerNoncurrentVersions></NoncurrentVersionExpiration></Rule>`,
		`<Rule><ID>dm</ID><Filter><Prefix>gone</Prefix></Filter><Status>Enabled</Status><Expiration><ExpiredObjectDeleteMarker>true</ExpiredObjectDeleteMarker></Expiration></Rule>`,
	), nil), 200)
	// "gone": its one version is the newest noncurrent one, kept by
	// NewerNoncurrentVersions=1, so the marker is not alone and stays.
	for deadline := time.Now().Add(10 * time.Second); ; {
		if v, _ := count("keep"); v == 2 {
			break
		}
		if time.Now().After(deadline) {
			v, m := count("keep")
			t.Fatalf("keep: %d versions, %d markers; want the current one and 1 newer noncurrent", v, m)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if g := ts.do(t, "GET", "/lcv/keep", nil, nil); string(g.body) != "d" {
		t.Fatalf("current version changed: %q", g.body)
	}
	time.Sleep(3 * day)
	if v, m := count("gone"); v != 1 || m != 1 {
		t.Fatalf("gone: %d versions, %d markers; NewerNoncurrentVersions should keep the version and so the marker", v, m)
	}
	// Without the NewerNoncurrentVersions keep, the version goes and then the lone marker.
	wantStatus(t, ts.do(t, "PUT", "/lcv?lifecycle", lcDoc(
		`<Rule><ID>nc</ID><Filter/><Status>Enabled</Status><NoncurrentVersionExpiration><NoncurrentDays>1</NoncurrentDays></NoncurrentVersionExpiration></Rule>`,
		`<Rule><ID>dm</ID><Filter><Prefix>gone</Prefix></Filter><Status>Enabled</Status><Expiration><ExpiredObjectDeleteMarker>true</ExpiredObjectDeleteMarker></Expiration></Rule>`,
	), nil), 200)
	for deadline := time.Now().Add(10 * time.Second); ; {
		v, m := count("gone")
		kv, _ := count("keep")
		if v == 0 && m == 0 && kv == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("gone: %d versions, %d markers; keep: %d versions; want 0, 0, 1", v, m, kv)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
