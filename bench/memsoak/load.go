package memsoak

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	s3types "github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/tristore/tristore/client/iscsi"
	"github.com/tristore/tristore/client/nfs"
)

// Protocols, in the order of the counters.
const (
	pS3 = iota
	pNFS3
	pNFS4
	pISCSI
	nProto
)

var protoNames = [nProto]string{"s3", "nfs3", "nfs4.1", "iscsi"}

// counters are the clients' totals, read by the sampler.
type counters struct {
	ops, errs, opened, closed, abrupt [nProto]atomic.Int64
	active                            [nProto]atomic.Int64

	mu        sync.Mutex
	firstErrs []string
}

func (c *counters) fail(p int, err error) {
	c.errs[p].Add(1)
	c.mu.Lock()
	if len(c.firstErrs) < 20 {
		c.firstErrs = append(c.firstErrs, fmt.Sprintf("%s %s: %v", time.Now().UTC().Format("15:04:05"), protoNames[p], err))
	}
	c.mu.Unlock()
}

// env is what every client needs.
type env struct {
	addrs   map[string]string
	volumes []string // target IQNs
	volSize int64
	think   time.Duration
	churn   churn
	c       *counters
	// models keep each client's model of its keys or files across its
	// reconnects (the data stays on the server): id -> name -> CRC-32.
	models sync.Map
}

func (e *env) model(id int) map[string]uint32 {
	m, _ := e.models.LoadOrStore(id, map[string]uint32{})
	return m.(map[string]uint32)
}

// churn says how a short-lived client reconnects.
type churn struct {
	// MinOps..MaxOps operations per connection before a reconnect.
	MinOps, MaxOps int
	// AbruptEvery: one reconnect in this many drops the connection
	// without a goodbye (no iSCSI logout, no NFS close of the TCP
	// connection by the server first, an S3 body abandoned mid-read).
	AbruptEvery int
}

// conn is one client connection (or session) of one protocol.
type conn interface {
	op(ctx context.Context, rng *rand.Rand) error
	// close ends the connection; abrupt drops it without a goodbye
	// where the protocol has one.
	close(abrupt bool) error
}

// runClient is one client: long-lived clients keep one connection for the
// whole run, the others reconnect every MinOps..MaxOps operations.
func runClient(ctx context.Context, e *env, p, id int, longLived bool, seed uint64) {
	rng := newRand(seed, id)
	for ctx.Err() == nil {
		cn, err := dial(ctx, e, p, id)
		if err != nil {
			if ctx.Err() == nil {
				e.c.fail(p, fmt.Errorf("client %d connect: %w", id, err))
				sleep(ctx, time.Second)
			}
			continue
		}
		e.c.opened[p].Add(1)
		e.c.active[p].Add(1)
		n := -1
		if !longLived {
			n = e.churn.MinOps + rng.IntN(e.churn.MaxOps-e.churn.MinOps+1)
		}
		for i := 0; (n < 0 || i < n) && ctx.Err() == nil; i++ {
			if err := cn.op(ctx, rng); err != nil {
				if ctx.Err() != nil {
					break
				}
				e.c.fail(p, fmt.Errorf("client %d: %w", id, err))
			} else {
				e.c.ops[p].Add(1)
			}
			if e.think > 0 {
				sleep(ctx, time.Duration(rng.Int64N(int64(2*e.think))))
			}
		}
		abrupt := !longLived && e.churn.AbruptEvery > 0 && rng.IntN(e.churn.AbruptEvery) == 0 && ctx.Err() == nil
		if abrupt {
			e.c.abrupt[p].Add(1)
		}
		if err := cn.close(abrupt); err != nil {
			e.c.fail(p, fmt.Errorf("client %d close: %w", id, err))
		}
		e.c.active[p].Add(-1)
		e.c.closed[p].Add(1)
	}
}

func newRand(seed uint64, id int) *rand.Rand { return rand.New(rand.NewPCG(seed, uint64(id))) }

