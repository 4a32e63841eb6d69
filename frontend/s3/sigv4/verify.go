package sigv4

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// verify implements Verifier.Verify: pick the mechanism, check time and
// signature, then wrap the body so the payload is checked as it is read.
func (v *Verifier) verify(r *http.Request) (Result, error) {
	authz := r.Header.Get("Authorization")
	q := r.URL.Query()
	presigned := q.Has("X-Amz-Signature") || q.Has("X-Amz-Credential") || q.Has("X-Amz-Algorithm")
	if authz == "" && q.Has("Signature") && q.Has("AWSAccessKeyId") {
		return Result{}, errInvalidArg("Signature Version 2 presigned URLs are not supported; use Signature Version 4.")
	}
	switch {
	case authz == "" && !presigned:
		if len(r.Header.Values("Authorization")) > 0 {
			return Result{}, errHeaderMalformed("the Authorization header is empty.")
		}
		return Result{Anonymous: true}, nil
	case authz != "" && presigned:
		return Result{}, errInvalidArg("Only one auth mechanism allowed; only the X-Amz-Algorithm query parameter or the Authorization header should be specified.")
	case presigned:
		return v.verifyPresigned(r, q)
	default:
		return v.verifyHeader(r, authz)
	}
}

// signingTime reads X-Amz-Date, falling back to the Date header.
func signingTime(r *http.Request) (time.Time, string, *Error) {
	if s := r.Header.Get("X-Amz-Date"); s != "" {
		t, err := time.Parse(amzDateFormat, s)
		if err != nil {
			return time.Time{}, "", errAccessDenied("AWS authentication requires a valid Date or x-amz-date header")
		}
		return t, s, nil
	}
	if s := r.Header.Get("Date"); s != "" {
		t, err := http.ParseTime(s)
		if err != nil {
			return time.Time{}, "", errAccessDenied("AWS authentication requires a valid Date or x-amz-date header")
		}
		t = t.UTC()
		return t, t.Format(amzDateFormat), nil
	}
	return time.Time{}, "", errAccessDenied("AWS authentication requires a valid Date or x-amz-date header")
}

func (v *Verifier) checkScope(a *Params, header bool) *Error {
	if v.region != "" && a.Region != v.region {
		msg := "the region '" + a.Region + "' is wrong; expecting '" + v.region + "'"
		if header {
			return errHeaderMalformed(msg)
		}
		return errQueryMalformed("Error parsing the X-Amz-Credential parameter; " + msg)
	}
	return nil
}

// secret looks the access key up, mapping lookup failures to S3 errors.
func (v *Verifier) secret(r *http.Request, ak string) (string, *Error) {
	s, err := v.creds.SecretFor(r.Context(), ak)
	if err != nil {
		if IsUnknownAccessKey(err) {
			return "", errUnknownKey()
		}
		return "", errInternal()
	}
	return s, nil
}

// signedHeaderValues collects the canonical values of the signed headers;
// a signed header the request does not carry is a signature mismatch in S3
// (the client signed something we cannot see), except host which must be
// present and signed.
func signedHeaderValues(r *http.Request, names []string) ([]string, bool) {
	vals := make([]string, len(names))
	hasHost := false
	for i, n := range names {
		if n == "host" {
			hasHost = true
		}
		val, ok := headerValue(r, n)
		if !ok {
			val = ""
		}
		vals[i] = val
	}
	return vals, hasHost
}

// matchSignature computes the expected signature for every canonical URI
// candidate and reports whether one matches.
func (v *Verifier) matchSignature(r *http.Request, a *Params, key []byte, amzDate, query string, vals []string, payload string) bool {
	for _, uri := range canonicalURIs(r.URL) {
		cr := canonicalRequest(r.Method, uri, query, a.SignedHeaders, vals, payload)
		sts := stringToSign(amzDate, a.scope(), cr)
		if sigEqual(hexHMAC(key, sts), a.Signature) {
			return true
		}
	}
	return false
}

