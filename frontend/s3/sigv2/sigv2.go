// Package sigv2 verifies AWS Signature Version 2 on S3 requests, for old
// clients (aws-cli v1 presigns with it, s3cmd with signature_v2 = True,
// boto 2, many appliances): the Authorization header
// ("AWS AccessKeyId:Signature") and presigned query strings
// (AWSAccessKeyId, Expires, Signature).
//
// The string to sign is the one the S3 developer guide documents
// ("Signing and authenticating REST requests"):
//
//	HTTP-Verb \n Content-MD5 \n Content-Type \n Date-or-Expires \n
//	CanonicalizedAmzHeaders CanonicalizedResource
//
// signed with HMAC-SHA1 and base64-encoded. SigV2 signs no payload hash,
// so the body is passed through unchanged (a Content-MD5, which is
// signed, is checked by the handler as for any request).
package sigv2

import (
	"context"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/subtle"
	"encoding/base64"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/tristore/tristore/frontend/s3/sigv4"
)

// Credentials looks up the secret key of an access key (the same contract
// as sigv4.Credentials: unknown keys give an error for which
// sigv4.IsUnknownAccessKey reports true).
type Credentials = sigv4.Credentials

// MaxClockSkew is how far a header-signed request's date may be from now.
const MaxClockSkew = 15 * time.Minute

// MaxPresignExpiry: S3 refuses SigV2 presigned URLs valid for longer than
// 7 days from now, like SigV4 ones.
const MaxPresignExpiry = 7 * 24 * time.Hour

// Is reports whether r is signed with SigV2 (header or query); such
// requests must go to Verify, not to the SigV4 verifier.
func Is(r *http.Request) bool {
	if a := r.Header.Get("Authorization"); a != "" {
		return strings.HasPrefix(a, "AWS ")
	}
	q := r.URL.Query()
	return q.Has("AWSAccessKeyId") && q.Has("Signature")
}

// Result is a verified request's signer.
type Result struct {
	AccessKey string
	Presigned bool
	Expires   time.Time // presigned only
}

// Verify checks r's SigV2 signature with now as the clock.
func Verify(ctx context.Context, creds Credentials, r *http.Request, now time.Time) (Result, error) {
	q := r.URL.Query()
	var ak, sig, dateLine string
	res := Result{}
	if a := r.Header.Get("Authorization"); a != "" {
		cred, ok := strings.CutPrefix(a, "AWS ")
		if !ok {
			return res, errInvalidArg("unsupported Authorization type")
		}
		i := strings.LastIndexByte(cred, ':')
		if i <= 0 || i == len(cred)-1 {
			return res, errInvalidArg("AWS authorization header is invalid.  Expected AwsAccessKeyId:signature")
		}
		ak, sig = cred[:i], cred[i+1:]
		if q.Has("AWSAccessKeyId") || q.Has("X-Amz-Signature") {
			return res, errInvalidArg("Only one auth mechanism allowed; only the Signature query parameter or the Authorization header should be specified")
		}
		t, e := requestDate(r)
		if e != nil {
			return res, e
		}
		if d := now.Sub(t); d > MaxClockSkew || d < -MaxClockSkew {
			return res, &sigv4.Error{Code: "RequestTimeTooSkewed", Status: http.StatusForbidden,
				Message: "The difference between the request time and the current time is too large."}
		}
		// With x-amz-date the Date line is empty: the date is signed among the x-amz-* headers.
		if r.Header.Get("X-Amz-Date") == "" {
			dateLine = r.Header.Get("Date")
		}
	} else {
		ak, sig = q.Get("AWSAccessKeyId"), q.Get("Signature")
		exp := q.Get("Expires")
		n, err := strconv.ParseInt(exp, 10, 64)
		if ak == "" || sig == "" || err != nil {
			return res, &sigv4.Error{Code: "AccessDenied", Status: http.StatusForbidden,
				Message: "Query-string authentication requires the Signature, Expires and AWSAccessKeyId parameters"}
		}
		e := time.Unix(n, 0)
		if now.After(e) {
			return res, &sigv4.Error{Code: "AccessDenied", Status: http.StatusForbidden, Message: "Request has expired"}
		}
		if e.Sub(now) > MaxPresignExpiry {
			return res, &sigv4.Error{Code: "AccessDenied", Status: http.StatusForbidden,
				Message: "Request has expired: Expires is more than 7 days in the future"}
		}
		res.Presigned, res.Expires = true, e
		dateLine = exp
	}
	res.AccessKey = ak
	secret, err := creds.SecretFor(ctx, ak)
	if err != nil {
		if sigv4.IsUnknownAccessKey(err) {
			return res, &sigv4.Error{Code: "InvalidAccessKeyId", Status: http.StatusForbidden,
				Message: "The AWS Access Key Id you provided does not exist in our records."}
		}
		return res, &sigv4.Error{Code: "InternalError", Status: http.StatusInternalServerError, Message: "We encountered an internal error. Please try again."}
	}
	got, err := base64.StdEncoding.DecodeString(sig)
	if err != nil {
		return res, errSignature()
	}
	for _, resource := range canonicalResources(r) {
		sts := StringToSign(r.Method, r.Header, dateLine, resource)
		if subtle.ConstantTimeCompare(Sign(secret, sts), got) == 1 {
			return res, nil
		}
	}
	return res, errSignature()
}

