package sigv4

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
)

const (
	testAK     = "TESTACCESSKEY0000001"
	testSecret = "testsecretkey/with+chars0000000000000000"
	testRegion = "us-east-1"
)

var testCreds = staticCreds{testAK: testSecret}

func sdkCreds() aws.Credentials {
	return aws.Credentials{AccessKeyID: testAK, SecretAccessKey: testSecret}
}

func s3Signer() *v4.Signer {
	return v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
}

func sha(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// escapeKey encodes a key like the S3 SDK does for the request path.
func escapeKey(k string) string { return uriEncode(k, true) }

// send signs req with the SDK and sends it to srv, returning status and
// error code.
func doReq(t *testing.T, req *http.Request) (int, string) {
	t.Helper()
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	code := ""
	if i := bytes.Index(b, []byte("<Code>")); i >= 0 {
		j := bytes.Index(b, []byte("</Code>"))
		code = string(b[i+6 : j])
	}
	return resp.StatusCode, code
}

func TestSDKSignHTTP(t *testing.T) {
	v := NewVerifier(testCreds, testRegion)
	rec := newRecorder(v)
	srv := httptest.NewServer(rec)
	defer srv.Close()
	keys := []string{"plain.txt", "dir/sub/file", "with space", "plus+sign", "percent%41", "unicode-ÄÖü-日本", "odd!'()*;:@&=$,", "tilde~and-dash_.", "a//double", "%2Fslash"}
	queries := []string{"", "uploads", "partNumber=1&uploadId=a%2Bb", "prefix=a%20b&delimiter=%2F&list-type=2", "tagging&versionId=x"}
	for _, k := range keys {
		for _, q := range queries {
			body := []byte("hello " + k)
			u := srv.URL + "/bucket/" + escapeKey(k)
			if q != "" {
				u += "?" + q
			}
			req, err := http.NewRequest("PUT", u, bytes.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("X-Amz-Content-Sha256", sha(body))
			req.Header.Set("X-Amz-Meta-Note", "  spaced   value ")
			if err := s3Signer().SignHTTP(context.Background(), sdkCreds(), req, sha(body), "s3", testRegion, time.Now()); err != nil {
				t.Fatal(err)
			}
			if st, code := doReq(t, req); st != 200 {
				t.Errorf("key %q query %q: %d %s", k, q, st, code)
			}
		}
	}
	// UNSIGNED-PAYLOAD.
	req, _ := http.NewRequest("PUT", srv.URL+"/bucket/unsigned", strings.NewReader("data"))
	req.Header.Set("X-Amz-Content-Sha256", UnsignedPayload)
	s3Signer().SignHTTP(context.Background(), sdkCreds(), req, UnsignedPayload, "s3", testRegion, time.Now())
	if st, code := doReq(t, req); st != 200 {
		t.Errorf("unsigned: %d %s", st, code)
	}
	// Body that does not match the signed hash.
	req, _ = http.NewRequest("PUT", srv.URL+"/bucket/mismatch", strings.NewReader("other"))
	req.Header.Set("X-Amz-Content-Sha256", sha([]byte("data")))
	s3Signer().SignHTTP(context.Background(), sdkCreds(), req, sha([]byte("data")), "s3", testRegion, time.Now())
	if st, code := doReq(t, req); st != 400 || code != "XAmzContentSHA256Mismatch" {
		t.Errorf("mismatch: %d %s", st, code)
	}
}

func TestErrors(t *testing.T) {
	v := NewVerifier(testCreds, testRegion)
	now := time.Now().UTC()
	v.Now = fixedClock(now)
	sign := func(r *http.Request, creds aws.Credentials, region string, at time.Time) {
		r.Header.Set("X-Amz-Content-Sha256", emptySHA256)
		if err := s3Signer().SignHTTP(context.Background(), creds, r, emptySHA256, "s3", region, at); err != nil {
			t.Fatal(err)
		}
	}
	newReq := func() *http.Request { return httptest.NewRequest("GET", "http://127.0.0.1:9000/bucket/key", nil) }

	r := newReq()
	sign(r, sdkCreds(), testRegion, now)
	if _, err := v.Verify(r); err != nil {
		t.Fatalf("baseline: %v", err)
	}
	cases := []struct {
		name string
		mod  func(r *http.Request)
		code string
	}{
		{"unknown key", func(r *http.Request) {
			sign(r, aws.Credentials{AccessKeyID: "NOSUCHKEY", SecretAccessKey: "x"}, testRegion, now)
		}, "InvalidAccessKeyId"},
		{"wrong secret", func(r *http.Request) {
			sign(r, aws.Credentials{AccessKeyID: testAK, SecretAccessKey: "wrong"}, testRegion, now)
		}, "SignatureDoesNotMatch"},
		{"wrong region", func(r *http.Request) { sign(r, sdkCreds(), "eu-west-1", now) }, "AuthorizationHeaderMalformed"},
		{"skew past", func(r *http.Request) { sign(r, sdkCreds(), testRegion, now.Add(-16*time.Minute)) }, "RequestTimeTooSkewed"},
		{"skew future", func(r *http.Request) { sign(r, sdkCreds(), testRegion, now.Add(16*time.Minute)) }, "RequestTimeTooSkewed"},
		{"garbage header", func(r *http.Request) { r.Header.Set("Authorization", "AWS4-HMAC-SHA256 garbage") }, "AuthorizationHeaderMalformed"},
		{"v2 signature", func(r *http.Request) { r.Header.Set("Authorization", "AWS AKID:c2ln") }, "InvalidArgument"},
		{"missing content sha", func(r *http.Request) {
			sign(r, sdkCreds(), testRegion, now)
			r.Header.Del("X-Amz-Content-Sha256")
		}, "MissingSecurityHeader"},
		{"bad content sha", func(r *http.Request) {
			sign(r, sdkCreds(), testRegion, now)
			r.Header.Set("X-Amz-Content-Sha256", "nothex")
		}, "InvalidArgument"},
		{"no date", func(r *http.Request) {
			sign(r, sdkCreds(), testRegion, now)
			r.Header.Del("X-Amz-Date")
		}, "AccessDenied"},
		{"header and query", func(r *http.Request) {
			sign(r, sdkCreds(), testRegion, now)
			r.URL.RawQuery = "X-Amz-Signature=abc"
		}, "InvalidArgument"},
		{"tampered header", func(r *http.Request) {
			sign(r, sdkCreds(), testRegion, now)
			r.Header.Set("X-Amz-Date", now.Add(time.Second).Format(amzDateFormat))
		}, "SignatureDoesNotMatch"},
	}
	for _, tc := range cases {
		r := newReq()
		tc.mod(r)
		_, err := v.Verify(r)
		if err == nil {
			t.Errorf("%s: accepted", tc.name)
			continue
		}
		e, ok := err.(*Error)
		if !ok || e.Code != tc.code {
			t.Errorf("%s: want %s, got %v", tc.name, tc.code, err)
		}
		if e != nil && e.Status == 0 {
			t.Errorf("%s: no status", tc.name)
		}
	}
	// Anonymous.
	res, err := v.Verify(newReq())
	if err != nil || !res.Anonymous {
		t.Fatalf("anonymous: %+v %v", res, err)
	}
}

func TestSDKPresign(t *testing.T) {
	v := NewVerifier(testCreds, testRegion)
	rec := newRecorder(v)
	srv := httptest.NewServer(rec)
	defer srv.Close()
	rec.bodies["/bucket/o b+j"] = []byte("content") // before the server sees requests
	presign := func(method, key string, expires time.Duration, at time.Time, hdr http.Header) (string, http.Header) {
		u := srv.URL + "/bucket/" + escapeKey(key) + "?X-Amz-Expires=" + fmt.Sprint(int(expires/time.Second))
		req, _ := http.NewRequest(method, u, nil)
		for k, vs := range hdr {
			req.Header[k] = vs
		}
		signed, sh, err := s3Signer().PresignHTTP(context.Background(), sdkCreds(), req, UnsignedPayload, "s3", testRegion, at)
		if err != nil {
			t.Fatal(err)
		}
		return signed, sh
	}
	get := func(u string, h http.Header) (int, string) {
		req, _ := http.NewRequest("GET", u, nil)
		for k, vs := range h {
			if k != "Host" {
				req.Header[k] = vs
			}
		}
		return doReq(t, req)
	}
	u, h := presign("GET", "o b+j", time.Hour, time.Now(), nil)
	if st, code := get(u, h); st != 200 {
		t.Fatalf("presigned GET: %d %s (%s)", st, code, u)
	}
	// Signed extra header must be sent.
	u, h = presign("GET", "o b+j", time.Hour, time.Now(), http.Header{"Range": {"bytes=0-1"}})
	if st, code := get(u, h); st != 200 {
		t.Fatalf("presigned GET with signed header: %d %s", st, code)
	}
	// Expired.
	u, h = presign("GET", "o b+j", time.Minute, time.Now().Add(-2*time.Minute), nil)
	if st, code := get(u, h); st != 403 || code != "AccessDenied" {
		t.Fatalf("expired: %d %s", st, code)
	}
	// Expires over 7 days.
	u, h = presign("GET", "o b+j", 8*24*time.Hour, time.Now(), nil)
	if st, code := get(u, h); st != 400 || code != "AuthorizationQueryParametersError" {
		t.Fatalf("8 days: %d %s", st, code)
	}
	// Tampered signature.
	u, h = presign("GET", "o b+j", time.Hour, time.Now(), nil)
	pu, _ := url.Parse(u)
	q := pu.Query()
	sig := []byte(q.Get("X-Amz-Signature"))
	if sig[0] == '0' {
		sig[0] = '1'
	} else {
		sig[0] = '0'
	}
	q.Set("X-Amz-Signature", string(sig))
	pu.RawQuery = q.Encode()
	if st, code := get(pu.String(), h); st != 403 || code != "SignatureDoesNotMatch" {
		t.Fatalf("tampered: %d %s", st, code)
	}
	// An unsigned x-amz-* header added by the URL's holder is refused.
	u, _ = presign("PUT", "acl-sneak", time.Hour, time.Now(), nil)
	req, _ := http.NewRequest("PUT", u, strings.NewReader("x"))
	req.Header.Set("X-Amz-Acl", "public-read-write")
	if st, code := doReq(t, req); st != 403 || code != "AccessDenied" {
		t.Fatalf("unsigned x-amz-acl: %d %s", st, code)
	}
	// Presigned PUT with a body.
	u, h = presign("PUT", "up/loaded", time.Hour, time.Now(), nil)
	req, _ = http.NewRequest("PUT", u, strings.NewReader("via presigned put"))
	if st, code := doReq(t, req); st != 200 {
		t.Fatalf("presigned PUT: %d %s", st, code)
	}
	if got := string(rec.body("/bucket/up/loaded")); got != "via presigned put" {
		t.Fatalf("stored %q", got)
	}
}