func (v *Verifier) verifyHeader(r *http.Request, authz string) (Result, error) {
	a, e := ParseAuthorization(authz)
	if e != nil {
		return Result{}, e
	}
	if e := v.checkScope(&a, true); e != nil {
		return Result{}, e
	}
	t, amzDate, e := signingTime(r)
	if e != nil {
		return Result{}, e
	}
	if amzDate[:8] != a.Date {
		return Result{}, errHeaderMalformed("the credential date '" + a.Date + "' does not match the request date '" + amzDate[:8] + "'.")
	}
	now := v.Now()
	if d := now.Sub(t); d > MaxClockSkew || d < -MaxClockSkew {
		return Result{}, errSkewed()
	}
	payload := r.Header.Get("X-Amz-Content-Sha256")
	if payload == "" {
		return Result{}, errMissingHeader("Your request is missing the required header x-amz-content-sha256.")
	}
	switch payload {
	case UnsignedPayload, StreamingPayload, StreamingPayloadTrail, StreamingUnsignedTrail:
	case streamingECDSA, streamingECDSATrail:
		return Result{}, errNotImplemented("Signature Version 4A streaming payloads are not supported.")
	default:
		if !isHexSig(strings.ToLower(payload)) {
			return Result{}, errInvalidArg("x-amz-content-sha256 must be UNSIGNED-PAYLOAD, STREAMING-UNSIGNED-PAYLOAD-TRAILER, STREAMING-AWS4-HMAC-SHA256-PAYLOAD, STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER or a valid sha256 value.")
		}
	}
	vals, hasHost := signedHeaderValues(r, a.SignedHeaders)
	if !hasHost {
		return Result{}, errHeaderMalformed("SignedHeaders must include host.")
	}
	secret, e := v.secret(r, a.AccessKey)
	if e != nil {
		return Result{}, e
	}
	key := v.signingKey(secret, a.Date, a.Region, a.Service)
	if !v.matchSignature(r, &a, key, amzDate, CanonicalQuery(r.URL.RawQuery, ""), vals, payload) {
		return Result{}, errSignature()
	}
	res := Result{AccessKey: a.AccessKey, SignedAt: t, Payload: payload}
	if e := v.wrapBody(r, &res, &a, key, amzDate); e != nil {
		return Result{}, e
	}
	return res, nil
}

func (v *Verifier) verifyPresigned(r *http.Request, q map[string][]string) (Result, error) {
	a, e := ParsePresigned(q)
	if e != nil {
		return Result{}, e
	}
	if e := v.checkScope(&a, false); e != nil {
		return Result{}, e
	}
	t, _ := time.Parse(amzDateFormat, a.AmzDate)
	now := v.Now()
	if t.Sub(now) > MaxClockSkew {
		return Result{}, errAccessDenied("Request is not valid yet")
	}
	exp := t.Add(a.Expires)
	if now.After(exp) {
		return Result{}, errAccessDenied("Request has expired")
	}
	vals, hasHost := signedHeaderValues(r, a.SignedHeaders)
	if !hasHost {
		return Result{}, errQueryMalformed("X-Amz-SignedHeaders must include host.")
	}
	secret, e := v.secret(r, a.AccessKey)
	if e != nil {
		return Result{}, e
	}
	key := v.signingKey(secret, a.Date, a.Region, a.Service)
	// A presigned URL signs UNSIGNED-PAYLOAD unless the signer put a payload
	// hash in the query (or in a signed x-amz-content-sha256 header).
	payload := UnsignedPayload
	if p := q["X-Amz-Content-Sha256"]; len(p) == 1 {
		payload = p[0]
	} else if p := r.Header.Get("X-Amz-Content-Sha256"); p != "" && containsStr(a.SignedHeaders, "x-amz-content-sha256") {
		payload = p
	}
	query := CanonicalQuery(r.URL.RawQuery, "X-Amz-Signature")
	if !v.matchSignature(r, &a, key, a.AmzDate, query, vals, payload) {
		return Result{}, errSignature()
	}
	// Whoever holds a presigned URL is not its signer: like S3, refuse
	// x-amz-* headers the signer did not sign (x-amz-acl, x-amz-meta-*,
	// x-amz-copy-source would otherwise let the holder change what the
	// signer allowed).
	for name := range r.Header {
		lname := strings.ToLower(name)
		if strings.HasPrefix(lname, "x-amz-") && lname != "x-amz-content-sha256" && !containsStr(a.SignedHeaders, lname) {
			return Result{}, errAccessDenied("There were headers present in the request which were not signed: " + lname)
		}
	}
	res := Result{AccessKey: a.AccessKey, Presigned: true, SignedAt: t, Expires: exp, Payload: payload}
	switch {
	case payload == UnsignedPayload:
	case isHexSig(strings.ToLower(payload)):
		if e := v.wrapBody(r, &res, &a, key, a.AmzDate); e != nil {
			return Result{}, e
		}
	default:
		return Result{}, errInvalidReq("presigned URLs do not support streaming payloads.")
	}
	return res, nil
}

