package chunkstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	s3client "github.com/tristore/tristore/client/s3"
)

// bucket is the handful of object operations the chunk store needs, each
// with the transfer engine's retry rule (s3client.Retryable): whole-object
// PUT and GET of at most one chunk, HEAD, DELETE and LIST. Chunks are never
// larger than one buffer, so no multipart upload is ever needed.
type bucket struct {
	api     *awss3.Client
	name    string
	prefix  string // "" or ends in "/"
	retries int
	timeout time.Duration // per attempt, body included (0: none)
	// noIfMatch is set once the server refused a conditional PUT as not
	// implemented; the HEAD check before each publish still guards then.
	noIfMatch bool
}

// errNotFound is a missing key (404 / NoSuchKey).
var errNotFound = errors.New("no such key")

// errRangeAnswer is a ranged GET answered without the Content-Range asked
// for (a server that ignores ranges).
var errRangeAnswer = errors.New("unexpected answer to a ranged GET")

// errPrecondition is a conditional request that failed (412).
var errPrecondition = errors.New("precondition failed")

func (b *bucket) key(k string) string { return b.prefix + k }

// do retries fn on retryable errors with full-jitter backoff (100 ms ·
// 2^n, at most 5 s), at most b.retries times. Each attempt gets at most
// b.timeout, so a server that stalls (a black-holed endpoint) costs a
// timeout and a retry, not a FUSE request that never returns.
func (b *bucket) do(ctx context.Context, fn func(context.Context) error) error {
	for attempt := 0; ; attempt++ {
		actx, cancel := ctx, context.CancelFunc(func() {})
		if b.timeout > 0 {
			actx, cancel = context.WithTimeout(ctx, b.timeout)
		}
		err := fn(actx)
		cancel()
		if err == nil {
			return nil
		}
		err = classify(err)
		if ctx.Err() != nil || attempt >= b.retries || !s3client.Retryable(err) {
			return err
		}
		backoff := min(100*time.Millisecond<<min(attempt, 6), 5*time.Second)
		t := time.NewTimer(rand.N(backoff) + 1)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return err
		}
	}
}

// classify wraps 404 and 412 in this package's sentinels and names the
// usual causes of 403, so a wrong key reads as one.
func classify(err error) error {
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) {
		switch re.HTTPStatusCode() {
		case http.StatusNotFound:
			var ae smithy.APIError
			if errors.As(err, &ae) && ae.ErrorCode() == "NoSuchBucket" {
				return fmt.Errorf("%w: %w", ErrNoBucket, err)
			}
			return fmt.Errorf("%w: %w", errNotFound, err)
		case http.StatusPreconditionFailed:
			return fmt.Errorf("%w: %w", errPrecondition, err)
		case http.StatusForbidden:
			return fmt.Errorf("%w (check the access key, secret key and the bucket policy): %w", ErrDenied, err)
		}
	}
	return err
}

func (b *bucket) put(ctx context.Context, key string, data []byte, ifMatch string) (etag string, err error) {
	k := b.key(key)
	err = b.do(ctx, func(ctx context.Context) error {
		in := &awss3.PutObjectInput{Bucket: &b.name, Key: &k, Body: bytes.NewReader(data), ContentLength: aws.Int64(int64(len(data)))}
		if ifMatch != "" && !b.noIfMatch {
			in.IfMatch = aws.String(ifMatch)
		}
		out, err := b.api.PutObject(ctx, in)
		if err != nil {
			var ae smithy.APIError
			if in.IfMatch != nil && errors.As(err, &ae) && ae.ErrorCode() == "NotImplemented" {
				b.noIfMatch = true
			}
			return err
		}
		etag = aws.ToString(out.ETag)
		return nil
	})
	return etag, err
}

// get reads a whole object of at most limit bytes into buf (growing it
// if it is too small) and returns the bytes and the ETag.
func (b *bucket) get(ctx context.Context, key string, buf []byte, limit int64) ([]byte, string, error) {
	k := b.key(key)
	var data []byte
	var etag string
	err := b.do(ctx, func(ctx context.Context) error {
		out, err := b.api.GetObject(ctx, &awss3.GetObjectInput{Bucket: &b.name, Key: &k})
		if err != nil {
			return err
		}
		defer out.Body.Close()
		n := aws.ToInt64(out.ContentLength)
		if n < 0 || n > limit {
			return fmt.Errorf("%w: %s has %d bytes, at most %d expected", ErrCorrupt, k, n, limit)
		}
		if int64(cap(buf)) < n {
			buf = make([]byte, n)
		}
		data = buf[:n]
		if _, err := io.ReadFull(out.Body, data); err != nil {
			return fmt.Errorf("get %s: %w", k, err)
		}
		etag = aws.ToString(out.ETag)
		return nil
	})
	return data, etag, err
}