func sleep(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

func dial(ctx context.Context, e *env, p, id int) (conn, error) {
	dctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	switch p {
	case pS3:
		return dialS3(e, id), nil
	case pNFS3:
		return dialNFS3(dctx, e, id)
	case pNFS4:
		return dialNFS4(dctx, e, id)
	default:
		return dialISCSI(dctx, e, id)
	}
}

// payload returns n bytes that differ per call.
func payload(rng *rand.Rand, n int) []byte {
	b := make([]byte, n)
	for i := 0; i+8 <= n; i += 8 {
		v := rng.Uint64()
		for j := range 8 {
			b[i+j] = byte(v >> (8 * j))
		}
	}
	return b
}

// size picks a size between 1 KiB and 256 KiB, small ones likelier.
func size(rng *rand.Rand) int {
	return 1<<10 + rng.IntN(1<<(8+rng.IntN(11)))
}

const filesPerClient = 16

// ---- S3 ----

type s3conn struct {
	c     *s3.Client
	tr    *http.Transport
	id    int
	model map[string]uint32 // key -> CRC-32 of its content
}

const bucket = "memsoak"

func newS3(addr string, tr *http.Transport) *s3.Client {
	cfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider(accessKey, secretKey, ""),
		HTTPClient: &http.Client{Transport: tr}, RetryMaxAttempts: 1}
	return s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.BaseEndpoint = aws.String("http://" + addr)
		o.UsePathStyle = true
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
		o.APIOptions = append(o.APIOptions, v4.SwapComputePayloadSHA256ForUnsignedPayloadMiddleware)
	})
}

func s3Transport() *http.Transport {
	return &http.Transport{DialContext: (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
		MaxIdleConnsPerHost: 2, IdleConnTimeout: time.Minute, DisableCompression: true}
}

func dialS3(e *env, id int) conn {
	tr := s3Transport()
	return &s3conn{c: newS3(e.addrs["s3"], tr), tr: tr, id: id, model: e.model(id)}
}

func (s *s3conn) key(rng *rand.Rand) string {
	return fmt.Sprintf("c%d/k%d", s.id, rng.IntN(filesPerClient))
}

func (s *s3conn) op(ctx context.Context, rng *rand.Rand) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	k := s.key(rng)
	switch r := rng.IntN(100); {
	case r < 35:
		if rng.IntN(100) == 0 {
			return s.multipart(ctx, rng, k)
		}
		b := payload(rng, size(rng))
		if _, err := s.c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: &k, Body: bytes.NewReader(b)}); err != nil {
			return fmt.Errorf("PUT %s: %w", k, err)
		}
		s.model[k] = crc32.ChecksumIEEE(b)
	case r < 70:
		out, err := s.c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: &k})
		want, ok := s.model[k]
		if err != nil {
			var nk *s3types.NoSuchKey
			if !ok && errors.As(err, &nk) {
				return nil
			}
			return fmt.Errorf("GET %s: %w", k, err)
		}
		defer out.Body.Close()
		if rng.IntN(20) == 0 {
			// Abandon the body after a few bytes: the transport closes the
			// connection with the server still writing.
			io.CopyN(io.Discard, out.Body, 512)
			return nil
		}
		b, err := io.ReadAll(out.Body)
		if err != nil {
			return fmt.Errorf("GET %s body: %w", k, err)
		}
		if !ok || crc32.ChecksumIEEE(b) != want {
			return fmt.Errorf("GET %s: content differs from the last PUT (in model %v)", k, ok)
		}
	case r < 80:
		_, err := s.c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(bucket), Key: &k})
		if _, ok := s.model[k]; ok && err != nil {
			return fmt.Errorf("HEAD %s: %w", k, err)
		}
	case r < 90:
		p := fmt.Sprintf("c%d/", s.id)
		out, err := s.c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: &p})
		if err != nil {
			return fmt.Errorf("LIST %s: %w", p, err)
		}
		if len(out.Contents) != len(s.model) {
			return fmt.Errorf("LIST %s: %d keys, model has %d", p, len(out.Contents), len(s.model))
		}
	default:
		if _, err := s.c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(bucket), Key: &k}); err != nil {
			return fmt.Errorf("DELETE %s: %w", k, err)
		}
		delete(s.model, k)
	}
	return nil
}

// multipart uploads two 5 MiB parts (one upload in a hundred PUTs).
func (s *s3conn) multipart(ctx context.Context, rng *rand.Rand, k string) error {
	cr, err := s.c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(bucket), Key: &k})
	if err != nil {
		return fmt.Errorf("CreateMultipartUpload %s: %w", k, err)
	}
	var parts []s3types.CompletedPart
	h := crc32.NewIEEE()
	for n := int32(1); n <= 2; n++ {
		b := payload(rng, 5<<20)
		h.Write(b)
		up, err := s.c.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String(bucket), Key: &k, UploadId: cr.UploadId,
			PartNumber: aws.Int32(n), Body: bytes.NewReader(b)})
		if err != nil {
			return fmt.Errorf("UploadPart %s: %w", k, err)
		}
		parts = append(parts, s3types.CompletedPart{ETag: up.ETag, PartNumber: aws.Int32(n)})
	}
	if _, err := s.c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String(bucket), Key: &k,
		UploadId: cr.UploadId, MultipartUpload: &s3types.CompletedMultipartUpload{Parts: parts}}); err != nil {
		return fmt.Errorf("CompleteMultipartUpload %s: %w", k, err)
	}
	s.model[k] = h.Sum32()
	return nil
}