func containsStr(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// wrapBody replaces r.Body with a reader that checks the payload as it is
// read, according to res.Payload.
func (v *Verifier) wrapBody(r *http.Request, res *Result, a *Params, key []byte, amzDate string) *Error {
	switch res.Payload {
	case UnsignedPayload:
		if r.Body != nil {
			r.Body = &lengthReader{rc: r.Body, want: r.ContentLength}
		}
		return nil
	case StreamingPayload, StreamingPayloadTrail, StreamingUnsignedTrail:
		res.Streaming = true
		dl := r.Header.Get("X-Amz-Decoded-Content-Length")
		decoded := int64(-1)
		if dl != "" {
			n, err := strconv.ParseInt(dl, 10, 64)
			if err != nil || n < 0 {
				return errInvalidArg("x-amz-decoded-content-length must be a non-negative integer.")
			}
			decoded = n
		} else if res.Payload == StreamingPayload {
			return errMissingHeader("Your request is missing the required header x-amz-decoded-content-length.")
		}
		var trailers []string
		if res.Payload != StreamingPayload {
			for _, t := range r.Header.Values("X-Amz-Trailer") {
				for _, name := range strings.Split(t, ",") {
					if name = strings.ToLower(strings.TrimSpace(name)); name != "" {
						trailers = append(trailers, name)
					}
				}
			}
			for _, name := range trailers {
				if _, ok := newChecksum(name); !ok {
					return errInvalidArg("unsupported x-amz-trailer \"" + name + "\".")
				}
			}
		}
		if r.Body == nil {
			return errIncomplete()
		}
		cr := &chunkedReader{
			src:      newLineReader(r.Body),
			body:     r.Body,
			signed:   res.Payload != StreamingUnsignedTrail,
			trailer:  res.Payload != StreamingPayload,
			key:      key,
			amzDate:  amzDate,
			scope:    a.scope(),
			prevSig:  a.Signature,
			want:     decoded,
			expected: trailers,
			req:      r,
		}
		r.Body = cr
		r.ContentLength = decoded
		if decoded >= 0 {
			r.Header.Set("Content-Length", itoa(decoded))
		} else {
			r.Header.Del("Content-Length")
		}
		stripAWSChunked(r.Header)
		return nil
	default:
		r.Body = newHashReader(r.Body, strings.ToLower(res.Payload), r.ContentLength)
		return nil
	}
}

// stripAWSChunked removes "aws-chunked" from Content-Encoding: it describes
// the framing this package removed, not the object's encoding.
func stripAWSChunked(h http.Header) {
	vals := h.Values("Content-Encoding")
	if len(vals) == 0 {
		return
	}
	var keep []string
	for _, v := range vals {
		for _, e := range strings.Split(v, ",") {
			if e = strings.TrimSpace(e); e != "" && !strings.EqualFold(e, "aws-chunked") {
				keep = append(keep, e)
			}
		}
	}
	h.Del("Content-Encoding")
	if len(keep) > 0 {
		h.Set("Content-Encoding", strings.Join(keep, ","))
	}
}

func hexHMAC(key []byte, s string) string {
	return hexEncode(hmacSHA256(key, s))
}
