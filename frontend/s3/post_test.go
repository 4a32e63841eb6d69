package s3

import (
	"bytes"
	"context"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime/multipart"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/tristore/tristore/frontend/s3/sigv2"
	"github.com/tristore/tristore/iam"
	"github.com/tristore/tristore/internal/testutil"
	"github.com/tristore/tristore/store"
	"github.com/tristore/tristore/store/posix"
)

const (
	postAK     = "POSTALICEKEY"
	postSecret = "post-alice-secret-key"
	bobAK      = "POSTBOBKEY"
	bobSecret  = "post-bob-secret-key"
)

// newSignedTestServer runs a Server with real SigV4/SigV2 authentication
// over an iam store holding alice (owner of bucket "pbk") and bob, and no
// anonymous access.
func newSignedTestServer(t *testing.T) *testServer {
	t.Helper()
	dir := t.TempDir()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := posix.Open(dir, posix.Options{Log: log})
	if err != nil {
		t.Fatal(err)
	}
	users, err := iam.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := users.AddWithKeys("alice", postAK, postSecret, false); err != nil {
		t.Fatal(err)
	}
	if _, err := users.AddWithKeys("bob", bobAK, bobSecret, false); err != nil {
		t.Fatal(err)
	}
	if _, err := users.AddWithKeys("carol@example.com", "POSTCAROLKEY", "post-carol-secret", false); err != nil {
		t.Fatal(err)
	}
	if err := st.CreateBucket(context.Background(), "pbk", "alice"); err != nil {
		t.Fatal(err)
	}
	srv, err := New(st, Options{Log: log, Auth: NewSigV4Auth(users, "us-east-1"), Authz: NewPolicyAuthz(), ShutdownTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	url, _ := serveTest(t, srv, st)
	return &testServer{url: url, srv: srv, st: st}
}

// signedPolicy builds a SigV4 POST form's auth fields for a policy,
// signed here with an HMAC chain written out in the test.
func signedPolicy(t *testing.T, ak, secret string, expiration time.Time, conds []any) map[string]string {
	now := time.Now().UTC()
	date := now.Format("20060102")
	cred := ak + "/" + date + "/us-east-1/s3/aws4_request"
	conds = append(conds, map[string]string{"x-amz-algorithm": "AWS4-HMAC-SHA256"},
		map[string]string{"x-amz-credential": cred}, map[string]string{"x-amz-date": now.Format("20060102T150405Z")})
	doc, _ := json.Marshal(map[string]any{"expiration": expiration.UTC().Format("2006-01-02T15:04:05.000Z"), "conditions": conds})
	pol := base64.StdEncoding.EncodeToString(doc)
	mac := func(k []byte, s string) []byte { m := hmac.New(sha256.New, k); m.Write([]byte(s)); return m.Sum(nil) }
	k := mac(mac(mac(mac([]byte("AWS4"+secret), date), "us-east-1"), "s3"), "aws4_request")
	return map[string]string{"policy": pol, "x-amz-algorithm": "AWS4-HMAC-SHA256", "x-amz-credential": cred,
		"x-amz-date": now.Format("20060102T150405Z"), "x-amz-signature": hex.EncodeToString(mac(k, pol))}
}

// sendPostForm sends a multipart form: fields (in order of names), then the file.
func sendPostForm(t *testing.T, url string, order []string, fields map[string]string, filename string, file io.Reader) resp {
	t.Helper()
	pr, pw := io.Pipe()
	mw := multipart.NewWriter(pw)
	go func() {
		for _, k := range order {
			mw.WriteField(k, fields[k])
		}
		fw, _ := mw.CreateFormFile("file", filename)
		_, err := io.Copy(fw, file)
		if err == nil {
			err = mw.Close()
		}
		pw.CloseWithError(err)
	}()
	req, _ := http.NewRequest("POST", url, pr)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	c := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	res, err := c.Do(req)
	if err != nil {
		t.Fatalf("POST: %v", err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return resp{res.StatusCode, res.Header, b}
}

func keysOf(m map[string]string) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func stored(t *testing.T, ts *testServer, key string) (string, store.ObjectInfo, bool) {
	t.Helper()
	rc, oi, err := ts.st.Get(context.Background(), "pbk", key, 0, -1)
	if errors.Is(err, store.ErrNoSuchKey) {
		return "", oi, false
	}
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, _ := io.ReadAll(rc)
	return string(b), oi, true
}

// TestPostObject: signed browser-form uploads with conditions, the
// success_action_* answers, and every refusal leaving nothing stored.
func TestPostObject(t *testing.T) {
	ts := newSignedTestServer(t)
	url := ts.url + "/pbk"
	conds := []any{map[string]string{"bucket": "pbk"}, []any{"starts-with", "$key", "uploads/"},
		[]any{"starts-with", "$Content-Type", "text/"}, []any{"content-length-range", 1, 1 << 20},
		map[string]string{"x-amz-meta-color": "blue"}, []any{"starts-with", "$success_action_status", ""},
		[]any{"starts-with", "$success_action_redirect", ""}}
	auth := signedPolicy(t, postAK, postSecret, time.Now().Add(time.Hour), conds)
	form := func(extra map[string]string) (map[string]string, []string) {
		f := map[string]string{"key": "uploads/${filename}", "Content-Type": "text/plain", "x-amz-meta-color": "blue"}
		for k, v := range auth {
			f[k] = v
		}
		for k, v := range extra {
			if v == "\x00" {
				delete(f, k)
			} else {
				f[k] = v
			}
		}
		return f, keysOf(f)
	}

	f, order := form(map[string]string{"success_action_status": "201"})
	r := sendPostForm(t, url, order, f, "hello.txt", strings.NewReader("hello post"))
	if r.status != 201 || !bytes.Contains(r.body, []byte("<Key>uploads/hello.txt</Key>")) || !bytes.Contains(r.body, []byte("<Bucket>pbk</Bucket>")) {
		t.Fatalf("201: %d %s", r.status, r.body)
	}
	body, oi, ok := stored(t, ts, "uploads/hello.txt")
	if !ok || body != "hello post" || oi.Meta.ContentType != "text/plain" || oi.Meta.UserMeta["color"] != "blue" || oi.Meta.Owner != "alice" {
		t.Fatalf("stored %q %+v", body, oi.Meta)
	}
	if r.header.Get("ETag") != `"`+oi.ETag+`"` {
		t.Errorf("ETag %s vs %s", r.header.Get("ETag"), oi.ETag)
	}

	f, order = form(map[string]string{"success_action_redirect": "http://127.0.0.1:1/done?x=1"})
	r = sendPostForm(t, url, order, f, "r.txt", strings.NewReader("redirected"))
	loc := r.header.Get("Location")
	if r.status != 303 || !strings.HasPrefix(loc, "http://127.0.0.1:1/done?") || !strings.Contains(loc, "key=uploads%2Fr.txt") || !strings.Contains(loc, "bucket=pbk") || !strings.Contains(loc, "etag=") {
		t.Fatalf("redirect: %d %s", r.status, loc)
	}
	f, order = form(nil)
	r = sendPostForm(t, url, order, f, "d.txt", strings.NewReader("default"))
	if r.status != 204 {
		t.Fatalf("default status: %d %s", r.status, r.body)
	}
	f, order = form(map[string]string{"success_action_status": "200"})
	if r = sendPostForm(t, url, order, f, "ok.txt", strings.NewReader("x")); r.status != 200 {
		t.Fatalf("200: %d", r.status)
	}

	// Refusals: S3's codes, nothing stored under the key.
	tampered := map[string]string{}
	{
		raw, _ := base64.StdEncoding.DecodeString(auth["policy"])
		raw = bytes.Replace(raw, []byte(`uploads/`), []byte(`anything`), 1)
		tampered["policy"] = base64.StdEncoding.EncodeToString(raw)
	}
	expired := signedPolicy(t, postAK, postSecret, time.Now().Add(-time.Minute), conds)
	for _, tc := range []struct {
		name   string
		extra  map[string]string
		file   string
		status int
		code   string
		msg    string
	}{
		{"tampered policy", map[string]string{"policy": tampered["policy"], "key": "anythingx/t.txt"}, "x", 403, "SignatureDoesNotMatch", ""},
		{"wrong signature", map[string]string{"x-amz-signature": strings.Repeat("0", 64)}, "x", 403, "SignatureDoesNotMatch", ""},
		{"expired", map[string]string{"policy": expired["policy"], "x-amz-signature": expired["x-amz-signature"], "x-amz-date": expired["x-amz-date"], "x-amz-credential": expired["x-amz-credential"]}, "x", 403, "AccessDenied", "Invalid according to Policy: Policy expired."},
		{"too big", nil, strings.Repeat("z", 1<<20+1), 400, "EntityTooLarge", ""},
		{"too small", nil, "", 400, "EntityTooSmall", ""},
		{"key outside", map[string]string{"key": "other/${filename}"}, "x", 403, "AccessDenied", ""},
		{"bad content type", map[string]string{"Content-Type": "image/png"}, "x", 403, "AccessDenied", ""},
		{"meta changed", map[string]string{"x-amz-meta-color": "red"}, "x", 403, "AccessDenied", ""},
		{"extra field", map[string]string{"x-amz-meta-other": "1"}, "x", 403, "AccessDenied", "Extra input fields: x-amz-meta-other"},
		{"no key", map[string]string{"key": "\x00"}, "x", 403, "AccessDenied", ""},
		{"unknown key", map[string]string{"x-amz-credential": "NOPE/" + strings.SplitN(auth["x-amz-credential"], "/", 2)[1]}, "x", 403, "InvalidAccessKeyId", ""},
		{"bad policy", map[string]string{"policy": "!!!", "x-amz-signature": "\x00"}, "x", 400, "InvalidPolicyDocument", ""},
	} {
		f, order := form(tc.extra)
		r := sendPostForm(t, url, order, f, "bad-"+strings.ReplaceAll(tc.name, " ", "-"), strings.NewReader(tc.file))
		wantErrMsg(t, tc.name, r, tc.status, tc.code, tc.msg)
		for _, k := range []string{"uploads/bad-" + strings.ReplaceAll(tc.name, " ", "-"), "anythingx/t.txt", "other/bad-key-outside"} {
			if _, _, ok := stored(t, ts, k); ok {
				t.Fatalf("%s: %s was stored", tc.name, k)
			}
		}
	}

	// Anonymous forms: refused on a private bucket, accepted where
	// everyone may write; bob's signed form needs a grant.
	anon := map[string]string{"key": "anon/${filename}"}
	wantErrMsg(t, "anonymous", sendPostForm(t, url, []string{"key"}, anon, "a.txt", strings.NewReader("a")), 403, "AccessDenied", "")
	bobAuth := signedPolicy(t, bobAK, bobSecret, time.Now().Add(time.Hour), []any{[]any{"starts-with", "$key", ""}})
	bobForm := map[string]string{"key": "bob/${filename}"}
	for k, v := range bobAuth {
		bobForm[k] = v
	}
	wantErrMsg(t, "bob", sendPostForm(t, url, keysOf(bobForm), bobForm, "b.txt", strings.NewReader("b")), 403, "AccessDenied", "")
	if err := ts.st.(store.BucketConfigurer).SetBucketConfig(context.Background(), "pbk", cfgACL, "public-read-write"); err != nil {
		t.Fatal(err)
	}
	if r := sendPostForm(t, url, []string{"key"}, anon, "a.txt", strings.NewReader("a")); r.status != 204 {
		t.Fatalf("anonymous on public-read-write: %d %s", r.status, r.body)
	}
	if r := sendPostForm(t, url, keysOf(bobForm), bobForm, "b.txt", strings.NewReader("b")); r.status != 204 {
		t.Fatalf("bob on public-read-write: %d %s", r.status, r.body)
	}
	if _, oi, ok := stored(t, ts, "bob/b.txt"); !ok || oi.Meta.Owner != "bob" {
		t.Fatalf("bob's object: %v %+v", ok, oi.Meta)
	}

	// SigV2 form (AWSAccessKeyId + signature = base64 HMAC-SHA1 of the policy).
	doc, _ := json.Marshal(map[string]any{"expiration": time.Now().Add(time.Hour).UTC().Format(time.RFC3339), "conditions": []any{map[string]string{"bucket": "pbk"}, []any{"starts-with", "$key", "v2/"}}})
	pol := base64.StdEncoding.EncodeToString(doc)
	m := hmac.New(sha1.New, []byte(postSecret))
	m.Write([]byte(pol))
	v2 := map[string]string{"key": "v2/${filename}", "AWSAccessKeyId": postAK, "policy": pol, "signature": base64.StdEncoding.EncodeToString(m.Sum(nil))}
	if r := sendPostForm(t, url, keysOf(v2), v2, "v2.txt", strings.NewReader("v2")); r.status != 204 {
		t.Fatalf("SigV2 form: %d %s", r.status, r.body)
	}
	v2["signature"] = base64.StdEncoding.EncodeToString(make([]byte, 20))
	wantErrMsg(t, "v2 bad", sendPostForm(t, url, keysOf(v2), v2, "v2b.txt", strings.NewReader("v2")), 403, "SignatureDoesNotMatch", "")

	// Not multipart at all.
	req, _ := http.NewRequest("POST", url, strings.NewReader("--x\r\nbroken"))
	req.Header.Set("Content-Type", "multipart/form-data; boundary=x")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(res.Body)
	res.Body.Close()
	wantErrMsg(t, "broken form", resp{res.StatusCode, res.Header, b}, 400, "MalformedPOSTRequest", "")
}

func wantErrMsg(t *testing.T, name string, r resp, status int, code, msg string) {
	t.Helper()
	if r.status != status || !bytes.Contains(r.body, []byte("<Code>"+code+"</Code>")) || (msg != "" && !bytes.Contains(r.body, []byte(msg))) {
		t.Fatalf("%s: %d %s, want %d %s %q", name, r.status, r.body, status, code, msg)
	}
}

// TestPostObjectBoto3: the fields boto3's generate_presigned_post makes
// (SigV4 POST policy with a content-length-range) upload a file.
func TestPostObjectBoto3(t *testing.T) {
	py := testutil.NeedPython(t, "boto3")
	ts := newSignedTestServer(t)
	script := `import boto3, json, sys
from botocore.config import Config
c = boto3.client("s3", endpoint_url=sys.argv[1], aws_access_key_id=sys.argv[2], aws_secret_access_key=sys.argv[3],
    region_name="us-east-1", config=Config(signature_version="s3v4", s3={"addressing_style": "path"}))
p = c.generate_presigned_post("pbk", "forms/${filename}", Fields={"success_action_status": "201"},
    Conditions=[["content-length-range", 1, 4096], {"success_action_status": "201"}], ExpiresIn=300)
print(json.dumps(p))`
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, py, "-c", script, ts.url, postAK, postSecret).Output()
	if err != nil {
		t.Fatalf("boto3: %v %s", err, out)
	}
	var p struct {
		URL    string            `json:"url"`
		Fields map[string]string `json:"fields"`
	}
	if err := json.Unmarshal(out, &p); err != nil {
		t.Fatal(err)
	}
	r := sendPostForm(t, p.URL, keysOf(p.Fields), p.Fields, "from-boto3.txt", strings.NewReader("boto3 form"))
	if r.status != 201 {
		t.Fatalf("boto3 form: %d %s", r.status, r.body)
	}
	if body, _, ok := stored(t, ts, "forms/from-boto3.txt"); !ok || body != "boto3 form" {
		t.Fatalf("stored %q %v", body, ok)
	}
	r = sendPostForm(t, p.URL, keysOf(p.Fields), p.Fields, "big.txt", strings.NewReader(strings.Repeat("b", 5000)))
	wantErrMsg(t, "boto3 too big", r, 400, "EntityTooLarge", "")
}

// TestSigV2ThroughServer: the server accepts SigV2 header and presigned
// requests from its users (PUT then GET), refuses a bad signature, and an
// unsigned request stays refused.
func TestSigV2ThroughServer(t *testing.T) {
	ts := newSignedTestServer(t)
	var extra map[string]string
	do := func(method, path, body string, presign bool, secret string) resp {
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		req, _ := http.NewRequest(method, ts.url+path, rd)
		for k, v := range extra {
			req.Header.Set(k, v)
		}
		if presign {
			exp := fmt.Sprint(time.Now().Add(time.Minute).Unix())
			sts := sigv2.StringToSign(method, req.Header, exp, path)
			sig := base64.StdEncoding.EncodeToString(sigv2.Sign(secret, sts))
			req.URL.RawQuery = "AWSAccessKeyId=" + postAK + "&Expires=" + exp + "&Signature=" + strings.NewReplacer("+", "%2B", "/", "%2F", "=", "%3D").Replace(sig)
		} else if secret != "" {
			d := time.Now().UTC().Format(time.RFC1123Z)
			req.Header.Set("X-Amz-Date", d)
			req.Header.Set("Content-Type", "text/plain")
			sts := sigv2.StringToSign(method, req.Header, "", path)
			req.Header.Set("Authorization", "AWS "+postAK+":"+base64.StdEncoding.EncodeToString(sigv2.Sign(secret, sts)))
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return resp{res.StatusCode, res.Header, b}
	}
	wantStatus(t, do("PUT", "/pbk/v2obj", "sigv2 body", false, postSecret), 200)
	if r := do("GET", "/pbk/v2obj", "", true, postSecret); r.status != 200 || string(r.body) != "sigv2 body" {
		t.Fatalf("presigned GET: %d %s", r.status, r.body)
	}
	if r := do("GET", "/pbk/v2obj?acl", "", false, postSecret); r.status != 200 {
		t.Fatalf("GET ?acl (a signed sub-resource): %d %s", r.status, r.body)
	}
	wantErr(t, do("PUT", "/pbk/v2bad", "x", false, "wrong-secret"), 403, "SignatureDoesNotMatch")
	wantErr(t, do("GET", "/pbk/v2obj", "", true, "wrong-secret"), 403, "SignatureDoesNotMatch")
	wantErr(t, do("GET", "/pbk/v2obj", "", false, ""), 403, "AccessDenied")
	if _, _, ok := stored(t, ts, "v2bad"); ok {
		t.Fatal("a badly signed PUT stored its object")
	}

	// Grants name users that exist: by ID or by an email address that is
	// a user's name; others are refused and change nothing.
	extra = map[string]string{"X-Amz-Grant-Read": `emailAddress="carol@example.com"`}
	wantStatus(t, do("PUT", "/pbk/v2obj?acl", "", false, postSecret), 200)
	extra = map[string]string{"X-Amz-Grant-Read": `emailAddress="nobody@example.com"`}
	wantErr(t, do("PUT", "/pbk/v2obj?acl", "", false, postSecret), 400, "UnresolvableGrantByEmailAddress")
	extra = map[string]string{"X-Amz-Grant-Read": `id="nobody"`}
	wantErr(t, do("PUT", "/pbk/v2obj?acl", "", false, postSecret), 400, "InvalidArgument")
	extra = nil
	if r := do("GET", "/pbk/v2obj?acl", "", false, postSecret); !strings.Contains(string(r.body), "<ID>carol@example.com</ID>") {
		t.Fatalf("GetObjectAcl after the email grant: %s", r.body)
	}
}

// TestS3cmdSigV2AndGrants: s3cmd with signature_v2 = True against the
// server: put, get, a read grant to another user by canonical ID
// (setacl --acl-grant, an AccessControlPolicy document), `info`, and the
// grantee reading the object with its own SigV2 requests.
func TestS3cmdSigV2AndGrants(t *testing.T) {
	s3cmd := testutil.NeedCmd(t, "s3cmd")
	ts := newSignedTestServer(t)
	host := strings.TrimPrefix(ts.url, "http://")
	dir := t.TempDir()
	cfg := func(name, ak, secret string) string {
		p := dir + "/" + name
		if err := os.WriteFile(p, []byte("[default]\naccess_key = "+ak+"\nsecret_key = "+secret+"\nhost_base = "+host+
			"\nhost_bucket = "+host+"\nuse_https = False\nsignature_v2 = True\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	alice, bob := cfg("alice.cfg", postAK, postSecret), cfg("bob.cfg", bobAK, bobSecret)
	run := func(cfgPath string, args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		out, err := exec.CommandContext(ctx, s3cmd, append([]string{"-c", cfgPath}, args...)...).CombinedOutput()
		return string(out), err
	}
	must := func(cfgPath string, args ...string) string {
		t.Helper()
		out, err := run(cfgPath, args...)
		if err != nil {
			t.Fatalf("s3cmd %v: %v\n%s", args, err, out)
		}
		return out
	}
	src := dir + "/src"
	os.WriteFile(src, []byte("s3cmd sigv2 data"), 0o600)
	must(alice, "put", src, "s3://pbk/dir/odd key+1")
	must(alice, "get", "--force", "s3://pbk/dir/odd key+1", dir+"/got")
	if b, _ := os.ReadFile(dir + "/got"); string(b) != "s3cmd sigv2 data" {
		t.Fatalf("got %q", b)
	}
	if out, err := run(bob, "get", "--force", "s3://pbk/dir/odd key+1", dir+"/bobgot"); err == nil {
		t.Fatalf("bob read without a grant: %s", out)
	}
	must(alice, "setacl", "--acl-grant=read:bob", "s3://pbk/dir/odd key+1")
	info := must(alice, "info", "s3://pbk/dir/odd key+1")
	if !strings.Contains(info, "bob: READ") {
		t.Fatalf("s3cmd info does not show bob's grant:\n%s", info)
	}
	must(bob, "get", "--force", "s3://pbk/dir/odd key+1", dir+"/bobgot")
	if b, _ := os.ReadFile(dir + "/bobgot"); string(b) != "s3cmd sigv2 data" {
		t.Fatalf("bob got %q", b)
	}
	must(alice, "setacl", "--acl-revoke=read:bob", "s3://pbk/dir/odd key+1")
	if out, err := run(bob, "get", "--force", "s3://pbk/dir/odd key+1", dir+"/bobgot2"); err == nil {
		t.Fatalf("bob read after the revoke: %s", out)
	}
}

// TestSigV2Boto3BucketRequests: botocore's SigV2 (signature_version "s3",
// what aws-cli 1.x and old boto3 sign with) works for requests on the
// bucket itself, which it signs with the resource "/bucket/" while the
// path-style URL is "/bucket": ListObjects (V1, V2, with a prefix),
// HeadBucket, GetBucketAcl, and object requests around them. Before, each
// bucket-level request was 403 SignatureDoesNotMatch (`aws s3 ls` failed).
func TestSigV2Boto3BucketRequests(t *testing.T) {
	py := testutil.NeedPython(t, "boto3")
	ts := newSignedTestServer(t)
	script := `import boto3, sys
from botocore.config import Config
c = boto3.client("s3", endpoint_url=sys.argv[1], aws_access_key_id=sys.argv[2], aws_secret_access_key=sys.argv[3],
    region_name="us-east-1", config=Config(signature_version="s3", s3={"addressing_style": "path"}, retries={"max_attempts": 1}))
c.put_object(Bucket="pbk", Key="v2/one two+three.txt", Body=b"x")
print(",".join(o["Key"] for o in c.list_objects(Bucket="pbk", Prefix="v2/")["Contents"]))
print(c.list_objects_v2(Bucket="pbk")["KeyCount"])
print(c.head_bucket(Bucket="pbk")["ResponseMetadata"]["HTTPStatusCode"])
print(c.get_bucket_acl(Bucket="pbk")["Owner"]["ID"])
print(c.get_object(Bucket="pbk", Key="v2/one two+three.txt")["Body"].read().decode())`
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, py, "-c", script, ts.url, postAK, postSecret).CombinedOutput()
	if err != nil {
		t.Fatalf("boto3 SigV2: %v\n%s", err, out)
	}
	if got, want := string(out), "v2/one two+three.txt\n1\n200\nalice\nx\n"; got != want {
		t.Fatalf("boto3 SigV2 printed %q, want %q", got, want)
	}
}
