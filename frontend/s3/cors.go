package s3

import (
	"encoding/xml"
	"net/http"
	"strconv"
	"strings"

	"github.com/tristore/tristore/store"
)

// CORS: the bucket's CORSConfiguration (Put/Get/DeleteBucketCors) kept as
// a bucket configuration document, answered preflight OPTIONS requests,
// and Access-Control-* headers on actual requests that carry an Origin.
// Rules are evaluated as S3 does: the first rule whose AllowedOrigin,
// AllowedMethod and (for a preflight) AllowedHeader lists all match wins;
// a preflight that no rule matches is 403 CORSResponse, an actual request
// that none matches is served without CORS headers (the browser then
// hides the answer from the page).

var (
	opGetBucketCors    = &operation{"GetBucketCors", "s3:GetBucketCORS", (*Server).getBucketCors}
	opPutBucketCors    = &operation{"PutBucketCors", "s3:PutBucketCORS", (*Server).putBucketCors}
	opDeleteBucketCors = &operation{"DeleteBucketCors", "s3:PutBucketCORS", deleteBucketSetting(cfgCORS)}
	// opPreflight is unauthenticated, as browsers send it without credentials.
	opPreflight = &operation{"PreflightRequest", "", nil}
)

// cfgCORS is the bucket configuration name of the CORS document.
const cfgCORS = "cors"

// S3's limits on a CORS configuration.
const (
	maxCORSRules = 100
	maxCORSBody  = 64 << 10
)

var (
	ErrNoSuchCORSConfiguration = &APIError{"NoSuchCORSConfiguration", http.StatusNotFound, "The CORS configuration does not exist"}
	errCORSNotEnabled          = &APIError{"CORSResponse", http.StatusForbidden, "CORS is not enabled for this bucket."}
	errCORSNotAllowed          = &APIError{"CORSResponse", http.StatusForbidden, "This CORS request is not allowed. This is usually because the evalution of Origin, request method / Access-Control-Request-Method or Access-Control-Request-Headers are not whitelisted by the resource's CORS spec."}
	errCORSNoOrigin            = &APIError{"BadRequest", http.StatusBadRequest, "Insufficient information. Origin request header needed."}
)

type corsRule struct {
	ID             string   `xml:"ID,omitempty"`
	AllowedHeaders []string `xml:"AllowedHeader"`
	AllowedMethods []string `xml:"AllowedMethod"`
	AllowedOrigins []string `xml:"AllowedOrigin"`
	ExposeHeaders  []string `xml:"ExposeHeader"`
	MaxAgeSeconds  *int     `xml:"MaxAgeSeconds"`
}

type corsConfiguration struct {
	XMLName xml.Name   `xml:"CORSConfiguration"`
	NS      string     `xml:"xmlns,attr,omitempty"`
	Rules   []corsRule `xml:"CORSRule"`
}

var corsSchema = xmlSchema{
	"CORSConfiguration":          {"CORSRule"},
	"CORSConfiguration/CORSRule": {"ID", "AllowedHeader", "AllowedMethod", "AllowedOrigin", "ExposeHeader", "MaxAgeSeconds"},
}

// corsMethods are the methods a CORS rule may allow (S3's list).
var corsMethods = []string{"GET", "PUT", "HEAD", "POST", "DELETE"}

