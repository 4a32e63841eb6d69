// Package s3 is tristore's S3-compatible HTTP front end: buckets, objects
// (ranges, conditionals, checksums, copy), listings v1/v2, multipart
// uploads, ACL and policy endpoints, S3 XML errors and Prometheus metrics,
// over a store.Store. Requests are authenticated by an Authenticator
// (SigV4, frontend/s3/sigv4) and authorised by an Authorizer
// (frontend/s3/authz) — both small interfaces so the handlers do not depend
// on how keys are kept or policies evaluated.
//
//	client --HTTP--> Server.ServeHTTP --route--> op (buckets.go, objects_*.go, ...)
//	                     |  authenticate (sigv4) + skew check
//	                     |  authorize (owner, ACL, policy from the store)
//	                     '--errors.go: store/auth errors -> S3 XML error
package s3

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tristore/tristore/frontend"
	"github.com/tristore/tristore/internal/reqmemo"
	"github.com/tristore/tristore/store"
)

// Options configures a Server. Zero values get the defaults noted.
type Options struct {
	// Region is reported by GetBucketLocation and used by SigV4 (default us-east-1).
	Region string
	// AllowAnonymous lets unsigned requests act with full access (a
	// switch for throw-away local setups). Without it, unsigned requests
	// get only what a public ACL or a bucket policy grants to "*".
	AllowAnonymous bool
	// VirtualHosts are domains for virtual-host-style requests: a Host of
	// "bucket.<domain>" addresses bucket. Others are path-style.
	VirtualHosts []string
	// MaxSkew is the largest accepted difference between a signed
	// request's X-Amz-Date and the server clock (default 15 minutes, as S3).
	MaxSkew time.Duration
	// ShutdownTimeout bounds how long in-flight requests may run after
	// Close or ctx cancellation (default 30 s).
	ShutdownTimeout time.Duration
	// MaxHeaderBytes limits request headers (default 64 KiB; larger gets 431).
	MaxHeaderBytes int
	// BodyIdleTimeout is how long a request body may send nothing before
	// the request fails (default 2 minutes). There is no total body
	// deadline: a 5 GiB PUT over a slow link is fine as long as it moves.
	BodyIdleTimeout time.Duration
	Log             *slog.Logger
	// Metrics, if set, receives the per-operation Prometheus collectors.
	Metrics prometheus.Registerer
	// TLS, if set, makes Serve speak HTTPS on the listeners it is given.
	TLS *tls.Config
	// Auth authenticates requests; required.
	Auth Authenticator
	// Authz authorises requests; required.
	Authz Authorizer
	// SSEKeyFile is the SSE-S3 server key's file (created 0600 on first
	// use; sse.go). "" refuses SSE-S3 with NotImplemented.
	SSEKeyFile string
	// LifecycleDay is the length of a "day" for lifecycle rules (default
	// 24h, or env TRISTORE_LIFECYCLE_DAY): shorter in tests (lifecycle_worker.go).
	LifecycleDay time.Duration
}

// Identity is who sent a request.
type Identity struct {
	AccessKey string
	User      string // user name; "" when anonymous
	Admin     bool
	Anonymous bool
}

// Authenticator checks a request's signature. On success it may replace
// r.Body with the verified, decoded payload (whose reader fails with a
// CodedError rather than io.EOF if the payload does not match its
// signature). Anonymous requests return Identity{Anonymous: true}, nil.
type Authenticator interface {
	Authenticate(r *http.Request) (Identity, error)
}

// AccessRequest is one access-control question: may Principal do Action
// on Bucket/Key, given the bucket's owner, ACLs and policy document.
type AccessRequest struct {
	Principal   string // "" when anonymous
	Admin       bool
	Action      string // "s3:GetObject", ...
	Bucket, Key string
	BucketOwner string
	BucketACL   string // canned ACL ("" = private)
	ObjectACL   string
	ObjectOwner string
	Policy      string // bucket policy JSON, "" if none
	// Context holds the request's policy condition keys (lower case).
	Context map[string][]string
	// ACLsDisabled: ownership BucketOwnerEnforced. IgnorePublicACLs and
	// RestrictPublicBuckets: the bucket's public access block flags.
	ACLsDisabled, IgnorePublicACLs, RestrictPublicBuckets bool
}

// Authorizer evaluates access and validates the documents clients upload.
type Authorizer interface {
	Allowed(AccessRequest) bool
	// CheckPolicy returns an error (a CodedError for MalformedPolicy) if doc is not a valid policy for bucket.
	CheckPolicy(doc []byte, bucket string) error
	ValidCannedACL(name string) bool
}

// Server is the S3 front end; it implements frontend.Server and http.Handler.
type Server struct {
	st   store.Store
	opts Options
	log  *slog.Logger
	met  *metrics

	mu     sync.Mutex
	hs     []*http.Server
	closed bool
	lc     lifecycleWorker
	sseKey sseKeyCache // sse.go
}

