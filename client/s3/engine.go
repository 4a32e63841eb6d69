// Package s3 is tristore's S3 transfer engine: parallel multipart upload
// and parallel ranged download on aws-sdk-go-v2, with memory bounded by
// chunk size × parallelism, its own retry loop (so the number of retries
// is known and reported) and a summary of every transfer.
//
// It talks to any S3-compatible endpoint and imports no tristore front
// end: it is a client, and the layering keeps it usable against peers.
package s3

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// MinPartSize is S3's smallest part (all but the last) of a multipart
// upload; a smaller upload chunk cannot be honoured, so it is an error.
const MinPartSize = 5 << 20

// maxParts is S3's limit on the parts of one multipart upload.
const maxParts = 10000

// Defaults for a zero Config field.
const (
	DefaultChunkSize   = 8 << 20
	DefaultParallelism = 4
	DefaultMaxMemory   = 1 << 30
	DefaultRetries     = 5
	DefaultRegion      = "us-east-1"
)

// NoRetries as Config.Retries disables retrying (0 means DefaultRetries).
const NoRetries = -1

// ErrMemoryBound is returned when ChunkSize × Parallelism exceeds MaxMemory.
var ErrMemoryBound = errors.New("chunk size × parallelism exceeds the memory bound")

// ErrChecksum reports bytes that arrived but do not match what the server
// says it stored; it is retried, as a corruption in transit would be.
var ErrChecksum = errors.New("checksum mismatch")

// ErrChanged reports an object replaced while it was being downloaded (its
// ETag no longer matched); what was written so far is a mix and must not be
// used.
var ErrChanged = errors.New("object changed during download")

// Config configures an Engine. Zero fields take the defaults above.
type Config struct {
	ChunkSize   int64 // bytes per part / ranged GET
	Parallelism int   // parts in flight per engine
	MaxMemory   int64 // enforced bound on ChunkSize × Parallelism
	Retries     int   // retries per request (NoRetries: none)

	Endpoint  string // e.g. http://127.0.0.1:9000; empty: AWS
	Region    string
	AccessKey string // empty: anonymous requests
	SecretKey string
	Token     string // session token, optional
	PathStyle bool   // bucket in the path, not the host name

	// BackoffBase and BackoffMax shape the full-jitter backoff: retry n
	// sleeps a uniform random time in [0, min(BackoffMax, BackoffBase·2^n)).
	BackoffBase time.Duration // default 100 ms
	BackoffMax  time.Duration // default 5 s

	// RequestTimeout bounds one attempt of one request, body included;
	// an attempt that runs over is retried. 0: no bound. Choose it above
	// ChunkSize / (slowest expected per-connection bandwidth).
	RequestTimeout time.Duration

	// HTTPClient replaces the engine's own (a pool sized for Parallelism).
	HTTPClient *http.Client
}

// withDefaults fills zero fields and checks the memory bound.
func (c Config) withDefaults() (Config, error) {
	if c.ChunkSize == 0 {
		c.ChunkSize = DefaultChunkSize
	}
	if c.Parallelism == 0 {
		c.Parallelism = DefaultParallelism
	}
	if c.MaxMemory == 0 {
		c.MaxMemory = DefaultMaxMemory
	}
	switch {
	case c.Retries == 0:
		c.Retries = DefaultRetries
	case c.Retries < 0:
		c.Retries = 0
	}
	if c.Region == "" {
		c.Region = DefaultRegion
	}
	if c.BackoffBase <= 0 {
		c.BackoffBase = 100 * time.Millisecond
	}
	if c.BackoffMax <= 0 {
		c.BackoffMax = 5 * time.Second
	}
	if c.ChunkSize < 0 || c.Parallelism < 0 || c.MaxMemory < 0 {
		return c, fmt.Errorf("s3: negative chunk size, parallelism or memory bound")
	}
	if c.ChunkSize > c.MaxMemory/int64(c.Parallelism) {
		return c, fmt.Errorf("s3: chunk size %d × parallelism %d = %d bytes > max memory %d: %w",
			c.ChunkSize, c.Parallelism, c.ChunkSize*int64(c.Parallelism), c.MaxMemory, ErrMemoryBound)
	}
	return c, nil
}

// Engine runs transfers. Its buffer pool is shared by all transfers of the
// engine, so the memory bound holds even for concurrent transfers.
type Engine struct {
	cfg  Config
	api  *awss3.Client
	pool *bufPool
}

