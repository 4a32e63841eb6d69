package sigv4

import (
	"bytes"
	"context"
	"crypto/rand"
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/minio/minio-go/v7"
	mcreds "github.com/minio/minio-go/v7/pkg/credentials"
)

func randBytes(t *testing.T, n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

// onlyReader hides Seek so the SDK cannot pre-compute the payload hash
// and must stream.
type onlyReader struct{ r io.Reader }

func (o onlyReader) Read(p []byte) (int, error) { return o.r.Read(p) }

// TestAWSSDKPutObjectChecksum drives the real S3 client: over TLS it sends
// aws-chunked bodies with a trailing x-amz-checksum-crc32c
// (STREAMING-UNSIGNED-PAYLOAD-TRAILER).
func TestAWSSDKPutObjectChecksum(t *testing.T) {
	v := NewVerifier(testCreds, testRegion)
	rec := newRecorder(v)
	srv := httptest.NewTLSServer(rec)
	defer srv.Close()
	client := s3.New(s3.Options{
		Region:       testRegion,
		Credentials:  credentials.NewStaticCredentialsProvider(testAK, testSecret, ""),
		BaseEndpoint: aws.String(srv.URL),
		UsePathStyle: true,
		HTTPClient:   srv.Client(),
	})
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		size int
		alg  types.ChecksumAlgorithm
	}{
		{"crc32c-small", 1000, types.ChecksumAlgorithmCrc32c},
		{"crc32c-large", 300_000, types.ChecksumAlgorithmCrc32c},
		{"crc32", 70_000, types.ChecksumAlgorithmCrc32},
		{"sha256", 5000, types.ChecksumAlgorithmSha256},
		{"crc64nvme", 5000, types.ChecksumAlgorithmCrc64nvme},
		{"empty", 0, types.ChecksumAlgorithmCrc32c},
	} {
		data := randBytes(t, tc.size)
		n := int64(len(data))
		_, err := client.PutObject(ctx, &s3.PutObjectInput{
			Bucket: aws.String("bucket"), Key: aws.String(tc.name),
			Body: onlyReader{bytes.NewReader(data)}, ContentLength: &n,
			ChecksumAlgorithm: tc.alg,
		})
		if err != nil {
			_, _, errs := rec.last()
			t.Fatalf("%s: PutObject: %v (server errors %v)", tc.name, err, errs)
		}
		if got := rec.body("/bucket/" + tc.name); !bytes.Equal(got, data) {
			t.Fatalf("%s: stored %d bytes, want %d", tc.name, len(got), len(data))
		}
		last, tr, _ := rec.last()
		t.Logf("%s: payload mode %s, trailer %v", tc.name, last, tr)
		if tc.size > 0 && (!strings.HasPrefix(last, "STREAMING-") || len(tr) == 0) {
			t.Errorf("%s: expected a streaming upload with a trailer, got %s %v", tc.name, last, tr)
		}
	}
	// Seekable body: the SDK may choose a different payload mode; it must
	// work too.
	data := randBytes(t, 10_000)
	if _, err := client.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bucket"), Key: aws.String("seekable"), Body: bytes.NewReader(data)}); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(rec.body("/bucket/seekable"), data) {
		t.Fatal("seekable body differs")
	}
	out, err := client.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("bucket"), Key: aws.String("seekable")})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(out.Body)
	out.Body.Close()
	if !bytes.Equal(got, data) {
		t.Fatal("GetObject differs")
	}
	// A wrong secret is refused with the S3 code.
	bad := s3.New(s3.Options{
		Region: testRegion, Credentials: credentials.NewStaticCredentialsProvider(testAK, "wrongsecret", ""),
		BaseEndpoint: aws.String(srv.URL), UsePathStyle: true, HTTPClient: srv.Client(),
	})
	_, err = bad.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bucket"), Key: aws.String("x"), Body: strings.NewReader("x")})
	if err == nil || !strings.Contains(err.Error(), "SignatureDoesNotMatch") {
		t.Fatalf("wrong secret: %v", err)
	}
}

// TestMinioStreaming drives minio-go, which over plain HTTP signs every
// chunk (STREAMING-AWS4-HMAC-SHA256-PAYLOAD) and, with TrailingHeaders and a
// checksum, adds a signed trailer (...-PAYLOAD-TRAILER).
func TestMinioStreaming(t *testing.T) {
	v := NewVerifier(testCreds, testRegion)
	rec := newRecorder(v)
	srv := httptest.NewServer(rec)
	defer srv.Close()
	host := strings.TrimPrefix(srv.URL, "http://")
	for _, trailing := range []bool{false, true} {
		mc, err := minio.New(host, &minio.Options{
			Creds: mcreds.NewStaticV4(testAK, testSecret, ""), Region: testRegion,
			BucketLookup: minio.BucketLookupPath, TrailingHeaders: trailing,
		})
		if err != nil {
			t.Fatal(err)
		}
		data := randBytes(t, 200_000)
		opts := minio.PutObjectOptions{DisableMultipart: true}
		if trailing {
			opts.AutoChecksum = minio.ChecksumCRC32C
			opts.Checksum = minio.ChecksumCRC32C
		}
		key := "minio-" + map[bool]string{false: "plain", true: "trailer"}[trailing]
		if _, err := mc.PutObject(context.Background(), "bucket", key, bytes.NewReader(data), int64(len(data)), opts); err != nil {
			_, _, errs := rec.last()
			t.Fatalf("%s: %v (server errors %v)", key, err, errs)
		}
		if !bytes.Equal(rec.body("/bucket/"+key), data) {
			t.Fatalf("%s: body differs", key)
		}
		last, tr, _ := rec.last()
		t.Logf("%s: payload mode %s trailer %v", key, last, tr)
		want := StreamingPayload
		if trailing {
			want = StreamingPayloadTrail
		}
		if last != want {
			t.Errorf("%s: payload mode %s, want %s", key, last, want)
		}
	}
}