// close drops the client's idle connections (the server sees them close;
// an abrupt close is the same for HTTP: there is no goodbye).
func (s *s3conn) close(bool) error {
	s.tr.CloseIdleConnections()
	return nil
}

// ---- NFS v3 ----

type nfs3conn struct {
	c     *nfs.Client
	dir   nfs.FH
	model map[string]uint32
}

const nfsDir = "nfsload"

func nfsOpts() nfs.Options {
	return nfs.Options{Timeout: 30 * time.Second, Retries: 2}
}

func dialNFS3(ctx context.Context, e *env, id int) (conn, error) {
	c, err := nfs.Dial(ctx, e.addrs["nfs"], nfsOpts())
	if err != nil {
		return nil, err
	}
	root, err := c.Mount(ctx, "/")
	if err == nil {
		var d nfs.FH
		if d, _, err = c.Lookup(ctx, root, nfsDir); err == nil {
			var dir nfs.FH
			if dir, _, err = c.Lookup(ctx, d, fmt.Sprintf("c%d", id)); err == nil {
				return &nfs3conn{c: c, dir: dir, model: e.model(id)}, nil
			}
		}
	}
	c.Close()
	return nil, err
}

func (n *nfs3conn) op(ctx context.Context, rng *rand.Rand) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	name := fmt.Sprintf("f%d", rng.IntN(filesPerClient))
	switch r := rng.IntN(100); {
	case r < 35:
		sz := size(rng)
		if rng.IntN(50) == 0 {
			sz = 3 << 20 // more than one WRITE: UNSTABLE + COMMIT
		}
		b := payload(rng, sz)
		zero := uint64(0)
		fh, _, err := n.c.Create(ctx, n.dir, name, nfs.Unchecked, nfs.SetAttr{Size: &zero}, nfs.Verifier{})
		if err != nil {
			return fmt.Errorf("CREATE %s: %w", name, err)
		}
		if err := n.c.WriteFile(ctx, fh, b, nfs.Unstable); err != nil {
			return fmt.Errorf("WRITE %s: %w", name, err)
		}
		n.model[name] = crc32.ChecksumIEEE(b)
	case r < 70:
		want, ok := n.model[name]
		fh, _, err := n.c.Lookup(ctx, n.dir, name)
		if err != nil {
			if !ok && errors.Is(err, nfs.ErrNoEnt) {
				return nil
			}
			return fmt.Errorf("LOOKUP %s: %w", name, err)
		}
		b, err := n.c.ReadFile(ctx, fh)
		if err != nil {
			return fmt.Errorf("READ %s: %w", name, err)
		}
		if !ok || crc32.ChecksumIEEE(b) != want {
			return fmt.Errorf("READ %s: content differs from the last write (in model %v)", name, ok)
		}
	case r < 80:
		if _, err := n.c.Getattr(ctx, n.dir); err != nil {
			return fmt.Errorf("GETATTR: %w", err)
		}
	case r < 88:
		ents, err := n.c.Readdirplus(ctx, n.dir)
		if err != nil {
			return fmt.Errorf("READDIRPLUS: %w", err)
		}
		if got := len(ents) - 2; got != len(n.model) && got+2 != len(n.model) { // with or without . and ..
			return fmt.Errorf("READDIRPLUS: %d entries, model has %d", len(ents), len(n.model))
		}
	case r < 94:
		to := fmt.Sprintf("f%d", rng.IntN(filesPerClient))
		if _, ok := n.model[name]; !ok || to == name {
			return nil
		}
		if err := n.c.Rename(ctx, n.dir, name, n.dir, to); err != nil {
			return fmt.Errorf("RENAME %s %s: %w", name, to, err)
		}
		n.model[to] = n.model[name]
		delete(n.model, name)
	default:
		if _, ok := n.model[name]; !ok {
			return nil
		}
		if err := n.c.Remove(ctx, n.dir, name); err != nil {
			return fmt.Errorf("REMOVE %s: %w", name, err)
		}
		delete(n.model, name)
	}
	return nil
}

// close: NFS v3 has no session; an abrupt close drops the TCP connection
// without the MOUNT UMNT call.
func (n *nfs3conn) close(abrupt bool) error {
	if !abrupt {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := n.c.Unmount(ctx); err != nil {
			n.c.Close()
			return fmt.Errorf("UMNT: %w", err)
		}
	}
	return n.c.Close()
}

// ---- NFS v4.1 ----

type nfs4conn struct {
	c     *nfs.Client4
	dir   nfs.FH
	model map[string]uint32
}

