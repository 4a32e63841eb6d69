package s3

import (
	"context"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/xml"
	"errors"
	"hash"
	"io"
	"mime"
	"net/http"
	"net/url"
	"path"
	"strings"
	"time"

	"github.com/tristore/tristore/frontend/s3/sigv4"
)

// POST Object: browser form uploads (multipart/form-data to the bucket
// URL), as the S3 API reference ("PostObject") and the user guide
// ("Browser-based uploads using POST") define them. The form's fields
// come first; the file is the last field read, and it is streamed into
// the store exactly like a PUT body (same durable publish), never held in
// memory. Authentication is in the form: a SigV4 POST policy
// (x-amz-algorithm, x-amz-credential, x-amz-date, policy, x-amz-signature
// = hex HMAC-SHA256 of the base64 policy with the SigV4 signing key), or
// the SigV2 form (AWSAccessKeyId, policy, signature = base64 HMAC-SHA1),
// or none (anonymous: only where an ACL or policy lets everyone write).

var opPostObject = &operation{"PostObject", "", (*Server).postObject}

// Limits on the form fields before the file: S3 does not publish its own;
// these bound the memory a form can make the server hold.
const (
	maxPostFields     = 100
	maxPostFieldBytes = 64 << 10
	maxPostFormBytes  = 1 << 20
)

var (
	errMalformedPost = &APIError{"MalformedPOSTRequest", http.StatusBadRequest, "The body of your POST request is not well-formed multipart/form-data."}
	errPolicyExpired = ErrAccessDenied.withMessage("Invalid according to Policy: Policy expired.")
	errInvalidPolicy = &APIError{"InvalidPolicyDocument", http.StatusBadRequest, "Invalid Policy: Invalid JSON."}
	errPostTooLarge  = ErrEntityTooLarge.withMessage("Your proposed upload exceeds the maximum allowed size")
	errPostTooSmall  = ErrEntityTooSmall.withMessage("Your proposed upload is smaller than the minimum allowed size")
)

// isPostObject tells a browser form upload from the other POSTs on a bucket.
func isPostObject(r *http.Request, bucket, key string) bool {
	if r.Method != http.MethodPost || bucket == "" || key != "" || r.URL.RawQuery != "" {
		return false
	}
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return err == nil && mt == "multipart/form-data"
}

// PostVerifier is implemented by Authenticators that can check a POST
// form's signature (SigV4Auth); fields are the form fields by lower-case name.
type PostVerifier interface {
	VerifyPost(ctx context.Context, fields map[string]string, now time.Time) (Identity, error)
}

// postForm is a POST Object request's fields (lower-case names; values
// as sent) and its file part.
type postForm struct {
	fields   map[string]string
	names    map[string]string // lower-case -> name as sent
	file     io.Reader
	filename string
	fileType string
}

func readPostForm(r *http.Request) (*postForm, error) {
	mr, err := r.MultipartReader()
	if err != nil {
		return nil, errMalformedPost
	}
	f := &postForm{fields: map[string]string{}, names: map[string]string{}}
	total := 0
	for range maxPostFields + 1 {
		p, err := mr.NextPart()
		if err == io.EOF {
			return nil, ErrInvalidArgument.withMessage("POST requires exactly one file upload per request.")
		}
		if err != nil {
			return nil, errMalformedPost
		}
		name := p.FormName()
		lname := strings.ToLower(name)
		if lname == "file" {
			f.file, f.filename, f.fileType = p, p.FileName(), p.Header.Get("Content-Type")
			return f, nil // fields after the file are not read, as in S3
		}
		if name == "" {
			return nil, errMalformedPost
		}
		b, err := io.ReadAll(io.LimitReader(p, maxPostFieldBytes+1))
		if err != nil {
			return nil, errMalformedPost
		}
		total += len(b)
		if len(b) > maxPostFieldBytes || total > maxPostFormBytes {
			return nil, ErrMaxMessageLength.withMessage("Your POST form fields are too large.")
		}
		if _, dup := f.fields[lname]; dup {
			return nil, ErrInvalidArgument.withMessage("POST form field " + name + " appears more than once.")
		}
		f.fields[lname], f.names[lname] = string(b), name
	}
	return nil, ErrInvalidArgument.withMessage("Too many POST form fields.")
}

// postPolicy is a decoded POST policy document.
type postPolicy struct {
	Expiration string            `json:"expiration"`
	Conditions []json.RawMessage `json:"conditions"`
}

type postCond struct {
	op, field, value string // op "eq" or "starts-with"; field lower-case without '$'
}

