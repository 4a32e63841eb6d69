package s3

import (
	"context"
	"encoding/xml"
	"net/http"
	"strings"
	"time"

	"github.com/tristore/tristore/store"
)

// Lifecycle configuration: Put/Get/DeleteBucketLifecycleConfiguration,
// validated as S3 validates it and kept as a bucket configuration
// document (so it survives restarts); lifecycle_worker.go enforces it.
//
// Enforced: Expiration by Days or Date with a Prefix, Tag, size or And
// filter, AbortIncompleteMultipartUpload and, on a store that keeps
// versions (store.Versioner), NoncurrentVersionExpiration (with
// NewerNoncurrentVersions) and Expiration/ExpiredObjectDeleteMarker.
// Transition and NoncurrentVersionTransition move objects between storage
// classes, of which tristore has one: refused with NotImplemented rather
// than stored as rules that never act.

var (
	opGetBucketLifecycle    = &operation{"GetBucketLifecycleConfiguration", "s3:GetLifecycleConfiguration", (*Server).getBucketLifecycle}
	opPutBucketLifecycle    = &operation{"PutBucketLifecycleConfiguration", "s3:PutLifecycleConfiguration", (*Server).putBucketLifecycle}
	opDeleteBucketLifecycle = &operation{"DeleteBucketLifecycle", "s3:PutLifecycleConfiguration", deleteBucketSetting(cfgLifecycle)}
)

// cfgLifecycle is the bucket configuration name of the lifecycle document.
const cfgLifecycle = "lifecycle"

const (
	maxLifecycleRules = 1000
	maxLifecycleBody  = 1 << 20
)

var ErrNoSuchLifecycleConfiguration = &APIError{"NoSuchLifecycleConfiguration", http.StatusNotFound, "The lifecycle configuration does not exist"}

type lcTag struct {
	Key   string `xml:"Key"`
	Value string `xml:"Value"`
}

type lcAnd struct {
	Prefix                *string `xml:"Prefix"`
	Tags                  []lcTag `xml:"Tag"`
	ObjectSizeGreaterThan *int64  `xml:"ObjectSizeGreaterThan"`
	ObjectSizeLessThan    *int64  `xml:"ObjectSizeLessThan"`
}

type lcFilter struct {
	Prefix                *string `xml:"Prefix"`
	Tag                   *lcTag  `xml:"Tag"`
	And                   *lcAnd  `xml:"And"`
	ObjectSizeGreaterThan *int64  `xml:"ObjectSizeGreaterThan"`
	ObjectSizeLessThan    *int64  `xml:"ObjectSizeLessThan"`
}

type lcExpiration struct {
	Date                      string `xml:"Date,omitempty"`
	Days                      *int   `xml:"Days"`
	ExpiredObjectDeleteMarker *bool  `xml:"ExpiredObjectDeleteMarker"`
}

type lcNoncurrent struct {
	NoncurrentDays          *int `xml:"NoncurrentDays"`
	NewerNoncurrentVersions *int `xml:"NewerNoncurrentVersions"`
}

type lcAbort struct {
	DaysAfterInitiation *int `xml:"DaysAfterInitiation"`
}

type lcRule struct {
	ID                          string        `xml:"ID,omitempty"`
	Prefix                      *string       `xml:"Prefix"`
	Filter                      *lcFilter     `xml:"Filter"`
	Status                      string        `xml:"Status"`
	Expiration                  *lcExpiration `xml:"Expiration"`
	NoncurrentVersionExpiration *lcNoncurrent `xml:"NoncurrentVersionExpiration"`
	AbortIncompleteMultipart    *lcAbort      `xml:"AbortIncompleteMultipartUpload"`
	Transition                  *struct{}     `xml:"Transition"`
	NoncurrentVersionTransition *struct{}     `xml:"NoncurrentVersionTransition"`

	// Resolved by parseLifecycle.
	prefix  string
	tags    map[string]string
	sizeGT  int64 // -1: none
	sizeLT  int64 // -1: none
	date    time.Time
	enabled bool
}

type lifecycleConfiguration struct {
	XMLName xml.Name `xml:"LifecycleConfiguration"`
	NS      string   `xml:"xmlns,attr,omitempty"`
	Rules   []lcRule `xml:"Rule"`
}

