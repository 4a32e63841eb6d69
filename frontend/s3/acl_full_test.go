package s3

import (
	"bytes"
	"testing"
)

func who(u string) map[string]string { return map[string]string{"X-Test-User": u} }

func with(h map[string]string, kv ...string) map[string]string {
	out := map[string]string{}
	for k, v := range h {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = kv[i+1]
	}
	return out
}

const aclDocHead = `<AccessControlPolicy xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Owner><ID>alice</ID></Owner><AccessControlList>`

func grantXML(typ, field, val, perm string) string {
	return `<Grant><Grantee xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance" xsi:type="` + typ + `"><` + field + `>` + val + `</` + field + `></Grantee><Permission>` + perm + `</Permission></Grant>`
}

// TestFullACLs: x-amz-grant-* headers and AccessControlPolicy documents
// with user and group grantees are stored, shown on GET and enforced
// (anonymous access exactly where AllUsers is granted); bad documents get
// S3's codes and change nothing.
func TestFullACLs(t *testing.T) {
	ts := newAccessTestServer(t)
	alice, bob, carol := who("alice"), who("bob"), who("carol")
	wantStatus(t, ts.do(t, "PUT", "/gbk", nil, alice), 200)
	wantStatus(t, ts.do(t, "PUT", "/gbk/doc", []byte("data"), alice), 200)
	wantErr(t, ts.do(t, "GET", "/gbk?list-type=2", nil, bob), 403, "AccessDenied")

	// Bucket grants by header: bob may list, carol may write objects.
	wantStatus(t, ts.do(t, "PUT", "/gbk?acl", nil, with(alice, "X-Amz-Grant-Read", `id="bob"`, "X-Amz-Grant-Write", `id=carol`)), 200)
	wantStatus(t, ts.do(t, "GET", "/gbk?list-type=2", nil, bob), 200)
	wantErr(t, ts.do(t, "PUT", "/gbk/x", []byte("b"), bob), 403, "AccessDenied")
	wantErr(t, ts.do(t, "GET", "/gbk?list-type=2", nil, carol), 403, "AccessDenied")
	wantStatus(t, ts.do(t, "PUT", "/gbk/by-carol", []byte("c"), carol), 200)
	wantErr(t, ts.do(t, "GET", "/gbk/doc", nil, bob), 403, "AccessDenied") // bucket READ is not object READ
	g := ts.do(t, "GET", "/gbk?acl", nil, alice)
	for _, want := range []string{"<ID>bob</ID>", "<Permission>READ</Permission>", "<ID>carol</ID>", "<Permission>WRITE</Permission>", "<Permission>FULL_CONTROL</Permission>"} {
		if !bytes.Contains(g.body, []byte(want)) {
			t.Fatalf("GetBucketAcl lacks %s: %s", want, g.body)
		}
	}
	wantErr(t, ts.do(t, "GET", "/gbk?acl", nil, bob), 403, "AccessDenied") // READ does not give READ_ACP

	// Object ACL document: AllUsers READ and carol READ_ACP.
	doc := aclDocHead + grantXML("CanonicalUser", "ID", "alice", "FULL_CONTROL") +
		grantXML("Group", "URI", "http://acs.amazonaws.com/groups/global/AllUsers", "READ") +
		grantXML("CanonicalUser", "ID", "carol", "READ_ACP") + `</AccessControlList></AccessControlPolicy>`
	wantErr(t, ts.do(t, "GET", "/gbk/doc", nil, nil), 403, "AccessDenied")
	wantStatus(t, ts.do(t, "PUT", "/gbk/doc?acl", []byte(doc), alice), 200)
	if r := ts.do(t, "GET", "/gbk/doc", nil, nil); r.status != 200 || string(r.body) != "data" {
		t.Fatalf("anonymous GET with AllUsers READ: %d %s", r.status, r.body)
	}
	wantErr(t, ts.do(t, "PUT", "/gbk/doc", []byte("x"), nil), 403, "AccessDenied") // READ only
	wantStatus(t, ts.do(t, "GET", "/gbk/doc?acl", nil, carol), 200)
	wantErr(t, ts.do(t, "PUT", "/gbk/doc?acl", []byte(doc), carol), 403, "AccessDenied")
	g = ts.do(t, "GET", "/gbk/doc?acl", nil, alice)
	if !bytes.Contains(g.body, []byte("AllUsers")) || !bytes.Contains(g.body, []byte("READ_ACP")) {
		t.Fatalf("GetObjectAcl: %s", g.body)
	}

	// Bad input: S3's codes, nothing changes.
	for _, bad := range []struct {
		body   string
		hdr    map[string]string
		status int
		code   string
	}{
		{`<AccessControlPolicy><AccessControlList>`, alice, 400, "MalformedACLError"},
		{aclDocHead + grantXML("CanonicalUser", "ID", "bob", "READ_SOMETIMES") + `</AccessControlList></AccessControlPolicy>`, alice, 400, "MalformedACLError"},
		{aclDocHead + grantXML("Group", "URI", "http://example.com/group", "READ") + `</AccessControlList></AccessControlPolicy>`, alice, 400, "InvalidArgument"},
		{"", with(alice, "X-Amz-Acl", "public-read", "X-Amz-Grant-Read", `id="bob"`), 400, "InvalidRequest"},
		{"", with(alice, "X-Amz-Grant-Read", `nonsense`), 400, "InvalidArgument"},
		{"", with(alice, "X-Amz-Grant-Read", `uri="http://acs.amazonaws.com/groups/global/Nobody"`), 400, "InvalidArgument"},
	} {
		var body []byte
		if bad.body != "" {
			body = []byte(bad.body)
		}
		wantErr(t, ts.do(t, "PUT", "/gbk/doc?acl", body, bad.hdr), bad.status, bad.code)
	}
	if r := ts.do(t, "GET", "/gbk/doc", nil, nil); r.status != 200 {
		t.Fatalf("a refused ACL changed the stored one: %d", r.status)
	}

	// CopyObject (metadata directive COPY) takes the ACL from its own
	// headers, not from the source.
	wantStatus(t, ts.do(t, "PUT", "/gbk/copy", nil, with(alice, "X-Amz-Copy-Source", "/gbk/doc", "X-Amz-Grant-Read", `id="carol"`)), 200)
	wantStatus(t, ts.do(t, "GET", "/gbk/copy", nil, carol), 200)
	wantErr(t, ts.do(t, "GET", "/gbk/copy", nil, nil), 403, "AccessDenied")
	wantErr(t, ts.do(t, "PUT", "/gbk/copy2", nil, with(alice, "X-Amz-Copy-Source", "/gbk/doc", "X-Amz-Grant-Read", `bogus`)), 400, "InvalidArgument")

	// PUT with grant headers sets the new object's ACL.
	wantStatus(t, ts.do(t, "PUT", "/gbk/pub", []byte("p"), with(alice, "X-Amz-Grant-Read", `uri="http://acs.amazonaws.com/groups/global/AuthenticatedUsers"`)), 200)
	wantStatus(t, ts.do(t, "GET", "/gbk/pub", nil, bob), 200)
	wantErr(t, ts.do(t, "GET", "/gbk/pub", nil, nil), 403, "AccessDenied")
}