// parsePostPolicy decodes the base64 policy into its conditions and the
// content-length-range (max -1 when absent).
func parsePostPolicy(b64 string, now time.Time) (conds []postCond, minLen, maxLen int64, err error) {
	maxLen = -1
	raw, e := base64.StdEncoding.DecodeString(b64)
	if e != nil {
		return nil, 0, 0, errInvalidPolicy.withMessage("Invalid Policy: Invalid Base64.")
	}
	var p postPolicy
	dec := json.NewDecoder(strings.NewReader(string(raw)))
	if e := dec.Decode(&p); e != nil {
		return nil, 0, 0, errInvalidPolicy
	}
	if p.Expiration == "" {
		return nil, 0, 0, errInvalidPolicy.withMessage("Invalid Policy: Policy missing expiration.")
	}
	exp, e := time.Parse(time.RFC3339Nano, p.Expiration)
	if e != nil {
		return nil, 0, 0, errInvalidPolicy.withMessage("Invalid Policy: Invalid 'expiration' value: '" + p.Expiration + "'")
	}
	if !now.Before(exp) {
		return nil, 0, 0, errPolicyExpired
	}
	if p.Conditions == nil {
		return nil, 0, 0, errInvalidPolicy.withMessage("Invalid Policy: Policy missing conditions.")
	}
	for _, c := range p.Conditions {
		var obj map[string]any
		if json.Unmarshal(c, &obj) == nil {
			if len(obj) != 1 {
				return nil, 0, 0, errInvalidPolicy.withMessage("Invalid Policy: Invalid Simple-Condition: Simple-Conditions must have exactly one property specified.")
			}
			for k, v := range obj {
				s, ok := v.(string)
				if !ok {
					return nil, 0, 0, errInvalidPolicy.withMessage("Invalid Policy: Invalid Simple-Condition: value must be a string.")
				}
				conds = append(conds, postCond{"eq", strings.ToLower(strings.TrimPrefix(k, "$")), s})
			}
			continue
		}
		var arr []any
		if json.Unmarshal(c, &arr) != nil || len(arr) != 3 {
			return nil, 0, 0, errInvalidPolicy.withMessage("Invalid Policy: Invalid Condition: " + string(c))
		}
		op, _ := arr[0].(string)
		switch strings.ToLower(op) {
		case "content-length-range":
			lo, ok1 := arr[1].(float64)
			hi, ok2 := arr[2].(float64)
			if !ok1 || !ok2 || lo < 0 || hi < lo {
				return nil, 0, 0, errInvalidPolicy.withMessage("Invalid Policy: Invalid content-length-range.")
			}
			minLen, maxLen = int64(lo), int64(hi)
		case "eq", "starts-with":
			f, ok1 := arr[1].(string)
			v, ok2 := arr[2].(string)
			if !ok1 || !ok2 || !strings.HasPrefix(f, "$") {
				return nil, 0, 0, errInvalidPolicy.withMessage("Invalid Policy: Invalid Condition: " + string(c))
			}
			conds = append(conds, postCond{strings.ToLower(op), strings.ToLower(f[1:]), v})
		default:
			return nil, 0, 0, errInvalidPolicy.withMessage("Invalid Policy: Invalid Condition: unknown operation " + op)
		}
	}
	return conds, minLen, maxLen, nil
}

// notCovered are fields no policy condition needs to name.
func notCovered(name string) bool {
	switch name {
	case "policy", "x-amz-signature", "signature", "awsaccesskeyid", "file", "x-amz-security-token":
		return true
	}
	return strings.HasPrefix(name, "x-ignore-")
}

// checkPostConditions applies the policy's conditions to the form (with
// the bucket as a field) and refuses fields no condition covers.
func checkPostConditions(conds []postCond, fields map[string]string, names map[string]string, bucket string) error {
	covered := map[string]bool{}
	for _, c := range conds {
		covered[c.field] = true
		have, ok := fields[c.field]
		if c.field == "bucket" {
			have, ok = bucket, true
		}
		fail := func() error {
			return ErrAccessDenied.withMessage(`Invalid according to Policy: Policy Condition failed: ["` + c.op + `", "$` + c.field + `", "` + c.value + `"]`)
		}
		switch c.op {
		case "eq":
			if !ok || have != c.value {
				return fail()
			}
		case "starts-with":
			if c.field == "content-type" && ok {
				// S3: each comma-separated type must start with the value.
				for _, t := range strings.Split(have, ",") {
					if !strings.HasPrefix(strings.TrimSpace(t), c.value) {
						return fail()
					}
				}
				continue
			}
			if !ok && c.value != "" || !strings.HasPrefix(have, c.value) {
				return fail()
			}
		}
	}
	for name := range fields {
		if !covered[name] && !notCovered(name) {
			return ErrAccessDenied.withMessage("Invalid according to Policy: Extra input fields: " + names[name])
		}
	}
	return nil
}

