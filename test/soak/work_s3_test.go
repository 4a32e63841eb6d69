package soak

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/aws/ratelimit"
	"github.com/aws/aws-sdk-go-v2/aws/retry"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/vishvananda/netns"
)

type dialFunc func(ctx context.Context, network, addr string) (net.Conn, error)

// nsDialer dials from the network namespace at path (the client side of
// the emulated link): the socket is made on a locked thread inside it.
func nsDialer(path string) dialFunc {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		type res struct {
			c   net.Conn
			err error
		}
		ch := make(chan res, 1)
		go func() {
			runtime.LockOSThread()
			orig, err := netns.Get()
			if err != nil {
				ch <- res{nil, err}
				return // the thread is still in its own namespace; unlocking is safe but keep it simple
			}
			defer orig.Close()
			target, err := netns.GetFromPath(path)
			if err != nil {
				runtime.UnlockOSThread()
				ch <- res{nil, err}
				return
			}
			defer target.Close()
			if err := netns.Set(target); err != nil {
				runtime.UnlockOSThread()
				ch <- res{nil, err}
				return
			}
			var d net.Dialer
			c, err := d.DialContext(ctx, network, addr)
			if netns.Set(orig) == nil {
				runtime.UnlockOSThread() // else the thread ends with this goroutine
			}
			ch <- res{c, err}
		}()
		r := <-ch
		return r.c, r.err
	}
}

// newS3 is an aws-sdk-go-v2 client that retries through short outages
// (8 attempts, no retry quota) and bounds each attempt.
func newS3(endpoint string, dial dialFunc) *s3.Client {
	if dial == nil {
		dial = (&net.Dialer{Timeout: 10 * time.Second}).DialContext
	}
	hc := &http.Client{Timeout: 90 * time.Second, Transport: &http.Transport{DialContext: dial, MaxIdleConnsPerHost: 8,
		ResponseHeaderTimeout: 60 * time.Second}}
	return s3.New(s3.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String("http://" + endpoint),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(accessKey, secretKey, ""),
		HTTPClient:   hc,
		Retryer: retry.NewStandard(func(o *retry.StandardOptions) {
			o.MaxAttempts = 8
			o.MaxBackoff = 3 * time.Second
			o.RateLimiter = ratelimit.None
		}),
	})
}

func md5hex(b []byte) string { s := md5.Sum(b); return hex.EncodeToString(s[:]) }

func isNoSuchKey(err error) bool {
	var nk *types.NoSuchKey
	var nf *types.NotFound
	return errors.As(err, &nk) || errors.As(err, &nf)
}

func randBody(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		v := rng.Uint64()
		for j := 0; j < 8; j++ {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	return b
}

// s3Work is a PUT/GET/HEAD/LIST/DELETE loop over a fixed set of keys with
// a model: for each key the set of states it may be in ("" = absent, else
// the MD5 of the content). An acknowledged PUT or DELETE leaves one state;
// a failed one adds a state (it may or may not have happened); every
// answer must be one of the states, and narrows them to it.
type s3Work struct {
	c      *s3.Client
	bucket string
	keys   int
	state  map[string][]string
	etag   map[string]string // content MD5 -> the ETag its upload gets
	byEtag map[string]string // and back
}

// contentOf maps an ETag to the content MD5 it was made for, or to a
// mark no state matches.
func (w *s3Work) contentOf(etag string) string {
	if c, ok := w.byEtag[etag]; ok {
		return c
	}
	return "unknown-etag-" + etag
}

func (w *s3Work) expect(content, etag string) {
	w.etag[content], w.byEtag[etag] = etag, content
}

func (w *s3Work) put(ctx context.Context, k string, body []byte) error {
	w.expect(md5hex(body), md5hex(body))
	_, err := w.c.PutObject(ctx, &s3.PutObjectInput{Bucket: &w.bucket, Key: &k, Body: bytes.NewReader(body)})
	return err
}

// multipart uploads body in 5 MiB parts; its ETag is the MD5 of the
// parts' MD5s, "-" and the part count.
func (w *s3Work) multipart(ctx context.Context, k string, body []byte) error {
	const part = 5 << 20
	var sums []byte
	var parts []types.CompletedPart
	for off, n := 0, int32(1); off < len(body); off, n = off+part, n+1 {
		s := md5.Sum(body[off:min(off+part, len(body))])
		sums = append(sums, s[:]...)
		parts = append(parts, types.CompletedPart{PartNumber: aws.Int32(n)})
	}
	w.expect(md5hex(body), fmt.Sprintf("%s-%d", md5hex(sums), len(parts)))
	up, err := w.c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: &w.bucket, Key: &k})
	if err != nil {
		return err
	}
	abort := func(err error) error {
		w.c.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: &w.bucket, Key: &k, UploadId: up.UploadId})
		return err
	}
	for i := range parts {
		off := i * part
		r, err := w.c.UploadPart(ctx, &s3.UploadPartInput{Bucket: &w.bucket, Key: &k, UploadId: up.UploadId,
			PartNumber: parts[i].PartNumber, Body: bytes.NewReader(body[off:min(off+part, len(body))])})
		if err != nil {
			return abort(err)
		}
		parts[i].ETag = r.ETag
	}
	_, err = w.c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: &w.bucket, Key: &k, UploadId: up.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}})
	if err != nil {
		return abort(err)
	}
	return nil
}

