package sigv2

import (
	"context"
	"crypto/hmac"
	"crypto/md5"
	"crypto/sha1"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tristore/tristore/frontend/s3/sigv4"
	"github.com/tristore/tristore/internal/testutil"
)

// The example credentials of the S3 developer guide.
const (
	docAK     = "AKIAIOSFODNN7EXAMPLE"
	docSecret = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
)

type creds map[string]string

func (c creds) SecretFor(_ context.Context, ak string) (string, error) {
	if s, ok := c[ak]; ok {
		return s, nil
	}
	return "", sigv4.ErrUnknownAccessKey
}

// hmacB64 computes the signature independently of Sign.
func hmacB64(secret, s string) string {
	m := hmac.New(sha1.New, []byte(secret))
	io.WriteString(m, s)
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

func code(err error) string {
	var e *sigv4.Error
	if errors.As(err, &e) {
		return e.Code
	}
	if err == nil {
		return ""
	}
	return "?" + err.Error()
}

// TestDocumentedVectors: the examples of "Signing and authenticating REST
// requests" (S3 developer guide, SigV2): the documented string to sign and
// signature, checked by an HMAC computed here and by Verify.
func TestDocumentedVectors(t *testing.T) {
	c := creds{docAK: docSecret}
	for _, tc := range []struct {
		name, method, url, date, ctype string
		sts, sig                       string
	}{
		{"object GET", "GET", "http://johnsmith.s3.amazonaws.com/photos/puppy.jpg", "Tue, 27 Mar 2007 19:36:42 +0000", "",
			"GET\n\n\nTue, 27 Mar 2007 19:36:42 +0000\n/johnsmith/photos/puppy.jpg", "bWq2s1WEIj+Ydj0vQ697zp+IXMU="},
		{"object PUT", "PUT", "http://johnsmith.s3.amazonaws.com/photos/puppy.jpg", "Tue, 27 Mar 2007 21:15:45 +0000", "image/jpeg",
			"PUT\n\nimage/jpeg\nTue, 27 Mar 2007 21:15:45 +0000\n/johnsmith/photos/puppy.jpg", "MyyxeRY7whkBe+bq8fHCL/2kKUg="},
		{"list", "GET", "http://johnsmith.s3.amazonaws.com/?prefix=photos&max-keys=50&marker=puppy", "Tue, 27 Mar 2007 19:42:41 +0000", "",
			"GET\n\n\nTue, 27 Mar 2007 19:42:41 +0000\n/johnsmith/", "htDYFYduRNen8P9ZfE/s9SuKy0U="},
		{"acl fetch", "GET", "http://johnsmith.s3.amazonaws.com/?acl", "Tue, 27 Mar 2007 19:44:46 +0000", "",
			"GET\n\n\nTue, 27 Mar 2007 19:44:46 +0000\n/johnsmith/?acl", "c2WLPFtWHVgbEmeEG93a4cG37dM="},
	} {
		if got := hmacB64(docSecret, tc.sts); got != tc.sig {
			t.Fatalf("%s: the documented vector itself does not hold: %s", tc.name, got)
		}
		r := httptest.NewRequest(tc.method, tc.url, nil)
		r.Header.Set("Date", tc.date)
		if tc.ctype != "" {
			r.Header.Set("Content-Type", tc.ctype)
		}
		res := canonicalResources(r)
		found := false
		for _, cr := range res {
			if StringToSign(tc.method, r.Header, tc.date, cr) == tc.sts {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: no candidate gives the documented string to sign; candidates %q", tc.name, res)
		}
		now, err := time.Parse(time.RFC1123Z, tc.date)
		if err != nil {
			t.Fatal(err)
		}
		r.Header.Set("Authorization", "AWS "+docAK+":"+tc.sig)
		if _, err := Verify(context.Background(), c, r, now.Add(time.Minute)); err != nil {
			t.Errorf("%s: documented signature refused: %v", tc.name, err)
		}
		// Any change to a signed part breaks it.
		r.Header.Set("Date", now.Add(time.Second).Format(time.RFC1123Z))
		if _, err := Verify(context.Background(), c, r, now); code(err) != "SignatureDoesNotMatch" {
			t.Errorf("%s: changed date: %v", tc.name, err)
		}
	}
	// The documented query-string example (Expires 1175139620).
	sts := "GET\n\n\n1175139620\n/johnsmith/photos/puppy.jpg"
	sig := hmacB64(docSecret, sts)
	if sig != "NpgCjnDzrM+WFzoENXmpNDUsSn8=" {
		t.Fatalf("documented presign vector: %s", sig)
	}
	u := "http://johnsmith.s3.amazonaws.com/photos/puppy.jpg?AWSAccessKeyId=" + docAK + "&Expires=1175139620&Signature=" + url.QueryEscape(sig)
	r := httptest.NewRequest("GET", u, nil)
	if res, err := Verify(context.Background(), c, r, time.Unix(1175139620-60, 0)); err != nil || !res.Presigned {
		t.Errorf("documented presigned URL refused: %v", err)
	}
	if _, err := Verify(context.Background(), c, r, time.Unix(1175139621, 0)); code(err) != "AccessDenied" {
		t.Errorf("expired presigned URL: %v", err)
	}
}

// TestStringToSignParts: x-amz-* headers and sub-resources as documented.
func TestStringToSignParts(t *testing.T) {
	h := http.Header{}
	h.Set("X-Amz-Meta-ReviewedBy", "joe@example.com")
	h.Add("X-Amz-Meta-ReviewedBy", "jane@example.com")
	h.Set("X-Amz-Meta-FileChecksum", "0x02661779")
	h.Set("X-Amz-Meta-ChecksumAlgorithm", "  crc32 ")
	h.Set("Content-Md5", "4gJE4saaMU4BqNR0kLY+lw==")
	h.Set("Content-Type", "application/x-download")
	got := StringToSign("PUT", h, "Tue, 27 Mar 2007 21:06:08 +0000", "/static.example.com/db-backup.dat.gz")
	want := "PUT\n4gJE4saaMU4BqNR0kLY+lw==\napplication/x-download\nTue, 27 Mar 2007 21:06:08 +0000\n" +
		"x-amz-meta-checksumalgorithm:crc32\nx-amz-meta-filechecksum:0x02661779\n" +
		"x-amz-meta-reviewedby:joe@example.com,jane@example.com\n/static.example.com/db-backup.dat.gz"
	if got != want {
		t.Errorf("string to sign:\n%q\nwant\n%q", got, want)
	}
	for q, want := range map[string]string{
		"":                                 "",
		"prefix=a&max-keys=3":              "",
		"acl":                              "?acl",
		"uploadId=x%2By&partNumber=2":      "?partNumber=2&uploadId=x+y",
		"versionId=v1&tagging&list-type=2": "?tagging&versionId=v1",
		"response-content-type=text%2Fplain&delete=": "?delete&response-content-type=text/plain",
	} {
		if got := CanonicalSubResources(q); got != want {
			t.Errorf("sub-resources of %q = %q, want %q", q, got, want)
		}
	}
}

// TestVerifyRefusals: each broken request gets S3's code.
func TestVerifyRefusals(t *testing.T) {
	c := creds{docAK: docSecret}
	now := time.Now()
	sign := func(r *http.Request, secret string) {
		d := now.UTC().Format(http.TimeFormat)
		r.Header.Set("Date", d)
		sts := StringToSign(r.Method, r.Header, d, r.URL.EscapedPath())
		r.Header.Set("Authorization", "AWS "+docAK+":"+hmacB64(secret, sts))
	}
	ok := httptest.NewRequest("GET", "http://127.0.0.1/b/k", nil)
	sign(ok, docSecret)
	if _, err := Verify(context.Background(), c, ok, now); err != nil {
		t.Fatalf("good request: %v", err)
	}
	bad := httptest.NewRequest("GET", "http://127.0.0.1/b/k", nil)
	sign(bad, "wrong")
	if _, err := Verify(context.Background(), c, bad, now); code(err) != "SignatureDoesNotMatch" {
		t.Errorf("wrong secret: %v", err)
	}
	other := httptest.NewRequest("GET", "http://127.0.0.1/b/other", nil)
	other.Header = ok.Header.Clone()
	if _, err := Verify(context.Background(), c, other, now); code(err) != "SignatureDoesNotMatch" {
		t.Errorf("replayed on another key: %v", err)
	}
	unk := httptest.NewRequest("GET", "http://127.0.0.1/b/k", nil)
	sign(unk, docSecret)
	unk.Header.Set("Authorization", strings.Replace(unk.Header.Get("Authorization"), docAK, "NOPE", 1))
	if _, err := Verify(context.Background(), c, unk, now); code(err) != "InvalidAccessKeyId" {
		t.Errorf("unknown key: %v", err)
	}
	if _, err := Verify(context.Background(), c, ok, now.Add(20*time.Minute)); code(err) != "RequestTimeTooSkewed" {
		t.Errorf("skewed: %v", err)
	}
	mal := httptest.NewRequest("GET", "http://127.0.0.1/b/k", nil)
	mal.Header.Set("Authorization", "AWS nocolon")
	if _, err := Verify(context.Background(), c, mal, now); code(err) != "InvalidArgument" {
		t.Errorf("malformed header: %v", err)
	}
	far := httptest.NewRequest("GET", fmt.Sprintf("http://127.0.0.1/b/k?AWSAccessKeyId=%s&Expires=%d&Signature=x", docAK, now.Add(8*24*time.Hour).Unix()), nil)
	if _, err := Verify(context.Background(), c, far, now); code(err) != "AccessDenied" {
		t.Errorf("expiry beyond 7 days: %v", err)
	}
}

// v2Server answers 200 to requests that verify with SigV2 and 403 with
// the code otherwise, recording what it saw.
type v2Server struct {
	mu    sync.Mutex
	seen  []string
	bad   []string
	c     creds
	store map[string][]byte
}

func (s *v2Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	res, err := Verify(r.Context(), s.c, r, time.Now())
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil || !Is(r) {
		s.bad = append(s.bad, r.Method+" "+r.URL.String()+": "+code(err)+" auth="+r.Header.Get("Authorization"))
		w.WriteHeader(http.StatusForbidden)
		return
	}
	s.seen = append(s.seen, fmt.Sprintf("%s %s presigned=%v", r.Method, r.URL.Path, res.Presigned))
	switch r.Method {
	case http.MethodPut:
		b, _ := io.ReadAll(r.Body)
		s.store[r.URL.Path] = b
		w.Header().Set("ETag", fmt.Sprintf(`"%x"`, md5.Sum(b)))
	case http.MethodGet:
		if strings.Count(r.URL.Path, "/") < 2 || strings.HasSuffix(r.URL.Path, "/") {
			w.Header().Set("Content-Type", "application/xml")
			io.WriteString(w, `<?xml version="1.0" encoding="UTF-8"?><ListBucketResult xmlns="http://s3.amazonaws.com/doc/2006-03-01/"><Name>bkt</Name><Prefix></Prefix><Marker></Marker><MaxKeys>1000</MaxKeys><IsTruncated>false</IsTruncated></ListBucketResult>`)
			return
		}
		b, ok := s.store[r.URL.Path]
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		w.Write(b)
	case http.MethodHead:
		b, ok := s.store[r.URL.Path]
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		w.Header().Set("Content-Length", fmt.Sprint(len(b)))
		w.Header().Set("Last-Modified", time.Now().UTC().Format(http.TimeFormat))
		w.Header().Set("ETag", fmt.Sprintf(`"%x"`, md5.Sum(b)))
	}
}

// TestClients: s3cmd with signature_v2 = True (a PUT and a GET of a key
// with a space and a '+') and aws-cli v1's SigV2 presign are accepted,
// and a presigned URL with one byte of its signature changed is not.
func TestClients(t *testing.T) {
	const ak, secret = "V2TESTKEY", "v2testsecret/with+chars"
	srv := &v2Server{c: creds{ak: secret}, store: map[string][]byte{}}
	hs := httptest.NewServer(srv)
	defer hs.Close()
	host := strings.TrimPrefix(hs.URL, "http://")
	dir := t.TempDir()

	t.Run("s3cmd", func(t *testing.T) {
		s3cmd := testutil.NeedCmd(t, "s3cmd")
		cfg := filepath.Join(dir, "s3cfg")
		os.WriteFile(cfg, []byte("[default]\naccess_key = "+ak+"\nsecret_key = "+secret+"\nhost_base = "+host+
			"\nhost_bucket = "+host+"\nuse_https = False\nsignature_v2 = True\n"), 0o600)
		src := filepath.Join(dir, "src")
		os.WriteFile(src, []byte("hello sigv2"), 0o600)
		run := func(args ...string) {
			cmd := exec.Command(s3cmd, append([]string{"-c", cfg, "--no-check-md5"}, args...)...)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cmd = exec.CommandContext(ctx, cmd.Path, cmd.Args[1:]...)
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("s3cmd %v: %v\n%s\nrefused: %v", args, err, out, srv.bad)
			}
		}
		run("put", src, "s3://bkt/a key+x")
		dst := filepath.Join(dir, "dst")
		run("get", "--force", "s3://bkt/a key+x", dst)
		if b, _ := os.ReadFile(dst); string(b) != "hello sigv2" {
			t.Fatalf("s3cmd got %q", b)
		}
		if len(srv.bad) > 0 {
			t.Fatalf("refused: %v", srv.bad)
		}
	})

	t.Run("botocore-v1-presign", func(t *testing.T) {
		// botocore's HmacV1QueryAuth: what aws-cli v1 and boto3 use for
		// signature_version = s3 (aws-cli v1's `s3 presign` now picks the
		// endpoint ruleset's SigV4 whatever the config file says).
		py := testutil.NeedPython(t, "boto3")
		srv.mu.Lock()
		srv.store["/bkt/obj name"] = []byte("presigned body")
		srv.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		script := `import boto3, sys
from botocore.config import Config
c = boto3.client("s3", endpoint_url=sys.argv[1], aws_access_key_id=sys.argv[2], aws_secret_access_key=sys.argv[3],
    region_name="us-east-1", config=Config(signature_version="s3", s3={"addressing_style": "path"}))
print(c.generate_presigned_url("get_object", Params={"Bucket": "bkt", "Key": "obj name"}, ExpiresIn=300))`
		out, err := exec.CommandContext(ctx, py, "-c", script, hs.URL, ak, secret).Output()
		if err != nil {
			t.Fatalf("presign: %v %s", err, out)
		}
		u := strings.TrimSpace(string(out))
		if !strings.Contains(u, "AWSAccessKeyId=") || !strings.Contains(u, "Signature=") {
			t.Fatalf("botocore did not presign with SigV2: %s", u)
		}
		resp, err := http.Get(u)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(b) != "presigned body" {
			t.Fatalf("GET presigned: %d %q refused %v", resp.StatusCode, b, srv.bad)
		}
		i := strings.Index(u, "Signature=") + len("Signature=")
		flip := byte('A')
		if u[i] == 'A' {
			flip = 'B'
		}
		tampered := u[:i] + string(flip) + u[i+1:]
		resp, err = http.Get(tampered)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 403 {
			t.Fatalf("tampered presigned URL: %d", resp.StatusCode)
		}
	})
}