// TestOwnershipAndPublicAccessBlock: BucketOwnerEnforced disables ACLs
// (AccessControlListNotSupported, grants ignored); the four public access
// block flags act as documented.
func TestOwnershipAndPublicAccessBlock(t *testing.T) {
	ts := newAccessTestServer(t)
	alice, bob := who("alice"), who("bob")
	wantStatus(t, ts.do(t, "PUT", "/obk", nil, alice), 200)
	wantErr(t, ts.do(t, "GET", "/obk?ownershipControls", nil, alice), 404, "OwnershipControlsNotFoundError")
	wantErr(t, ts.do(t, "GET", "/obk?publicAccessBlock", nil, alice), 404, "NoSuchPublicAccessBlockConfiguration")
	wantStatus(t, ts.do(t, "PUT", "/obk/pub", []byte("p"), with(alice, "X-Amz-Acl", "public-read")), 200)
	wantStatus(t, ts.do(t, "GET", "/obk/pub", nil, nil), 200)

	own := `<OwnershipControls xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Rule><ObjectOwnership>BucketOwnerEnforced</ObjectOwnership></Rule></OwnershipControls>`
	wantErr(t, ts.do(t, "PUT", "/obk?ownershipControls", []byte(`<OwnershipControls><Rule><ObjectOwnership>Whatever</ObjectOwnership></Rule></OwnershipControls>`), alice), 400, "MalformedXML")
	wantErr(t, ts.do(t, "PUT", "/obk?ownershipControls", []byte(own), bob), 403, "AccessDenied")
	wantStatus(t, ts.do(t, "PUT", "/obk?ownershipControls", []byte(own), alice), 200)
	if g := ts.do(t, "GET", "/obk?ownershipControls", nil, alice); !bytes.Contains(g.body, []byte("<ObjectOwnership>BucketOwnerEnforced</ObjectOwnership>")) {
		t.Fatalf("GetBucketOwnershipControls: %s", g.body)
	}
	wantErr(t, ts.do(t, "GET", "/obk/pub", nil, nil), 403, "AccessDenied") // ACLs no longer grant
	wantErr(t, ts.do(t, "PUT", "/obk?acl", nil, with(alice, "X-Amz-Acl", "public-read")), 400, "AccessControlListNotSupported")
	wantErr(t, ts.do(t, "PUT", "/obk/x", []byte("x"), with(alice, "X-Amz-Acl", "public-read")), 400, "AccessControlListNotSupported")
	wantErr(t, ts.do(t, "PUT", "/obk/x", []byte("x"), with(alice, "X-Amz-Grant-Read", `id="bob"`)), 400, "AccessControlListNotSupported")
	wantErr(t, ts.do(t, "GET", "/obk/x", nil, alice), 404, "NoSuchKey")
	wantStatus(t, ts.do(t, "PUT", "/obk/x", []byte("x"), with(alice, "X-Amz-Acl", "bucket-owner-full-control")), 200)
	wantStatus(t, ts.do(t, "PUT", "/obk?acl", nil, with(alice, "X-Amz-Acl", "private")), 200)
	wantStatus(t, ts.do(t, "DELETE", "/obk?ownershipControls", nil, alice), 204)
	wantErr(t, ts.do(t, "GET", "/obk?ownershipControls", nil, alice), 404, "OwnershipControlsNotFoundError")
	wantStatus(t, ts.do(t, "GET", "/obk/pub", nil, nil), 200)

	// Public access block.
	pab := func(flags ...string) []byte {
		s := `<PublicAccessBlockConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/">`
		for _, f := range flags {
			s += "<" + f + ">true</" + f + ">"
		}
		return []byte(s + `</PublicAccessBlockConfiguration>`)
	}
	wantErr(t, ts.do(t, "PUT", "/obk?publicAccessBlock", []byte("<PublicAccessBlockConfiguration>"), alice), 400, "MalformedXML")
	wantStatus(t, ts.do(t, "PUT", "/obk?publicAccessBlock", pab("IgnorePublicAcls"), alice), 200)
	wantErr(t, ts.do(t, "GET", "/obk/pub", nil, nil), 403, "AccessDenied")
	g := ts.do(t, "GET", "/obk?publicAccessBlock", nil, alice)
	if !bytes.Contains(g.body, []byte("<IgnorePublicAcls>true</IgnorePublicAcls>")) || !bytes.Contains(g.body, []byte("<BlockPublicAcls>false</BlockPublicAcls>")) {
		t.Fatalf("GetPublicAccessBlock: %s", g.body)
	}
	wantStatus(t, ts.do(t, "PUT", "/obk?publicAccessBlock", pab("BlockPublicAcls", "BlockPublicPolicy"), alice), 200)
	wantStatus(t, ts.do(t, "GET", "/obk/pub", nil, nil), 200) // Block* refuse new public ACLs only
	wantErr(t, ts.do(t, "PUT", "/obk/pub?acl", nil, with(alice, "X-Amz-Acl", "public-read-write")), 403, "AccessDenied")
	wantErr(t, ts.do(t, "PUT", "/obk/new", []byte("n"), with(alice, "X-Amz-Grant-Read", `uri="http://acs.amazonaws.com/groups/global/AllUsers"`)), 403, "AccessDenied")
	wantStatus(t, ts.do(t, "PUT", "/obk/new", []byte("n"), with(alice, "X-Amz-Grant-Read", `id="bob"`)), 200)
	public := `{"Statement":{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::obk/*"}}`
	wantErr(t, ts.do(t, "PUT", "/obk?policy", []byte(public), alice), 403, "AccessDenied")
	wantErr(t, ts.do(t, "GET", "/obk?policy", nil, alice), 404, "NoSuchBucketPolicy")
	local := `{"Statement":{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::obk/*","Condition":{"IpAddress":{"aws:SourceIp":"127.0.0.0/8"}}}}`
	wantStatus(t, ts.do(t, "PUT", "/obk?policy", []byte(local), alice), 204)
	wantStatus(t, ts.do(t, "GET", "/obk/x", nil, nil), 200)
	if g := ts.do(t, "GET", "/obk?policyStatus", nil, alice); g.status != 200 || !bytes.Contains(g.body, []byte("<IsPublic>false</IsPublic>")) {
		t.Fatalf("GetBucketPolicyStatus (IP-pinned): %d %s", g.status, g.body)
	}

	// RestrictPublicBuckets: a public policy allows only signed-in users.
	wantStatus(t, ts.do(t, "DELETE", "/obk?publicAccessBlock", nil, alice), 204)
	wantStatus(t, ts.do(t, "PUT", "/obk?policy", []byte(public), alice), 204)
	wantStatus(t, ts.do(t, "GET", "/obk/x", nil, nil), 200)
	if g := ts.do(t, "GET", "/obk?policyStatus", nil, alice); g.status != 200 || !bytes.Contains(g.body, []byte("<IsPublic>true</IsPublic>")) {
		t.Fatalf("GetBucketPolicyStatus (public): %d %s", g.status, g.body)
	}
	wantStatus(t, ts.do(t, "PUT", "/obk?publicAccessBlock", pab("RestrictPublicBuckets"), alice), 200)
	wantErr(t, ts.do(t, "GET", "/obk/x", nil, nil), 403, "AccessDenied")
	wantStatus(t, ts.do(t, "GET", "/obk/x", nil, bob), 200)
}

