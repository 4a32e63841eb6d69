package sigv4

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// streamBuilder writes aws-chunked bodies the way SDKs do, for the
// negative cases no SDK produces.
type streamBuilder struct {
	key     []byte
	amzDate string
	scope   string
	prev    string
	signed  bool
	buf     bytes.Buffer
}

func (b *streamBuilder) chunk(data []byte) {
	if b.signed {
		sts := chunkAlgorithm + "\n" + b.amzDate + "\n" + b.scope + "\n" + b.prev + "\n" + emptySHA256 + "\n" + hashHex(data)
		b.prev = hexHMAC(b.key, sts)
		fmt.Fprintf(&b.buf, "%x;chunk-signature=%s\r\n", len(data), b.prev)
	} else {
		fmt.Fprintf(&b.buf, "%x\r\n", len(data))
	}
	b.buf.Write(data)
	if len(data) > 0 {
		b.buf.WriteString("\r\n")
	}
}

func (b *streamBuilder) trailer(lines ...string) {
	canon := ""
	for _, l := range lines {
		canon += l + "\n"
		b.buf.WriteString(l + "\r\n")
	}
	if b.signed {
		sts := trailerAlg + "\n" + b.amzDate + "\n" + b.scope + "\n" + b.prev + "\n" + hashHex([]byte(canon))
		b.buf.WriteString("x-amz-trailer-signature:" + hexHMAC(b.key, sts) + "\r\n")
	}
	b.buf.WriteString("\r\n")
}

// streamReq makes a signed streaming request whose body build() writes.
func streamReq(t testing.TB, v *Verifier, mode string, decoded int, trailerHdr string, build func(b *streamBuilder)) *http.Request {
	t.Helper()
	now := v.Now()
	amzDate := now.UTC().Format(amzDateFormat)
	scope := amzDate[:8] + "/" + testRegion + "/s3/aws4_request"
	r := httptest.NewRequest("PUT", "http://127.0.0.1/bucket/obj", nil)
	r.Header.Set("X-Amz-Date", amzDate)
	r.Header.Set("X-Amz-Content-Sha256", mode)
	r.Header.Set("Content-Encoding", "aws-chunked")
	if decoded >= 0 {
		r.Header.Set("X-Amz-Decoded-Content-Length", fmt.Sprint(decoded))
	}
	if trailerHdr != "" {
		r.Header.Set("X-Amz-Trailer", trailerHdr)
	}
	names := []string{"content-encoding", "host", "x-amz-content-sha256", "x-amz-date"}
	if decoded >= 0 {
		names = append(names, "x-amz-decoded-content-length")
	}
	if trailerHdr != "" {
		names = append(names, "x-amz-trailer")
	}
	vals, _ := signedHeaderValues(r, names)
	key := v.signingKey(testSecret, amzDate[:8], testRegion, "s3")
	cr := canonicalRequest("PUT", "/bucket/obj", "", names, vals, mode)
	seed := hexHMAC(key, stringToSign(amzDate, scope, cr))
	r.Header.Set("Authorization", "AWS4-HMAC-SHA256 Credential="+testAK+"/"+scope+", SignedHeaders="+strings.Join(names, ";")+", Signature="+seed)
	b := &streamBuilder{key: key, amzDate: amzDate, scope: scope, prev: seed, signed: mode != StreamingUnsignedTrail}
	build(b)
	r.Body = io.NopCloser(bytes.NewReader(b.buf.Bytes()))
	r.ContentLength = int64(b.buf.Len())
	return r
}

func crc32c(b []byte) string {
	h := crc32.New(crc32.MakeTable(crc32.Castagnoli))
	h.Write(b)
	return base64.StdEncoding.EncodeToString(h.Sum(nil))
}

