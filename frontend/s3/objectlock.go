package s3

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/tristore/tristore/store"
)

// Object Lock (WORM) as S3 has it: only on a bucket created with
// x-amz-bucket-object-lock-enabled: true (which also turns versioning on
// and can never be suspended); a default retention for new versions;
// per-version retention (GOVERNANCE, which a caller allowed
// s3:BypassGovernanceRetention may shorten or remove with
// x-amz-bypass-governance-retention: true, and COMPLIANCE, which nobody
// can) and legal hold. A locked version cannot be deleted by version ID;
// a DELETE without one only adds a delete marker, and a PUT adds a new
// version, so nothing locked is ever overwritten. Retention and legal hold
// are kept in the version's metadata record, the bucket's configuration in
// the bucket document cfgObjectLock; both survive a restart.

const cfgObjectLock = "object-lock"

var (
	opPutObjectLockConfig = &operation{"PutObjectLockConfiguration", "s3:PutBucketObjectLockConfiguration", (*Server).putObjectLockConfig}
	opGetObjectLockConfig = &operation{"GetObjectLockConfiguration", "s3:GetBucketObjectLockConfiguration", (*Server).getObjectLockConfig}
	opPutObjectRetention  = &operation{"PutObjectRetention", "s3:PutObjectRetention", (*Server).putObjectRetention}
	opGetObjectRetention  = &operation{"GetObjectRetention", "s3:GetObjectRetention", (*Server).getObjectRetention}
	opPutObjectLegalHold  = &operation{"PutObjectLegalHold", "s3:PutObjectLegalHold", (*Server).putObjectLegalHold}
	opGetObjectLegalHold  = &operation{"GetObjectLegalHold", "s3:GetObjectLegalHold", (*Server).getObjectLegalHold}
)

var (
	errNoLockConfig          = &APIError{"ObjectLockConfigurationNotFoundError", http.StatusNotFound, "Object Lock configuration does not exist for this bucket"}
	errLockNotEnabled        = &APIError{"InvalidBucketState", http.StatusConflict, "Object Lock configuration cannot be enabled on existing buckets"}
	errNoObjectLockConfig    = &APIError{"NoSuchObjectLockConfiguration", http.StatusNotFound, "The specified object does not have a ObjectLock configuration"}
	errRetainDatePast        = ErrInvalidArgument.withMessage("The retain until date must be in the future!")
	errLockedVersion         = ErrAccessDenied.withMessage("Access Denied because object protected by object lock.")
	errLockHeadersIncomplete = ErrInvalidArgument.withMessage("x-amz-object-lock-retain-until-date and x-amz-object-lock-mode must both be supplied")
)

// lockConf is the stored bucket configuration.
type lockConf struct {
	Mode  string `json:"mode,omitempty"` // default retention mode ("" = none)
	Days  int    `json:"days,omitempty"`
	Years int    `json:"years,omitempty"`
}

type lockConfigXML struct {
	XMLName           xml.Name `xml:"ObjectLockConfiguration"`
	NS                string   `xml:"xmlns,attr,omitempty"`
	ObjectLockEnabled string   `xml:"ObjectLockEnabled"`
	Rule              *struct {
		DefaultRetention struct {
			Mode  string `xml:"Mode"`
			Days  *int   `xml:"Days,omitempty"`
			Years *int   `xml:"Years,omitempty"`
		} `xml:"DefaultRetention"`
	} `xml:"Rule,omitempty"`
}

type retentionXML struct {
	XMLName         xml.Name `xml:"Retention"`
	NS              string   `xml:"xmlns,attr,omitempty"`
	Mode            string   `xml:"Mode,omitempty"`
	RetainUntilDate string   `xml:"RetainUntilDate,omitempty"`
}

type legalHoldXML struct {
	XMLName xml.Name `xml:"LegalHold"`
	NS      string   `xml:"xmlns,attr,omitempty"`
	Status  string   `xml:"Status"`
}