var lifecycleSchema = xmlSchema{
	"LifecycleConfiguration":                                     {"Rule"},
	"LifecycleConfiguration/Rule":                                {"ID", "Prefix", "Filter", "Status", "Expiration", "Transition", "NoncurrentVersionExpiration", "NoncurrentVersionTransition", "AbortIncompleteMultipartUpload"},
	"LifecycleConfiguration/Rule/Filter":                         {"Prefix", "Tag", "And", "ObjectSizeGreaterThan", "ObjectSizeLessThan"},
	"LifecycleConfiguration/Rule/Filter/Tag":                     {"Key", "Value"},
	"LifecycleConfiguration/Rule/Filter/And":                     {"Prefix", "Tag", "ObjectSizeGreaterThan", "ObjectSizeLessThan"},
	"LifecycleConfiguration/Rule/Filter/And/Tag":                 {"Key", "Value"},
	"LifecycleConfiguration/Rule/Expiration":                     {"Date", "Days", "ExpiredObjectDeleteMarker"},
	"LifecycleConfiguration/Rule/Transition":                     {"Date", "Days", "StorageClass"},
	"LifecycleConfiguration/Rule/NoncurrentVersionExpiration":    {"NoncurrentDays", "NewerNoncurrentVersions"},
	"LifecycleConfiguration/Rule/NoncurrentVersionTransition":    {"NoncurrentDays", "NewerNoncurrentVersions", "StorageClass"},
	"LifecycleConfiguration/Rule/AbortIncompleteMultipartUpload": {"DaysAfterInitiation"},
}

// parseLifecycleDate reads an Expiration Date: ISO 8601 at midnight UTC.
func parseLifecycleDate(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	var t time.Time
	var err error
	for _, layout := range []string{time.RFC3339Nano, "2006-01-02T15:04:05.000Z", "2006-01-02"} {
		if t, err = time.Parse(layout, s); err == nil {
			break
		}
	}
	if err != nil {
		return time.Time{}, ErrInvalidArgument.withMessage("Date must be in ISO 8601 format")
	}
	t = t.UTC()
	if !t.Equal(t.Truncate(24 * time.Hour)) {
		return time.Time{}, ErrInvalidArgument.withMessage("'Date' must be at midnight GMT")
	}
	return t, nil
}

// parseLifecycle decodes and validates a LifecycleConfiguration with S3's
// codes, resolving each rule's filter. Nothing is stored unless it passes.
func parseLifecycle(b []byte) (*lifecycleConfiguration, error) {
	if err := checkXMLSchema(b, "LifecycleConfiguration", lifecycleSchema); err != nil {
		return nil, err
	}
	var c lifecycleConfiguration
	if err := xml.Unmarshal(b, &c); err != nil {
		return nil, ErrMalformedXML
	}
	if len(c.Rules) == 0 {
		return nil, ErrMalformedXML
	}
	if len(c.Rules) > maxLifecycleRules {
		return nil, ErrInvalidRequest.withMessage("The number of lifecycle rules should not exceed allowed limit of 1000 rules")
	}
	ids := map[string]bool{}
	for i := range c.Rules {
		if err := c.Rules[i].resolve(); err != nil {
			return nil, err
		}
		ru := &c.Rules[i]
		if ru.ID != "" {
			if ids[ru.ID] {
				return nil, ErrInvalidArgument.withMessage("Rule ID must be unique. Found same ID for more than one rule")
			}
			ids[ru.ID] = true
		}
	}
	return &c, nil
}