// countingLimit enforces content-length-range while the file streams.
type countingLimit struct {
	r        io.Reader
	n        int64
	min, max int64 // max < 0: none
	err      error
}

func (c *countingLimit) Read(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n, err := c.r.Read(p)
	c.n += int64(n)
	if c.max >= 0 && c.n > c.max {
		c.err = errPostTooLarge
		return 0, c.err
	}
	if err == io.EOF && c.n < c.min {
		c.err = errPostTooSmall
		return n, c.err
	}
	return n, err
}

type postResponse struct {
	XMLName  xml.Name `xml:"PostResponse"`
	Location string   `xml:"Location"`
	Bucket   string   `xml:"Bucket"`
	Key      string   `xml:"Key"`
	ETag     string   `xml:"ETag"`
}

func (s *Server) postObject(w http.ResponseWriter, r *http.Request, rc *reqCtx) error {
	ctx := r.Context()
	now := time.Now()
	form, err := readPostForm(r)
	if err != nil {
		return err
	}
	f := form.fields
	signed := f["x-amz-signature"] != "" || f["signature"] != ""
	if _, ok := f["policy"]; signed && !ok {
		return ErrInvalidArgument.withMessage("Bucket POST must contain a field named 'policy'.")
	}
	id := Identity{Anonymous: true}
	if signed {
		pv, ok := s.opts.Auth.(PostVerifier)
		if !ok {
			return ErrNotImplemented.withMessage("this server's authenticator cannot verify POST forms")
		}
		if id, err = pv.VerifyPost(ctx, f, now); err != nil {
			return err
		}
	}
	var minLen int64
	maxLen := int64(maxPutSize)
	if pol, ok := f["policy"]; ok {
		conds, lo, hi, err := parsePostPolicy(pol, now)
		if err != nil {
			return err
		}
		if err := checkPostConditions(conds, f, form.names, rc.bucket); err != nil {
			return err
		}
		if hi >= 0 {
			minLen, maxLen = lo, min(hi, maxLen)
		}
	}
	key, ok := f["key"]
	if !ok || key == "" {
		return ErrInvalidArgument.withMessage("Bucket POST must contain a field named 'key'.  If it is specified, please check the order of the fields.")
	}
	if strings.Contains(key, "${filename}") {
		key = strings.ReplaceAll(key, "${filename}", path.Base(strings.ReplaceAll(form.filename, "\\", "/")))
	}
	if err := checkKey(key); err != nil {
		return err
	}
	rc.key, rc.ident = key, id
	// Authorise as a PUT by the form's signer, with the form's fields as
	// the request headers policy conditions see.
	h := http.Header{}
	for lname, v := range f {
		switch {
		case strings.HasPrefix(lname, "x-amz-meta-"), strings.HasPrefix(lname, "x-amz-grant-"), lname == "x-amz-acl",
			lname == "cache-control", lname == "content-disposition", lname == "content-encoding", lname == "expires",
			lname == "content-type", lname == "x-amz-storage-class":
			h.Set(lname, v)
		case strings.HasPrefix(lname, "x-amz-server-side-encryption"), strings.HasPrefix(lname, "x-amz-object-lock-"),
			lname == "x-amz-website-redirect-location":
			h.Set(lname, v) // refused below (refuseUnencrypted, metaFromRequest's unsupported-header check)
		}
	}
	if h.Get("Content-Type") == "" && form.fileType != "" {
		h.Set("Content-Type", form.fileType)
	}
	cr := r.Clone(ctx)
	cr.Header = h.Clone()
	cr.RemoteAddr, cr.TLS = r.RemoteAddr, r.TLS
	rc.cond = conditionContext(cr, id, now)
	rc.cond["s3:authtype"] = []string{"POST"}
	if err := s.authorize(ctx, rc, "s3:PutObject", rc.bucket, key); err != nil {
		return err
	}
	if err := s.refuseUnencrypted(ctx, h, rc.bucket, "POST Object"); err != nil { // sse_config.go
		return err
	}
	meta, err := s.metaFromRequest(h, rc)
	if err != nil {
		return err
	}
	body := &countingLimit{r: form.file, min: minLen, max: maxLen}
	oi, err := s.st.Put(ctx, rc.bucket, key, body, -1, meta)
	if err != nil {
		if body.err != nil {
			return body.err
		}
		var ae *APIError
		if errors.As(err, &ae) {
			return ae
		}
		return err
	}
	etag := `"` + oi.ETag + `"`
	loc := "/" + rc.bucket + "/" + (&url.URL{Path: key}).EscapedPath()
	w.Header().Set("ETag", etag)
	w.Header().Set("Location", loc)
	if redir := f["success_action_redirect"]; redir != "" {
		if u, err := url.Parse(redir); err == nil && (u.Scheme == "http" || u.Scheme == "https") {
			q := u.Query()
			q.Set("bucket", rc.bucket)
			q.Set("key", key)
			q.Set("etag", etag)
			u.RawQuery = q.Encode()
			w.Header().Set("Location", u.String())
			w.WriteHeader(http.StatusSeeOther)
			return nil
		}
	}
	switch f["success_action_status"] {
	case "200":
		w.WriteHeader(http.StatusOK)
	case "201":
		return writeXMLStatus(w, http.StatusCreated, postResponse{Location: loc, Bucket: rc.bucket, Key: key, ETag: etag})
	default: // 204, and anything else, as in S3
		w.WriteHeader(http.StatusNoContent)
	}
	return nil
}