// lockConfig returns the bucket's Object Lock configuration, nil when the
// bucket was not created with Object Lock.
func (s *Server) lockConfig(ctx context.Context, bucket string) (*lockConf, error) {
	bc, ok := s.st.(store.BucketConfigurer)
	if !ok {
		_, err := s.st.StatBucket(ctx, bucket)
		return nil, err
	}
	v, err := bc.GetBucketConfig(ctx, bucket, cfgObjectLock)
	if err != nil || v == "" {
		return nil, err
	}
	var c lockConf
	if err := json.Unmarshal([]byte(v), &c); err != nil {
		return nil, err
	}
	return &c, nil
}

// enableObjectLock is the part of CreateBucket for
// x-amz-bucket-object-lock-enabled: true.
func (s *Server) enableObjectLock(ctx context.Context, bucket string) error {
	_, bc, err := s.versioner()
	if err != nil {
		return err
	}
	if err := bc.SetBucketConfig(ctx, bucket, store.VersioningConfig, store.VersioningEnabled); err != nil {
		return err
	}
	return bc.SetBucketConfig(ctx, bucket, cfgObjectLock, "{}")
}

func validLockMode(m string) bool { return m == "GOVERNANCE" || m == "COMPLIANCE" }

func (s *Server) putObjectLockConfig(w http.ResponseWriter, r *http.Request, rc *reqCtx) error {
	ctx := r.Context()
	_, bc, err := s.versioner()
	if err != nil {
		return err
	}
	cur, err := s.lockConfig(ctx, rc.bucket)
	if err != nil {
		return err
	}
	var doc lockConfigXML
	if _, err := readXML(r, &doc, false); err != nil {
		return err
	}
	if doc.ObjectLockEnabled != "Enabled" {
		return ErrMalformedXML
	}
	var c lockConf
	if doc.Rule != nil {
		d := doc.Rule.DefaultRetention
		if !validLockMode(d.Mode) || (d.Days == nil) == (d.Years == nil) {
			return ErrMalformedXML
		}
		c.Mode = d.Mode
		switch {
		case d.Days != nil && *d.Days <= 0:
			return ErrInvalidArgument.withMessage("Default retention period must be a positive integer value")
		case d.Years != nil && *d.Years <= 0:
			return ErrInvalidArgument.withMessage("Default retention period must be a positive integer value")
		case d.Days != nil:
			c.Days = *d.Days
		default:
			c.Years = *d.Years
		}
	}
	if cur == nil {
		return errLockNotEnabled
	}
	b, _ := json.Marshal(c)
	if err := bc.SetBucketConfig(ctx, rc.bucket, cfgObjectLock, string(b)); err != nil {
		return err
	}
	w.WriteHeader(http.StatusOK)
	return nil
}

func (s *Server) getObjectLockConfig(w http.ResponseWriter, r *http.Request, rc *reqCtx) error {
	c, err := s.lockConfig(r.Context(), rc.bucket)
	if err != nil {
		return err
	}
	if c == nil {
		return errNoLockConfig
	}
	doc := lockConfigXML{NS: s3NS, ObjectLockEnabled: "Enabled"}
	if c.Mode != "" {
		doc.Rule = &struct {
			DefaultRetention struct {
				Mode  string `xml:"Mode"`
				Days  *int   `xml:"Days,omitempty"`
				Years *int   `xml:"Years,omitempty"`
			} `xml:"DefaultRetention"`
		}{}
		doc.Rule.DefaultRetention.Mode = c.Mode
		if c.Days > 0 {
			doc.Rule.DefaultRetention.Days = &c.Days
		} else {
			doc.Rule.DefaultRetention.Years = &c.Years
		}
	}
	return writeXML(w, doc)
}

