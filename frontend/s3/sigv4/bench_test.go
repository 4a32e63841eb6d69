package sigv4

import (
	"bytes"
	"context"
	"io"
	"net/http/httptest"
	"testing"
	"time"
)

// Benchmarks of the cost of verification (see docs/bench/auth.md):
// go test -run XXX -bench . -benchtime 2s ./frontend/s3/sigv4

func BenchmarkVerifyHeader(b *testing.B) {
	v := NewVerifier(testCreds, testRegion)
	r := httptest.NewRequest("GET", "http://127.0.0.1:9000/bucket/some/key.txt?versionId=1", nil)
	r.Header.Set("X-Amz-Content-Sha256", emptySHA256)
	if err := s3Signer().SignHTTP(context.Background(), sdkCreds(), r, emptySHA256, "s3", testRegion, time.Now()); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.Verify(r); err != nil {
			b.Fatal(err)
		}
	}
}

// benchPayload measures decoding+verifying a 4 MiB body in each mode.
func benchPayload(b *testing.B, mode string) {
	v := NewVerifier(testCreds, testRegion)
	v.Now = fixedClock(time.Now())
	data := bytes.Repeat([]byte("0123456789abcdef"), 4<<20/16)
	tr := ""
	if mode != StreamingPayload {
		tr = "x-amz-checksum-crc32c"
	}
	tmpl := streamReq(b, v, mode, len(data), tr, func(sb *streamBuilder) {
		for i := 0; i < len(data); i += 64 << 10 {
			sb.chunk(data[i:min(len(data), i+64<<10)])
		}
		sb.chunk(nil)
		if tr == "" {
			sb.buf.WriteString("\r\n")
		} else {
			sb.trailer("x-amz-checksum-crc32c:" + crc32c(data))
		}
	})
	wire, _ := io.ReadAll(tmpl.Body)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		r := tmpl.Clone(context.Background())
		r.Body = io.NopCloser(bytes.NewReader(wire))
		r.ContentLength = int64(len(wire))
		r.Header.Set("Content-Encoding", "aws-chunked")
		if _, err := v.Verify(r); err != nil {
			b.Fatal(err)
		}
		if n, err := io.Copy(io.Discard, r.Body); err != nil || n != int64(len(data)) {
			b.Fatal(n, err)
		}
	}
}

func BenchmarkChunkedSigned(b *testing.B)          { benchPayload(b, StreamingPayload) }
func BenchmarkChunkedSignedTrailer(b *testing.B)   { benchPayload(b, StreamingPayloadTrail) }
func BenchmarkChunkedUnsignedTrailer(b *testing.B) { benchPayload(b, StreamingUnsignedTrail) }

func BenchmarkSignedPayloadSHA256(b *testing.B) {
	data := bytes.Repeat([]byte("0123456789abcdef"), 4<<20/16)
	sum := sha(data)
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		r := newHashReader(io.NopCloser(bytes.NewReader(data)), sum, int64(len(data)))
		if _, err := io.Copy(io.Discard, r); err != nil {
			b.Fatal(err)
		}
	}
}