// New builds an engine; it fails if the memory bound is violated.
func New(cfg Config) (*Engine, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	hc := cfg.HTTPClient
	if hc == nil {
		tr := http.DefaultTransport.(*http.Transport).Clone()
		tr.MaxIdleConns = 4 * cfg.Parallelism
		tr.MaxIdleConnsPerHost = 2 * cfg.Parallelism
		hc = &http.Client{Transport: tr}
	}
	acfg := aws.Config{
		Region:     cfg.Region,
		HTTPClient: hc,
		// Our own loop retries; the SDK's would hide the count.
		Retryer:                    func() aws.Retryer { return aws.NopRetryer{} },
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenRequired,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenRequired,
	}
	if cfg.AccessKey != "" {
		acfg.Credentials = credentials.NewStaticCredentialsProvider(cfg.AccessKey, cfg.SecretKey, cfg.Token)
	} else {
		acfg.Credentials = aws.AnonymousCredentials{}
	}
	api := awss3.NewFromConfig(acfg, func(o *awss3.Options) {
		if cfg.Endpoint != "" {
			o.BaseEndpoint = aws.String(cfg.Endpoint)
		}
		o.UsePathStyle = cfg.PathStyle
	})
	return &Engine{cfg: cfg, api: api, pool: newBufPool(cfg.Parallelism, cfg.ChunkSize)}, nil
}

// Config returns the engine's effective configuration.
func (e *Engine) Config() Config { return e.cfg }

// API is the underlying SDK client (no retries), for listing and the like.
func (e *Engine) API() *awss3.Client { return e.api }

// bufPool hands out at most n chunk buffers; get blocks while all are out.
// The counters let tests check the bound really held.
type bufPool struct {
	size  int64
	free  chan []byte
	inUse atomic.Int64
	peak  atomic.Int64
}

func newBufPool(n int, size int64) *bufPool {
	p := &bufPool{size: size, free: make(chan []byte, n)}
	for range n {
		p.free <- nil // allocated on first use
	}
	return p
}

