package s3

import (
	"bytes"
	"net/http"
	"testing"
)

const corsDoc = `<CORSConfiguration xmlns="http://s3.amazonaws.com/doc/2006-03-01/">
 <CORSRule><ID>site</ID><AllowedOrigin>https://*.example.com</AllowedOrigin><AllowedMethod>GET</AllowedMethod><AllowedMethod>PUT</AllowedMethod>
  <AllowedHeader>x-amz-*</AllowedHeader><AllowedHeader>Content-Type</AllowedHeader><ExposeHeader>ETag</ExposeHeader><MaxAgeSeconds>600</MaxAgeSeconds></CORSRule>
 <CORSRule><AllowedOrigin>*</AllowedOrigin><AllowedMethod>HEAD</AllowedMethod></CORSRule>
</CORSConfiguration>`

// TestCORSConfig: Put/Get/DeleteBucketCors round trip, and every refused
// document (S3's code) leaves the stored configuration as it was.
func TestCORSConfig(t *testing.T) {
	ts := newTestServer(t)
	wantStatus(t, ts.do(t, "PUT", "/cbk", nil, nil), 200)
	wantErr(t, ts.do(t, "GET", "/cbk?cors", nil, nil), 404, "NoSuchCORSConfiguration")
	wantStatus(t, ts.do(t, "PUT", "/cbk?cors", []byte(corsDoc), nil), 200)
	g := ts.do(t, "GET", "/cbk?cors", nil, nil)
	wantStatus(t, g, 200)
	for _, want := range []string{"<AllowedOrigin>https://*.example.com</AllowedOrigin>", "<MaxAgeSeconds>600</MaxAgeSeconds>", "<ID>site</ID>", "<AllowedMethod>HEAD</AllowedMethod>"} {
		if !bytes.Contains(g.body, []byte(want)) {
			t.Fatalf("GetBucketCors lacks %s: %s", want, g.body)
		}
	}
	bad := []struct {
		doc, code string
		status    int
	}{
		{"", "MalformedXML", 400},
		{"<CORSConfiguration>", "MalformedXML", 400},
		{"<CORSConfiguration/>", "MalformedXML", 400},
		{"<CORSConfiguration><CORSRule><AllowedMethod>GET</AllowedMethod></CORSRule></CORSConfiguration>", "MalformedXML", 400},
		{"<CORSConfiguration><CORSRule><AllowedOrigin>*</AllowedOrigin></CORSRule></CORSConfiguration>", "MalformedXML", 400},
		{"<CORSConfiguration><CORSRule><AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET</AllowedMethod><Bogus/></CORSRule></CORSConfiguration>", "MalformedXML", 400},
		{"<CORSConfiguration><CORSRule><AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET</AllowedMethod><MaxAgeSeconds>soon</MaxAgeSeconds></CORSRule></CORSConfiguration>", "MalformedXML", 400},
		{"<CORSConfiguration><CORSRule><AllowedOrigin>*</AllowedOrigin><AllowedMethod>PATCH</AllowedMethod></CORSRule></CORSConfiguration>", "InvalidRequest", 400},
		{"<CORSConfiguration><CORSRule><AllowedOrigin>*.*.com</AllowedOrigin><AllowedMethod>GET</AllowedMethod></CORSRule></CORSConfiguration>", "InvalidRequest", 400},
		{"<CORSConfiguration><CORSRule><AllowedOrigin>*</AllowedOrigin><AllowedMethod>GET</AllowedMethod><AllowedHeader>*a*</AllowedHeader></CORSRule></CORSConfiguration>", "InvalidRequest", 400},
	}
	for _, b := range bad {
		wantErr(t, ts.do(t, "PUT", "/cbk?cors", []byte(b.doc), nil), b.status, b.code)
		if g2 := ts.do(t, "GET", "/cbk?cors", nil, nil); !bytes.Equal(g2.body, g.body) {
			t.Fatalf("refused document %q changed the configuration: %s", b.doc, g2.body)
		}
	}
	wantErr(t, ts.do(t, "PUT", "/cbk?cors", []byte(corsDoc), map[string]string{"Content-MD5": "1B2M2Y8AsgTpgAmY7PhCfg=="}), 400, "BadDigest")
	wantErr(t, ts.do(t, "PUT", "/nob?cors", []byte(corsDoc), nil), 404, "NoSuchBucket")
	wantStatus(t, ts.do(t, "DELETE", "/cbk?cors", nil, nil), 204)
	wantErr(t, ts.do(t, "GET", "/cbk?cors", nil, nil), 404, "NoSuchCORSConfiguration")
}