// applyObjectLock sets the lock fields of a new version's meta from the
// x-amz-object-lock-* headers or the bucket's default retention (PUT,
// CopyObject, CreateMultipartUpload).
func (s *Server) applyObjectLock(ctx context.Context, h http.Header, bucket string, m *store.ObjectMeta) error {
	m.LockMode, m.LockUntil, m.LegalHold = "", time.Time{}, false
	mode, until, hold := h.Get("X-Amz-Object-Lock-Mode"), h.Get("X-Amz-Object-Lock-Retain-Until-Date"), h.Get("X-Amz-Object-Lock-Legal-Hold")
	c, err := s.lockConfig(ctx, bucket)
	if err != nil {
		return err
	}
	if c == nil {
		if mode != "" || until != "" || hold != "" {
			return errMissingObjectLock
		}
		return nil
	}
	switch hold {
	case "":
	case "ON":
		m.LegalHold = true
	case "OFF":
	default:
		return ErrInvalidArgument.withMessage("Legal Hold must be either of 'ON' or 'OFF'")
	}
	if (mode == "") != (until == "") {
		return errLockHeadersIncomplete
	}
	if mode != "" {
		if !validLockMode(mode) {
			return ErrInvalidArgument.withMessage("Unknown wormMode directive.")
		}
		t, err := time.Parse(time.RFC3339, until)
		if err != nil {
			return ErrInvalidArgument.withMessage("The retain until date must be provided in ISO 8601 format")
		}
		if !t.After(time.Now()) {
			return errRetainDatePast
		}
		m.LockMode, m.LockUntil = mode, t.UTC()
		return nil
	}
	if c.Mode != "" {
		now := time.Now().UTC()
		m.LockMode = c.Mode
		if c.Days > 0 {
			m.LockUntil = now.AddDate(0, 0, c.Days)
		} else {
			m.LockUntil = now.AddDate(c.Years, 0, 0)
		}
	}
	return nil
}

// lockHeaders reports a version's lock on GET/HEAD.
func lockHeaders(h http.Header, m store.ObjectMeta) {
	if m.LockMode != "" && !m.LockUntil.IsZero() {
		h.Set("X-Amz-Object-Lock-Mode", m.LockMode)
		h.Set("X-Amz-Object-Lock-Retain-Until-Date", m.LockUntil.UTC().Format(time.RFC3339))
	}
	if m.LegalHold {
		h.Set("X-Amz-Object-Lock-Legal-Hold", "ON")
	}
}

// bypassGovernance reports whether the request asks to bypass GOVERNANCE
// retention and may: the header and s3:BypassGovernanceRetention.
func (s *Server) bypassGovernance(ctx context.Context, rc *reqCtx, r *http.Request, key string) bool {
	if !strings.EqualFold(r.Header.Get("X-Amz-Bypass-Governance-Retention"), "true") {
		return false
	}
	return s.authorize(ctx, rc, "s3:BypassGovernanceRetention", rc.bucket, key) == nil
}

// checkLockedDelete refuses to delete a version under legal hold or
// unexpired retention (GOVERNANCE may be bypassed), as S3 does.
func (s *Server) checkLockedDelete(ctx context.Context, rc *reqCtx, r *http.Request, key string, oi store.ObjectInfo) error {
	m := oi.Meta
	if m.LegalHold {
		return errLockedVersion
	}
	if m.LockMode == "" || !m.LockUntil.After(time.Now()) {
		return nil
	}
	if m.LockMode == "GOVERNANCE" && s.bypassGovernance(ctx, rc, r, key) {
		return nil
	}
	return errLockedVersion
}

// lockTarget resolves the version a retention or legal-hold request is
// about, in a bucket with Object Lock.
func (s *Server) lockTarget(ctx context.Context, r *http.Request, rc *reqCtx) (store.Versioner, string, store.ObjectInfo, error) {
	v, _, err := s.versioner()
	if err != nil {
		return nil, "", store.ObjectInfo{}, err
	}
	vid, err := versionParam(r)
	if err != nil {
		return nil, "", store.ObjectInfo{}, err
	}
	oi, err := v.StatVersion(ctx, rc.bucket, rc.key, vid)
	if errors.Is(err, store.ErrDeleteMarker) {
		return nil, "", oi, ErrDeleteMarkerMethod
	}
	if err != nil {
		return nil, "", oi, err
	}
	c, err := s.lockConfig(ctx, rc.bucket)
	if err != nil {
		return nil, "", store.ObjectInfo{}, err
	}
	if c == nil {
		return nil, "", store.ObjectInfo{}, errMissingObjectLock
	}
	return v, vid, oi, nil
}

