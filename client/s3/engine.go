// Package s3 is tristore's S3 transfer engine: parallel multipart upload
// and parallel ranged download on aws-sdk-go-v2, with memory bounded by
// chunk size × parallelism, its own retry loop (so the number of retries
// is known and reported) and a summary of every transfer.
//
// It talks to any S3-compatible endpoint and imports no tristore front
// end: it is a client, and the layering keeps it usable against peers.
package s3

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
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

	// NoTailSplit turns off splitting the ranges left at a download's
	// tail among idle streams (see rangeDownload); for measuring it.
	NoTailSplit bool

	// Progress, when set, is told the payload bytes of every part or
	// chunk once it is safely moved (from many goroutines at once).
	Progress func(n int64)
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
	// slots bounds a download's ranged GETs in flight to Parallelism
	// for the whole engine (split ranges hold no buffer of their own).
	slots chan struct{}
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
	return &Engine{cfg: cfg, api: api, pool: newBufPool(cfg.Parallelism, cfg.ChunkSize), slots: make(chan struct{}, cfg.Parallelism)}, nil
}

// progress reports n bytes done to Config.Progress.
func (e *Engine) progress(n int64) {
	if e.cfg.Progress != nil && n > 0 {
		e.cfg.Progress(n)
	}
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
