package s3

import (
	"encoding/xml"
	"strings"
	"testing"
)

// TestSSEHeaderOnReadRefused: x-amz-server-side-encryption (or an SSE-KMS
// key ID or context header) on GET or HEAD is 400 InvalidArgument, as AWS
// answers, for an SSE-S3 object, a plain one and a missing key alike;
// before, the header was ignored and the read answered 200. The SSE-C
// headers still read an SSE-C object, and reads without the header work.
func TestSSEHeaderOnReadRefused(t *testing.T) {
	e := newSSEEnv(t)
	ts := e.ts
	wantStatus(t, ts.do(t, "PUT", "/enc/plain", []byte("plain"), nil), 200)
	wantStatus(t, ts.do(t, "PUT", "/enc/s3", []byte("sealed"), map[string]string{sseHdr: "AES256"}), 200)
	k := newSSEC(7)
	ch := map[string]string{
		sseCHdr + "Algorithm": "AES256",
		sseCHdr + "Key":       k.key,
		sseCHdr + "Key-Md5":   k.md5,
	}
	wantStatus(t, ts.do(t, "PUT", "/enc/c", []byte("customer"), ch), 200)
	for _, key := range []string{"plain", "s3", "c", "missing"} {
		for _, hdr := range []map[string]string{
			{sseHdr: "AES256"},
			{sseHdr: "aws:kms"},
			{sseHdr + "-Aws-Kms-Key-Id": "arn:aws:kms:us-east-1:1:key/x"},
			{sseHdr + "-Context": "e30="},
		} {
			wantErr(t, ts.do(t, "GET", "/enc/"+key, nil, hdr), 400, "InvalidArgument")
			wantErr(t, ts.do(t, "GET", "/enc/"+key+"?partNumber=1", nil, hdr), 400, "InvalidArgument")
			wantErr(t, ts.do(t, "HEAD", "/enc/"+key, nil, hdr), 400, "")
		}
	}
	r := ts.do(t, "GET", "/enc/s3", nil, map[string]string{sseHdr: "AES256"})
	var er errorResponse
	if xml.Unmarshal(r.body, &er) != nil || !strings.Contains(er.Message, "x-amz-server-side-encryption") {
		t.Fatalf("error message does not name the header: %s", r.body)
	}
	for key, want := range map[string]string{"plain": "plain", "s3": "sealed"} {
		g := ts.do(t, "GET", "/enc/"+key, nil, nil)
		if g.status != 200 || string(g.body) != want {
			t.Fatalf("GET %s: %d %q", key, g.status, g.body)
		}
		wantStatus(t, ts.do(t, "HEAD", "/enc/"+key, nil, nil), 200)
	}
	if g := ts.do(t, "GET", "/enc/c", nil, ch); g.status != 200 || string(g.body) != "customer" {
		t.Fatalf("SSE-C GET: %d %q", g.status, g.body)
	}
	wantStatus(t, ts.do(t, "HEAD", "/enc/c", nil, ch), 200)
}

// TestSSEKMSRefusedClearly: SSE-KMS stays 501 NotImplemented on PUT,
// CopyObject, CreateMultipartUpload and as a bucket default, with a
// message that says there is no KMS and names the modes that work (before:
// a bare "SSE-KMS is not supported"); nothing is stored.
func TestSSEKMSRefusedClearly(t *testing.T) {
	e := newSSEEnv(t)
	ts := e.ts
	wantStatus(t, ts.do(t, "PUT", "/enc/src", []byte("src"), nil), 200)
	check := func(what string, r resp) {
		t.Helper()
		wantErr(t, r, 501, "NotImplemented")
		var er errorResponse
		if err := xml.Unmarshal(r.body, &er); err != nil {
			t.Fatal(err)
		}
		for _, s := range []string{"SSE-KMS", "key management service", "AES256", "SSE-C"} {
			if !strings.Contains(er.Message, s) {
				t.Fatalf("%s: message %q does not say %q", what, er.Message, s)
			}
		}
	}
	kms := map[string]string{sseHdr: "aws:kms"}
	check("PUT aws:kms", ts.do(t, "PUT", "/enc/k", []byte("x"), kms))
	check("PUT aws:kms:dsse", ts.do(t, "PUT", "/enc/k", []byte("x"), map[string]string{sseHdr: "aws:kms:dsse"}))
	check("PUT key id", ts.do(t, "PUT", "/enc/k", []byte("x"), map[string]string{sseHdr + "-Aws-Kms-Key-Id": "k1"}))
	check("CopyObject", ts.do(t, "PUT", "/enc/k", nil, map[string]string{"X-Amz-Copy-Source": "/enc/src", sseHdr: "aws:kms"}))
	check("CreateMultipartUpload", ts.do(t, "POST", "/enc/k?uploads", nil, kms))
	cfg := `<ServerSideEncryptionConfiguration><Rule><ApplyServerSideEncryptionByDefault><SSEAlgorithm>aws:kms</SSEAlgorithm></ApplyServerSideEncryptionByDefault></Rule></ServerSideEncryptionConfiguration>`
	check("PutBucketEncryption", ts.do(t, "PUT", "/enc?encryption", []byte(cfg), nil))
	wantErr(t, ts.do(t, "HEAD", "/enc/k", nil, nil), 404, "")
	wantErr(t, ts.do(t, "GET", "/enc?encryption", nil, nil), 404, "ServerSideEncryptionConfigurationNotFoundError")
	if r := ts.do(t, "GET", "/enc?uploads", nil, nil); strings.Contains(string(r.body), "<Upload>") {
		t.Fatalf("an upload was created: %s", r.body)
	}
}
