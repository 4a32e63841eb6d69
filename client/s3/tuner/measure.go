package tuner

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	s3client "github.com/tristore/tristore/client/s3"
)

// Sample is one measured point.
type Sample struct {
	Point
	// BandwidthBps is the bytes that crossed the connections in the
	// direction measured during the window, per second: received (Down),
	// or acknowledged by the server (Up; TCP_INFO on Linux, else written).
	// HTTP headers are included: under 3 % at 16 KiB, nothing at 1 MiB.
	BandwidthBps float64 `json:"bandwidth_Bps"`
	// LatencyMeanS is the mean time of the requests that started and
	// finished inside the window (0 when none did: a point whose requests
	// outlast the window, e.g. 64 MiB on a slow link).
	LatencyMeanS float64 `json:"latency_mean_s"`
	Requests     int     `json:"requests"` // completed inside the window
	// CPUSeconds is this process's CPU time (user+system) in the window.
	CPUSeconds  float64 `json:"cpu_s"`
	WindowS     float64 `json:"window_s"`
	Seconds     float64 `json:"seconds"`    // what the point cost, warm-up and wind-down included
	CostBytes   int64   `json:"cost_bytes"` // bytes moved for it, both directions
	WindowBytes int64   `json:"window_bytes"`
	Errors      int     `json:"errors,omitempty"`
}

// Measurer measures points; S3Measurer against an endpoint, tests with a
// simulated surface.
type Measurer interface {
	Measure(ctx context.Context, pt Point) (Sample, error)
}

// Direction is what is measured: PUTs (up) or ranged GETs (down).
type Direction string

const (
	Up   Direction = "up"
	Down Direction = "down"
)

// S3Measurer measures a point by running Parallel workers, each sending
// requests of ChunkSize bytes back to back through a client/s3 engine (the
// one the transfers use: same SDK, signing and checksums): PUTs of fresh
// objects for Up, ranged GETs of one probe object for Down. It waits for
// every worker to finish one request (connections open, TCP windows
// grown; or enough bytes moved for that, or WarmMax), counts the bytes that cross the connections during
// Window, then cancels what is in flight. So every point costs at most
// WarmMax + Window (+ the cancellation), whatever its size: a 64 MiB × 16
// point is not waited out.
type S3Measurer struct {
	Base      s3client.Config // endpoint and credentials; chunk, parallelism, memory and HTTP client are set per point
	Dial      func(ctx context.Context, network, addr string) (net.Conn, error)
	Bucket    string
	Prefix    string // keys used: Prefix + "w<n>" (Up), Prefix + "probe" (Down); removed by Cleanup
	Direction Direction
	Window    time.Duration // default 2 s
	WarmMax   time.Duration // default 1.5 s

	mu        sync.Mutex
	data      []byte // random payload, grown on demand
	probeSize int64  // size of the probe object (Down), 0: none yet
	used      map[string]bool
	// Overhead is what preparing cost (the Down probe object's upload).
	OverheadSeconds float64
	OverheadBytes   int64
}

// counters count the bytes of a point's connections: read, written, and
// acknowledged by the peer (what an upload really delivered).
type counters struct {
	rd, wr atomic.Int64

	mu     sync.Mutex
	live   map[*countConn]bool
	closed int64 // bytes acked on connections already closed
	noAck  bool  // some connection could not report acked bytes
}

// sent is the bytes the peer acknowledged, or (where the kernel cannot
// say) the bytes written.
func (k *counters) sent() int64 {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.noAck {
		return k.wr.Load()
	}
	n := k.closed
	for c := range k.live {
		if a := tcpAcked(c.Conn); a >= 0 {
			n += a
		}
	}
	return n
}

// countConn counts the bytes read and written on a connection.
type countConn struct {
	net.Conn
	k *counters
}

func newCountConn(c net.Conn, k *counters) *countConn {
	cc := &countConn{c, k}
	k.mu.Lock()
	if k.live == nil {
		k.live = map[*countConn]bool{}
	}
	if tcpAcked(c) < 0 {
		k.noAck = true
	}
	k.live[cc] = true
	k.mu.Unlock()
	return cc
}

func (c *countConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	c.k.rd.Add(int64(n))
	return n, err
}

func (c *countConn) Write(b []byte) (int, error) {
	n, err := c.Conn.Write(b)
	c.k.wr.Add(int64(n))
	return n, err
}

func (c *countConn) Close() error {
	c.k.mu.Lock()
	if c.k.live[c] {
		if a := tcpAcked(c.Conn); a >= 0 {
			c.k.closed += a
		}
		delete(c.k.live, c)
	}
	c.k.mu.Unlock()
	return c.Conn.Close()
}