// Sign is the SigV2 signature of a string to sign: HMAC-SHA1 with the secret.
func Sign(secret, stringToSign string) []byte {
	m := hmac.New(sha1.New, []byte(secret))
	m.Write([]byte(stringToSign))
	return m.Sum(nil)
}

// StringToSign builds the documented SigV2 string to sign. dateLine is the
// Date header (empty when x-amz-date is sent) or, presigned, Expires.
func StringToSign(method string, h http.Header, dateLine, resource string) string {
	var b strings.Builder
	b.WriteString(method)
	b.WriteByte('\n')
	b.WriteString(h.Get("Content-Md5"))
	b.WriteByte('\n')
	b.WriteString(h.Get("Content-Type"))
	b.WriteByte('\n')
	b.WriteString(dateLine)
	b.WriteByte('\n')
	b.WriteString(CanonicalAmzHeaders(h))
	b.WriteString(resource)
	return b.String()
}

// CanonicalAmzHeaders: every x-amz-* header, lower-cased, sorted, values
// of repeated headers joined with ",", folding whitespace collapsed,
// each as "name:value\n".
func CanonicalAmzHeaders(h http.Header) string {
	var names []string
	for k := range h {
		lk := strings.ToLower(k)
		if strings.HasPrefix(lk, "x-amz-") {
			names = append(names, lk)
		}
	}
	sort.Strings(names)
	var b strings.Builder
	for _, n := range names {
		vals := h.Values(n)
		for i, v := range vals {
			vals[i] = strings.Join(strings.Fields(v), " ")
		}
		b.WriteString(n)
		b.WriteByte(':')
		b.WriteString(strings.Join(vals, ","))
		b.WriteByte('\n')
	}
	return b.String()
}

// SubResources are the query parameters that are part of the
// CanonicalizedResource (the developer guide's list plus the later ones
// botocore signs); all other query parameters are not signed.
var SubResources = map[string]bool{
	"accelerate": true, "acl": true, "analytics": true, "cors": true, "defaultObjectAcl": true,
	"delete": true, "inventory": true, "lifecycle": true, "location": true, "logging": true,
	"metrics": true, "notification": true, "object-lock": true, "partNumber": true,
	"policy": true, "replication": true, "requestPayment": true, "restore": true,
	"select": true, "select-type": true, "storageClass": true, "tagging": true, "torrent": true,
	"uploadId": true, "uploads": true, "versionId": true, "versioning": true, "versions": true,
	"website": true, "retention": true, "legal-hold": true, "ownershipControls": true,
	"publicAccessBlock": true, "encryption": true, "policyStatus": true, "attributes": true,
	"response-cache-control": true, "response-content-disposition": true,
	"response-content-encoding": true, "response-content-language": true,
	"response-content-type": true, "response-expires": true,
}

