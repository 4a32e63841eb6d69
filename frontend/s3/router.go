package s3

import (
	"encoding/xml"
	"io"
	"net"
	"net/http"
	"strings"

	"github.com/tristore/tristore/store"
)

// operation is one S3 API call: its name (for metrics), the IAM action it
// needs (checked before fn runs; "" = fn checks itself) and its handler.
type operation struct {
	name   string
	action string
	fn     func(s *Server, w http.ResponseWriter, r *http.Request, rc *reqCtx) error
}

// parseTarget finds the bucket and key, virtual-host style when the Host is
// "<bucket>.<one of VirtualHosts>", path style otherwise.
func (s *Server) parseTarget(r *http.Request) (bucket, key string, err error) {
	path := r.URL.Path
	if !strings.HasPrefix(path, "/") {
		path = "/" + path
	}
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.ToLower(host)
	for _, d := range s.opts.VirtualHosts {
		if strings.HasSuffix(host, "."+d) {
			bucket = strings.TrimSuffix(host, "."+d)
			key = path[1:]
			return bucket, key, checkKey(key)
		}
	}
	rest := path[1:]
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		bucket, key = rest[:i], rest[i+1:]
	} else {
		bucket = rest
	}
	return bucket, key, checkKey(key)
}

func checkKey(key string) error {
	if len(key) > store.MaxKeyLen {
		return ErrKeyTooLong
	}
	return nil
}

// validBucketName applies S3's rules for new buckets: 3-63 characters of
// lower-case letters, digits, '.' and '-', starting and ending with a
// letter or digit, no "..", and not shaped like an IP address.
func validBucketName(b string) bool {
	if len(b) < 3 || len(b) > 63 || strings.Contains(b, "..") {
		return false
	}
	for i := 0; i < len(b); i++ {
		c := b[i]
		ok := c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '-'
		if !ok {
			return false
		}
	}
	first, last := b[0], b[len(b)-1]
	alnum := func(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }
	if !alnum(first) || !alnum(last) {
		return false
	}
	if net.ParseIP(b) != nil {
		return false
	}
	return !strings.HasPrefix(b, store.ReservedPrefix)
}

// Sub-resources we do not implement: answered with NotImplemented instead
// of being mistaken for a plain GET/PUT of the bucket or object.
var unsupportedSub = []string{
	"cors", "lifecycle", "website", "encryption", "replication",
	"logging", "notification",
	"accelerate", "requestPayment", "inventory", "analytics", "metrics",
	"intelligent-tiering", "torrent",
	"restore", "select", "versionId", "policyStatus",
}

func hasQ(r *http.Request, k string) bool { _, ok := r.URL.Query()[k]; return ok }

