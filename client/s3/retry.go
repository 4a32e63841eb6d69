package s3

import (
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"sort"
	"sync"
	"syscall"
	"time"

	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// do runs one request with the engine's retry policy: up to Retries more
// attempts on retryable errors, sleeping with exponential backoff and full
// jitter. Every attempt counts as a request and its latency is recorded.
// Each attempt gets at most RequestTimeout (body included), so a stalled
// server costs one timeout and a retry, not the whole transfer.
func (e *Engine) do(ctx context.Context, st *stats, fn func(context.Context) error) error {
	for attempt := 0; ; attempt++ {
		start := time.Now()
		actx, cancel := ctx, context.CancelFunc(func() {})
		if e.cfg.RequestTimeout > 0 {
			actx, cancel = context.WithTimeout(ctx, e.cfg.RequestTimeout)
		}
		err := fn(actx)
		cancel()
		st.record(time.Since(start))
		if err == nil {
			return nil
		}
		if ctx.Err() != nil || attempt >= e.cfg.Retries || !Retryable(err) {
			return err
		}
		st.retried()
		backoff := e.cfg.BackoffBase
		for i := 0; i < attempt && backoff < e.cfg.BackoffMax; i++ {
			backoff *= 2
		}
		backoff = min(backoff, e.cfg.BackoffMax)
		t := time.NewTimer(rand.N(backoff) + 1)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return err
		}
	}
}

// Do runs fn (one request made through API()) with the engine's retry
// policy and RequestTimeout, for the requests callers make themselves:
// listings, deletes, bucket chores.
func (e *Engine) Do(ctx context.Context, fn func(context.Context) error) error {
	return e.do(ctx, newStats(), fn)
}

// DoTally is Do counting the request towards t's summary.
func (e *Engine) DoTally(ctx context.Context, t *Tally, fn func(context.Context) error) error {
	return e.do(ctx, t.st, fn)
}

// Tally gathers the requests of a whole command (its listings and deletes
// through Do, its batch through BatchOptions.Tally) into one summary whose
// wall time starts at NewTally.
type Tally struct{ st *stats }

// NewTally starts a tally now.
func NewTally() *Tally { return &Tally{st: newStats()} }

// Retryable says whether a failed request may succeed if repeated: 5xx,
// 429 and throttling, timeouts, connection resets and bytes that arrived
// damaged (a download's ErrChecksum; an upload the server refused as
// BadDigest or XAmzContentSHA256Mismatch). Any other 4xx is the caller's mistake and is never repeated;
// neither is a refused connection (the endpoint is not there).
func Retryable(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) {
		return false
	}
	if errors.Is(err, ErrChecksum) {
		return true
	}
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "SlowDown", "Throttling", "ThrottlingException", "RequestTimeout", "InternalError", "ServiceUnavailable":
			return true
		case "BadDigest", "XAmzContentSHA256Mismatch":
			// The server refused bytes that do not match the checksum or
			// the signed SHA-256 they were sent with: damaged on the way,
			// like a download's ErrChecksum; the client still holds them.
			return true
		}
	}
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) {
		s := re.HTTPStatusCode()
		if s >= 500 || s == 429 {
			return true
		}
		if s >= 400 {
			return false
		}
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		return false
	}
	if errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) ||
		errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, context.DeadlineExceeded) {
		return true
	}
	return isNetErr(err)
}

// stats collects one transfer's requests; safe for concurrent parts.
type stats struct {
	start     time.Time
	mu        sync.Mutex
	latencies []time.Duration
	retries   int
	reused    int64
}

func newStats() *stats { return &stats{start: time.Now()} }

func (s *stats) record(d time.Duration) {
	s.mu.Lock()
	s.latencies = append(s.latencies, d)
	s.mu.Unlock()
}

// addReused counts bytes an earlier, interrupted upload already stored.
func (s *stats) addReused(n int64) {
	s.mu.Lock()
	s.reused += n
	s.mu.Unlock()
}

// merge adds o's requests to s (a batch summarising its files).
func (s *stats) merge(o *stats) {
	o.mu.Lock()
	l, r, u := append([]time.Duration(nil), o.latencies...), o.retries, o.reused
	o.mu.Unlock()
	s.mu.Lock()
	s.latencies = append(s.latencies, l...)
	s.retries += r
	s.reused += u
	s.mu.Unlock()
}

func (s *stats) retried() {
	s.mu.Lock()
	s.retries++
	s.mu.Unlock()
}

// Result summarises one transfer. Durations are in seconds and latencies in
// milliseconds so the JSON reads without knowing Go's time.Duration.
type Result struct {
	Bytes        int64   `json:"bytes"`          // payload bytes moved (0 on failure)
	Seconds      float64 `json:"seconds"`        // wall time of the transfer
	BandwidthBps float64 `json:"bandwidth_Bps"`  // Bytes / Seconds
	Requests     int     `json:"requests"`       // HTTP requests, retries included
	Retries      int     `json:"retries"`        // requests that were repeats
	LatencyP50Ms float64 `json:"latency_p50_ms"` // per request
	LatencyP90Ms float64 `json:"latency_p90_ms"`
	LatencyP99Ms float64 `json:"latency_p99_ms"`
	// ResumedBytes of Bytes were not sent again: an interrupted upload
	// had already stored them (verified by size and checksum).
	ResumedBytes int64 `json:"resumed_bytes,omitempty"`
}

func (s *stats) result(bytes int64) Result {
	el := time.Since(s.start)
	s.mu.Lock()
	defer s.mu.Unlock()
	r := Result{Bytes: bytes, Seconds: el.Seconds(), Requests: len(s.latencies), Retries: s.retries, ResumedBytes: s.reused}
	if r.Seconds > 0 {
		r.BandwidthBps = float64(bytes) / r.Seconds
	}
	l := append([]time.Duration(nil), s.latencies...)
	sort.Slice(l, func(i, j int) bool { return l[i] < l[j] })
	r.LatencyP50Ms = percentileMs(l, 50)
	r.LatencyP90Ms = percentileMs(l, 90)
	r.LatencyP99Ms = percentileMs(l, 99)
	return r
}

// percentileMs is the nearest-rank percentile of sorted latencies.
func percentileMs(sorted []time.Duration, p int) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := (p*len(sorted)+99)/100 - 1
	i = max(0, min(i, len(sorted)-1))
	return float64(sorted[i]) / float64(time.Millisecond)
}