func writeXMLStatus(w http.ResponseWriter, status int, v any) error {
	b, err := xml.Marshal(v)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	w.Write([]byte(xml.Header))
	w.Write(b)
	return nil
}

// VerifyPost implements PostVerifier: SigV4 (x-amz-algorithm
// AWS4-HMAC-SHA256, x-amz-credential, x-amz-date, x-amz-signature) or
// SigV2 (AWSAccessKeyId, signature) over the base64 policy field.
func (a *SigV4Auth) VerifyPost(ctx context.Context, f map[string]string, now time.Time) (Identity, error) {
	policy := f["policy"]
	if sig := f["x-amz-signature"]; sig != "" {
		if f["x-amz-algorithm"] != "AWS4-HMAC-SHA256" {
			return Identity{}, ErrInvalidArgument.withMessage("Only AWS4-HMAC-SHA256 is supported for x-amz-algorithm in POST forms.")
		}
		parts := strings.Split(f["x-amz-credential"], "/")
		if len(parts) != 5 || parts[3] != "s3" || parts[4] != "aws4_request" {
			return Identity{}, ErrInvalidArgument.withMessage("Invalid x-amz-credential: expected <key>/<date>/<region>/s3/aws4_request.")
		}
		if a.region != "" && parts[2] != a.region {
			return Identity{}, ErrInvalidArgument.withMessage("Invalid x-amz-credential: the region '" + parts[2] + "' is wrong; expecting '" + a.region + "'")
		}
		if d := f["x-amz-date"]; len(d) < 8 || d[:8] != parts[1] {
			return Identity{}, ErrInvalidArgument.withMessage("Invalid x-amz-date: it must be given and match the credential date.")
		}
		secret, err := a.users.SecretFor(ctx, parts[0])
		if err != nil {
			if sigv4.IsUnknownAccessKey(err) {
				return Identity{}, ErrInvalidAccessKeyID
			}
			return Identity{}, err
		}
		k := hmacSum(sha256.New, []byte("AWS4"+secret), parts[1])
		k = hmacSum(sha256.New, k, parts[2])
		k = hmacSum(sha256.New, k, "s3")
		k = hmacSum(sha256.New, k, "aws4_request")
		want := hex.EncodeToString(hmacSum(sha256.New, k, policy))
		if subtle.ConstantTimeCompare([]byte(want), []byte(strings.ToLower(sig))) != 1 {
			return Identity{}, ErrSignatureDoesNotMatch
		}
		return a.identity(ctx, parts[0])
	}
	ak := f["awsaccesskeyid"]
	secret, err := a.users.SecretFor(ctx, ak)
	if err != nil {
		if sigv4.IsUnknownAccessKey(err) {
			return Identity{}, ErrInvalidAccessKeyID
		}
		return Identity{}, err
	}
	want := base64.StdEncoding.EncodeToString(hmacSum(sha1.New, []byte(secret), policy))
	if subtle.ConstantTimeCompare([]byte(want), []byte(f["signature"])) != 1 {
		return Identity{}, ErrSignatureDoesNotMatch
	}
	return a.identity(ctx, ak)
}

func hmacSum(h func() hash.Hash, key []byte, data string) []byte {
	m := hmac.New(h, key)
	m.Write([]byte(data))
	return m.Sum(nil)
}

var _ PostVerifier = (*SigV4Auth)(nil)