func route(r *http.Request, bucket, key string) (*operation, error) {
	q := r.URL.Query()
	if op := routeVersioning(r, bucket, key); op != nil { // objectlock.go
		return op, nil
	}
	if op := routeConfig(r, bucket, key); op != nil {
		return op, nil
	}
	if op := routeAccess(r, bucket, key); op != nil { // access_config.go
		return op, nil
	}
	if op := routeUnset(r, bucket, key); op != nil {
		return op, nil
	}
	for _, sub := range unsupportedSub {
		if sub == "versionId" && (q.Get(sub) == "null" || versionedObjectRequest(r, key)) {
			continue // versioning.go
		}
		if _, ok := q[sub]; ok {
			return &operation{name: "Unsupported"}, ErrNotImplemented.withMessage("the ?" + sub + " sub-resource is not implemented")
		}
	}
	m := r.Method
	switch {
	case bucket == "":
		if m == http.MethodGet {
			return opListBuckets, nil
		}
	case key == "":
		switch m {
		case http.MethodGet:
			switch {
			case hasQ(r, "location"):
				return opGetBucketLocation, nil
			case hasQ(r, "acl"):
				return opGetBucketACL, nil
			case hasQ(r, "policy"):
				return opGetBucketPolicy, nil
			case hasQ(r, "versioning"):
				return opGetBucketVersioning, nil
			case hasQ(r, "tagging"):
				return opGetBucketTagging, nil
			case hasQ(r, "uploads"):
				return opListMultipartUploads, nil
			case hasQ(r, "versions"):
				return opListObjectVersions, nil
			case q.Get("list-type") == "2":
				return opListObjectsV2, nil
			}
			return opListObjects, nil
		case http.MethodHead:
			return opHeadBucket, nil
		case http.MethodPut:
			switch {
			case hasQ(r, "acl"):
				return opPutBucketACL, nil
			case hasQ(r, "policy"):
				return opPutBucketPolicy, nil
			case hasQ(r, "tagging"):
				return opPutBucketTagging, nil
			}
			return opCreateBucket, nil
		case http.MethodDelete:
			if hasQ(r, "policy") {
				return opDeleteBucketPolicy, nil
			}
			if hasQ(r, "tagging") {
				return opDeleteBucketTagging, nil
			}
			return opDeleteBucket, nil
		case http.MethodPost:
			if hasQ(r, "delete") {
				return opDeleteObjects, nil
			}
		}
	default:
		switch m {
		case http.MethodGet:
			switch {
			case hasQ(r, "acl"):
				return opGetObjectACL, nil
			case hasQ(r, "tagging"):
				return opGetObjectTagging, nil
			case hasQ(r, "attributes"):
				return opGetObjectAttributes, nil
			case hasQ(r, "uploadId"):
				return opListParts, nil
			}
			return opGetObject, nil
		case http.MethodHead:
			return opHeadObject, nil
		case http.MethodPut:
			switch {
			case hasQ(r, "acl"):
				return opPutObjectACL, nil
			case hasQ(r, "tagging"):
				return opPutObjectTagging, nil
			case hasQ(r, "uploadId") || hasQ(r, "partNumber"):
				if r.Header.Get("X-Amz-Copy-Source") != "" {
					return opUploadPartCopy, nil
				}
				return opUploadPart, nil
			case r.Header.Get("X-Amz-Copy-Source") != "":
				return opCopyObject, nil
			}
			return opPutObject, nil
		case http.MethodPost:
			switch {
			case hasQ(r, "uploads"):
				return opCreateMultipartUpload, nil
			case hasQ(r, "uploadId"):
				return opCompleteMultipartUpload, nil
			}
		case http.MethodDelete:
			if hasQ(r, "uploadId") {
				return opAbortMultipartUpload, nil
			}
			if hasQ(r, "tagging") {
				return opDeleteObjectTagging, nil
			}
			return opDeleteObject, nil
		}
	}
	return &operation{name: "Unsupported"}, ErrMethodNotAllowed
}

// writeXML sends v as an XML document with status 200.
func writeXML(w http.ResponseWriter, v any) error {
	b, err := xml.Marshal(v)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(http.StatusOK)
	w.Write([]byte(xml.Header))
	_, err = w.Write(b)
	if err != nil {
		// The status is sent; a failed body write only means the client left.
		return nil
	}
	return nil
}

// countingWriter records the status and the number of body bytes sent.
type countingWriter struct {
	http.ResponseWriter
	code  int
	n     int64
	wrote bool
}

func (c *countingWriter) WriteHeader(code int) {
	if !c.wrote {
		c.code = code
		c.wrote = true
	}
	c.ResponseWriter.WriteHeader(code)
}

func (c *countingWriter) Write(p []byte) (int, error) {
	if !c.wrote {
		c.WriteHeader(http.StatusOK)
	}
	n, err := c.ResponseWriter.Write(p)
	c.n += int64(n)
	return n, err
}

// Flush lets long responses (e.g. CompleteMultipartUpload keep-alives) reach the client.
func (c *countingWriter) Flush() {
	if f, ok := c.ResponseWriter.(http.Flusher); ok {
		if !c.wrote {
			c.WriteHeader(http.StatusOK)
		}
		f.Flush()
	}
}

// Unwrap lets http.ResponseController reach the connection (read deadlines).
func (c *countingWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }

func (c *countingWriter) status() int {
	if c.code == 0 {
		return http.StatusOK
	}
	return c.code
}

// countingBody counts request body bytes for the bytes-in metric.
type countingBody struct {
	io.ReadCloser
	n *int64
}

func (c *countingBody) Read(p []byte) (int, error) {
	n, err := c.ReadCloser.Read(p)
	*c.n += int64(n)
	return n, err
}

var _ http.Flusher = (*countingWriter)(nil)

// ReadFrom keeps the underlying writer's fast path (sendfile from a store
// file to the socket) available through the counting wrapper.
func (c *countingWriter) ReadFrom(src io.Reader) (int64, error) {
	if !c.wrote {
		c.WriteHeader(http.StatusOK)
	}
	if rf, ok := c.ResponseWriter.(io.ReaderFrom); ok {
		n, err := rf.ReadFrom(src)
		c.n += n
		return n, err
	}
	n, err := io.Copy(struct{ io.Writer }{c.ResponseWriter}, src)
	c.n += n
	return n, err
}

var _ io.ReaderFrom = (*countingWriter)(nil)