// engine builds an engine for pt whose connections are counted into rd/wr.
func (m *S3Measurer) engine(pt Point, k *counters) (*s3client.Engine, *http.Transport, error) {
	dial := m.Dial
	if dial == nil {
		dial = (&net.Dialer{Timeout: 10 * time.Second}).DialContext
	}
	tr := &http.Transport{
		DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
			c, err := dial(ctx, network, addr)
			if err != nil {
				return nil, err
			}
			return newCountConn(c, k), nil
		},
		MaxIdleConns:        2 * pt.Parallel,
		MaxIdleConnsPerHost: 2 * pt.Parallel,
		IdleConnTimeout:     30 * time.Second,
		DisableCompression:  true,
	}
	c := m.Base
	c.ChunkSize = max(pt.ChunkSize, 1)
	c.Parallelism = pt.Parallel
	c.MaxMemory = c.ChunkSize * int64(pt.Parallel)
	c.HTTPClient = &http.Client{Transport: tr}
	e, err := s3client.New(c)
	return e, tr, err
}

func (m *S3Measurer) payload(n int64) []byte {
	m.mu.Lock()
	defer m.mu.Unlock()
	if int64(len(m.data)) < n {
		m.data = make([]byte, n)
		rand.Read(m.data)
	}
	return m.data[:n]
}

// ensureProbe makes the Down probe object at least n bytes (4 chunks of
// the largest size asked for, so ranged GETs land on different offsets).
func (m *S3Measurer) ensureProbe(ctx context.Context, n int64) error {
	m.mu.Lock()
	have := m.probeSize
	m.mu.Unlock()
	if have >= n {
		return nil
	}
	size := max(n, 4<<20)
	var k counters
	e, tr, err := m.engine(Point{8 << 20, 8}, &k)
	if err != nil {
		return err
	}
	defer tr.CloseIdleConnections()
	start := time.Now()
	data := m.payload(size)
	_, err = e.Upload(ctx, m.Bucket, m.Prefix+"probe", bytes.NewReader(data), size)
	m.mu.Lock()
	defer m.mu.Unlock()
	m.OverheadSeconds += time.Since(start).Seconds()
	m.OverheadBytes += k.rd.Load() + k.wr.Load()
	if err != nil {
		return fmt.Errorf("tuner: writing the probe object: %w", err)
	}
	m.probeSize = size
	m.markUsed(m.Prefix + "probe")
	return nil
}

func (m *S3Measurer) markUsed(k string) {
	if m.used == nil {
		m.used = map[string]bool{}
	}
	m.used[k] = true
}

// cpuTime is this process's user+system CPU time.
func cpuTime() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	tv := func(t syscall.Timeval) float64 { return float64(t.Sec) + float64(t.Usec)/1e6 }
	return tv(ru.Utime) + tv(ru.Stime)
}

// Measure runs pt (see S3Measurer).
func (m *S3Measurer) Measure(ctx context.Context, pt Point) (Sample, error) {
	window, warmMax := m.Window, m.WarmMax
	if window <= 0 {
		window = 2 * time.Second
	}
	if warmMax <= 0 {
		warmMax = 1500 * time.Millisecond
	}
	if m.Direction == Down {
		if err := m.ensureProbe(ctx, 4*pt.ChunkSize); err != nil {
			return Sample{}, err
		}
	}
	var k counters
	e, tr, err := m.engine(pt, &k)
	if err != nil {
		return Sample{}, err
	}
	defer tr.CloseIdleConnections()
	start := time.Now()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()

	var (
		mu        sync.Mutex
		windowAt  time.Time // zero until the window opens
		lats      []float64
		errs      int
		firstErr  error
		warmed    atomic.Int64
		allWarm   = make(chan struct{})
		closeWarm sync.Once
	)
	data := m.payload(pt.ChunkSize)
	m.mu.Lock()
	probe := m.probeSize
	for w := range pt.Parallel {
		m.markUsed(fmt.Sprintf("%sw%d", m.Prefix, w))
	}
	m.mu.Unlock()
	one := func(ctx context.Context, w, n int) error {
		switch m.Direction {
		case Down:
			slots := probe / pt.ChunkSize
			off := int64((w*7919+n*104729)%int(slots)) * pt.ChunkSize
			out, err := e.API().GetObject(ctx, &awss3.GetObjectInput{Bucket: &m.Bucket, Key: aws.String(m.Prefix + "probe"),
				Range: aws.String(fmt.Sprintf("bytes=%d-%d", off, off+pt.ChunkSize-1))})
			if err != nil {
				return err
			}
			_, err = io.Copy(io.Discard, out.Body)
			out.Body.Close()
			return err
		default:
			_, err := e.Upload(ctx, m.Bucket, fmt.Sprintf("%sw%d", m.Prefix, w), bytes.NewReader(data), pt.ChunkSize)
			return err
		}
	}
	var wg sync.WaitGroup
	for w := range pt.Parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; wctx.Err() == nil && n < 1<<20; n++ {
				t0 := time.Now()
				err := one(wctx, w, n)
				t1 := time.Now()
				if wctx.Err() != nil {
					return
				}
				mu.Lock()
				if err != nil {
					errs++
					if firstErr == nil {
						firstErr = err
					}
				} else if !windowAt.IsZero() && !t0.Before(windowAt) {
					lats = append(lats, t1.Sub(t0).Seconds())
				}
				mu.Unlock()
				if n == 0 && warmed.Add(1) == int64(pt.Parallel) {
					closeWarm.Do(func() { close(allWarm) })
				}
				if err != nil && errs > 3*pt.Parallel {
					return
				}
			}
		}()
	}
	counter := k.rd.Load
	if m.Direction != Down {
		counter = k.sent
	}
	// Warm-up ends when every worker finished a request, or the workers
	// moved min(chunk, 1 MiB) each on average (connections open, TCP
	// windows grown: a 16 MiB × 16 point on a fast link need not wait for
	// 256 MiB), or at WarmMax.
	warmBytes := int64(pt.Parallel) * min(pt.ChunkSize, 1<<20)
	warm := time.NewTimer(warmMax)
	tick := time.NewTicker(20 * time.Millisecond)