// getParts reads a whole object of at most limit bytes into buf like get,
// as parts ranged GETs in parallel, each of about hint/parts bytes (hint:
// the length expected), the last one open-ended so that a longer object
// still comes whole. On a lossy long link one TCP stream spends most of a
// short transfer in slow start; parts shorten that (scripts/bench/
// chunkfetch.sh). A part past the object's end (416) counts for nothing.
// Parts that disagree on the object's length (it was replaced meanwhile)
// or do not cover it are an error; the caller's hash check catches mixed
// versions of equal length.
func (b *bucket) getParts(ctx context.Context, key string, buf []byte, limit, hint int64, parts int) ([]byte, error) {
	if parts <= 1 || hint <= 0 {
		data, _, err := b.get(ctx, key, buf, limit)
		return data, err
	}
	if int64(cap(buf)) < limit {
		buf = make([]byte, limit)
	}
	buf = buf[:limit]
	ps := (hint + int64(parts) - 1) / int64(parts)
	k := b.key(key)
	type got struct {
		n, total int64
		past     bool // 416: the part starts past the end
		err      error
	}
	res := make([]got, parts)
	var wg sync.WaitGroup
	for q := range parts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			off := int64(q) * ps
			rng := fmt.Sprintf("bytes=%d-", off)
			if q < parts-1 {
				rng = fmt.Sprintf("bytes=%d-%d", off, off+ps-1)
			}
			r := &res[q]
			r.err = b.do(ctx, func(ctx context.Context) error {
				r.n, r.total, r.past = 0, 0, false
				out, err := b.api.GetObject(ctx, &awss3.GetObjectInput{Bucket: &b.name, Key: &k, Range: &rng})
				var re *smithyhttp.ResponseError
				if errors.As(err, &re) && re.HTTPStatusCode() == http.StatusRequestedRangeNotSatisfiable {
					r.past = true
					return nil
				}
				if err != nil {
					return err
				}
				defer out.Body.Close()
				var start, end int64
				if _, err := fmt.Sscanf(aws.ToString(out.ContentRange), "bytes %d-%d/%d", &start, &end, &r.total); err != nil || start != off || end < start {
					return fmt.Errorf("%w: get %s %s: Content-Range %q", errRangeAnswer, k, rng, aws.ToString(out.ContentRange))
				}
				if r.total > limit {
					return fmt.Errorf("%w: %s has %d bytes, at most %d expected", ErrCorrupt, k, r.total, limit)
				}
				n := end - start + 1
				if _, err := io.ReadFull(out.Body, buf[start:start+n]); err != nil {
					return fmt.Errorf("get %s %s: %w", k, rng, err)
				}
				r.n = n
				return nil
			})
		}()
	}
	wg.Wait()
	for _, r := range res {
		if errors.Is(r.err, errRangeAnswer) {
			// A server that ignores or garbles ranges: one GET instead.
			data, _, err := b.get(ctx, key, buf, limit)
			return data, err
		}
	}
	total := int64(-1)
	for _, r := range res {
		if r.err != nil {
			return nil, r.err
		}
		if !r.past {
			if total >= 0 && r.total != total {
				return nil, fmt.Errorf("get %s: parts report lengths %d and %d (replaced meanwhile)", k, total, r.total)
			}
			total = r.total
		}
	}
	if total < 0 { // every part past the end: an empty object
		data, _, err := b.get(ctx, key, buf, limit)
		return data, err
	}
	for q, r := range res {
		off := int64(q) * ps
		want := max(0, min(total, off+ps)-off)
		if q == parts-1 {
			want = max(0, total-off)
		}
		if (r.past && want > 0) || (!r.past && r.n != want) {
			return nil, fmt.Errorf("get %s: part %d holds %d bytes of %d (replaced meanwhile?)", k, q, r.n, want)
		}
	}
	return buf[:total], nil
}

// getRange reads [off, off+len(buf)) of key; a shorter object is an error.
func (b *bucket) getRange(ctx context.Context, key string, buf []byte, off int64, etag string) error {
	k := b.key(key)
	rng := fmt.Sprintf("bytes=%d-%d", off, off+int64(len(buf))-1)
	return b.do(ctx, func(ctx context.Context) error {
		in := &awss3.GetObjectInput{Bucket: &b.name, Key: &k, Range: &rng}
		if etag != "" {
			in.IfMatch = aws.String(etag)
		}
		out, err := b.api.GetObject(ctx, in)
		if err != nil {
			return err
		}
		defer out.Body.Close()
		if _, err := io.ReadFull(out.Body, buf); err != nil {
			return fmt.Errorf("get %s %s: %w", k, rng, err)
		}
		return nil
	})
}

func (b *bucket) head(ctx context.Context, key string) (etag string, err error) {
	k := b.key(key)
	err = b.do(ctx, func(ctx context.Context) error {
		out, err := b.api.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: &b.name, Key: &k})
		if err != nil {
			return err
		}
		etag = aws.ToString(out.ETag)
		return nil
	})
	return etag, err
}

func (b *bucket) del(ctx context.Context, key string) error {
	k := b.key(key)
	return b.do(ctx, func(ctx context.Context) error {
		_, err := b.api.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: &b.name, Key: &k})
		if errors.Is(classify(err), errNotFound) {
			return nil
		}
		return err
	})
}

// list calls fn for every key under prefix (relative to the store's
// prefix), at most max keys in all (a bound, not a page size).
func (b *bucket) list(ctx context.Context, prefix string, max int, fn func(key string, size int64) error) error {
	p := b.key(prefix)
	var token *string
	seen := 0
	for seen < max {
		var out *awss3.ListObjectsV2Output
		err := b.do(ctx, func(ctx context.Context) error {
			var err error
			out, err = b.api.ListObjectsV2(ctx, &awss3.ListObjectsV2Input{Bucket: &b.name, Prefix: &p, ContinuationToken: token})
			return err
		})
		if err != nil {
			return err
		}
		for _, o := range out.Contents {
			seen++
			if err := fn(strings.TrimPrefix(aws.ToString(o.Key), b.prefix), aws.ToInt64(o.Size)); err != nil {
				return err
			}
		}
		if !aws.ToBool(out.IsTruncated) || out.NextContinuationToken == nil {
			return nil
		}
		token = out.NextContinuationToken
	}
	return fmt.Errorf("list %s: more than %d keys", p, max)
}
