package s3

import (
	"encoding/json"
	"encoding/xml"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/tristore/tristore/store"
)

// Object and bucket tagging. Object tags are part of the object's metadata
// (store.ObjectMeta.Tags: the posix store keeps them in the same xattr or
// sidecar record as the ETag and user metadata, fsynced before the
// answer); bucket tags are a bucket configuration document ("tagging",
// kept as JSON like the ACL and policy). Limits and error codes are S3's.

var (
	opGetObjectTagging    = &operation{"GetObjectTagging", "s3:GetObjectTagging", (*Server).getObjectTagging}
	opPutObjectTagging    = &operation{"PutObjectTagging", "s3:PutObjectTagging", (*Server).putObjectTagging}
	opDeleteObjectTagging = &operation{"DeleteObjectTagging", "s3:DeleteObjectTagging", (*Server).deleteObjectTagging}
	opGetBucketTagging    = &operation{"GetBucketTagging", "s3:GetBucketTagging", (*Server).getBucketTagging}
	opPutBucketTagging    = &operation{"PutBucketTagging", "s3:PutBucketTagging", (*Server).putBucketTagging}
	opDeleteBucketTagging = &operation{"DeleteBucketTagging", "s3:PutBucketTagging", deleteBucketSetting(cfgTagging)}
)

// cfgTagging is the bucket configuration name of the bucket's tag set.
const cfgTagging = "tagging"

// S3's tagging limits.
const (
	maxObjectTags = 10
	maxBucketTags = 50
	maxTagKey     = 128 // characters
	maxTagValue   = 256 // characters
	maxTagBody    = 64 << 10
)

var (
	ErrInvalidTag = &APIError{"InvalidTag", http.StatusBadRequest, "The tag provided was not a valid tag."}
	// errTooManyObjectTags: more than 10 tags on an object.
	errTooManyObjectTags = &APIError{"BadRequest", http.StatusBadRequest, "Object tags cannot be greater than 10"}
	ErrNoSuchTagSet      = &APIError{"NoSuchTagSet", http.StatusNotFound, "The TagSet does not exist"}
)

type tagXML struct {
	Key   string `xml:"Key"`
	Value string `xml:"Value"`
}

// tagging is the Tagging document of PutObjectTagging/PutBucketTagging
// and of their GET answers.
type tagging struct {
	XMLName xml.Name `xml:"Tagging"`
	NS      string   `xml:"xmlns,attr,omitempty"`
	TagSet  []tagXML `xml:"TagSet>Tag"`
}

// tagPair is one tag in request order (a map would hide duplicates).
type tagPair struct{ k, v string }

// validTagChars reports whether s uses only what S3 allows in tags:
// letters, digits and white space in any script, and + - = . _ : / @.
func validTagChars(s string) bool {
	for _, c := range s {
		if !unicode.IsLetter(c) && !unicode.IsNumber(c) && !unicode.IsSpace(c) && !strings.ContainsRune("+-=._:/@", c) {
			return false
		}
	}
	return true
}

// checkTags applies S3's rules to a tag set and returns it as a map.
// An empty set gives a nil map.
func checkTags(pairs []tagPair, max int) (map[string]string, error) {
	if len(pairs) > max {
		if max == maxObjectTags {
			// AWS's code here is BadRequest, not InvalidTag (seen from
			// boto3 and Terraform against AWS: "BadRequest: Object tags
			// cannot be greater than 10").
			return nil, errTooManyObjectTags
		}
		return nil, ErrInvalidTag.withMessage("Bucket tag count cannot be greater than 50")
	}
	var m map[string]string
	for _, p := range pairs {
		switch {
		case p.k == "":
			return nil, ErrInvalidTag.withMessage("The TagKey you have provided is invalid")
		case !utf8.ValidString(p.k) || utf8.RuneCountInString(p.k) > maxTagKey:
			return nil, ErrInvalidTag.withMessage("The TagKey you have provided is too long, max " + strconv.Itoa(maxTagKey))
		case !utf8.ValidString(p.v) || utf8.RuneCountInString(p.v) > maxTagValue:
			return nil, ErrInvalidTag.withMessage("The TagValue you have provided is too long, max " + strconv.Itoa(maxTagValue))
		case strings.HasPrefix(strings.ToLower(p.k), "aws:"):
			return nil, ErrInvalidTag.withMessage("Your TagKey cannot be prefixed with aws:")
		case !validTagChars(p.k):
			return nil, ErrInvalidTag.withMessage("The TagKey you have provided is invalid")
		case !validTagChars(p.v):
			return nil, ErrInvalidTag.withMessage("The TagValue you have provided is invalid")
		}
		if _, dup := m[p.k]; dup {
			return nil, ErrInvalidTag.withMessage("Cannot provide multiple Tags with the same key")
		}
		if m == nil {
			m = map[string]string{}
		}
		m[p.k] = p.v
	}
	return m, nil
}