warmup:
	for {
		select {
		case <-allWarm:
			break warmup
		case <-warm.C:
			break warmup
		case <-ctx.Done():
			break warmup
		case <-tick.C:
			if counter() >= warmBytes {
				break warmup
			}
		}
	}
	warm.Stop()
	tick.Stop()
	mu.Lock()
	windowAt = time.Now()
	mu.Unlock()
	b0, cpu0 := counter(), cpuTime()
	// A window in which not one byte moved is no measurement (a loaded
	// machine or a stalled link can hold a short window's every request):
	// it is extended, at most 4 more windows, until bytes have moved, so a
	// profile check does not read "0 B/s" as drift and re-sample.
	var b1 int64
	for ext := 0; ext <= 4; ext++ {
		t := time.NewTimer(window)
		select {
		case <-t.C:
		case <-ctx.Done():
		}
		t.Stop()
		if b1 = counter(); b1 > b0 || ctx.Err() != nil {
			break
		}
		mu.Lock()
		stuck := errs > 0
		mu.Unlock()
		if stuck {
			break
		}
	}
	cpu1 := cpuTime()
	mu.Lock()
	elapsed := time.Since(windowAt).Seconds()
	nl := append([]float64(nil), lats...)
	nerr, ferr := errs, firstErr
	mu.Unlock()
	cancel()
	wg.Wait()
	if err := ctx.Err(); err != nil {
		return Sample{}, err
	}
	s := Sample{Point: pt, WindowS: elapsed, WindowBytes: b1 - b0, CPUSeconds: cpu1 - cpu0,
		Requests: len(nl), Errors: nerr, Seconds: time.Since(start).Seconds(), CostBytes: k.rd.Load() + k.wr.Load()}
	s.BandwidthBps = float64(s.WindowBytes) / elapsed
	for _, l := range nl {
		s.LatencyMeanS += l / float64(len(nl))
	}
	if s.WindowBytes == 0 && ferr != nil {
		return s, fmt.Errorf("tuner: %d×%d: %w", pt.ChunkSize, pt.Parallel, ferr)
	}
	return s, nil
}

// Cleanup removes the objects the measurer wrote: every key under Prefix,
// listed again until none is left (a PUT cancelled at a window's end can
// still land on the server after the first delete), at most 5 rounds.
func (m *S3Measurer) Cleanup(ctx context.Context) error {
	m.mu.Lock()
	used := len(m.used) > 0
	m.used = nil
	m.mu.Unlock()
	if !used {
		return nil
	}
	var k counters
	e, tr, err := m.engine(Point{1, 4}, &k)
	if err != nil {
		return err
	}
	defer tr.CloseIdleConnections()
	for round := 0; round < 5; round++ {
		var keys []types.ObjectIdentifier
		err := e.Do(ctx, func(ctx context.Context) error {
			out, err := e.API().ListObjectsV2(ctx, &awss3.ListObjectsV2Input{Bucket: &m.Bucket, Prefix: &m.Prefix})
			if err != nil {
				return err
			}
			keys = keys[:0]
			for _, o := range out.Contents {
				keys = append(keys, types.ObjectIdentifier{Key: o.Key})
			}
			return nil
		})
		if err != nil {
			return fmt.Errorf("tuner: listing %s to clean up: %w", m.Prefix, err)
		}
		if len(keys) == 0 {
			return nil
		}
		err = e.Do(ctx, func(ctx context.Context) error {
			_, err := e.API().DeleteObjects(ctx, &awss3.DeleteObjectsInput{Bucket: &m.Bucket, Delete: &types.Delete{Objects: keys, Quiet: aws.Bool(true)}})
			return err
		})
		if err != nil {
			return fmt.Errorf("tuner: removing the probe objects under %s: %w", m.Prefix, err)
		}
		select {
		case <-time.After(time.Duration(round+1) * 200 * time.Millisecond):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	return fmt.Errorf("tuner: probe objects under %s keep appearing", m.Prefix)
}
