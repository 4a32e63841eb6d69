package chunkstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	s3client "github.com/tristore/tristore/client/s3"
)

// flaky is a transport that can play an endpoint that is down (connection
// refused) or throttling (503 SlowDown for the next n requests).
type flaky struct {
	next     http.RoundTripper
	down     atomic.Bool
	throttle atomic.Int32
	slowed   atomic.Int32
}

func (f *flaky) RoundTrip(r *http.Request) (*http.Response, error) {
	if f.down.Load() {
		return nil, &netOpError{}
	}
	if f.throttle.Add(-1) >= 0 {
		f.slowed.Add(1)
		body := `<?xml version="1.0" encoding="UTF-8"?><Error><Code>SlowDown</Code><Message>Please reduce your request rate.</Message></Error>`
		return &http.Response{StatusCode: 503, Status: "503 Slow Down", Header: http.Header{"Content-Type": {"application/xml"}},
			Body: io.NopCloser(strings.NewReader(body)), ContentLength: int64(len(body)), Request: r, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1}, nil
	}
	f.throttle.Store(0)
	return f.next.RoundTrip(r)
}

// netOpError is a refused connection as the net package reports it.
type netOpError struct{}

func (*netOpError) Error() string   { return "dial tcp 127.0.0.1:1: connect: connection refused" }
func (*netOpError) Unwrap() error   { return syscall.ECONNREFUSED }
func (*netOpError) Timeout() bool   { return false }
func (*netOpError) Temporary() bool { return false }

// TestEndpointTrouble: throttling is retried until it passes; an endpoint
// that is down fails Sync clearly while the data stays dirty and readable
// in the cache, and once it is back the same data goes up.
func TestEndpointTrouble(t *testing.T) {
	v := newEnv(t)
	f := &flaky{next: http.DefaultTransport}
	e, err := s3client.New(s3client.Config{Endpoint: v.e.Config().Endpoint, AccessKey: testAK, SecretKey: testSK, PathStyle: true,
		Retries: 4, HTTPClient: &http.Client{Transport: f}})
	if err != nil {
		t.Fatal(err)
	}
	c := v.cfg(t.TempDir())
	c.Engine = e
	s := v.open(c)
	ino := mkfile(t, s, "f")
	want := randBytes(3, 3*cs)
	write(t, s, ino, want, 0)
	f.throttle.Store(3)
	if err := s.Sync(context.Background()); err != nil {
		t.Fatalf("sync while throttled: %v", err)
	}
	if f.slowed.Load() != 3 {
		t.Fatalf("%d throttled answers seen, want 3", f.slowed.Load())
	}
	more := randBytes(4, cs)
	write(t, s, ino, more, 3*cs)
	want = append(want, more...)
	f.down.Store(true)
	if err := s.Sync(context.Background()); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("sync with the endpoint down: %v", err)
	}
	if got := readAll(t, s, ino); !bytes.Equal(got, want) {
		t.Fatal("cache does not serve the unsent data")
	}
	if n := len(s.dirtyChunks(func(uint64, *dirtyChunk) bool { return true })); n != 1 {
		t.Fatalf("%d dirty chunks after the failed sync, want 1", n)
	}
	f.down.Store(false)
	if err := s.Sync(context.Background()); err != nil {
		t.Fatalf("sync once the endpoint is back: %v", err)
	}
	s.Close(context.Background())
	s2 := v.open(v.cfg(t.TempDir()))
	if got := readAll(t, s2, lookup(t, s2, "f")); !bytes.Equal(got, want) {
		t.Fatal("fresh gateway reads different bytes")
	}
}

// TestStalledEndpoint: a server that accepts requests and never answers
// costs one request timeout per attempt, then a clear error, not a hang.
func TestStalledEndpoint(t *testing.T) {
	v := newEnv(t)
	stall := make(chan struct{})
	defer close(stall)
	f := &stallRT{next: http.DefaultTransport, stall: stall}
	e, err := s3client.New(s3client.Config{Endpoint: v.e.Config().Endpoint, AccessKey: testAK, SecretKey: testSK, PathStyle: true,
		Retries: 1, HTTPClient: &http.Client{Transport: f}})
	if err != nil {
		t.Fatal(err)
	}
	c := v.cfg(t.TempDir())
	c.Engine, c.RequestTimeout = e, 300*time.Millisecond
	s := v.open(c)
	write(t, s, mkfile(t, s, "f"), randBytes(1, cs), 0)
	f.on.Store(true)
	start := time.Now()
	err = s.Sync(context.Background())
	if err == nil || time.Since(start) > 10*time.Second {
		t.Fatalf("sync against a stalled server: %v after %v", err, time.Since(start))
	}
	f.on.Store(false)
	if err := s.Sync(context.Background()); err != nil {
		t.Fatalf("sync once the server answers again: %v", err)
	}
}

// stallRT holds every request until its context ends while on is set.
type stallRT struct {
	next  http.RoundTripper
	on    atomic.Bool
	stall chan struct{}
}

func (s *stallRT) RoundTrip(r *http.Request) (*http.Response, error) {
	if s.on.Load() {
		select {
		case <-r.Context().Done():
			return nil, r.Context().Err()
		case <-s.stall:
			return nil, io.ErrUnexpectedEOF
		}
	}
	return s.next.RoundTrip(r)
}

// TestLeaseRenewal: a link too broken to renew the lease past its expiry
// only holds publishing back (local writes go on) and the store publishes
// again once a renewal finds its own token; a lease object that names
// someone else makes the store refuse writes for good.
func TestLeaseRenewal(t *testing.T) {
	v := newEnv(t)
	f := &flaky{next: http.DefaultTransport}
	e, err := s3client.New(s3client.Config{Endpoint: v.e.Config().Endpoint, AccessKey: testAK, SecretKey: testSK, PathStyle: true,
		Retries: s3client.NoRetries, HTTPClient: &http.Client{Transport: f}})
	if err != nil {
		t.Fatal(err)
	}
	c := v.cfg(t.TempDir())
	c.Engine, c.LeaseTTL = e, 3*time.Second
	s := v.open(c)
	ino := mkfile(t, s, "f")
	f.down.Store(true)
	time.Sleep(3500 * time.Millisecond) // renewals failed past the expiry
	write(t, s, ino, []byte("local"), 0)
	if err := s.Sync(context.Background()); err == nil {
		t.Fatal("published with an expired lease")
	}
	f.down.Store(false)
	deadline := time.Now().Add(10 * time.Second)
	for s.Sync(context.Background()) != nil {
		if time.Now().After(deadline) {
			t.Fatal("no publish within 10 s of the link coming back")
		}
		time.Sleep(200 * time.Millisecond)
	}
	// Someone else's lease: refused for good.
	k := "fs/" + leaseKey
	if _, err := v.e.API().PutObject(context.Background(), &awss3.PutObjectInput{Bucket: &v.bucket, Key: &k,
		Body: strings.NewReader(fmt.Sprintf(`{"owner":"intruder","token":"x","expires":%d}`, time.Now().Add(time.Hour).UnixNano()))}); err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(10 * time.Second)
	for {
		_, err := s.WriteAt(context.Background(), ino, []byte("x"), 0)
		if errors.Is(err, ErrReadOnly) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("writes still accepted 10 s after the lease was taken over: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