// resolve checks one rule and fills its resolved fields.
func (ru *lcRule) resolve() error {
	ru.sizeGT, ru.sizeLT = -1, -1
	if len(ru.ID) > 255 {
		return ErrInvalidArgument.withMessage("ID length should not exceed allowed limit of 255")
	}
	switch ru.Status {
	case "Enabled":
		ru.enabled = true
	case "Disabled":
	default:
		return ErrMalformedXML
	}
	if ru.Transition != nil || ru.NoncurrentVersionTransition != nil {
		return ErrNotImplemented.withMessage("lifecycle transitions are not supported: tristore has a single storage class")
	}
	if (ru.Prefix != nil) == (ru.Filter != nil) {
		return ErrMalformedXML // exactly one of the legacy Prefix and Filter
	}
	var pairs []tagPair
	if ru.Prefix != nil {
		ru.prefix = *ru.Prefix
	} else if f := ru.Filter; f != nil {
		n := 0
		for _, set := range []bool{f.Prefix != nil, f.Tag != nil, f.And != nil, f.ObjectSizeGreaterThan != nil, f.ObjectSizeLessThan != nil} {
			if set {
				n++
			}
		}
		if n > 1 {
			return ErrMalformedXML // one predicate, or And
		}
		prefix, gt, lt := f.Prefix, f.ObjectSizeGreaterThan, f.ObjectSizeLessThan
		if f.Tag != nil {
			pairs = append(pairs, tagPair{f.Tag.Key, f.Tag.Value})
		}
		if a := f.And; a != nil {
			prefix, gt, lt = a.Prefix, a.ObjectSizeGreaterThan, a.ObjectSizeLessThan
			for _, t := range a.Tags {
				pairs = append(pairs, tagPair{t.Key, t.Value})
			}
		}
		if prefix != nil {
			ru.prefix = *prefix
		}
		if gt != nil {
			if *gt < 0 {
				return ErrInvalidArgument.withMessage("ObjectSizeGreaterThan must be a non-negative integer")
			}
			ru.sizeGT = *gt
		}
		if lt != nil {
			if *lt <= 0 {
				return ErrInvalidArgument.withMessage("ObjectSizeLessThan must be a positive integer")
			}
			ru.sizeLT = *lt
		}
		if ru.sizeGT >= 0 && ru.sizeLT >= 0 && ru.sizeGT >= ru.sizeLT {
			return ErrInvalidArgument.withMessage("ObjectSizeGreaterThan must be less than ObjectSizeLessThan")
		}
	}
	tags, err := checkTags(pairs, maxObjectTags)
	if err != nil {
		return err
	}
	ru.tags = tags
	if ru.Expiration == nil && ru.NoncurrentVersionExpiration == nil && ru.AbortIncompleteMultipart == nil {
		return ErrInvalidRequest.withMessage("At least one action needs to be specified in a rule")
	}
	if e := ru.Expiration; e != nil {
		set := 0
		if e.Days != nil {
			set++
			if *e.Days <= 0 {
				return ErrInvalidArgument.withMessage("'Days' for Expiration action must be a positive integer")
			}
		}
		if e.Date != "" {
			set++
			if ru.date, err = parseLifecycleDate(e.Date); err != nil {
				return err
			}
		}
		if set > 1 {
			return ErrMalformedXML // Days or Date, not both
		}
		if e.ExpiredObjectDeleteMarker != nil {
			if set > 0 {
				return ErrInvalidArgument.withMessage("ExpiredObjectDeleteMarker cannot be specified with Days or Date in a Lifecycle Expiration Policy")
			}
			if len(ru.tags) > 0 {
				return ErrInvalidArgument.withMessage("ExpiredObjectDeleteMarker cannot be specified with a tag-based filter")
			}
			set++
		}
		if set == 0 {
			return ErrMalformedXML
		}
	}
	if nv := ru.NoncurrentVersionExpiration; nv != nil {
		if nv.NoncurrentDays == nil || *nv.NoncurrentDays <= 0 {
			return ErrInvalidArgument.withMessage("'NoncurrentDays' for NoncurrentVersionExpiration action must be a positive integer")
		}
		if n := nv.NewerNoncurrentVersions; n != nil && (*n < 1 || *n > 100) {
			return ErrInvalidArgument.withMessage("'NewerNoncurrentVersions' must be between 1 and 100")
		}
	}
	if a := ru.AbortIncompleteMultipart; a != nil {
		if a.DaysAfterInitiation == nil || *a.DaysAfterInitiation <= 0 {
			return ErrInvalidArgument.withMessage("'DaysAfterInitiation' for AbortIncompleteMultipartUpload action must be a positive integer")
		}
		if len(ru.tags) > 0 || ru.sizeGT >= 0 || ru.sizeLT >= 0 {
			return ErrInvalidRequest.withMessage("AbortIncompleteMultipartUpload cannot be specified with tags or object size filters")
		}
	}
	return nil
}

// matches reports whether object oi falls under the rule's filter.
func (ru *lcRule) matches(oi store.ObjectInfo) bool {
	oi = plainInfo(oi) // sse.go: size filters see the plaintext size
	if !strings.HasPrefix(oi.Key, ru.prefix) {
		return false
	}
	if ru.sizeGT >= 0 && oi.Size <= ru.sizeGT {
		return false
	}
	if ru.sizeLT >= 0 && oi.Size >= ru.sizeLT {
		return false
	}
	for k, v := range ru.tags {
		if got, ok := oi.Meta.Tags[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// bucketLifecycle returns the bucket's lifecycle rules, nil when none.
func (s *Server) bucketLifecycle(ctx context.Context, bucket string) (*lifecycleConfiguration, error) {
	bc, err := s.bucketConfigurer()
	if err != nil {
		return nil, err
	}
	doc, err := bc.GetBucketConfig(ctx, bucket, cfgLifecycle)
	if err != nil || doc == "" {
		return nil, err
	}
	return parseLifecycle([]byte(doc))
}

func (s *Server) getBucketLifecycle(w http.ResponseWriter, r *http.Request, rc *reqCtx) error {
	if _, err := s.st.StatBucket(r.Context(), rc.bucket); err != nil {
		return err
	}
	c, err := s.bucketLifecycle(r.Context(), rc.bucket)
	if err != nil {
		return err
	}
	if c == nil {
		return ErrNoSuchLifecycleConfiguration
	}
	c.NS = s3NS
	return writeXML(w, c)
}

func (s *Server) putBucketLifecycle(w http.ResponseWriter, r *http.Request, rc *reqCtx) error {
	if _, err := s.st.StatBucket(r.Context(), rc.bucket); err != nil {
		return err
	}
	b, err := readVerifiedBody(r, maxLifecycleBody)
	if err != nil {
		return err
	}
	c, err := parseLifecycle(b)
	if err != nil {
		return err
	}
	c.NS = s3NS
	out, err := xml.Marshal(c)
	if err != nil {
		return err
	}
	if err := s.setBucketConfig(r, rc.bucket, cfgLifecycle, string(out)); err != nil {
		return err
	}
	s.lifecycleKick()
	w.WriteHeader(http.StatusOK)
	return nil
}
