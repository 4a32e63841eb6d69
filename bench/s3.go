package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
)

// S3 drives a bucket with aws-sdk-go-v2 (path-style, SigV4 with
// UNSIGNED-PAYLOAD, no extra checksums: the client's CPU cost per byte is
// small and the same on every server, as in scripts/bench/s3load). The SDK's
// retries are off: a failed request is the benchmark's to count, not the
// SDK's to hide. Files are objects; directories are key prefixes (Mkdir is
// a no-op). OpenFile gives ranged GETs; WriteAt is ErrNotSupported (objects
// are written whole).
type S3 struct {
	c             *s3.Client
	bucket        string
	target        string
	createdBucket bool
}

// OpenS3 connects to s3://[AK:SK@]host:port/bucket (s3+https:// for TLS).
// Credentials: the URL's user info, else o.AccessKey/o.SecretKey, else the
// environment (AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, then
// TRISTORE_ACCESS_KEY/TRISTORE_SECRET_KEY). The bucket is created if it does
// not exist (and removed again by Close).
func OpenS3(ctx context.Context, u *url.URL, o Options) (*S3, error) {
	bucket := strings.Trim(u.Path, "/")
	target := Redact(u.String())
	if u.Host == "" || bucket == "" || strings.Contains(bucket, "/") {
		return nil, fmt.Errorf("bench: target %s: want s3://host:port/bucket", target)
	}
	ak, sk := o.AccessKey, o.SecretKey
	if u.User != nil {
		ak = u.User.Username()
		sk, _ = u.User.Password()
	}
	for _, pair := range [][2]string{{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"}, {"TRISTORE_ACCESS_KEY", "TRISTORE_SECRET_KEY"}} {
		if ak == "" && sk == "" {
			ak, sk = os.Getenv(pair[0]), os.Getenv(pair[1])
		}
	}
	if ak == "" || sk == "" {
		return nil, fmt.Errorf("bench: target %s: no S3 credentials (--access-key/--secret-key, or AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY)", target)
	}
	region := o.Region
	if region == "" {
		region = "us-east-1"
	}
	scheme := "http"
	if u.Scheme == "s3+https" {
		scheme = "https"
	}
	endpoint := scheme + "://" + u.Host
	dialer := &net.Dialer{Timeout: o.timeout()}
	tr := &http.Transport{
		DialContext:           dialer.DialContext,
		MaxIdleConns:          256,
		MaxIdleConnsPerHost:   256,
		IdleConnTimeout:       time.Minute,
		ResponseHeaderTimeout: o.timeout(),
		DisableCompression:    true,
	}
	if o.Dial != nil {
		tr.DialContext = o.Dial
	}
	cfg := aws.Config{Region: region, Credentials: credentials.NewStaticCredentialsProvider(ak, sk, ""),
		HTTPClient: &http.Client{Transport: tr}, RetryMaxAttempts: 1}
	c := s3.NewFromConfig(cfg, func(so *s3.Options) {
		so.BaseEndpoint = aws.String(endpoint)
		so.UsePathStyle = true
		so.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		so.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
		// UNSIGNED-PAYLOAD, as scripts/bench/s3load: hashing every body
		// would put the client's SHA-256 speed into the figures.
		so.APIOptions = append(so.APIOptions, func(st *middleware.Stack) error {
			return v4.SwapComputePayloadSHA256ForUnsignedPayloadMiddleware(st)
		})
	})
	d := &S3{c: c, bucket: bucket, target: target}
	if _, err := c.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: &bucket}); err != nil {
		var nf *types.NotFound
		if !errors.As(err, &nf) && apiCode(err) != "NotFound" && apiCode(err) != "NoSuchBucket" {
			return nil, fmt.Errorf("bench: target %s: connect: %s", target, describeS3(err))
		}
		if _, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: &bucket}); err != nil {
			return nil, fmt.Errorf("bench: target %s: creating bucket: %s", target, describeS3(err))
		}
		d.createdBucket = true
	}
	return d, nil
}

func apiCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

// describeS3 turns an SDK error into a line that says what to check.
func describeS3(err error) string {
	switch apiCode(err) {
	case "Forbidden", "AccessDenied", "InvalidAccessKeyId", "SignatureDoesNotMatch":
		return fmt.Sprintf("access denied (%s): check the access and secret keys: %v", apiCode(err), err)
	}
	var ne net.Error
	var oe *net.OpError
	if errors.As(err, &oe) || errors.As(err, &ne) {
		return fmt.Sprintf("unreachable: %v", err)
	}
	return err.Error()
}

func (d *S3) Protocol() string { return "s3" }
func (d *S3) Target() string   { return d.target }
func (d *S3) Forms() []string  { return []string{FormDefault} }

func (d *S3) Mkdir(ctx context.Context, dir string) error { return nil }

