package s3

import (
	"bytes"
	"testing"
	"time"
)

func retentionDoc(mode string, until time.Time) []byte {
	return []byte(`<Retention xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Mode>` + mode + `</Mode><RetainUntilDate>` +
		until.UTC().Format(time.RFC3339) + `</RetainUntilDate></Retention>`)
}

func TestObjectLockHTTP(t *testing.T) {
	dir := t.TempDir()
	ts, stop := newTestServerAt(t, dir)
	bypass := map[string]string{"X-Amz-Bypass-Governance-Retention": "true"}
	wantStatus(t, ts.do(t, "PUT", "/plain", nil, nil), 200)
	wantStatus(t, ts.do(t, "PUT", "/lkb", nil, map[string]string{"X-Amz-Bucket-Object-Lock-Enabled": "true"}), 200)
	if r := ts.do(t, "GET", "/lkb?versioning", nil, nil); !bytes.Contains(r.body, []byte("<Status>Enabled</Status>")) {
		t.Fatalf("an Object Lock bucket is versioned: %s", r.body)
	}
	if r := ts.do(t, "GET", "/lkb?object-lock", nil, nil); r.status != 200 || !bytes.Contains(r.body, []byte("<ObjectLockEnabled>Enabled</ObjectLockEnabled>")) {
		t.Fatalf("GetObjectLockConfiguration: %d %s", r.status, r.body)
	}
	wantErr(t, ts.do(t, "GET", "/plain?object-lock", nil, nil), 404, "ObjectLockConfigurationNotFoundError")
	cfg := func(rule string) []byte {
		return []byte(`<ObjectLockConfiguration><ObjectLockEnabled>Enabled</ObjectLockEnabled>` + rule + `</ObjectLockConfiguration>`)
	}
	gov1 := cfg(`<Rule><DefaultRetention><Mode>GOVERNANCE</Mode><Days>1</Days></DefaultRetention></Rule>`)
	wantErr(t, ts.do(t, "PUT", "/plain?object-lock", gov1, nil), 409, "InvalidBucketState")
	// Bad configurations: S3's codes, nothing stored.
	wantErr(t, ts.do(t, "PUT", "/lkb?object-lock", cfg(`<Rule><DefaultRetention><Mode>GOVERNANCE</Mode><Days>1</Days><Years>1</Years></DefaultRetention></Rule>`), nil), 400, "MalformedXML")
	wantErr(t, ts.do(t, "PUT", "/lkb?object-lock", cfg(`<Rule><DefaultRetention><Mode>GOVERNANCE</Mode><Days>0</Days></DefaultRetention></Rule>`), nil), 400, "InvalidArgument")
	wantErr(t, ts.do(t, "PUT", "/lkb?object-lock", cfg(`<Rule><DefaultRetention><Mode>SOFT</Mode><Days>1</Days></DefaultRetention></Rule>`), nil), 400, "MalformedXML")
	wantErr(t, ts.do(t, "PUT", "/lkb?object-lock", []byte(`<ObjectLockConfiguration><ObjectLockEnabled>`), nil), 400, "MalformedXML")
	if r := ts.do(t, "GET", "/lkb?object-lock", nil, nil); bytes.Contains(r.body, []byte("<Rule>")) {
		t.Fatalf("a refused configuration was stored: %s", r.body)
	}
	wantStatus(t, ts.do(t, "PUT", "/lkb?object-lock", gov1, nil), 200)
	if r := ts.do(t, "GET", "/lkb?object-lock", nil, nil); !bytes.Contains(r.body, []byte("<Mode>GOVERNANCE</Mode><Days>1</Days>")) {
		t.Fatalf("GetObjectLockConfiguration: %s", r.body)
	}
	wantErr(t, ts.do(t, "PUT", "/lkb?versioning", []byte(`<VersioningConfiguration><Status>Suspended</Status></VersioningConfiguration>`), nil), 409, "InvalidBucketState")

	// Default retention applies to a new version.
	p := ts.do(t, "PUT", "/lkb/g", []byte("governed"), nil)
	vg := p.header.Get("X-Amz-Version-Id")
	h := ts.do(t, "HEAD", "/lkb/g", nil, nil)
	if h.header.Get("X-Amz-Object-Lock-Mode") != "GOVERNANCE" || h.header.Get("X-Amz-Object-Lock-Retain-Until-Date") == "" {
		t.Fatalf("default retention: %v", h.header)
	}
	wantErr(t, ts.do(t, "DELETE", "/lkb/g?versionId="+vg, nil, nil), 403, "AccessDenied")
	// Shortening GOVERNANCE needs the bypass.
	soon := time.Now().Add(10 * time.Minute)
	wantErr(t, ts.do(t, "PUT", "/lkb/g?retention", retentionDoc("GOVERNANCE", soon), nil), 403, "AccessDenied")
	wantStatus(t, ts.do(t, "PUT", "/lkb/g?retention", retentionDoc("GOVERNANCE", soon), bypass), 200)
	if r := ts.do(t, "GET", "/lkb/g?retention", nil, nil); !bytes.Contains(r.body, []byte("<Mode>GOVERNANCE</Mode>")) {
		t.Fatalf("GetObjectRetention: %s", r.body)
	}
	// A DELETE without a version only adds a marker.
	if d := ts.do(t, "DELETE", "/lkb/g", nil, nil); d.status != 204 || d.header.Get("X-Amz-Delete-Marker") != "true" {
		t.Fatalf("DELETE of a locked key: %d %v", d.status, d.header)
	}
	// Legal hold blocks even a bypass.
	wantErr(t, ts.do(t, "PUT", "/lkb/g?legal-hold&versionId="+vg, []byte(`<LegalHold><Status>MAYBE</Status></LegalHold>`), nil), 400, "MalformedXML")
	wantStatus(t, ts.do(t, "PUT", "/lkb/g?legal-hold&versionId="+vg, []byte(`<LegalHold><Status>ON</Status></LegalHold>`), nil), 200)
	if r := ts.do(t, "GET", "/lkb/g?legal-hold&versionId="+vg, nil, nil); !bytes.Contains(r.body, []byte("<Status>ON</Status>")) {
		t.Fatalf("GetObjectLegalHold: %s", r.body)
	}
	wantErr(t, ts.do(t, "DELETE", "/lkb/g?versionId="+vg, nil, bypass), 403, "AccessDenied")

	// COMPLIANCE: no shortening, no delete, bypass or not; extending is fine.
	until := time.Now().Add(time.Hour).Truncate(time.Second)
	c := ts.do(t, "PUT", "/lkb/c", []byte("kept"), map[string]string{"X-Amz-Object-Lock-Mode": "COMPLIANCE",
		"X-Amz-Object-Lock-Retain-Until-Date": until.UTC().Format(time.RFC3339)})
	wantStatus(t, c, 200)
	vc := c.header.Get("X-Amz-Version-Id")
	wantErr(t, ts.do(t, "DELETE", "/lkb/c?versionId="+vc, nil, bypass), 403, "AccessDenied")
	wantErr(t, ts.do(t, "PUT", "/lkb/c?retention", retentionDoc("COMPLIANCE", until.Add(-time.Minute)), bypass), 403, "AccessDenied")
	wantErr(t, ts.do(t, "PUT", "/lkb/c?retention", retentionDoc("GOVERNANCE", until.Add(time.Hour)), bypass), 403, "AccessDenied")
	wantStatus(t, ts.do(t, "PUT", "/lkb/c?retention", retentionDoc("COMPLIANCE", until.Add(time.Hour)), nil), 200)
	// Dates in the past and incomplete headers.
	wantErr(t, ts.do(t, "PUT", "/lkb/c?retention", retentionDoc("COMPLIANCE", time.Now().Add(-time.Hour)), nil), 400, "InvalidArgument")
	wantErr(t, ts.do(t, "PUT", "/lkb/p", []byte("x"), map[string]string{"X-Amz-Object-Lock-Mode": "GOVERNANCE",
		"X-Amz-Object-Lock-Retain-Until-Date": time.Now().Add(-time.Hour).UTC().Format(time.RFC3339)}), 400, "InvalidArgument")
	wantErr(t, ts.do(t, "PUT", "/lkb/p", []byte("x"), map[string]string{"X-Amz-Object-Lock-Mode": "GOVERNANCE"}), 400, "InvalidArgument")
	wantErr(t, ts.do(t, "GET", "/lkb/p", nil, nil), 404, "NoSuchKey") // nothing stored
	wantErr(t, ts.do(t, "PUT", "/lkb/c?retention", []byte("<Retention><Mode>"), nil), 400, "MalformedXML")
	// Lock headers and requests on a bucket without Object Lock.
	wantErr(t, ts.do(t, "PUT", "/plain/x", []byte("x"), map[string]string{"X-Amz-Object-Lock-Legal-Hold": "ON"}), 400, "InvalidRequest")
	wantStatus(t, ts.do(t, "PUT", "/plain/x", []byte("x"), nil), 200)
	wantErr(t, ts.do(t, "PUT", "/plain/x?retention", retentionDoc("GOVERNANCE", until), nil), 400, "InvalidRequest")
	wantErr(t, ts.do(t, "GET", "/lkb/c?retention&versionId="+strings32('0'), nil, nil), 404, "NoSuchVersion")

	// Everything survives a restart.
	stop()
	ts2, _ := newTestServerAt(t, dir)
	if r := ts2.do(t, "GET", "/lkb?object-lock", nil, nil); !bytes.Contains(r.body, []byte("<Mode>GOVERNANCE</Mode><Days>1</Days>")) {
		t.Fatalf("lock configuration after restart: %s", r.body)
	}
	if r := ts2.do(t, "GET", "/lkb/c?retention", nil, nil); !bytes.Contains(r.body, []byte("<Mode>COMPLIANCE</Mode>")) {
		t.Fatalf("retention after restart: %s", r.body)
	}
	wantErr(t, ts2.do(t, "DELETE", "/lkb/c?versionId="+vc, nil, bypass), 403, "AccessDenied")
	wantErr(t, ts2.do(t, "DELETE", "/lkb/g?versionId="+vg, nil, bypass), 403, "AccessDenied")
	// Legal hold off: the GOVERNANCE version can go with the bypass.
	wantStatus(t, ts2.do(t, "PUT", "/lkb/g?legal-hold&versionId="+vg, []byte(`<LegalHold><Status>OFF</Status></LegalHold>`), nil), 200)
	wantErr(t, ts2.do(t, "DELETE", "/lkb/g?versionId="+vg, nil, nil), 403, "AccessDenied")
	wantStatus(t, ts2.do(t, "DELETE", "/lkb/g?versionId="+vg, nil, bypass), 204)
	wantErr(t, ts2.do(t, "GET", "/lkb/g?versionId="+vg, nil, nil), 404, "NoSuchVersion")
}

func strings32(c byte) string { return string(bytes.Repeat([]byte{c}, 32)) }