// CanonicalSubResources renders the signed sub-resources of rawQuery:
// "?a&b=v" sorted by name, values decoded, "" when there are none.
func CanonicalSubResources(rawQuery string) string {
	type kv struct {
		k, v string
		has  bool
	}
	var subs []kv
	for part := range strings.SplitSeq(rawQuery, "&") {
		if part == "" {
			continue
		}
		k, v, has := strings.Cut(part, "=")
		if dk, err := url.QueryUnescape(k); err == nil {
			k = dk
		}
		if !SubResources[k] {
			continue
		}
		if dv, err := url.QueryUnescape(v); err == nil {
			v = dv
		}
		subs = append(subs, kv{k, v, has && v != ""})
	}
	if len(subs) == 0 {
		return ""
	}
	sort.SliceStable(subs, func(i, j int) bool { return subs[i].k < subs[j].k })
	var b strings.Builder
	for i, s := range subs {
		if i == 0 {
			b.WriteByte('?')
		} else {
			b.WriteByte('&')
		}
		b.WriteString(s.k)
		if s.has {
			b.WriteByte('=')
			b.WriteString(s.v)
		}
	}
	return b.String()
}

// canonicalResources lists the CanonicalizedResource candidates of r: the
// path as sent (path-style requests), and "/bucket"+path for each way the
// Host could be "<bucket>.<endpoint>" (virtual-host style; the verifier
// does not know the endpoint domain, and trying a handful of prefixes
// costs a few HMACs).
func canonicalResources(r *http.Request) []string {
	path := r.URL.EscapedPath()
	if r.URL.RawPath != "" {
		path = r.URL.RawPath
	}
	if path == "" {
		path = "/"
	}
	sub := CanonicalSubResources(r.URL.RawQuery)
	out := []string{path + sub}
	if alt := (&url.URL{Path: r.URL.Path}).EscapedPath(); alt != path && alt != "" {
		out = append(out, alt+sub)
	}
	// A path-style request for a bucket itself ("/bkt": list, ?acl, HEAD)
	// is signed by botocore's HmacV1 (aws-cli 1.x, boto3 with
	// signature_version "s3") with the resource "/bkt/", the bucket's
	// root as a virtual-host request names it.
	if len(path) > 1 && !strings.Contains(path[1:], "/") {
		out = append(out, path+"/"+sub)
	}
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	if net.ParseIP(host) != nil {
		return out
	}
	host = strings.ToLower(host)
	for i := 0; i < len(host) && len(out) < 8; i++ {
		if host[i] == '.' {
			out = append(out, "/"+host[:i]+path+sub)
		}
	}
	return out
}

// requestDate reads x-amz-date (RFC 1123 in SigV2) or Date.
func requestDate(r *http.Request) (time.Time, error) {
	v := r.Header.Get("X-Amz-Date")
	if v == "" {
		v = r.Header.Get("Date")
	}
	if v == "" {
		return time.Time{}, &sigv4.Error{Code: "AccessDenied", Status: http.StatusForbidden,
			Message: "AWS authentication requires a valid Date or x-amz-date header"}
	}
	t, err := http.ParseTime(v)
	if err != nil {
		// Clients write the offset form of RFC 1123 ("+0000") too.
		for _, f := range []string{time.RFC1123Z, "Mon, 2 Jan 2006 15:04:05 -0700", "20060102T150405Z"} {
			if t2, err2 := time.Parse(f, v); err2 == nil {
				return t2, nil
			}
		}
		return time.Time{}, &sigv4.Error{Code: "AccessDenied", Status: http.StatusForbidden,
			Message: "AWS authentication requires a valid Date or x-amz-date header"}
	}
	return t, nil
}

func errSignature() error {
	return &sigv4.Error{Code: "SignatureDoesNotMatch", Status: http.StatusForbidden,
		Message: "The request signature we calculated does not match the signature you provided. Check your key and signing method."}
}

func errInvalidArg(msg string) error {
	return &sigv4.Error{Code: "InvalidArgument", Status: http.StatusBadRequest, Message: msg}
}