// parseCORS decodes and validates a CORSConfiguration with S3's error
// codes: unknown elements, a rule without AllowedOrigin or AllowedMethod
// and a bad MaxAgeSeconds are MalformedXML; an unsupported method or a
// pattern with two wildcards InvalidRequest.
func parseCORS(b []byte) (*corsConfiguration, error) {
	if err := checkXMLSchema(b, "CORSConfiguration", corsSchema); err != nil {
		return nil, err
	}
	var c corsConfiguration
	if err := xml.Unmarshal(b, &c); err != nil {
		return nil, ErrMalformedXML
	}
	if len(c.Rules) == 0 {
		return nil, ErrMalformedXML
	}
	if len(c.Rules) > maxCORSRules {
		return nil, ErrInvalidRequest.withMessage("The number of CORS rules should not exceed allowed limit of 100 rules.")
	}
	for i := range c.Rules {
		ru := &c.Rules[i]
		if len(ru.AllowedMethods) == 0 || len(ru.AllowedOrigins) == 0 {
			return nil, ErrMalformedXML
		}
		if len(ru.ID) > 255 {
			return nil, ErrInvalidArgument.withMessage("ID length should not exceed allowed limit of 255")
		}
		if ru.MaxAgeSeconds != nil && *ru.MaxAgeSeconds < 0 {
			return nil, ErrMalformedXML
		}
		for j, m := range ru.AllowedMethods {
			m = strings.TrimSpace(m)
			ru.AllowedMethods[j] = m
			if !contains(corsMethods, m) {
				return nil, ErrInvalidRequest.withMessage("Found unsupported HTTP method in CORS config. Unsupported method is " + m)
			}
		}
		for j, o := range ru.AllowedOrigins {
			o = strings.TrimSpace(o)
			ru.AllowedOrigins[j] = o
			if strings.Count(o, "*") > 1 {
				return nil, ErrInvalidRequest.withMessage(`AllowedOrigin "` + o + `" can not have more than one wildcard.`)
			}
		}
		for j, h := range ru.AllowedHeaders {
			h = strings.TrimSpace(h)
			ru.AllowedHeaders[j] = h
			if strings.Count(h, "*") > 1 {
				return nil, ErrInvalidRequest.withMessage(`AllowedHeader "` + h + `" can not have more than one wildcard.`)
			}
		}
	}
	return &c, nil
}

// wildMatch matches s against a pattern with at most one '*'.
func wildMatch(pattern, s string) bool {
	pre, suf, ok := strings.Cut(pattern, "*")
	if !ok {
		return pattern == s
	}
	return len(s) >= len(pre)+len(suf) && strings.HasPrefix(s, pre) && strings.HasSuffix(s, suf)
}

// match reports whether the rule allows origin, method and every one of
// headers (lower-case; header patterns match case-insensitively).
func (ru *corsRule) match(origin, method string, headers []string) bool {
	okOrigin := false
	for _, o := range ru.AllowedOrigins {
		if wildMatch(o, origin) {
			okOrigin = true
			break
		}
	}
	if !okOrigin || !contains(ru.AllowedMethods, method) {
		return false
	}
	for _, h := range headers {
		ok := false
		for _, p := range ru.AllowedHeaders {
			if wildMatch(strings.ToLower(p), h) {
				ok = true
				break
			}
		}
		if !ok {
			return false
		}
	}
	return true
}

// firstMatch returns the first rule that matches, or nil.
func (c *corsConfiguration) firstMatch(origin, method string, headers []string) *corsRule {
	for i := range c.Rules {
		if c.Rules[i].match(origin, method, headers) {
			return &c.Rules[i]
		}
	}
	return nil
}

// setCORSHeaders writes the Access-Control-* answer of rule ru to origin.
// A rule allowing any origin answers "*" (no credentials, as S3); one
// naming origins echoes the request's origin and allows credentials.
func setCORSHeaders(h http.Header, ru *corsRule, origin string, reqHeaders []string) {
	if contains(ru.AllowedOrigins, "*") {
		h.Set("Access-Control-Allow-Origin", "*")
	} else {
		h.Set("Access-Control-Allow-Origin", origin)
		h.Set("Access-Control-Allow-Credentials", "true")
	}
	h.Set("Access-Control-Allow-Methods", strings.Join(ru.AllowedMethods, ", "))
	if len(reqHeaders) > 0 {
		h.Set("Access-Control-Allow-Headers", strings.Join(reqHeaders, ", "))
	}
	if len(ru.ExposeHeaders) > 0 {
		h.Set("Access-Control-Expose-Headers", strings.Join(ru.ExposeHeaders, ", "))
	}
	if ru.MaxAgeSeconds != nil {
		h.Set("Access-Control-Max-Age", strconv.Itoa(*ru.MaxAgeSeconds))
	}
	h.Add("Vary", "Origin, Access-Control-Request-Headers, Access-Control-Request-Method")
}