func (d *S3) Put(ctx context.Context, name string, data []byte) error {
	_, err := d.c.PutObject(ctx, &s3.PutObjectInput{Bucket: &d.bucket, Key: &name,
		Body: bytes.NewReader(data), ContentLength: aws.Int64(int64(len(data)))})
	return err
}

func (d *S3) Get(ctx context.Context, name string, buf []byte) (int, time.Time, error) {
	return d.get(ctx, name, buf, nil)
}

func (d *S3) get(ctx context.Context, name string, buf []byte, rng *string) (int, time.Time, error) {
	out, err := d.c.GetObject(ctx, &s3.GetObjectInput{Bucket: &d.bucket, Key: &name, Range: rng})
	if err != nil {
		return 0, time.Time{}, err
	}
	defer out.Body.Close()
	var first time.Time
	n := 0
	for n < len(buf) {
		m, err := out.Body.Read(buf[n:])
		if first.IsZero() && m > 0 {
			first = time.Now()
		}
		n += m
		if err == io.EOF {
			return n, first, nil
		}
		if err != nil {
			return n, first, err
		}
	}
	// Drain what the caller did not size for (should be nothing), so the
	// connection can be reused and the byte count is honest.
	extra, err := io.Copy(io.Discard, out.Body)
	if err == nil && extra > 0 {
		err = fmt.Errorf("object %s is %d bytes longer than expected", name, extra)
	}
	return n, first, err
}

func (d *S3) OpenFile(ctx context.Context, name string, size int64, form string) (File, error) {
	if form != FormDefault && form != "" {
		return nil, fmt.Errorf("bench: s3 has no access form %q", form)
	}
	h, err := d.c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &d.bucket, Key: &name})
	if err != nil || aws.ToInt64(h.ContentLength) != size {
		buf := make([]byte, size)
		Fill(buf, 1)
		if err := d.Put(ctx, name, buf); err != nil {
			return nil, err
		}
	}
	return &s3File{d: d, name: name}, nil
}

type s3File struct {
	d    *S3
	name string
}

func (f *s3File) ReadAt(ctx context.Context, p []byte, off int64) (int, error) {
	rng := fmt.Sprintf("bytes=%d-%d", off, off+int64(len(p))-1)
	n, _, err := f.d.get(ctx, f.name, p, &rng)
	return n, err
}
func (f *s3File) WriteAt(ctx context.Context, p []byte, off int64) (int, error) {
	return 0, fmt.Errorf("s3 WriteAt: %w (objects are written whole)", ErrNotSupported)
}
func (f *s3File) ReadOnly() bool                  { return true }
func (f *s3File) Sync(ctx context.Context) error  { return nil }
func (f *s3File) Close(ctx context.Context) error { return nil }

func (d *S3) List(ctx context.Context, dir string) ([]string, error) {
	prefix := strings.TrimSuffix(dir, "/") + "/"
	var names []string
	p := s3.NewListObjectsV2Paginator(d.c, &s3.ListObjectsV2Input{Bucket: &d.bucket, Prefix: &prefix, Delimiter: aws.String("/")})
	for pages := 0; p.HasMorePages() && pages < 1_000_000; pages++ {
		page, err := p.NextPage(ctx)
		if err != nil {
			return names, err
		}
		for _, o := range page.Contents {
			names = append(names, strings.TrimPrefix(aws.ToString(o.Key), prefix))
		}
		for _, cp := range page.CommonPrefixes {
			names = append(names, strings.TrimSuffix(strings.TrimPrefix(aws.ToString(cp.Prefix), prefix), "/"))
		}
	}
	return names, nil
}

func (d *S3) Delete(ctx context.Context, name string) error {
	_, err := d.c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &d.bucket, Key: &name})
	return err
}

func (d *S3) RemoveAll(ctx context.Context, dir string) error {
	if dir == "" {
		return errors.New("bench: refusing to empty the whole bucket")
	}
	prefix := strings.TrimSuffix(dir, "/") + "/"
	p := s3.NewListObjectsV2Paginator(d.c, &s3.ListObjectsV2Input{Bucket: &d.bucket, Prefix: &prefix})
	var firstErr error
	for pages := 0; p.HasMorePages() && pages < 1_000_000; pages++ {
		page, err := p.NextPage(ctx)
		if err != nil {
			return err
		}
		for _, o := range page.Contents {
			if err := d.Delete(ctx, aws.ToString(o.Key)); err != nil && firstErr == nil {
				firstErr = err
			}
		}
	}
	return firstErr
}

// Close deletes the bucket if OpenS3 created it (it is empty once the run's
// directory is removed).
func (d *S3) Close(ctx context.Context) error {
	if d.createdBucket {
		if _, err := d.c.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: &d.bucket}); err != nil {
			return fmt.Errorf("bench: target %s: deleting the bucket the run created: %w", d.target, err)
		}
	}
	return nil
}

var _ Driver = (*S3)(nil)