// TestCORSPreflight: OPTIONS answers from the rules (origin wildcard,
// method, requested headers), 403 CORSResponse when nothing matches or
// no rules are set, 400 without Origin; actual requests with a matching
// Origin get Access-Control-* headers, also on errors.
func TestCORSPreflight(t *testing.T) {
	ts := newTestServer(t)
	wantStatus(t, ts.do(t, "PUT", "/pfb", nil, nil), 200)
	wantStatus(t, ts.do(t, "PUT", "/pfb/obj", []byte("hello"), nil), 200)
	pre := func(origin, method, headers string) resp {
		h := map[string]string{"Origin": origin, "Access-Control-Request-Method": method}
		if headers != "" {
			h["Access-Control-Request-Headers"] = headers
		}
		return ts.do(t, "OPTIONS", "/pfb/obj", nil, h)
	}
	wantErr(t, pre("https://a.example.com", "GET", ""), 403, "CORSResponse") // no configuration yet
	wantStatus(t, ts.do(t, "PUT", "/pfb?cors", []byte(corsDoc), nil), 200)

	r := pre("https://a.example.com", "PUT", "Content-Type, X-Amz-Meta-Owner")
	wantStatus(t, r, 200)
	for k, v := range map[string]string{
		"Access-Control-Allow-Origin":      "https://a.example.com",
		"Access-Control-Allow-Methods":     "GET, PUT",
		"Access-Control-Allow-Headers":     "content-type, x-amz-meta-owner",
		"Access-Control-Expose-Headers":    "ETag",
		"Access-Control-Max-Age":           "600",
		"Access-Control-Allow-Credentials": "true",
	} {
		if got := r.header.Get(k); got != v {
			t.Errorf("preflight %s = %q, want %q", k, got, v)
		}
	}
	// The wildcard rule allows HEAD from anywhere and answers "*".
	r = pre("http://other.test", "HEAD", "")
	wantStatus(t, r, 200)
	if r.header.Get("Access-Control-Allow-Origin") != "*" || r.header.Get("Access-Control-Allow-Credentials") != "" {
		t.Errorf("wildcard rule: %v", r.header)
	}
	for _, c := range [][3]string{
		{"http://other.test", "GET", ""},                    // origin not allowed for GET
		{"https://a.example.com", "DELETE", ""},             // method not allowed
		{"https://a.example.com", "PUT", "Authorization"},   // header not allowed
		{"https://example.com", "GET", ""},                  // "https://*.example.com" needs a subdomain
		{"https://a.example.com.evil", "GET", "x-amz-date"}, // suffix must match
	} {
		r := pre(c[0], c[1], c[2])
		wantErr(t, r, 403, "CORSResponse")
		if !bytes.Contains(r.body, []byte("This CORS request is not allowed")) || r.header.Get("Access-Control-Allow-Origin") != "" {
			t.Errorf("%v: %s %v", c, r.body, r.header)
		}
	}
	wantErr(t, ts.do(t, "OPTIONS", "/pfb/obj", nil, map[string]string{"Access-Control-Request-Method": "GET"}), 400, "BadRequest")
	wantErr(t, ts.do(t, "OPTIONS", "/pfb/obj", nil, map[string]string{"Origin": "https://a.example.com"}), 400, "BadRequest")
	wantErr(t, ts.do(t, "OPTIONS", "/nob/obj", nil, map[string]string{"Origin": "https://a.example.com", "Access-Control-Request-Method": "GET"}), 404, "NoSuchBucket")

	// Actual requests.
	g := ts.do(t, "GET", "/pfb/obj", nil, map[string]string{"Origin": "https://b.example.com"})
	wantStatus(t, g, 200)
	if g.header.Get("Access-Control-Allow-Origin") != "https://b.example.com" || g.header.Get("Access-Control-Expose-Headers") != "ETag" || string(g.body) != "hello" {
		t.Errorf("GET with Origin: %v %q", g.header, g.body)
	}
	if e := ts.do(t, "GET", "/pfb/missing", nil, map[string]string{"Origin": "https://b.example.com"}); e.status != 404 || e.header.Get("Access-Control-Allow-Origin") == "" {
		t.Errorf("error answer without CORS headers: %d %v", e.status, e.header)
	}
	if g := ts.do(t, "GET", "/pfb/obj", nil, map[string]string{"Origin": "http://other.test"}); g.status != 200 || g.header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("GET from a disallowed origin got CORS headers: %v", g.header)
	}
	if g := ts.do(t, "GET", "/pfb/obj", nil, nil); g.header.Get("Access-Control-Allow-Origin") != "" {
		t.Errorf("GET without Origin got CORS headers: %v", g.header)
	}
	// Deleting the rules ends it.
	wantStatus(t, ts.do(t, "DELETE", "/pfb?cors", nil, nil), 204)
	wantErr(t, pre("https://a.example.com", "GET", ""), 403, "CORSResponse")
	_ = http.MethodOptions
}
