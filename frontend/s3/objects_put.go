package s3

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/tristore/tristore/store"
)

var opPutObject = &operation{"PutObject", "s3:PutObject", (*Server).putObject}

// maxPutSize is S3's largest single PUT (5 GiB); larger objects need multipart.
const maxPutSize = 5 << 30

// maxUserMeta is S3's limit on the total size of x-amz-meta-* headers.
const maxUserMeta = 2 << 10

// storedHeaders are the standard headers kept with an object and returned on GET.
var storedHeaders = []string{"Cache-Control", "Content-Disposition", "Content-Encoding", "Content-Language", "Expires"}

// metaFromRequest collects the metadata a PUT, Copy (REPLACE) or
// CreateMultipartUpload supplies in its headers.
func (s *Server) metaFromRequest(h http.Header, rc *reqCtx) (store.ObjectMeta, error) {
	m := store.ObjectMeta{ContentType: h.Get("Content-Type"), Owner: rc.ident.User}
	if err := refuseUnsupported(h); err != nil {
		return m, err
	}
	size := 0
	for k, vs := range h {
		lk := strings.ToLower(k)
		name, ok := strings.CutPrefix(lk, "x-amz-meta-")
		if !ok || name == "" {
			continue
		}
		if m.UserMeta == nil {
			m.UserMeta = map[string]string{}
		}
		v := strings.Join(vs, ",")
		m.UserMeta[name] = v
		size += len(name) + len(v)
	}
	if size > maxUserMeta {
		return m, ErrMetadataTooLarge
	}
	for _, k := range storedHeaders {
		if v := h.Get(k); v != "" {
			if k == "Content-Encoding" {
				// aws-chunked is transfer framing, not the object's encoding.
				v = strings.TrimPrefix(strings.TrimPrefix(v, "aws-chunked"), ",")
				if v == "" {
					continue
				}
			}
			if m.Headers == nil {
				m.Headers = map[string]string{}
			}
			m.Headers[k] = v
		}
	}
	ctx := rc.ctx
	if ctx == nil {
		ctx = context.Background()
	}
	// acl_grants.go: x-amz-acl or x-amz-grant-*, ownership controls.
	acl, owner, err := s.newObjectACL(ctx, h, rc)
	if err != nil {
		return m, err
	}
	m.ACL, m.Owner = acl, owner
	tags, err := tagsFromHeader(h)
	if err != nil {
		return m, err
	}
	m.Tags = tags
	return m, nil
}

// bodySize is the payload length of r: the decoded length of an
// aws-chunked body, else Content-Length; -1 if unknown.
func bodySize(r *http.Request) (int64, error) {
	if v := r.Header.Get("X-Amz-Decoded-Content-Length"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return 0, ErrInvalidArgument.withMessage("invalid x-amz-decoded-content-length")
		}
		return n, nil
	}
	return r.ContentLength, nil
}

func (s *Server) putObject(w http.ResponseWriter, r *http.Request, rc *reqCtx) error {
	ctx := r.Context()
	size, err := bodySize(r)
	if err != nil {
		return err
	}
	if size > maxPutSize {
		return ErrEntityTooLarge
	}
	meta, err := s.metaFromRequest(r.Header, rc)
	if err != nil {
		return err
	}
	if err := s.applyObjectLock(ctx, r.Header, rc.bucket, &meta); err != nil { // objectlock.go
		return err
	}
	// Conditional PUT: If-None-Match: * refuses to overwrite, If-Match
	// requires the current ETag. Both are checked here, before the body is
	// read, so a doomed upload fails fast. That check alone cannot settle
	// a race, so If-None-Match: * then publishes through the store's
	// PutIfAbsent (an atomic no-replace publish) when the store has one:
	// of racing writers exactly one wins, the others get 412. If-Match
	// stays check-then-put (the store has no compare-and-swap on ETags).
	inm, im := r.Header.Get("If-None-Match"), r.Header.Get("If-Match")
	if inm != "" || im != "" {
		if inm != "" && inm != "*" {
			return ErrNotImplemented.withMessage("If-None-Match on PUT accepts only *")
		}
		oi, err := s.st.Stat(ctx, rc.bucket, rc.key)
		oi = plainInfo(oi) // sse.go: the ETag clients were given
		switch {
		case err == nil:
			if inm == "*" || !etagMatches(im, oi.ETag) {
				return ErrPreconditionFailed
			}
		case errors.Is(err, store.ErrNoSuchKey):
			if im != "" {
				return ErrNoSuchKey
			}
		default:
			return err
		}
	}
	if size < 0 {
		return ErrMissingContentLength
	}
	vr, sums, err := newVerifyingReader(r.Body, size, r.Header)
	if err != nil {
		return err
	}
	meta.Checksums = sums
	sw, err := s.sseForWrite(ctx, r, rc.bucket) // sse.go
	if err != nil {
		return err
	}
	body, ssize, err := s.encryptBody(ctx, sw, rc.bucket, rc.key, vr, size, &meta)
	if err != nil {
		return err
	}
	var oi store.ObjectInfo
	if ep, ok := s.st.(store.ExclusivePutter); ok && inm == "*" {
		oi, err = ep.PutIfAbsent(ctx, rc.bucket, rc.key, body, ssize, meta)
	} else {
		oi, err = s.st.Put(ctx, rc.bucket, rc.key, body, ssize, meta)
	}
	if err != nil {
		return vr.bodyError(err)
	}
	h := w.Header()
	sseResponseHeaders(h, oi, r.Header, sseCHdr)
	oi = plainInfo(oi)
	h.Set("ETag", `"`+oi.ETag+`"`)
	setVersionHeader(h, oi, "")
	for alg, v := range sums {
		h.Set("X-Amz-Checksum-"+strings.ToLower(alg), v)
	}
	echoTrailerChecksums(h, r)
	w.WriteHeader(http.StatusOK)
	return nil
}

// echoTrailerChecksums returns checksums that arrived (verified by sigv4)
// in an aws-chunked trailer, as S3 does. They are not kept with the
// object: the metadata was handed to the store before the trailer arrived.
func echoTrailerChecksums(h http.Header, r *http.Request) {
	for k, vs := range r.Trailer {
		if strings.HasPrefix(strings.ToLower(k), "x-amz-checksum-") && len(vs) > 0 {
			h.Set(k, vs[0])
		}
	}
}

// unsupportedHeaders name object features tristore does not keep. A
// request asking for one is refused rather than stored without it: a
// client asking for encryption or a retention lock must not believe it
// got one.
var unsupportedHeaders = []string{
	"x-amz-website-redirect-location",
}

func refuseUnsupported(h http.Header) error {
	for k := range h {
		lk := strings.ToLower(k)
		for _, u := range unsupportedHeaders {
			if strings.HasPrefix(lk, u) {
				return ErrNotImplemented.withMessage(k + " is not supported by this server")
			}
		}
	}
	return nil
}