func (s *Server) putObjectRetention(w http.ResponseWriter, r *http.Request, rc *reqCtx) error {
	ctx := r.Context()
	var doc retentionXML
	if _, err := readXML(r, &doc, false); err != nil {
		return err
	}
	var until time.Time
	if doc.Mode != "" || doc.RetainUntilDate != "" {
		if !validLockMode(doc.Mode) || doc.RetainUntilDate == "" {
			return ErrMalformedXML
		}
		t, err := time.Parse(time.RFC3339, doc.RetainUntilDate)
		if err != nil {
			return ErrMalformedXML
		}
		if !t.After(time.Now()) {
			return errRetainDatePast
		}
		until = t.UTC()
	}
	v, vid, oi, err := s.lockTarget(ctx, r, rc)
	if err != nil {
		return err
	}
	m := oi.Meta
	if m.LockMode != "" && m.LockUntil.After(time.Now()) {
		// Extending (same mode, later date) is always allowed; anything
		// weaker needs a GOVERNANCE bypass, and COMPLIANCE allows nothing weaker.
		weaker := doc.Mode != m.LockMode || until.Before(m.LockUntil)
		if m.LockMode == "COMPLIANCE" && doc.Mode == "GOVERNANCE" {
			weaker = true
		}
		if weaker {
			if m.LockMode == "COMPLIANCE" || !s.bypassGovernance(ctx, rc, r, rc.key) {
				return errLockedVersion
			}
		}
	}
	m.LockMode, m.LockUntil = doc.Mode, until
	if vid == "" {
		vid = wireVersion(oi)
	}
	if _, err := v.UpdateVersionMeta(ctx, rc.bucket, rc.key, vid, m); err != nil {
		return err
	}
	w.WriteHeader(http.StatusOK)
	return nil
}

func (s *Server) getObjectRetention(w http.ResponseWriter, r *http.Request, rc *reqCtx) error {
	_, _, oi, err := s.lockTarget(r.Context(), r, rc)
	if err != nil {
		return err
	}
	if oi.Meta.LockMode == "" {
		return errNoObjectLockConfig
	}
	return writeXML(w, retentionXML{NS: s3NS, Mode: oi.Meta.LockMode, RetainUntilDate: oi.Meta.LockUntil.UTC().Format(iso8601)})
}

func (s *Server) putObjectLegalHold(w http.ResponseWriter, r *http.Request, rc *reqCtx) error {
	ctx := r.Context()
	var doc legalHoldXML
	if _, err := readXML(r, &doc, false); err != nil {
		return err
	}
	if doc.Status != "ON" && doc.Status != "OFF" {
		return ErrMalformedXML
	}
	v, vid, oi, err := s.lockTarget(ctx, r, rc)
	if err != nil {
		return err
	}
	m := oi.Meta
	m.LegalHold = doc.Status == "ON"
	if vid == "" {
		vid = wireVersion(oi)
	}
	if _, err := v.UpdateVersionMeta(ctx, rc.bucket, rc.key, vid, m); err != nil {
		return err
	}
	w.WriteHeader(http.StatusOK)
	return nil
}

func (s *Server) getObjectLegalHold(w http.ResponseWriter, r *http.Request, rc *reqCtx) error {
	_, _, oi, err := s.lockTarget(r.Context(), r, rc)
	if err != nil {
		return err
	}
	st := "OFF"
	if oi.Meta.LegalHold {
		st = "ON"
	}
	return writeXML(w, legalHoldXML{NS: s3NS, Status: st})
}

// routeVersioning returns the operations of versioning and Object Lock,
// or nil.
func routeVersioning(r *http.Request, bucket, key string) *operation {
	if bucket == "" {
		return nil
	}
	get, put := r.Method == http.MethodGet, r.Method == http.MethodPut
	if !get && !put {
		return nil
	}
	pick := func(g, p *operation) *operation {
		if get {
			return g
		}
		return p
	}
	if key == "" {
		switch {
		case hasQ(r, "versioning"):
			return pick(opGetBucketVersioning, opPutBucketVersioning)
		case hasQ(r, "object-lock"):
			return pick(opGetObjectLockConfig, opPutObjectLockConfig)
		}
		return nil
	}
	switch {
	case hasQ(r, "retention"):
		return pick(opGetObjectRetention, opPutObjectRetention)
	case hasQ(r, "legal-hold"):
		return pick(opGetObjectLegalHold, opPutObjectLegalHold)
	}
	return nil
}
