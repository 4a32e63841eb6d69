package s3peers

import (
	"context"
	"encoding/base64"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
)

// TestTrailerChecksum sends aws-chunked bodies with an unsigned trailer
// checksum (STREAMING-UNSIGNED-PAYLOAD-TRAILER, what current SDKs send):
// a correct CRC32 is accepted and echoed, a wrong one is BadDigest and the
// old object stays. The store stops reading at the decoded length, so this
// also checks the front end reads on to the trailer.
func TestTrailerChecksum(t *testing.T) {
	srv := startServer(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	c := sdkClient(srv.endpoint, rootAK, rootSK)
	if _, err := c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String("trailer")}); err != nil {
		t.Fatal(err)
	}
	put := func(data, trailerCRC string) (*http.Response, string) {
		body := fmt.Sprintf("%x\r\n%s\r\n0\r\nx-amz-checksum-crc32:%s\r\n\r\n", len(data), data, trailerCRC)
		req, _ := http.NewRequestWithContext(ctx, "PUT", srv.endpoint+"/trailer/obj", strings.NewReader(body))
		req.ContentLength = int64(len(body))
		req.Header.Set("Content-Encoding", "aws-chunked")
		req.Header.Set("X-Amz-Decoded-Content-Length", strconv.Itoa(len(data)))
		req.Header.Set("X-Amz-Trailer", "x-amz-checksum-crc32")
		req.Header.Set("X-Amz-Content-Sha256", "STREAMING-UNSIGNED-PAYLOAD-TRAILER")
		creds := aws.Credentials{AccessKeyID: rootAK, SecretAccessKey: rootSK}
		if err := v4.NewSigner().SignHTTP(ctx, creds, req, "STREAMING-UNSIGNED-PAYLOAD-TRAILER", "s3", "us-east-1", time.Now()); err != nil {
			t.Fatal(err)
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		return res, string(b)
	}
	crc := func(s string) string {
		v := crc32.ChecksumIEEE([]byte(s))
		return base64.StdEncoding.EncodeToString([]byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)})
	}
	res, body := put("first version", crc("first version"))
	if res.StatusCode != 200 || res.Header.Get("X-Amz-Checksum-Crc32") != crc("first version") {
		t.Fatalf("good trailer: %d %v %s", res.StatusCode, res.Header, body)
	}
	res, body = put("forged version", crc("something else"))
	if res.StatusCode != 400 || !strings.Contains(body, "<Code>BadDigest</Code>") {
		t.Fatalf("bad trailer: %d %s", res.StatusCode, body)
	}
	o, err := c.GetObject(ctx, &awss3.GetObjectInput{Bucket: aws.String("trailer"), Key: aws.String("obj")})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(o.Body)
	o.Body.Close()
	if string(got) != "first version" {
		t.Fatalf("object after refused PUT: %q", got)
	}
}