// TestPolicyConditionsOverHTTP: conditions see the real request (source
// address, TLS, list parameters, the caller's name); a policy with an
// unknown operator is MalformedPolicy and leaves the stored one.
func TestPolicyConditionsOverHTTP(t *testing.T) {
	ts := newAccessTestServer(t)
	alice, bob := who("alice"), who("bob")
	wantStatus(t, ts.do(t, "PUT", "/cbk", nil, alice), 200)
	wantStatus(t, ts.do(t, "PUT", "/cbk/home/bob/f", []byte("b"), alice), 200)
	pol := `{"Version":"2012-10-17","Statement":[
	 {"Effect":"Allow","Principal":"*","Action":"s3:ListBucket","Resource":"arn:aws:s3:::cbk","Condition":{"StringLike":{"s3:prefix":"home/${aws:username}/*"},"NumericLessThanEquals":{"s3:max-keys":"100"}}},
	 {"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::cbk/*","Condition":{"IpAddress":{"aws:SourceIp":"127.0.0.0/8"},"Bool":{"aws:SecureTransport":"false"}}},
	 {"Effect":"Deny","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::cbk/*","Condition":{"DateGreaterThan":{"aws:CurrentTime":"2000-01-01T00:00:00Z"},"StringEquals":{"aws:username":"mallory"}}},
	 {"Effect":"Deny","NotPrincipal":{"AWS":"alice"},"NotAction":["s3:GetObject","s3:ListBucket"],"Resource":["arn:aws:s3:::cbk","arn:aws:s3:::cbk/*"]}]}`
	wantStatus(t, ts.do(t, "PUT", "/cbk?policy", []byte(pol), alice), 204)
	wantStatus(t, ts.do(t, "GET", "/cbk?list-type=2&prefix=home/bob/&max-keys=10", nil, bob), 200)
	wantErr(t, ts.do(t, "GET", "/cbk?list-type=2&prefix=home/bob/&max-keys=1000", nil, bob), 403, "AccessDenied")
	wantErr(t, ts.do(t, "GET", "/cbk?list-type=2&prefix=home/alice/", nil, bob), 403, "AccessDenied")
	wantErr(t, ts.do(t, "GET", "/cbk?list-type=2", nil, bob), 403, "AccessDenied")
	wantStatus(t, ts.do(t, "GET", "/cbk/home/bob/f", nil, nil), 200) // from 127.0.0.1 over plain HTTP
	wantErr(t, ts.do(t, "GET", "/cbk/home/bob/f", nil, who("mallory")), 403, "AccessDenied")
	wantErr(t, ts.do(t, "DELETE", "/cbk/home/bob/f", nil, bob), 403, "AccessDenied")
	wantStatus(t, ts.do(t, "PUT", "/cbk/other", []byte("o"), alice), 200) // alice is not denied by NotPrincipal

	bad := `{"Statement":{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::cbk/*","Condition":{"StringRoughly":{"aws:username":"x"}}}}`
	wantErr(t, ts.do(t, "PUT", "/cbk?policy", []byte(bad), alice), 400, "MalformedPolicy")
	if g := ts.do(t, "GET", "/cbk?policy", nil, alice); string(g.body) != pol {
		t.Fatalf("a refused policy replaced the stored one: %s", g.body)
	}
	// Outside 127.0.0.0/8 (a policy for another network): anonymous refused.
	other := `{"Statement":{"Effect":"Allow","Principal":"*","Action":"s3:GetObject","Resource":"arn:aws:s3:::cbk/*","Condition":{"NotIpAddress":{"aws:SourceIp":"127.0.0.0/8"}}}}`
	wantStatus(t, ts.do(t, "PUT", "/cbk?policy", []byte(other), alice), 204)
	wantErr(t, ts.do(t, "GET", "/cbk/home/bob/f", nil, nil), 403, "AccessDenied")
}