// bucketCORS returns the bucket's CORS configuration, nil when none is set
// (or the store keeps no bucket configuration).
func (s *Server) bucketCORS(r *http.Request, bucket string) (*corsConfiguration, error) {
	bc, ok := s.st.(store.BucketConfigurer)
	if !ok {
		return nil, nil
	}
	doc, err := bc.GetBucketConfig(r.Context(), bucket, cfgCORS)
	if err != nil || doc == "" {
		return nil, err
	}
	c, err := parseCORS([]byte(doc))
	if err != nil {
		s.log.Warn("s3: stored CORS configuration unreadable; treated as none", "bucket", bucket, "err", err)
		return nil, nil
	}
	return c, nil
}

// requestHeaderList splits Access-Control-Request-Headers into lower-case names.
func requestHeaderList(v string) []string {
	var out []string
	for _, h := range strings.Split(v, ",") {
		if h = strings.ToLower(strings.TrimSpace(h)); h != "" {
			out = append(out, h)
		}
	}
	return out
}

// preflight answers an OPTIONS request (bucket or object) from the
// bucket's CORS rules. It runs before authentication: browsers never
// sign preflights.
func (s *Server) preflight(w http.ResponseWriter, r *http.Request, rc *reqCtx) error {
	if rc.bucket == "" {
		return ErrMethodNotAllowed
	}
	origin := r.Header.Get("Origin")
	if origin == "" {
		return errCORSNoOrigin
	}
	method := r.Header.Get("Access-Control-Request-Method")
	if method == "" || !contains(corsMethods, method) {
		return &APIError{"BadRequest", http.StatusBadRequest, "Invalid Access-Control-Request-Method: " + method}
	}
	if _, err := s.st.StatBucket(r.Context(), rc.bucket); err != nil {
		return err
	}
	c, err := s.bucketCORS(r, rc.bucket)
	if err != nil {
		return err
	}
	if c == nil {
		return errCORSNotEnabled
	}
	hdrs := requestHeaderList(r.Header.Get("Access-Control-Request-Headers"))
	ru := c.firstMatch(origin, method, hdrs)
	if ru == nil {
		return errCORSNotAllowed
	}
	setCORSHeaders(w.Header(), ru, origin, hdrs)
	w.WriteHeader(http.StatusOK)
	return nil
}

// corsActual adds the Access-Control-* headers to an actual (non-OPTIONS)
// request with an Origin, before its handler runs, so error answers carry
// them too (a page can then read S3's error). Nothing is added when no
// rule matches; a failure to read the rules is logged, not fatal.
func (s *Server) corsActual(w http.ResponseWriter, r *http.Request, bucket string) {
	origin := r.Header.Get("Origin")
	c, err := s.bucketCORS(r, bucket)
	if err != nil || c == nil {
		return
	}
	if ru := c.firstMatch(origin, r.Method, nil); ru != nil {
		setCORSHeaders(w.Header(), ru, origin, nil)
	}
}

func (s *Server) getBucketCors(w http.ResponseWriter, r *http.Request, rc *reqCtx) error {
	if _, err := s.st.StatBucket(r.Context(), rc.bucket); err != nil {
		return err
	}
	c, err := s.bucketCORS(r, rc.bucket)
	if err != nil {
		return err
	}
	if c == nil {
		return ErrNoSuchCORSConfiguration
	}
	c.NS = s3NS
	return writeXML(w, c)
}

// putBucketCors validates the whole document before storing anything, so
// a refused document leaves the previous configuration in force.
func (s *Server) putBucketCors(w http.ResponseWriter, r *http.Request, rc *reqCtx) error {
	if _, err := s.st.StatBucket(r.Context(), rc.bucket); err != nil {
		return err
	}
	b, err := readVerifiedBody(r, maxCORSBody)
	if err != nil {
		return err
	}
	c, err := parseCORS(b)
	if err != nil {
		return err
	}
	c.NS = s3NS
	out, err := xml.Marshal(c)
	if err != nil {
		return err
	}
	if err := s.setBucketConfig(r, rc.bucket, cfgCORS, string(out)); err != nil {
		return err
	}
	w.WriteHeader(http.StatusOK)
	return nil
}
