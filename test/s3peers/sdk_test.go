package s3peers

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/feature/s3/manager"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

func sdkClient(endpoint, ak, sk string) *awss3.Client {
	cfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider(ak, sk, "")}
	return awss3.NewFromConfig(cfg, func(o *awss3.Options) {
		o.BaseEndpoint = aws.String(endpoint)
		o.UsePathStyle = true
	})
}

// errCode returns the S3 error code of an SDK error ("" if none).
func errCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

func httpStatus(err error) int {
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

// steps collects one line per step of a request sequence: "ok" plus what
// S3 defines about the answer, or the HTTP status and S3 error code, so
// that two servers' sequences compare line by line.
type steps []string

// step records one request's outcome.
func (s *steps) step(name string, err error, detail string) {
	if err != nil {
		*s = append(*s, fmt.Sprintf("%s: %d %s", name, httpStatus(err), errCode(err)))
		return
	}
	*s = append(*s, name+": ok "+detail)
}

// getBody reads and closes a GetObject answer's body.
func getBody(o *awss3.GetObjectOutput, err error) (string, error) {
	if err != nil {
		return "", err
	}
	defer o.Body.Close()
	b, err := io.ReadAll(o.Body)
	return string(b), err
}

func randBytes(t *testing.T, n int) []byte {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return b
}

func TestAWSSDK(t *testing.T) {
	srv := startServer(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := sdkClient(srv.endpoint, rootAK, rootSK)
	bkt := "sdk-bucket"
	if _, err := c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: &bkt}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.HeadBucket(ctx, &awss3.HeadBucketInput{Bucket: &bkt}); err != nil {
		t.Fatal(err)
	}
	lb, err := c.ListBuckets(ctx, &awss3.ListBucketsInput{})
	if err != nil || len(lb.Buckets) != 1 || *lb.Buckets[0].Name != bkt {
		t.Fatalf("ListBuckets: %v %v", lb, err)
	}

	t.Run("CRUD+CRC32C", func(t *testing.T) {
		data := randBytes(t, 100_000)
		_, err := c.PutObject(ctx, &awss3.PutObjectInput{Bucket: &bkt, Key: aws.String("dir/one.bin"), Body: bytes.NewReader(data),
			ContentType: aws.String("application/x-one"), Metadata: map[string]string{"origin": "sdk"},
			ChecksumAlgorithm: types.ChecksumAlgorithmCrc32c})
		if err != nil {
			t.Fatal(err)
		}
		out, err := c.GetObject(ctx, &awss3.GetObjectInput{Bucket: &bkt, Key: aws.String("dir/one.bin"), ChecksumMode: types.ChecksumModeEnabled})
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(out.Body)
		out.Body.Close()
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("GetObject content differs (%v)", err)
		}
		crc := crc32.Checksum(data, crc32.MakeTable(crc32.Castagnoli))
		want := base64.StdEncoding.EncodeToString([]byte{byte(crc >> 24), byte(crc >> 16), byte(crc >> 8), byte(crc)})
		if aws.ToString(out.ChecksumCRC32C) != want || out.Metadata["origin"] != "sdk" || aws.ToString(out.ContentType) != "application/x-one" {
			t.Fatalf("GET headers: crc %q want %q, meta %v, type %q", aws.ToString(out.ChecksumCRC32C), want, out.Metadata, aws.ToString(out.ContentType))
		}
		rg, err := c.GetObject(ctx, &awss3.GetObjectInput{Bucket: &bkt, Key: aws.String("dir/one.bin"), Range: aws.String("bytes=1000-1999")})
		if err != nil {
			t.Fatal(err)
		}
		part, _ := io.ReadAll(rg.Body)
		rg.Body.Close()
		if !bytes.Equal(part, data[1000:2000]) {
			t.Fatal("range content differs")
		}
		// Conditionals.
		etag := aws.ToString(out.ETag)
		if _, err := c.GetObject(ctx, &awss3.GetObjectInput{Bucket: &bkt, Key: aws.String("dir/one.bin"), IfNoneMatch: &etag}); httpStatus(err) != 304 {
			t.Fatalf("If-None-Match: %v", err)
		}
		if _, err := c.GetObject(ctx, &awss3.GetObjectInput{Bucket: &bkt, Key: aws.String("dir/one.bin"), IfMatch: aws.String(`"abc"`)}); errCode(err) != "PreconditionFailed" {
			t.Fatalf("If-Match: %v", err)
		}
		if _, err := c.PutObject(ctx, &awss3.PutObjectInput{Bucket: &bkt, Key: aws.String("dir/one.bin"), Body: strings.NewReader("x"), IfNoneMatch: aws.String("*")}); errCode(err) != "PreconditionFailed" {
			t.Fatalf("PUT If-None-Match: %v", err)
		}
		if _, err := c.GetObject(ctx, &awss3.GetObjectInput{Bucket: &bkt, Key: aws.String("nope")}); errCode(err) != "NoSuchKey" {
			t.Fatalf("missing key: %v", err)
		}
		if _, err := c.GetObject(ctx, &awss3.GetObjectInput{Bucket: &bkt, Key: aws.String("dir/one.bin"), Range: aws.String("bytes=200000-")}); errCode(err) != "InvalidRange" {
			t.Fatalf("bad range: %v", err)
		}
		// Copy with REPLACE.
		if _, err := c.CopyObject(ctx, &awss3.CopyObjectInput{Bucket: &bkt, Key: aws.String("copy.bin"), CopySource: aws.String(bkt + "/dir/one.bin"),
			MetadataDirective: types.MetadataDirectiveReplace, Metadata: map[string]string{"origin": "copy"}}); err != nil {
			t.Fatal(err)
		}
		h, err := c.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: &bkt, Key: aws.String("copy.bin")})
		if err != nil || h.Metadata["origin"] != "copy" || aws.ToInt64(h.ContentLength) != int64(len(data)) {
			t.Fatalf("copy head: %+v %v", h, err)
		}
	})

	t.Run("ListPaging", func(t *testing.T) {
		var want []string
		for i := 0; i < 23; i++ {
			k := fmt.Sprintf("list/d%d/k%02d", i%3, i)
			want = append(want, k)
			if _, err := c.PutObject(ctx, &awss3.PutObjectInput{Bucket: &bkt, Key: &k, Body: strings.NewReader(k)}); err != nil {
				t.Fatal(err)
			}
		}
		var got []string
		p := awss3.NewListObjectsV2Paginator(c, &awss3.ListObjectsV2Input{Bucket: &bkt, Prefix: aws.String("list/"), MaxKeys: aws.Int32(4)})
		for pages := 0; p.HasMorePages() && pages < 20; pages++ {
			page, err := p.NextPage(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range page.Contents {
				got = append(got, *o.Key)
			}
		}
		sortStrings(want)
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("paged listing:\n got %v\nwant %v", got, want)
		}
		d, err := c.ListObjectsV2(ctx, &awss3.ListObjectsV2Input{Bucket: &bkt, Prefix: aws.String("list/"), Delimiter: aws.String("/")})
		if err != nil || len(d.CommonPrefixes) != 3 || len(d.Contents) != 0 {
			t.Fatalf("delimiter: %+v %v", d, err)
		}
		v1, err := c.ListObjects(ctx, &awss3.ListObjectsInput{Bucket: &bkt, Prefix: aws.String("list/"), Marker: aws.String("list/d2"), MaxKeys: aws.Int32(100)})
		if err != nil || len(v1.Contents) != 7 {
			t.Fatalf("v1 marker: %d %v", len(v1.Contents), err)
		}
	})

	t.Run("MultipartManager", func(t *testing.T) {
		data := randBytes(t, 23<<20)
		up := manager.NewUploader(c, func(u *manager.Uploader) { u.PartSize = 5 << 20; u.Concurrency = 3 })
		res, err := up.Upload(ctx, &awss3.PutObjectInput{Bucket: &bkt, Key: aws.String("big/23mib"), Body: bytes.NewReader(data)})
		if err != nil {
			t.Fatal(err)
		}
		var etags []byte
		for off := 0; off < len(data); off += 5 << 20 {
			end := min(off+5<<20, len(data))
			s := md5.Sum(data[off:end])
			etags = append(etags, s[:]...)
		}
		want := fmt.Sprintf(`"%x-5"`, md5.Sum(etags))
		if aws.ToString(res.ETag) != want {
			t.Fatalf("multipart ETag %s, want %s", aws.ToString(res.ETag), want)
		}
		buf := manager.NewWriteAtBuffer(make([]byte, 0, len(data)))
		dl := manager.NewDownloader(c, func(d *manager.Downloader) { d.PartSize = 5 << 20; d.Concurrency = 3 })
		if _, err := dl.Download(ctx, buf, &awss3.GetObjectInput{Bucket: &bkt, Key: aws.String("big/23mib")}); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf.Bytes(), data) {
			t.Fatal("downloaded multipart object differs")
		}
		p2, err := c.GetObject(ctx, &awss3.GetObjectInput{Bucket: &bkt, Key: aws.String("big/23mib"), PartNumber: aws.Int32(2)})
		if err != nil {
			t.Fatal(err)
		}
		b2, _ := io.ReadAll(p2.Body)
		p2.Body.Close()
		if !bytes.Equal(b2, data[5<<20:10<<20]) || aws.ToInt32(p2.PartsCount) != 5 {
			t.Fatalf("partNumber=2: %d bytes, parts %d", len(b2), aws.ToInt32(p2.PartsCount))
		}
		// UploadPartCopy: first 5 MiB of the big object + a small tail.
		cr, err := c.CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{Bucket: &bkt, Key: aws.String("big/copied")})
		if err != nil {
			t.Fatal(err)
		}
		pc, err := c.UploadPartCopy(ctx, &awss3.UploadPartCopyInput{Bucket: &bkt, Key: aws.String("big/copied"), UploadId: cr.UploadId, PartNumber: aws.Int32(1),
			CopySource: aws.String(bkt + "/big/23mib"), CopySourceRange: aws.String(fmt.Sprintf("bytes=0-%d", 5<<20-1))})
		if err != nil {
			t.Fatal(err)
		}
		pt, err := c.UploadPart(ctx, &awss3.UploadPartInput{Bucket: &bkt, Key: aws.String("big/copied"), UploadId: cr.UploadId, PartNumber: aws.Int32(2), Body: strings.NewReader("tail")})
		if err != nil {
			t.Fatal(err)
		}
		lp, err := c.ListParts(ctx, &awss3.ListPartsInput{Bucket: &bkt, Key: aws.String("big/copied"), UploadId: cr.UploadId})
		if err != nil || len(lp.Parts) != 2 {
			t.Fatalf("ListParts: %v %v", lp, err)
		}
		lu, err := c.ListMultipartUploads(ctx, &awss3.ListMultipartUploadsInput{Bucket: &bkt})
		if err != nil || len(lu.Uploads) != 1 {
			t.Fatalf("ListMultipartUploads: %v %v", lu, err)
		}
		_, err = c.CompleteMultipartUpload(ctx, &awss3.CompleteMultipartUploadInput{Bucket: &bkt, Key: aws.String("big/copied"), UploadId: cr.UploadId,
			MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{
				{PartNumber: aws.Int32(1), ETag: pc.CopyPartResult.ETag}, {PartNumber: aws.Int32(2), ETag: pt.ETag}}}})
		if err != nil {
			t.Fatal(err)
		}
		g, err := c.GetObject(ctx, &awss3.GetObjectInput{Bucket: &bkt, Key: aws.String("big/copied")})
		if err != nil {
			t.Fatal(err)
		}
		gb, _ := io.ReadAll(g.Body)
		g.Body.Close()
		if !bytes.Equal(gb, append(append([]byte{}, data[:5<<20]...), "tail"...)) {
			t.Fatal("UploadPartCopy result differs")
		}
		// Abort leaves nothing behind.
		ab, err := c.CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{Bucket: &bkt, Key: aws.String("big/aborted")})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.AbortMultipartUpload(ctx, &awss3.AbortMultipartUploadInput{Bucket: &bkt, Key: aws.String("big/aborted"), UploadId: ab.UploadId}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.ListParts(ctx, &awss3.ListPartsInput{Bucket: &bkt, Key: aws.String("big/aborted"), UploadId: ab.UploadId}); errCode(err) != "NoSuchUpload" {
			t.Fatalf("aborted upload: %v", err)
		}
	})

	t.Run("Presigned", func(t *testing.T) {
		ps := awss3.NewPresignClient(c)
		put, err := ps.PresignPutObject(ctx, &awss3.PutObjectInput{Bucket: &bkt, Key: aws.String("presigned.txt")}, awss3.WithPresignExpires(5*time.Minute))
		if err != nil {
			t.Fatal(err)
		}
		req, _ := http.NewRequestWithContext(ctx, put.Method, put.URL, strings.NewReader("via presigned PUT"))
		for k, vs := range put.SignedHeader {
			if k != "Host" {
				req.Header[k] = vs
			}
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != 200 {
			t.Fatalf("presigned PUT: %d", res.StatusCode)
		}
		get, err := ps.PresignGetObject(ctx, &awss3.GetObjectInput{Bucket: &bkt, Key: aws.String("presigned.txt")})
		if err != nil {
			t.Fatal(err)
		}
		res, err = http.Get(get.URL)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(res.Body)
		res.Body.Close()
		if res.StatusCode != 200 || string(b) != "via presigned PUT" {
			t.Fatalf("presigned GET: %d %q", res.StatusCode, b)
		}
		// Tampering with a presigned URL is refused.
		res, err = http.Get(strings.Replace(get.URL, "presigned.txt", "other.txt", 1))
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != 403 {
			t.Fatalf("tampered presigned URL: %d", res.StatusCode)
		}
	})

	t.Run("AuthErrors", func(t *testing.T) {
		bad := sdkClient(srv.endpoint, rootAK, "wrong-secret-123")
		if _, err := bad.ListBuckets(ctx, &awss3.ListBucketsInput{}); errCode(err) != "SignatureDoesNotMatch" {
			t.Fatalf("wrong secret: %v", err)
		}
		unknown := sdkClient(srv.endpoint, "NOSUCHKEY", "whatever-123")
		if _, err := unknown.ListBuckets(ctx, &awss3.ListBucketsInput{}); errCode(err) != "InvalidAccessKeyId" {
			t.Fatalf("unknown key: %v", err)
		}
		res, err := http.Get(srv.endpoint + "/" + bkt + "/dir/one.bin")
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		if res.StatusCode != 403 {
			t.Fatalf("anonymous GET of a private object: %d", res.StatusCode)
		}
	})

	t.Run("DeleteAll", func(t *testing.T) {
		if _, err := c.DeleteBucket(ctx, &awss3.DeleteBucketInput{Bucket: &bkt}); errCode(err) != "BucketNotEmpty" {
			t.Fatalf("non-empty delete: %v", err)
		}
		for i := 0; i < 10; i++ {
			l, err := c.ListObjectsV2(ctx, &awss3.ListObjectsV2Input{Bucket: &bkt})
			if err != nil {
				t.Fatal(err)
			}
			if len(l.Contents) == 0 {
				break
			}
			var ids []types.ObjectIdentifier
			for _, o := range l.Contents {
				ids = append(ids, types.ObjectIdentifier{Key: o.Key})
			}
			d, err := c.DeleteObjects(ctx, &awss3.DeleteObjectsInput{Bucket: &bkt, Delete: &types.Delete{Objects: ids}})
			if err != nil || len(d.Errors) != 0 || len(d.Deleted) != len(ids) {
				t.Fatalf("DeleteObjects: %v %+v", err, d)
			}
		}
		if _, err := c.DeleteBucket(ctx, &awss3.DeleteBucketInput{Bucket: &bkt}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.HeadBucket(ctx, &awss3.HeadBucketInput{Bucket: &bkt}); httpStatus(err) != 404 {
			t.Fatalf("deleted bucket: %v", err)
		}
	})
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}