// New returns a Server over st.
func New(st store.Store, opts Options) (*Server, error) {
	if st == nil {
		return nil, errors.New("s3: nil store")
	}
	if opts.Auth == nil {
		return nil, errors.New("s3: Options.Auth is required")
	}
	if opts.Authz == nil {
		return nil, errors.New("s3: Options.Authz is required")
	}
	if opts.Region == "" {
		opts.Region = "us-east-1"
	}
	if opts.MaxSkew <= 0 {
		opts.MaxSkew = 15 * time.Minute
	}
	if opts.ShutdownTimeout <= 0 {
		opts.ShutdownTimeout = 30 * time.Second
	}
	if opts.BodyIdleTimeout <= 0 {
		opts.BodyIdleTimeout = 2 * time.Minute
	}
	if opts.MaxHeaderBytes <= 0 {
		opts.MaxHeaderBytes = 64 << 10
	}
	for i, d := range opts.VirtualHosts {
		opts.VirtualHosts[i] = strings.ToLower(strings.TrimPrefix(d, "."))
	}
	log := opts.Log
	if log == nil {
		log = slog.Default()
	}
	met, err := newMetrics(opts.Metrics)
	if err != nil {
		return nil, err
	}
	return &Server{st: st, opts: opts, log: log.With("protocol", "s3"), met: met}, nil
}

// Name implements frontend.Server.
func (s *Server) Name() string { return "s3" }

// Serve serves HTTP on ln until ctx is cancelled or Close is called, then
// lets in-flight requests finish (up to ShutdownTimeout) and returns nil.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	hs := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    s.opts.MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelDebug),
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.hs = append(s.hs, hs)
	s.mu.Unlock()
	s.startLifecycle(ctx)

	// Below TLS: see httperr.go for what this catches and what it cannot.
	ln = xmlErrListener{Listener: ln, s: s}
	if s.opts.TLS != nil {
		hs.TLSConfig = s.opts.TLS.Clone()
		ln = tls.NewListener(ln, hs.TLSConfig)
	}
	errc := make(chan error, 1)
	go func() { errc <- hs.Serve(ln) }()
	select {
	case err := <-errc:
		if errors.Is(err, http.ErrServerClosed) {
			return nil
		}
		return fmt.Errorf("s3: %w", err)
	case <-ctx.Done():
		s.shutdown(hs)
		<-errc
		s.stopLifecycle()
		return nil
	}
}

func (s *Server) shutdown(hs *http.Server) {
	sctx, cancel := context.WithTimeout(context.Background(), s.opts.ShutdownTimeout)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil {
		s.log.Warn("shutdown timeout: closing remaining connections", "err", err)
		hs.Close()
	}
}

// Close stops all Serve loops gracefully (in-flight requests finish).
func (s *Server) Close() error {
	s.mu.Lock()
	s.closed = true
	hss := s.hs
	s.hs = nil
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, hs := range hss {
		wg.Add(1)
		go func() { defer wg.Done(); s.shutdown(hs) }()
	}
	wg.Wait()
	s.stopLifecycle()
	return nil
}

// reqCtx carries per-request state through a handler.
type reqCtx struct {
	id          string
	op          *operation
	bucket, key string
	ident       Identity
	bytesIn     int64
	// cond holds the policy condition keys of the request
	// (access_config.go), computed by authorize only when a bucket policy
	// needs them (POST Object sets its own).
	cond map[string][]string
	// req is the request, for helpers that get rc but not r.
	req *http.Request
	// ctx is the request's context, for helpers that get rc but not r.
	ctx context.Context
}

// ServeHTTP authenticates, routes, authorises and runs one request.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	// One memo per request: the store and the user database look the
	// bucket's documents and the access key up once per request, not once
	// per question (internal/reqmemo).
	//
	// In place (*r =), not a copy: handle() wraps r.Body (idleBody,
	// countingBody) and net/http's post-handler cleanup looks at its own
	// *Request's Body. With a copy it saw the raw body, and a request
	// refused before its body was read (an SSE-C UploadPart without its
	// key) got its connection reset instead of the 400/403
	// (TestSSEMultipart failed 3 of 3 after 7bff836, passes with this).
	*r = *r.WithContext(reqmemo.With(r.Context()))
	rc := &reqCtx{id: newRequestID()}
	cw := &countingWriter{ResponseWriter: w}
	cw.Header().Set("x-amz-request-id", rc.id)
	cw.Header().Set("x-amz-id-2", rc.id)
	cw.Header().Set("Server", "tristore")
	if r.ContentLength == 0 && strings.EqualFold(r.Header.Get("Expect"), "100-continue") {
		// net/http sends "100 Continue" only when a handler reads a
		// non-empty body. botocore waits for it even on empty PUTs and
		// otherwise stalls its next request on the connection until its
		// read timeout, so answer the expectation ourselves.
		w.WriteHeader(http.StatusContinue)
	}
	err := s.handle(cw, r, rc)
	var ae *APIError
	if err != nil {
		if cw.wrote {
			// Headers are gone (e.g. a GET body failed mid-stream): all
			// we can do is cut the connection so the client sees a short body.
			s.log.Warn("request failed after response started", "op", rc.opName(), "bucket", rc.bucket, "key", rc.key, "err", err)
			s.met.observe(rc.opName(), cw.status(), ErrInternal, rc.bytesIn, cw.n, time.Since(start))
			panic(http.ErrAbortHandler)
		}
		ae = writeError(cw, r, rc, err)
		if serverFault(ae, err) {
			s.log.Error("request failed", "op", rc.opName(), "bucket", rc.bucket, "key", rc.key, "code", ae.Code, "err", err, "id", rc.id)
		} else {
			s.log.Debug("request refused", "op", rc.opName(), "bucket", rc.bucket, "key", rc.key, "code", ae.Code, "err", err, "id", rc.id)
		}
	}
	s.met.observe(rc.opName(), cw.status(), ae, rc.bytesIn, cw.n, time.Since(start))
}

