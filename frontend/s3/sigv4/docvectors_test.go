package sigv4

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// The examples of the AWS S3 SigV4 documentation ("Signature Calculations
// for the Authorization Header: Transferring Payload in a Single Chunk",
// "... in Multiple Chunks" and "Authenticating Requests: Using Query
// Parameters"), with the documented keys and expected signatures.
var docTime = time.Date(2013, 5, 24, 0, 5, 0, 0, time.UTC)

func TestDocGetObject(t *testing.T) {
	v := NewVerifier(docCreds, "us-east-1")
	v.Now = fixedClock(docTime)
	r := httptest.NewRequest("GET", "http://examplebucket.s3.amazonaws.com/test.txt", nil)
	r.Header.Set("Range", "bytes=0-9")
	r.Header.Set("x-amz-content-sha256", emptySHA256)
	r.Header.Set("x-amz-date", "20130524T000000Z")
	r.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41")
	res, err := v.Verify(r)
	if err != nil {
		t.Fatal(err)
	}
	if res.AccessKey != docAK || res.Anonymous || res.Presigned {
		t.Fatalf("result %+v", res)
	}
	if _, err := io.ReadAll(r.Body); err != nil {
		t.Fatalf("empty body: %v", err)
	}
	// One changed header breaks the signature.
	r.Header.Set("Range", "bytes=0-10")
	r.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41")
	_, err = v.Verify(r)
	wantCode(t, err, "SignatureDoesNotMatch")
}

func TestDocPutObject(t *testing.T) {
	v := NewVerifier(docCreds, "us-east-1")
	v.Now = fixedClock(docTime)
	mk := func(body string) *http.Request {
		r := httptest.NewRequest("PUT", "http://examplebucket.s3.amazonaws.com/test$file.text", strings.NewReader(body))
		r.Header.Set("Date", "Fri, 24 May 2013 00:00:00 GMT")
		r.Header.Set("x-amz-date", "20130524T000000Z")
		r.Header.Set("x-amz-storage-class", "REDUCED_REDUNDANCY")
		r.Header.Set("x-amz-content-sha256", "44ce7dd67c959e0d3524ffac1771dfbba87d2b6b4b4e99e42034a8b803f8b072")
		r.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,SignedHeaders=date;host;x-amz-content-sha256;x-amz-date;x-amz-storage-class,Signature=98ad721746da40c64f1a55b78f14c238d841ea1380cd77a1b5971af0ece108bd")
		return r
	}
	r := mk("Welcome to Amazon S3.")
	if _, err := v.Verify(r); err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(r.Body)
	if err != nil || string(b) != "Welcome to Amazon S3." {
		t.Fatalf("body %q %v", b, err)
	}
	// Same length, different content: signature still matches (it covers
	// the declared hash), the body reader fails at EOF.
	r = mk("Welcome to Amazon S4.")
	if _, err := v.Verify(r); err != nil {
		t.Fatal(err)
	}
	_, err = io.ReadAll(r.Body)
	wantCode(t, err, "XAmzContentSHA256Mismatch")
}

func TestDocListObjects(t *testing.T) {
	v := NewVerifier(docCreds, "us-east-1")
	v.Now = fixedClock(docTime)
	for _, tc := range []struct{ url, sig string }{
		{"http://examplebucket.s3.amazonaws.com/?lifecycle", "fea454ca298b7da1c68078a5d1bdbfbbe0d65c699e0f91ac7a200a0136783543"},
		{"http://examplebucket.s3.amazonaws.com/?max-keys=2&prefix=J", "34b48302e7b5fa45bde8084f4b7868a86f0a534bc59db6670ed5711ef69dc6f7"},
	} {
		r := httptest.NewRequest("GET", tc.url, nil)
		r.Header.Set("x-amz-content-sha256", emptySHA256)
		r.Header.Set("x-amz-date", "20130524T000000Z")
		r.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,SignedHeaders=host;x-amz-content-sha256;x-amz-date,Signature="+tc.sig)
		if _, err := v.Verify(r); err != nil {
			t.Errorf("%s: %v", tc.url, err)
		}
	}
}