func (p *bufPool) get(ctx context.Context) ([]byte, error) {
	select {
	case b := <-p.free:
		if b == nil {
			b = make([]byte, p.size)
		}
		n := p.inUse.Add(1)
		for {
			old := p.peak.Load()
			if n <= old || p.peak.CompareAndSwap(old, n) {
				break
			}
		}
		return b, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func (p *bufPool) put(b []byte) {
	p.inUse.Add(-1)
	p.free <- b[:cap(b)]
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// crcB64 is the x-amz-checksum-* form of a CRC: big-endian, base64.
func crcB64(sum uint32) string {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], sum)
	return base64.StdEncoding.EncodeToString(b[:])
}

// Upload stores size bytes of r as bucket/key: one PUT up to ChunkSize,
// else a parallel multipart upload that is aborted if anything fails.
func (e *Engine) Upload(ctx context.Context, bucket, key string, r io.ReaderAt, size int64) (Result, error) {
	st := newStats()
	err := e.upload(ctx, st, bucket, key, r, size)
	res := st.result(size)
	if err != nil {
		res.Bytes = 0
		return res, fmt.Errorf("upload s3://%s/%s: %w", bucket, key, err)
	}
	return res, nil
}

func (e *Engine) upload(ctx context.Context, st *stats, bucket, key string, r io.ReaderAt, size int64) error {
	if size < 0 {
		return fmt.Errorf("negative size %d", size)
	}
	chunk := e.cfg.ChunkSize
	if size <= chunk {
		buf, err := e.pool.get(ctx)
		if err != nil {
			return err
		}
		defer e.pool.put(buf)
		b := buf[:size]
		if err := readFull(r, b, 0); err != nil {
			return err
		}
		sum := crcB64(crc32.Checksum(b, castagnoli))
		return e.do(ctx, st, func(ctx context.Context) error {
			_, err := e.api.PutObject(ctx, &awss3.PutObjectInput{
				Bucket: &bucket, Key: &key, Body: bytes.NewReader(b), ContentLength: aws.Int64(size),
				ChecksumAlgorithm: types.ChecksumAlgorithmCrc32c, ChecksumCRC32C: &sum,
			})
			return err
		})
	}
	if chunk < MinPartSize {
		return fmt.Errorf("chunk size %d is under S3's minimum part size %d for a multipart upload", chunk, MinPartSize)
	}
	nparts := (size + chunk - 1) / chunk
	if nparts > maxParts {
		return fmt.Errorf("%d bytes in %d-byte parts need %d parts, over S3's limit of %d: use a larger chunk size", size, chunk, nparts, maxParts)
	}
	var uploadID string
	err := e.do(ctx, st, func(ctx context.Context) error {
		out, err := e.api.CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{
			Bucket: &bucket, Key: &key, ChecksumAlgorithm: types.ChecksumAlgorithmCrc32c,
		})
		if err == nil {
			uploadID = aws.ToString(out.UploadId)
		}
		return err
	})
	if err == nil && uploadID == "" {
		err = errors.New("CreateMultipartUpload answered without an UploadId")
	}
	if err != nil {
		return err
	}
	parts := make([]types.CompletedPart, nparts)
	err = e.parallel(ctx, int(nparts), func(ctx context.Context, i int) error {
		off := int64(i) * chunk
		n := min(chunk, size-off)
		buf, err := e.pool.get(ctx)
		if err != nil {
			return err
		}
		defer e.pool.put(buf)
		b := buf[:n]
		if err := readFull(r, b, off); err != nil {
			return err
		}
		sum := crcB64(crc32.Checksum(b, castagnoli))
		pn := int32(i + 1)
		return e.do(ctx, st, func(ctx context.Context) error {
			out, err := e.api.UploadPart(ctx, &awss3.UploadPartInput{
				Bucket: &bucket, Key: &key, UploadId: &uploadID, PartNumber: &pn,
				Body: bytes.NewReader(b), ContentLength: aws.Int64(n),
				ChecksumAlgorithm: types.ChecksumAlgorithmCrc32c, ChecksumCRC32C: &sum,
			})
			if err != nil {
				return err
			}
			if got := aws.ToString(out.ChecksumCRC32C); got != "" && got != sum {
				return fmt.Errorf("part %d: server stored CRC32C %s, sent %s: %w", pn, got, sum, ErrChecksum)
			}
			parts[i] = types.CompletedPart{PartNumber: &pn, ETag: out.ETag, ChecksumCRC32C: &sum}
			return nil
		})
	})
	if err == nil {
		err = e.do(ctx, st, func(ctx context.Context) error {
			_, err := e.api.CompleteMultipartUpload(ctx, &awss3.CompleteMultipartUploadInput{
				Bucket: &bucket, Key: &key, UploadId: &uploadID,
				MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
			})
			return err
		})
	}
	if err != nil {
		// Nothing partial stays behind: abort even when ctx is cancelled.
		actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		aerr := e.do(actx, st, func(ctx context.Context) error {
			_, err := e.api.AbortMultipartUpload(ctx, &awss3.AbortMultipartUploadInput{
				Bucket: &bucket, Key: &key, UploadId: &uploadID,
			})
			return err
		})
		if aerr != nil {
			return fmt.Errorf("%w (and aborting upload %s failed: %v)", err, uploadID, aerr)
		}
		return err
	}
	return nil
}

// readFull reads len(b) bytes at off; a short source is an error (the file
// shrank under us), not a silently short object.
func readFull(r io.ReaderAt, b []byte, off int64) error {
	n, err := r.ReadAt(b, off)
	if n == len(b) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("read source at %d: got %d of %d bytes: %w", off, n, len(b), err)
}

// parallel runs fn(0..n-1) on at most Parallelism goroutines; the first
// error cancels the rest and is returned.
func (e *Engine) parallel(ctx context.Context, n int, fn func(context.Context, int) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		next     atomic.Int64
		wg       sync.WaitGroup
		once     sync.Once
		firstErr error
	)
	for range min(e.cfg.Parallelism, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := fn(ctx, i); err != nil {
					once.Do(func() { firstErr = err; cancel() })
					return
				}
			}
		}()
	}
	wg.Wait()
	if firstErr == nil && ctx.Err() != nil {
		return ctx.Err()
	}
	return firstErr
}

// Download writes bucket/key to w with parallel ranged GETs of ChunkSize.
// Every GET carries If-Match on the ETag seen first, and every part's
// length is checked, so an object replaced mid-download is an error, not
// a mix; a single-GET object with a stored full-object CRC32C/CRC32 has
// its bytes compared against it.
func (e *Engine) Download(ctx context.Context, bucket, key string, w io.WriterAt) (Result, error) {
	st := newStats()
	size, err := e.download(ctx, st, bucket, key, w)
	res := st.result(size)
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) && re.HTTPStatusCode() == http.StatusPreconditionFailed {
		err = fmt.Errorf("%w: %w", ErrChanged, err)
	}
	if err != nil {
		res.Bytes = 0
		return res, fmt.Errorf("download s3://%s/%s: %w", bucket, key, err)
	}
	return res, nil
}