func TestChunkedCases(t *testing.T) {
	v := NewVerifier(testCreds, testRegion)
	v.Now = fixedClock(time.Now())
	data := bytes.Repeat([]byte("0123456789"), 1000)
	good := crc32c(data)
	cases := []struct {
		name    string
		mode    string
		decoded int
		trailer string
		build   func(b *streamBuilder)
		code    string // "" = success
	}{
		{"signed ok", StreamingPayload, len(data), "", func(b *streamBuilder) {
			b.chunk(data[:8192])
			b.chunk(data[8192:])
			b.chunk(nil)
			b.buf.WriteString("\r\n")
		}, ""},
		{"signed trailer ok", StreamingPayloadTrail, len(data), "x-amz-checksum-crc32c", func(b *streamBuilder) {
			b.chunk(data)
			b.chunk(nil)
			b.trailer("x-amz-checksum-crc32c:" + good)
		}, ""},
		{"unsigned trailer ok", StreamingUnsignedTrail, len(data), "x-amz-checksum-crc32c", func(b *streamBuilder) {
			b.chunk(data)
			b.chunk(nil)
			b.trailer("x-amz-checksum-crc32c:" + good)
		}, ""},
		{"unsigned trailer bad checksum", StreamingUnsignedTrail, len(data), "x-amz-checksum-crc32c", func(b *streamBuilder) {
			b.chunk(data)
			b.chunk(nil)
			b.trailer("x-amz-checksum-crc32c:" + crc32c([]byte("other")))
		}, "BadDigest"},
		{"signed trailer bad checksum", StreamingPayloadTrail, len(data), "x-amz-checksum-crc32c", func(b *streamBuilder) {
			b.chunk(data)
			b.chunk(nil)
			b.trailer("x-amz-checksum-crc32c:" + crc32c([]byte("other")))
		}, "BadDigest"},
		{"signed trailer forged signature", StreamingPayloadTrail, len(data), "x-amz-checksum-crc32c", func(b *streamBuilder) {
			b.chunk(data)
			b.chunk(nil)
			b.buf.WriteString("x-amz-checksum-crc32c:" + good + "\r\nx-amz-trailer-signature:" + strings.Repeat("ab", 32) + "\r\n\r\n")
		}, "SignatureDoesNotMatch"},
		{"trailer missing", StreamingUnsignedTrail, len(data), "x-amz-checksum-crc32c", func(b *streamBuilder) {
			b.chunk(data)
			b.chunk(nil)
			b.buf.WriteString("\r\n")
		}, "IncompleteBody"},
		{"undeclared trailer", StreamingUnsignedTrail, len(data), "x-amz-checksum-crc32c", func(b *streamBuilder) {
			b.chunk(data)
			b.chunk(nil)
			b.trailer("x-amz-checksum-sha1:AAAA", "x-amz-checksum-crc32c:"+good)
		}, "InvalidRequest"},
		{"decoded length mismatch", StreamingPayload, len(data) + 1, "", func(b *streamBuilder) {
			b.chunk(data)
			b.chunk(nil)
			b.buf.WriteString("\r\n")
		}, "IncompleteBody"},
		{"missing final chunk", StreamingPayload, len(data), "", func(b *streamBuilder) {
			b.chunk(data)
		}, "IncompleteBody"},
		{"chunk longer than declared", StreamingPayload, len(data), "", func(b *streamBuilder) {
			b.chunk(data[:100])
			b.buf.Truncate(b.buf.Len() - 2)
			b.buf.WriteString("XX\r\n")
		}, "InvalidRequest"},
		{"bad size", StreamingPayload, len(data), "", func(b *streamBuilder) {
			b.buf.WriteString("zz;chunk-signature=" + strings.Repeat("0", 64) + "\r\n")
		}, "InvalidRequest"},
		{"no chunk signature", StreamingPayload, len(data), "", func(b *streamBuilder) {
			b.buf.WriteString("10\r\n0123456789abcdef\r\n")
		}, "InvalidRequest"},
		{"reordered chunks", StreamingPayload, 20, "", func(b *streamBuilder) {
			first := *b
			first.buf = bytes.Buffer{}
			first.chunk([]byte("0123456789"))
			second := first
			second.buf = bytes.Buffer{}
			second.chunk([]byte("abcdefghij"))
			b.buf.Write(second.buf.Bytes())
			b.buf.Write(first.buf.Bytes())
		}, "SignatureDoesNotMatch"},
		{"unsupported trailer", StreamingUnsignedTrail, len(data), "x-amz-checksum-md5", func(b *streamBuilder) {}, "InvalidArgument"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := streamReq(t, v, tc.mode, tc.decoded, tc.trailer, tc.build)
			_, err := v.Verify(r)
			var got []byte
			if err == nil {
				got, err = io.ReadAll(r.Body)
			}
			if tc.code == "" {
				if err != nil {
					t.Fatal(err)
				}
				if !bytes.Equal(got, data) {
					t.Fatalf("decoded %d bytes", len(got))
				}
				if tc.trailer != "" && r.Trailer.Get(tc.trailer) != good {
					t.Fatalf("trailer %v", r.Trailer)
				}
				return
			}
			wantCode(t, err, tc.code)
		})
	}
}

// TestCanonicalQuery checks the SigV4 query rules directly.
func TestCanonicalQuery(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", ""},
		{"acl", "acl="},
		{"b=2&a=1", "a=1&b=2"},
		{"a=2&a=1", "a=1&a=2"},
		{"prefix=a+b&x=%7e", "prefix=a%20b&x=~"},
		{"k=%2F%2f/", "k=%2F%2F%2F"},
		{"uploads&prefix=", "prefix=&uploads="},
		{"X-Amz-Signature=abc&z=1", "z=1"},
	} {
		if got := CanonicalQuery(tc.in, "X-Amz-Signature"); got != tc.want {
			t.Errorf("%q: got %q want %q", tc.in, got, tc.want)
		}
	}
}

// readN reads until n bytes arrived (or an error), like a handler that
// stops after Content-Length bytes, and returns the last error seen.
func readN(r io.Reader, n int) error {
	buf := make([]byte, 1000)
	for got := 0; got < n; {
		k, err := r.Read(buf[:min(len(buf), n-got)])
		got += k
		if err != nil {
			return err
		}
	}
	return nil
}

// TestVerdictWithLastByte: a caller that reads exactly the announced
// length still learns about a bad checksum or hash with the last bytes.
func TestVerdictWithLastByte(t *testing.T) {
	v := NewVerifier(testCreds, testRegion)
	v.Now = fixedClock(time.Now())
	data := bytes.Repeat([]byte("x"), 5000)
	r := streamReq(t, v, StreamingUnsignedTrail, len(data), "x-amz-checksum-crc32c", func(b *streamBuilder) {
		b.chunk(data)
		b.chunk(nil)
		b.trailer("x-amz-checksum-crc32c:" + crc32c([]byte("other")))
	})
	if _, err := v.Verify(r); err != nil {
		t.Fatal(err)
	}
	err := readN(r.Body, len(data))
	wantCode(t, err, "BadDigest")

	r = httptest.NewRequest("PUT", "http://127.0.0.1/b/k", bytes.NewReader(data))
	r.Header.Set("X-Amz-Content-Sha256", strings.Repeat("0", 64))
	r.Body = newHashReader(r.Body, strings.Repeat("0", 64), int64(len(data)))
	err = readN(r.Body, len(data))
	wantCode(t, err, "XAmzContentSHA256Mismatch")
}