// serverFault tells the errors worth an ERROR line (the server failed)
// from those that are the client's doing or a documented refusal, which
// are logged at DEBUG: every 4xx, 501 NotImplemented (a feature the
// client asked for that tristore does not have) and 503 for a request the
// client cancelled. One `s3cmd info` used to log four ERROR lines.
func serverFault(ae *APIError, err error) bool {
	switch {
	case ae.Status < 500, ae.Status == http.StatusNotImplemented:
		return false
	case errors.Is(err, context.Canceled):
		return false
	}
	return true
}

func (rc *reqCtx) opName() string {
	if rc.op == nil {
		return "Unknown"
	}
	return rc.op.name
}

func (s *Server) handle(w http.ResponseWriter, r *http.Request, rc *reqCtx) error {
	if r.Body != nil && r.ContentLength != 0 {
		r.Body = &idleBody{ReadCloser: r.Body, ctl: http.NewResponseController(w), d: s.opts.BodyIdleTimeout}
	}
	bucket, key, err := s.parseTarget(r)
	rc.bucket, rc.key = bucket, key
	if err != nil {
		return err
	}
	if r.Method == http.MethodOptions {
		rc.op = opPreflight
		return s.preflight(w, r, rc) // cors.go: unauthenticated, as browsers send it
	}
	if bucket != "" && r.Header.Get("Origin") != "" {
		s.corsActual(w, r, bucket)
	}
	op, err := route(r, bucket, key)
	rc.op = op
	if err != nil {
		return err
	}
	if err := s.checkSkew(r); err != nil {
		return err
	}
	id, err := s.opts.Auth.Authenticate(r)
	if err != nil {
		return err
	}
	rc.ident = id
	rc.req, rc.ctx = r, r.Context()
	if op.action != "" {
		if err := s.authorize(r.Context(), rc, op.action, bucket, key); err != nil {
			return err
		}
	}
	if r.Body != nil {
		r.Body = &countingBody{ReadCloser: r.Body, n: &rc.bytesIn}
	}
	return op.fn(s, w, r, rc)
}

// checkSkew refuses header-signed requests whose date is too far from now.
// Presigned URLs carry their own expiry, checked by the authenticator.
// SigV2 requests are checked by frontend/s3/sigv2, which reads their
// RFC 1123 dates (with a "+0000" zone, which http.ParseTime refuses).
func (s *Server) checkSkew(r *http.Request) error {
	if a := r.Header.Get("Authorization"); a == "" || strings.HasPrefix(a, "AWS ") {
		return nil
	}
	var t time.Time
	var err error
	if v := r.Header.Get("X-Amz-Date"); v != "" {
		t, err = time.Parse("20060102T150405Z", v)
	} else if v := r.Header.Get("Date"); v != "" {
		t, err = http.ParseTime(v)
	} else {
		return &APIError{"AccessDenied", http.StatusForbidden, "AWS authentication requires a valid Date or x-amz-date header"}
	}
	if err != nil {
		return &APIError{"AccessDenied", http.StatusForbidden, "AWS authentication requires a valid Date or x-amz-date header"}
	}
	if d := time.Since(t); d > s.opts.MaxSkew || d < -s.opts.MaxSkew {
		return ErrRequestTimeTooSkewed
	}
	return nil
}

// idleBody fails a request body that stalls: before each read it moves
// the connection's read deadline BodyIdleTimeout ahead, so a client that
// stops sending mid-body cannot hold a handler (and a temp file) forever.
type idleBody struct {
	io.ReadCloser
	ctl *http.ResponseController
	d   time.Duration
}

func (b *idleBody) Read(p []byte) (int, error) {
	b.ctl.SetReadDeadline(time.Now().Add(b.d))
	n, err := b.ReadCloser.Read(p)
	if err != nil && errors.Is(err, os.ErrDeadlineExceeded) {
		err = ErrIncompleteBody.withMessage("the request body stalled for longer than " + b.d.String())
	} else if err != nil {
		// Body done: a long handler (e.g. completing a huge multipart
		// upload) must not trip the deadline, which would cancel its context.
		b.ctl.SetReadDeadline(time.Time{})
	}
	return n, err
}

var _ frontend.Server = (*Server)(nil)
var _ http.Handler = (*Server)(nil)