// TestCreateBucketAccessHeaders: CreateBucket keeps x-amz-grant-* and
// x-amz-object-ownership; bad values create no bucket.
func TestCreateBucketAccessHeaders(t *testing.T) {
	ts := newAccessTestServer(t)
	alice, bob := who("alice"), who("bob")
	wantStatus(t, ts.do(t, "PUT", "/cb1", nil, with(alice, "X-Amz-Grant-Read", `id="bob"`)), 200)
	wantStatus(t, ts.do(t, "GET", "/cb1?list-type=2", nil, bob), 200)
	wantStatus(t, ts.do(t, "PUT", "/cb2", nil, with(alice, "X-Amz-Object-Ownership", "BucketOwnerEnforced")), 200)
	if g := ts.do(t, "GET", "/cb2?ownershipControls", nil, alice); !bytes.Contains(g.body, []byte("BucketOwnerEnforced")) {
		t.Fatalf("ownership after CreateBucket: %d %s", g.status, g.body)
	}
	for _, h := range []map[string]string{
		with(alice, "X-Amz-Object-Ownership", "Nobody"),
		with(alice, "X-Amz-Object-Ownership", "BucketOwnerEnforced", "X-Amz-Acl", "public-read"),
		with(alice, "X-Amz-Grant-Read", "garbage"),
		with(alice, "X-Amz-Acl", "private", "X-Amz-Grant-Read", `id="bob"`),
	} {
		if r := ts.do(t, "PUT", "/cb3", nil, h); r.status != 400 {
			t.Fatalf("CreateBucket with %v: %d %s", h, r.status, r.body)
		}
		wantErr(t, ts.do(t, "HEAD", "/cb3", nil, alice), 404, "")
	}
}