func dialNFS4(ctx context.Context, e *env, id int) (conn, error) {
	c, err := nfs.Dial4(ctx, e.addrs["nfs"], nfsOpts())
	if err != nil {
		return nil, err
	}
	dir, _, err := c.LookupPath(ctx, fmt.Sprintf("/%s/c%d", nfsDir, id))
	if err != nil {
		c.Close(ctx)
		return nil, err
	}
	return &nfs4conn{c: c, dir: dir, model: e.model(id)}, nil
}

func (n *nfs4conn) op(ctx context.Context, rng *rand.Rand) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	name := fmt.Sprintf("f%d", rng.IntN(filesPerClient))
	switch r := rng.IntN(100); {
	case r < 35:
		b := payload(rng, size(rng))
		if err := n.c.WriteFile(ctx, n.dir, name, b, 0o644); err != nil {
			return fmt.Errorf("v4 write %s: %w", name, err)
		}
		n.model[name] = crc32.ChecksumIEEE(b)
	case r < 70:
		want, ok := n.model[name]
		if !ok {
			return nil
		}
		b, err := n.c.ReadFile(ctx, n.dir, name)
		if err != nil {
			return fmt.Errorf("v4 read %s: %w", name, err)
		}
		if crc32.ChecksumIEEE(b) != want {
			return fmt.Errorf("v4 read %s: content differs from the last write", name)
		}
	case r < 80:
		if _, ok := n.model[name]; !ok {
			return nil
		}
		if _, err := n.c.Stat(ctx, n.dir, name); err != nil {
			return fmt.Errorf("v4 stat %s: %w", name, err)
		}
	case r < 90:
		ents, err := n.c.Readdir(ctx, n.dir, nil)
		if err != nil {
			return fmt.Errorf("v4 readdir: %w", err)
		}
		if len(ents) != len(n.model) {
			return fmt.Errorf("v4 readdir: %d entries, model has %d", len(ents), len(n.model))
		}
	default:
		if _, ok := n.model[name]; !ok {
			return nil
		}
		if err := n.c.Remove(ctx, n.dir, name); err != nil {
			return fmt.Errorf("v4 remove %s: %w", name, err)
		}
		delete(n.model, name)
	}
	return nil
}

// close destroys the session and the client ID. (Client4 has no way to
// drop the connection without them; an abandoned v4.1 client would hold
// its state until the lease ends, which is not a leak.)
func (n *nfs4conn) close(bool) error {
	return n.c.Close(context.Background())
}

// ---- iSCSI ----

type iscsiconn struct {
	s        *iscsi.Session
	off, len int64 // this client's region of the LUN
}

// iscsiRegion is each client's share of a volume.
const iscsiRegion = 4 << 20

func dialISCSI(ctx context.Context, e *env, id int) (conn, error) {
	nv := len(e.volumes)
	s, err := iscsi.Open(ctx, iscsi.Config{Portal: e.addrs["iscsi"], Target: e.volumes[id%nv],
		Initiator: fmt.Sprintf("iqn.2026-11.org.tristore:memsoak.c%d", id), QueueDepth: 8})
	if err != nil {
		return nil, err
	}
	off := int64(id/nv) * iscsiRegion % e.volSize
	return &iscsiconn{s: s, off: off, len: iscsiRegion}, nil
}

func (c *iscsiconn) op(ctx context.Context, rng *rand.Rand) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	n := int64(4<<10) << rng.IntN(5) // 4..64 KiB
	off := c.off + rng.Int64N((c.len-n)/4096+1)*4096
	switch r := rng.IntN(100); {
	case r < 45:
		b := payload(rng, int(n))
		if _, err := c.s.WriteAt(ctx, b, off); err != nil {
			return fmt.Errorf("WRITE %d+%d: %w", off, n, err)
		}
		got := make([]byte, n)
		if _, err := c.s.ReadAt(ctx, got, off); err != nil {
			return fmt.Errorf("READ %d+%d: %w", off, n, err)
		}
		if !bytes.Equal(got, b) {
			return fmt.Errorf("READ %d+%d: not what was just written", off, n)
		}
	case r < 95:
		got := make([]byte, n)
		if _, err := c.s.ReadAt(ctx, got, off); err != nil {
			return fmt.Errorf("READ %d+%d: %w", off, n, err)
		}
	default:
		if err := c.s.Flush(ctx); err != nil {
			return fmt.Errorf("SYNCHRONIZE CACHE: %w", err)
		}
	}
	return nil
}

// close logs out; an abrupt one first drops the TCP connection under the
// session (the target sees it vanish mid-session) and then closes the
// session once it has logged in again, or gives up on it.
func (c *iscsiconn) close(abrupt bool) error {
	if abrupt {
		c.s.DropConnection()
		c.s.Close() // fails: the connection is gone (or logging in again)
		return nil
	}
	return c.s.Close()
}