func (e *Engine) download(ctx context.Context, st *stats, bucket, key string, w io.WriterAt) (int64, error) {
	var head *awss3.HeadObjectOutput
	err := e.do(ctx, st, func(ctx context.Context) error {
		var err error
		head, err = e.api.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: &bucket, Key: &key, ChecksumMode: types.ChecksumModeEnabled})
		return err
	})
	if err != nil {
		return 0, err
	}
	size := aws.ToInt64(head.ContentLength)
	etag := head.ETag
	chunk := e.cfg.ChunkSize
	if size == 0 {
		return 0, nil
	}
	if size <= chunk {
		buf, err := e.pool.get(ctx)
		if err != nil {
			return 0, err
		}
		defer e.pool.put(buf)
		b := buf[:size]
		err = e.do(ctx, st, func(ctx context.Context) error {
			out, err := e.api.GetObject(ctx, &awss3.GetObjectInput{Bucket: &bucket, Key: &key, IfMatch: etag, ChecksumMode: types.ChecksumModeEnabled})
			if err != nil {
				return err
			}
			defer out.Body.Close()
			if err := readBody(out.Body, b, aws.ToInt64(out.ContentLength)); err != nil {
				return err
			}
			return verifyFull(out, b)
		})
		if err != nil {
			return 0, err
		}
		if _, err := w.WriteAt(b, 0); err != nil {
			return 0, fmt.Errorf("write local: %w", err)
		}
		return size, nil
	}
	nparts := int((size + chunk - 1) / chunk)
	err = e.parallel(ctx, nparts, func(ctx context.Context, i int) error {
		off := int64(i) * chunk
		n := min(chunk, size-off)
		buf, err := e.pool.get(ctx)
		if err != nil {
			return err
		}
		defer e.pool.put(buf)
		b := buf[:n]
		rng := fmt.Sprintf("bytes=%d-%d", off, off+n-1)
		err = e.do(ctx, st, func(ctx context.Context) error {
			out, err := e.api.GetObject(ctx, &awss3.GetObjectInput{Bucket: &bucket, Key: &key, IfMatch: etag, Range: &rng})
			if err != nil {
				return err
			}
			defer out.Body.Close()
			if got := aws.ToString(out.ETag); etag != nil && got != "" && got != *etag {
				return fmt.Errorf("range %s: ETag %s, want %s: %w", rng, got, *etag, ErrChanged)
			}
			return readBody(out.Body, b, aws.ToInt64(out.ContentLength))
		})
		if err != nil {
			return err
		}
		if _, err := w.WriteAt(b, off); err != nil {
			return fmt.Errorf("write local at %d: %w", off, err)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	return size, nil
}

// readBody fills b from body, which must hold exactly len(b) bytes.
func readBody(body io.Reader, b []byte, contentLength int64) error {
	if contentLength != int64(len(b)) {
		return fmt.Errorf("response has %d bytes, want %d: %w", contentLength, len(b), ErrChecksum)
	}
	if _, err := io.ReadFull(body, b); err != nil {
		return err
	}
	var one [1]byte
	if n, _ := body.Read(one[:]); n != 0 {
		return fmt.Errorf("response longer than %d bytes: %w", len(b), ErrChecksum)
	}
	return nil
}

// verifyFull compares a whole object's bytes with its stored full-object
// checksum, when the server returned one (composite, per-part checksums
// of multipart objects cannot be compared against one GET's bytes).
func verifyFull(out *awss3.GetObjectOutput, b []byte) error {
	if out.ChecksumType == types.ChecksumTypeComposite {
		return nil
	}
	check := func(name, want string, tab *crc32.Table) error {
		if want == "" || strings.Contains(want, "-") {
			return nil
		}
		if got := crcB64(crc32.Checksum(b, tab)); got != want {
			return fmt.Errorf("%s of received bytes %s, stored %s: %w", name, got, want, ErrChecksum)
		}
		return nil
	}
	if err := check("CRC32C", aws.ToString(out.ChecksumCRC32C), castagnoli); err != nil {
		return err
	}
	return check("CRC32", aws.ToString(out.ChecksumCRC32), crc32.IEEETable)
}

// isNetErr is a crude but bounded fallback for transport errors the SDK
// wraps without exposing their type.
func isNetErr(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return true
	}
	s := err.Error()
	for _, m := range []string{"connection reset", "broken pipe", "unexpected EOF", "server closed idle connection", ": EOF"} {
		if strings.Contains(s, m) {
			return true
		}
	}
	return false
}