func (w *s3Work) key(i int) string { return fmt.Sprintf("k%03d/obj", i) }

func addState(l []string, s string) []string {
	if slices.Contains(l, s) {
		return l
	}
	return append(l, s)
}

func (w *s3Work) run(ctx context.Context, rec *recorder, rng *rand.Rand, maxIter int) {
	const wl = "s3"
	w.state, w.etag, w.byEtag = map[string][]string{}, map[string]string{"": ""}, map[string]string{"": ""}
	for i := 0; i < w.keys; i++ {
		w.state[w.key(i)] = []string{""}
	}
	for it := 0; it < maxIter && ctx.Err() == nil; it++ {
		k := w.key(rng.IntN(w.keys))
		switch p := rng.IntN(100); {
		case p < 35:
			n := rng.IntN(256 << 10)
			multi := rng.IntN(12) == 0
			if multi {
				n = 5<<20 + rng.IntN(7<<20)
			}
			body := randBody(rng, n)
			sum := md5hex(body)
			op, put := "put", w.put
			if multi {
				op, put = "multipart", w.multipart
			}
			if rec.do(wl, viewS3, op, func() error { return put(ctx, k, body) }) != nil {
				w.state[k] = addState(w.state[k], sum)
			} else {
				w.state[k] = []string{sum}
			}
		case p < 65:
			var got string
			err := rec.do(wl, viewS3, "get", func() error {
				out, err := w.c.GetObject(ctx, &s3.GetObjectInput{Bucket: &w.bucket, Key: &k})
				if isNoSuchKey(err) {
					got = ""
					return nil
				}
				if err != nil {
					return err
				}
				defer out.Body.Close()
				b, err := io.ReadAll(out.Body)
				if err != nil {
					return err
				}
				got = md5hex(b)
				if etag := strings.Trim(aws.ToString(out.ETag), `"`); etag != w.etag[got] && slices.Contains(w.state[k], got) {
					rec.bad("s3: GET %s: ETag %s, but the content written had ETag %s", k, etag, w.etag[got])
				}
				return nil
			})
			if err == nil {
				w.observe(rec, k, got, "GET")
			}
		case p < 75:
			var got string
			if rec.do(wl, viewS3, "head", func() error {
				out, err := w.c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: &w.bucket, Key: &k})
				if isNoSuchKey(err) {
					got = ""
					return nil
				}
				if err != nil {
					return err
				}
				got = w.contentOf(strings.Trim(aws.ToString(out.ETag), `"`))
				return nil
			}) == nil {
				w.observe(rec, k, got, "HEAD")
			}
		case p < 87:
			if rec.do(wl, viewS3, "delete", func() error {
				_, err := w.c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: &w.bucket, Key: &k})
				return err
			}) != nil {
				w.state[k] = addState(w.state[k], "")
			} else {
				w.state[k] = []string{""}
			}
		default:
			var listed map[string]string
			if rec.do(wl, viewS3, "list", func() error {
				var err error
				listed, err = w.list(ctx)
				return err
			}) == nil {
				w.observeList(rec, listed, "LIST")
			}
		}
	}
}

// list returns every key of the bucket with its ETag.
func (w *s3Work) list(ctx context.Context) (map[string]string, error) {
	out := map[string]string{}
	var token *string
	for page := 0; page < 1000; page++ {
		r, err := w.c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: &w.bucket, ContinuationToken: token, MaxKeys: aws.Int32(50)})
		if err != nil {
			return nil, err
		}
		for _, o := range r.Contents {
			out[aws.ToString(o.Key)] = w.contentOf(strings.Trim(aws.ToString(o.ETag), `"`))
		}
		if !aws.ToBool(r.IsTruncated) {
			return out, nil
		}
		token = r.NextContinuationToken
	}
	return nil, fmt.Errorf("list: more than 1000 pages")
}

func (w *s3Work) observe(rec *recorder, k, got, how string) {
	if !slices.Contains(w.state[k], got) {
		rec.bad("s3: %s %s returned %s, but the model allows only %s (acknowledged writes: the last is the first state)", how, k, show(got), showAll(w.state[k]))
	}
	w.state[k] = []string{got}
}

func (w *s3Work) observeList(rec *recorder, listed map[string]string, how string) {
	for k := range listed {
		if _, ok := w.state[k]; !ok {
			rec.bad("s3: %s shows key %s that was never written", how, k)
		}
	}
	for k := range w.state {
		w.observe(rec, k, listed[k], how)
	}
}

func show(s string) string {
	if s == "" {
		return "absent"
	}
	return s[:8]
}

func showAll(l []string) string {
	var o []string
	for _, s := range l {
		o = append(o, show(s))
	}
	return "[" + strings.Join(o, " ") + "]"
}