// tagsFromHeader parses x-amz-tagging (URL query encoded, "k1=v1&k2=v2")
// as sent on PUT, CopyObject (with x-amz-tagging-directive: REPLACE) and
// CreateMultipartUpload. Absent or empty: no tags.
func tagsFromHeader(h http.Header) (map[string]string, error) {
	v := h.Get("X-Amz-Tagging")
	if v == "" {
		return nil, nil
	}
	var pairs []tagPair
	for _, kv := range strings.Split(v, "&") {
		if kv == "" {
			continue
		}
		k, val, _ := strings.Cut(kv, "=")
		var err1, err2 error
		k, err1 = url.QueryUnescape(k)
		val, err2 = url.QueryUnescape(val)
		if err1 != nil || err2 != nil {
			return nil, ErrInvalidArgument.withMessage("The header 'x-amz-tagging' shall be encoded as UTF-8 then URLEncoded URL query parameters without tag name duplicates.")
		}
		pairs = append(pairs, tagPair{k, val})
	}
	return checkTags(pairs, maxObjectTags)
}

// readTagging reads and checks a Tagging document body.
func readTagging(r *http.Request, max int) (map[string]string, error) {
	b, err := readVerifiedBody(r, maxTagBody)
	if err != nil {
		return nil, err
	}
	var doc tagging
	if len(b) == 0 {
		return nil, ErrMalformedXML
	}
	if err := xml.Unmarshal(b, &doc); err != nil {
		return nil, ErrMalformedXML
	}
	pairs := make([]tagPair, 0, len(doc.TagSet))
	for _, t := range doc.TagSet {
		pairs = append(pairs, tagPair{t.Key, t.Value})
	}
	return checkTags(pairs, max)
}

// tagSet renders tags sorted by key (S3 does not promise an order; a
// fixed one keeps answers stable).
func tagSet(m map[string]string) []tagXML {
	out := make([]tagXML, 0, len(m))
	for k, v := range m {
		out = append(out, tagXML{k, v})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Key < out[j].Key })
	return out
}

// writeTagging answers a GET ...?tagging. TagSet is always present, also
// when empty (<TagSet></TagSet>), as S3 sends it for an untagged object.
func writeTagging(w http.ResponseWriter, m map[string]string) error {
	doc := tagging{NS: s3NS, TagSet: tagSet(m)}
	if len(doc.TagSet) == 0 {
		return writeXML(w, emptyTagging{NS: s3NS})
	}
	return writeXML(w, doc)
}

type emptyTagging struct {
	XMLName xml.Name `xml:"Tagging"`
	NS      string   `xml:"xmlns,attr"`
	TagSet  struct{} `xml:"TagSet"`
}

func (s *Server) metaUpdater() (store.MetaUpdater, error) {
	mu, ok := s.st.(store.MetaUpdater)
	if !ok {
		return nil, ErrNotImplemented.withMessage("this store cannot update object metadata")
	}
	return mu, nil
}

func (s *Server) getObjectTagging(w http.ResponseWriter, r *http.Request, rc *reqCtx) error {
	_, oi, err := s.subTarget(r.Context(), w, r, rc, "GetObjectTagging")
	if err != nil {
		return err
	}
	return writeTagging(w, oi.Meta.Tags)
}

// setObjectTags replaces the tag set of the object (or of the version the
// request names, version_sub.go); the store makes it durable (record and
// file fsynced) before we answer.
func (s *Server) setObjectTags(w http.ResponseWriter, r *http.Request, rc *reqCtx, op string, tags map[string]string) error {
	if _, err := s.metaUpdater(); err != nil {
		return err
	}
	vid, oi, err := s.subTarget(r.Context(), w, r, rc, op)
	if err != nil {
		return err
	}
	meta := oi.Meta
	meta.Tags = tags
	return s.updateSubMeta(r.Context(), rc, vid, oi, meta)
}

func (s *Server) putObjectTagging(w http.ResponseWriter, r *http.Request, rc *reqCtx) error {
	tags, err := readTagging(r, maxObjectTags)
	if err != nil {
		return err
	}
	if err := s.setObjectTags(w, r, rc, "PutObjectTagging", tags); err != nil {
		return err
	}
	w.WriteHeader(http.StatusOK)
	return nil
}

func (s *Server) deleteObjectTagging(w http.ResponseWriter, r *http.Request, rc *reqCtx) error {
	if err := s.setObjectTags(w, r, rc, "DeleteObjectTagging", nil); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func (s *Server) getBucketTagging(w http.ResponseWriter, r *http.Request, rc *reqCtx) error {
	if _, err := s.st.StatBucket(r.Context(), rc.bucket); err != nil {
		return err
	}
	bc, err := s.bucketConfigurer()
	if err != nil {
		return err
	}
	doc, err := bc.GetBucketConfig(r.Context(), rc.bucket, cfgTagging)
	if err != nil {
		return err
	}
	if doc == "" {
		return ErrNoSuchTagSet
	}
	var m map[string]string
	if err := json.Unmarshal([]byte(doc), &m); err != nil || len(m) == 0 {
		return ErrNoSuchTagSet // unreadable: as if never set (logged by the caller's 404 path)
	}
	return writeTagging(w, m)
}

func (s *Server) putBucketTagging(w http.ResponseWriter, r *http.Request, rc *reqCtx) error {
	if _, err := s.st.StatBucket(r.Context(), rc.bucket); err != nil {
		return err
	}
	tags, err := readTagging(r, maxBucketTags)
	if err != nil {
		return err
	}
	val := ""
	if len(tags) > 0 {
		b, err := json.Marshal(tags)
		if err != nil {
			return err
		}
		val = string(b)
	}
	if err := s.setBucketConfig(r, rc.bucket, cfgTagging, val); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