func TestDocPresigned(t *testing.T) {
	const u = "http://examplebucket.s3.amazonaws.com/test.txt?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404"
	v := NewVerifier(docCreds, "us-east-1")
	v.Now = fixedClock(docTime.Add(23 * time.Hour))
	res, err := v.Verify(httptest.NewRequest("GET", u, nil))
	if err != nil {
		t.Fatal(err)
	}
	if !res.Presigned || !res.Expires.Equal(time.Date(2013, 5, 25, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("result %+v", res)
	}
	v.Now = fixedClock(docTime.Add(25 * time.Hour))
	_, err = v.Verify(httptest.NewRequest("GET", u, nil))
	wantCode(t, err, "AccessDenied")
	if !strings.Contains(err.Error(), "Request has expired") {
		t.Fatalf("message: %v", err)
	}
	v.Now = fixedClock(docTime)
	_, err = v.Verify(httptest.NewRequest("GET", strings.Replace(u, "test.txt", "test2.txt", 1), nil))
	wantCode(t, err, "SignatureDoesNotMatch")
}

// docChunkedBody builds the documented 64 KiB + 1 KiB chunked upload.
func docChunkedBody(sigs [3]string) []byte {
	var b bytes.Buffer
	b.WriteString("10000;chunk-signature=" + sigs[0] + "\r\n")
	b.Write(bytes.Repeat([]byte("a"), 65536))
	b.WriteString("\r\n400;chunk-signature=" + sigs[1] + "\r\n")
	b.Write(bytes.Repeat([]byte("a"), 1024))
	b.WriteString("\r\n0;chunk-signature=" + sigs[2] + "\r\n\r\n")
	return b.Bytes()
}

var docChunkSigs = [3]string{
	"ad80c730a21e5b8d04586a2213dd63b9a0e99e0e2307b0ade35a65485a288648",
	"0055627c9e194cb4542bae2aa5492e3c1575bbb81b612b7d234b86a503ef5497",
	"b6c6ea8a5354eaf15b3cb7646744f4275b71ea724fed81ceb9323e279d449df9",
}

func docChunkedRequest(body []byte) *http.Request {
	r := httptest.NewRequest("PUT", "http://s3.amazonaws.com/examplebucket/chunkObject.txt", bytes.NewReader(body))
	r.Header.Set("x-amz-date", "20130524T000000Z")
	r.Header.Set("x-amz-storage-class", "REDUCED_REDUNDANCY")
	r.Header.Set("x-amz-content-sha256", StreamingPayload)
	r.Header.Set("Content-Encoding", "aws-chunked")
	r.Header.Set("x-amz-decoded-content-length", "66560")
	r.Header.Set("Content-Length", "66824")
	r.ContentLength = 66824
	r.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,SignedHeaders=content-encoding;content-length;host;x-amz-content-sha256;x-amz-date;x-amz-decoded-content-length;x-amz-storage-class,Signature=4f232c4386841ef735655705268965c44a0e4690baa4adea153f7db9fa80a0a9")
	return r
}

func TestDocChunked(t *testing.T) {
	v := NewVerifier(docCreds, "us-east-1")
	v.Now = fixedClock(docTime)
	body := docChunkedBody(docChunkSigs)
	if len(body) != 66824 {
		t.Fatalf("example body is %d bytes", len(body))
	}
	r := docChunkedRequest(body)
	res, err := v.Verify(r)
	if err != nil {
		t.Fatal(err)
	}
	if !res.Streaming || r.ContentLength != 66560 || r.Header.Get("Content-Encoding") != "" {
		t.Fatalf("res %+v, ContentLength %d, CE %q", res, r.ContentLength, r.Header.Get("Content-Encoding"))
	}
	got, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, bytes.Repeat([]byte("a"), 66560)) {
		t.Fatalf("decoded %d bytes", len(got))
	}

	// A tampered second chunk signature fails before EOF.
	bad := docChunkSigs
	bad[1] = strings.Repeat("0", 64)
	r = docChunkedRequest(docChunkedBody(bad))
	if _, err := v.Verify(r); err != nil {
		t.Fatal(err)
	}
	_, err = io.ReadAll(r.Body)
	wantCode(t, err, "SignatureDoesNotMatch")

	// Tampered data (same length) fails too.
	tb := docChunkedBody(docChunkSigs)
	tb[200] = 'b'
	r = docChunkedRequest(tb)
	if _, err := v.Verify(r); err != nil {
		t.Fatal(err)
	}
	_, err = io.ReadAll(r.Body)
	wantCode(t, err, "SignatureDoesNotMatch")

	// Truncated body: IncompleteBody.
	r = docChunkedRequest(body[:40000])
	if _, err := v.Verify(r); err != nil {
		t.Fatal(err)
	}
	_, err = io.ReadAll(r.Body)
	wantCode(t, err, "IncompleteBody")
}