// verify lists the bucket and GETs every key that should be there.
func (w *s3Work) verify(ctx context.Context, rec *recorder) string {
	if w.state == nil {
		return "s3: not run"
	}
	listed, err := w.list(ctx)
	if err != nil {
		rec.bad("s3 final LIST: %v", err)
		return "s3: final list failed"
	}
	w.observeList(rec, listed, "final LIST")
	present := 0
	for k, content := range listed {
		out, err := w.c.GetObject(ctx, &s3.GetObjectInput{Bucket: &w.bucket, Key: aws.String(k)})
		if err != nil {
			rec.bad("s3 final GET %s: %v", k, err)
			continue
		}
		b, err := io.ReadAll(out.Body)
		out.Body.Close()
		if err != nil || md5hex(b) != content {
			rec.bad("s3 final GET %s: %d bytes (%v), MD5 %s differs from the listed ETag's content %s", k, len(b), err, md5hex(b), content)
		}
		present++
	}
	return fmt.Sprintf("s3: final LIST+GET of %d keys (%d present) matches the model", len(w.state), present)
}

// xviewWork writes objects over S3 and reads them over the NFS mount, and
// writes files over the NFS mount and reads them over S3; both must be
// the same bytes (and the S3 ETag the MD5 of the NFS file).
type xviewWork struct {
	c      *s3.Client
	bucket string            // a top-level directory of the NFS mount
	mnt    string            // the NFS mount's root
	acked  map[string]string // key (= path below the bucket) -> MD5
}

func (x *xviewWork) run(ctx context.Context, rec *recorder, rng *rand.Rand, maxIter int) {
	const wl = "xview"
	x.acked = map[string]string{}
	for i := 0; i < maxIter && ctx.Err() == nil; i++ {
		body := randBody(rng, 1+rng.IntN(1<<20))
		sum := md5hex(body)
		key := fmt.Sprintf("xview/s3-%04d.bin", i)
		if rec.do(wl, viewS3, "s3-put", func() error {
			_, err := x.c.PutObject(ctx, &s3.PutObjectInput{Bucket: &x.bucket, Key: &key, Body: bytes.NewReader(body)})
			return err
		}) == nil {
			x.acked[key] = sum
			var got []byte
			if rec.do(wl, viewNFS, "nfs-read", func() error {
				var err error
				got, err = os.ReadFile(filepath.Join(x.mnt, x.bucket, key))
				return err
			}) == nil && md5hex(got) != sum {
				rec.bad("xview: %s PUT over S3 (MD5 %s) reads %d bytes with MD5 %s over NFS", key, sum[:8], len(got), md5hex(got)[:8])
			}
		}
		key = fmt.Sprintf("xview/nfs-%04d.bin", i)
		if rec.do(wl, viewNFS, "nfs-write", func() error { return writeFileSync(filepath.Join(x.mnt, x.bucket, key), body) }) == nil {
			x.acked[key] = sum
			if got, etag, err := x.get(ctx, rec, key); err == nil && (got != sum || etag != sum) {
				rec.bad("xview: %s written over NFS (MD5 %s) is MD5 %s with ETag %s over S3", key, sum[:8], got[:8], etag)
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(time.Duration(1+rng.IntN(4)) * time.Second):
		}
	}
}

func (x *xviewWork) get(ctx context.Context, rec *recorder, key string) (sum, etag string, err error) {
	err = rec.do("xview", viewS3, "s3-get", func() error {
		out, err := x.c.GetObject(ctx, &s3.GetObjectInput{Bucket: &x.bucket, Key: &key})
		if err != nil {
			return err
		}
		defer out.Body.Close()
		b, err := io.ReadAll(out.Body)
		if err != nil {
			return err
		}
		sum, etag = md5hex(b), strings.Trim(aws.ToString(out.ETag), `"`)
		return nil
	})
	return sum, etag, err
}

// verify reads every acknowledged object over S3 and over the NFS tree at
// mnt (a mount, or the server's data directory).
func (x *xviewWork) verify(ctx context.Context, rec *recorder, mnt, where string) string {
	keys := make([]string, 0, len(x.acked))
	for k := range x.acked {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	bad := 0
	for _, k := range keys {
		want := x.acked[k]
		b, err := os.ReadFile(filepath.Join(mnt, x.bucket, k))
		if err != nil || md5hex(b) != want {
			bad++
			rec.bad("xview %s: %s: %d bytes (%v), want MD5 %s", where, k, len(b), err, want[:8])
		}
		out, err := x.c.GetObject(ctx, &s3.GetObjectInput{Bucket: &x.bucket, Key: aws.String(k)})
		if err != nil {
			bad++
			rec.bad("xview %s: S3 GET %s: %v", where, k, err)
			continue
		}
		b, err = io.ReadAll(out.Body)
		out.Body.Close()
		if err != nil || md5hex(b) != want {
			bad++
			rec.bad("xview %s: S3 GET %s: %d bytes (%v), want MD5 %s", where, k, len(b), err, want[:8])
		}
	}
	return fmt.Sprintf("xview %s: %d acknowledged objects/files read over both S3 and NFS, %d disagree", where, len(keys), bad)
}

func writeFileSync(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
