package sigv4

import (
	"bytes"
	"io"
	"net/url"
	"strings"
	"testing"
	"time"
)

// Fuzz targets for every parser that sees attacker-controlled bytes before
// authentication has succeeded. `go test` runs the seeds; run one with
// go test -fuzz=FuzzChunkedDecoder ./frontend/s3/sigv4

func FuzzCanonicalQuery(f *testing.F) {
	for _, s := range []string{"", "acl", "a=1&b=2", "prefix=a+b&delimiter=%2F", "%zz=1&&=&x", "X-Amz-Signature=1&k=%E6%97%A5", "a=%"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, q string) {
		c := CanonicalQuery(q, "X-Amz-Signature")
		for i := 0; i < len(c); i++ {
			ch := c[i]
			if !isUnreserved(ch) && ch != '%' && ch != '=' && ch != '&' {
				t.Fatalf("canonical query %q has raw byte %q", c, ch)
			}
		}
		// The canonical form is a fixed point.
		if c2 := CanonicalQuery(c, "X-Amz-Signature"); c2 != c {
			t.Fatalf("not idempotent: %q -> %q -> %q", q, c, c2)
		}
	})
}

func FuzzCanonicalURI(f *testing.F) {
	for _, s := range []string{"/", "/bucket/key", "/b/with space", "/b/%2F", "/b/ä", "/b/a//b/../c", "/b/%zz"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		u, err := url.Parse("http://h" + p)
		if err != nil || u.Host != "h" {
			return
		}
		for _, c := range canonicalURIs(u) {
			if c == "" {
				t.Fatalf("empty canonical URI for %q", p)
			}
		}
		c := CanonicalURI(u)
		for i := 0; i < len(c); i++ {
			ch := c[i]
			if !isUnreserved(ch) && ch != '%' && ch != '/' {
				t.Fatalf("canonical URI %q has raw byte %q", c, ch)
			}
		}
		// Decoding the canonical URI gives the path back.
		if d, err := url.PathUnescape(c); err != nil || (u.Path != "" && d != u.Path) {
			t.Fatalf("canonical %q does not decode to %q (%v)", c, u.Path, err)
		}
	})
}

func FuzzParseAuthorization(f *testing.F) {
	f.Add("AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/aws4_request,SignedHeaders=host;range;x-amz-content-sha256;x-amz-date,Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41")
	f.Add("AWS4-HMAC-SHA256 Credential=a/b/c/d/e, SignedHeaders=, Signature=")
	f.Add("AWS AKID:sig")
	f.Add("AWS4-HMAC-SHA256 ,,,,=")
	f.Fuzz(func(t *testing.T, h string) {
		a, err := ParseAuthorization(h)
		if err != nil {
			if err.Code == "" || err.Status == 0 {
				t.Fatalf("error without code/status: %+v", err)
			}
			return
		}
		if !isHexSig(a.Signature) || len(a.SignedHeaders) == 0 || a.AccessKey == "" || a.Service != "s3" {
			t.Fatalf("accepted incomplete header %q: %+v", h, a)
		}
	})
}

func FuzzParsePresigned(f *testing.F) {
	f.Add("X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=AKIAIOSFODNN7EXAMPLE%2F20130524%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Date=20130524T000000Z&X-Amz-Expires=86400&X-Amz-SignedHeaders=host&X-Amz-Signature=aeeed9bbccd4d02ee5c0109b86d86835f995330da4c265957d157751f604d404")
	f.Add("X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Expires=-1")
	f.Add("X-Amz-Expires=99999999999999999999999")
	f.Fuzz(func(t *testing.T, raw string) {
		q, err := url.ParseQuery(raw)
		if err != nil {
			return
		}
		a, e := ParsePresigned(q)
		if e != nil {
			if e.Code == "" || e.Status == 0 {
				t.Fatalf("error without code/status: %+v", e)
			}
			return
		}
		if a.Expires <= 0 || a.Expires > MaxPresignExpiry || !isHexSig(a.Signature) {
			t.Fatalf("accepted bad presign %q: %+v", raw, a)
		}
	})
}

// FuzzChunkedDecoder feeds arbitrary bodies to the aws-chunked decoder in
// all three modes: it must terminate, never panic, never return more bytes
// than it was given, and report failures as *Error.
func FuzzChunkedDecoder(f *testing.F) {
	f.Add([]byte("5\r\nhello\r\n0\r\nx-amz-checksum-crc32c:mnG7TA==\r\n\r\n"), uint8(0))
	f.Add([]byte("5;chunk-signature="+strings.Repeat("0", 64)+"\r\nhello\r\n0;chunk-signature="+strings.Repeat("0", 64)+"\r\n\r\n"), uint8(1))
	f.Add([]byte("ffffffffffffffff\r\n"), uint8(2))
	f.Add([]byte("0\r\n\n\r\nx-amz-checksum-crc32c:AAAAAA==\n\r\n\r\n"), uint8(0))
	f.Add([]byte(strings.Repeat("\r\n", 100)), uint8(0))
	f.Fuzz(func(t *testing.T, body []byte, mode uint8) {
		c := &chunkedReader{
			src:      newLineReader(bytes.NewReader(body)),
			body:     io.NopCloser(nil),
			signed:   mode%3 != 0,
			trailer:  mode%3 != 1,
			key:      []byte("k"),
			amzDate:  "20130524T000000Z",
			scope:    "20130524/us-east-1/s3/aws4_request",
			prevSig:  strings.Repeat("0", 64),
			want:     -1,
			expected: []string{"x-amz-checksum-crc32c"},
		}
		if mode%3 == 1 {
			c.expected = nil
		}
		var out int
		buf := make([]byte, 7)
		deadline := time.Now().Add(5 * time.Second)
		for i := 0; i < 1_000_000 && time.Now().Before(deadline); i++ {
			n, err := c.Read(buf)
			out += n
			if err == io.EOF {
				break
			}
			if err != nil {
				if _, ok := err.(*Error); !ok {
					t.Fatalf("non-S3 error %T %v", err, err)
				}
				break
			}
		}
		if out > len(body) {
			t.Fatalf("decoded %d bytes from %d", out, len(body))
		}
	})
}

// FuzzChunkedRoundTrip: whatever the data and chunk size, a correctly
// signed stream decodes to the data.
func FuzzChunkedRoundTrip(f *testing.F) {
	f.Add([]byte("hello world"), uint16(3))
	f.Add([]byte{}, uint16(1))
	f.Add(bytes.Repeat([]byte{0, '\r', '\n'}, 100), uint16(64))
	v := NewVerifier(testCreds, testRegion)
	v.Now = fixedClock(time.Now())
	f.Fuzz(func(t *testing.T, data []byte, chunk uint16) {
		if chunk == 0 {
			chunk = 1
		}
		r := streamReq(t, v, StreamingPayloadTrail, len(data), "x-amz-checksum-crc32c", func(b *streamBuilder) {
			for i := 0; i < len(data); i += int(chunk) {
				b.chunk(data[i:min(len(data), i+int(chunk))])
			}
			b.chunk(nil)
			b.trailer("x-amz-checksum-crc32c:" + crc32c(data))
		})
		if _, err := v.Verify(r); err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(r.Body)
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("round trip: %v", err)
		}
	})
}
