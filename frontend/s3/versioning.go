package s3

import (
	"context"
	"encoding/xml"
	"errors"
	"io"
	"net/http"

	"github.com/tristore/tristore/store"
)

// Bucket versioning (PutBucketVersioning/GetBucketVersioning) and the
// versionId parameter of object requests. The store keeps the versions
// (store.Versioner, store/posix/versions.go); the state is the bucket
// document store.VersioningConfig, so it survives a restart.

var (
	opPutBucketVersioning = &operation{"PutBucketVersioning", "s3:PutBucketVersioning", (*Server).putBucketVersioning}
)

// S3 errors of versioning.
var (
	ErrNoSuchVersion      = &APIError{"NoSuchVersion", http.StatusNotFound, "The specified version does not exist."}
	ErrInvalidVersionID   = &APIError{"InvalidArgument", http.StatusBadRequest, "Invalid version id specified"}
	ErrIllegalVersioning  = &APIError{"IllegalVersioningConfigurationException", http.StatusBadRequest, "The Versioning element must be specified"}
	ErrInvalidBucketState = &APIError{"InvalidBucketState", http.StatusConflict, "An Object Lock configuration is present on this bucket, so the versioning state cannot be changed."}
	ErrDeleteMarkerMethod = &APIError{"MethodNotAllowed", http.StatusMethodNotAllowed, "The specified method is not allowed against this resource."}
)

type versioningXML struct {
	XMLName   xml.Name `xml:"VersioningConfiguration"`
	NS        string   `xml:"xmlns,attr,omitempty"`
	Status    string   `xml:"Status,omitempty"`
	MfaDelete string   `xml:"MfaDelete,omitempty"`
}

// versioner returns the store's Versioner and BucketConfigurer.
func (s *Server) versioner() (store.Versioner, store.BucketConfigurer, error) {
	v, ok := s.st.(store.Versioner)
	bc, ok2 := s.st.(store.BucketConfigurer)
	if !ok || !ok2 {
		return nil, nil, ErrNotImplemented.withMessage("this store keeps no object versions")
	}
	return v, bc, nil
}

// versioningState returns the bucket's state ("" = never enabled).
func (s *Server) versioningState(ctx context.Context, bucket string) (string, error) {
	bc, ok := s.st.(store.BucketConfigurer)
	if !ok {
		if _, err := s.st.StatBucket(ctx, bucket); err != nil {
			return "", err
		}
		return "", nil
	}
	return bc.GetBucketConfig(ctx, bucket, store.VersioningConfig)
}

// getBucketVersioning answers the bucket's state; an empty document for a
// bucket that never had versioning on, as S3.
func (s *Server) getBucketVersioning(w http.ResponseWriter, r *http.Request, rc *reqCtx) error {
	state, err := s.versioningState(r.Context(), rc.bucket)
	if err != nil {
		return err
	}
	return writeXML(w, versioningXML{NS: s3NS, Status: state})
}

// putBucketVersioning sets Enabled or Suspended. A bucket with Object Lock
// cannot be suspended (InvalidBucketState), MFA delete is not offered.
func (s *Server) putBucketVersioning(w http.ResponseWriter, r *http.Request, rc *reqCtx) error {
	ctx := r.Context()
	_, bc, err := s.versioner()
	if err != nil {
		return err
	}
	if _, err := s.st.StatBucket(ctx, rc.bucket); err != nil {
		return err
	}
	var doc versioningXML
	if _, err := readXML(r, &doc, false); err != nil {
		return err
	}
	if doc.MfaDelete == "Enabled" {
		return ErrNotImplemented.withMessage("MFA delete is not supported")
	}
	if doc.MfaDelete != "" && doc.MfaDelete != "Disabled" {
		return ErrMalformedXML
	}
	switch doc.Status {
	case store.VersioningEnabled:
	case store.VersioningSuspended:
		lock, err := s.lockConfig(ctx, rc.bucket)
		if err != nil {
			return err
		}
		if lock != nil {
			return ErrInvalidBucketState
		}
	case "":
		// S3 accepts a document without Status and changes nothing.
		w.WriteHeader(http.StatusOK)
		return nil
	default:
		return ErrMalformedXML
	}
	if err := bc.SetBucketConfig(ctx, rc.bucket, store.VersioningConfig, doc.Status); err != nil {
		return err
	}
	w.WriteHeader(http.StatusOK)
	return nil
}

// versionParam returns the request's versionId ("" when absent); an
// empty versionId= is S3's "Version id cannot be the empty string".
func versionParam(r *http.Request) (string, error) {
	q := r.URL.Query()
	vs, ok := q["versionId"]
	if !ok {
		return "", nil
	}
	if len(vs) == 0 || vs[0] == "" {
		return "", ErrInvalidArgument.withMessage("Version id cannot be the empty string")
	}
	return vs[0], nil
}

// setVersionHeader sends x-amz-version-id for a version of a versioned
// bucket (or one asked for by ID).
func setVersionHeader(h http.Header, oi store.ObjectInfo, asked string) {
	switch {
	case oi.VersionID != "":
		h.Set("X-Amz-Version-Id", oi.VersionID)
	case asked != "":
		h.Set("X-Amz-Version-Id", "null")
	}
}

// nullVersionHeader sends x-amz-version-id: null for the null version met
// by a GET/HEAD without versionId in a bucket whose versioning is Enabled
// or Suspended, as AWS does (an object written while versioning was
// Suspended, or before it was first enabled). A bucket that never had
// versioning sends none. PUT, CopyObject and CompleteMultipartUpload in a
// Suspended bucket send none either: AWS's PutObject reference shows the
// header only for Enabled buckets (docs/s3.md, Versioning).
func (s *Server) nullVersionHeader(ctx context.Context, h http.Header, bucket string) {
	if state, err := s.versioningState(ctx, bucket); err == nil && state != "" {
		h.Set("X-Amz-Version-Id", "null")
	}
}

// markerHeaders describes a delete marker met by GET/HEAD: S3 sends
// x-amz-delete-marker and the marker's version with the error.
func markerHeaders(w http.ResponseWriter, oi store.ObjectInfo) {
	h := w.Header()
	h.Set("X-Amz-Delete-Marker", "true")
	id := oi.VersionID
	if id == "" {
		id = "null"
	}
	h.Set("X-Amz-Version-Id", id)
	if !oi.ModTime.IsZero() {
		h.Set("Last-Modified", oi.ModTime.UTC().Format(http.TimeFormat))
	}
}

// statObject is Stat of the latest version or of version vid.
func (s *Server) statObject(ctx context.Context, w http.ResponseWriter, bucket, key, vid string) (store.ObjectInfo, error) {
	v, ok := s.st.(store.Versioner)
	if vid == "" {
		oi, err := s.st.Stat(ctx, bucket, key)
		if errors.Is(err, store.ErrNoSuchKey) && ok && w != nil {
			s.latestMarker(ctx, w, v, bucket, key)
		}
		return oi, err
	}
	if !ok {
		if vid != "null" {
			return store.ObjectInfo{}, ErrNoSuchVersion
		}
		return s.st.Stat(ctx, bucket, key)
	}
	oi, err := v.StatVersion(ctx, bucket, key, vid)
	if errors.Is(err, store.ErrDeleteMarker) && w != nil {
		markerHeaders(w, oi)
	}
	return oi, err
}

// getObjectVersion is Get of the latest version or of version vid.
func (s *Server) getObjectVersion(ctx context.Context, w http.ResponseWriter, bucket, key, vid string, off, n int64) (io.ReadCloser, store.ObjectInfo, error) {
	v, ok := s.st.(store.Versioner)
	if vid == "" {
		rd, oi, err := s.st.Get(ctx, bucket, key, off, n)
		if errors.Is(err, store.ErrNoSuchKey) && ok && w != nil {
			s.latestMarker(ctx, w, v, bucket, key)
		}
		return rd, oi, err
	}
	if !ok {
		if vid != "null" {
			return nil, store.ObjectInfo{}, ErrNoSuchVersion
		}
		return s.st.Get(ctx, bucket, key, off, n)
	}
	rd, oi, err := v.GetVersion(ctx, bucket, key, vid, off, n)
	if errors.Is(err, store.ErrDeleteMarker) && w != nil {
		markerHeaders(w, oi)
	}
	return rd, oi, err
}

// latestMarker adds the delete-marker headers to a NoSuchKey whose key's
// latest version is a delete marker.
func (s *Server) latestMarker(ctx context.Context, w http.ResponseWriter, v store.Versioner, bucket, key string) {
	if oi, err := v.StatVersion(ctx, bucket, key, ""); errors.Is(err, store.ErrDeleteMarker) {
		markerHeaders(w, oi)
	}
}

// deleteOne deletes key (vid "": the latest, which on a versioned bucket
// adds a delete marker; else that version, after the Object Lock check)
// and returns what S3 reports: the version removed or the marker added.
func (s *Server) deleteOne(ctx context.Context, rc *reqCtx, r *http.Request, key, vid string) (store.ObjectInfo, error) {
	v, ok := s.st.(store.Versioner)
	if vid == "" {
		if !ok {
			err := s.st.Delete(ctx, rc.bucket, key)
			if errors.Is(err, store.ErrNoSuchKey) {
				err = nil
			}
			return store.ObjectInfo{}, err
		}
		oi, err := v.DeleteObject(ctx, rc.bucket, key)
		if errors.Is(err, store.ErrNoSuchKey) {
			err = nil
		}
		return oi, err
	}
	if err := s.authorizeVersion(ctx, rc, "s3:DeleteObjectVersion", rc.bucket, key, vid); err != nil {
		return store.ObjectInfo{}, err
	}
	if !ok {
		if vid != "null" {
			return store.ObjectInfo{}, ErrInvalidVersionID
		}
		err := s.st.Delete(ctx, rc.bucket, key)
		if errors.Is(err, store.ErrNoSuchKey) {
			err = nil
		}
		return store.ObjectInfo{VersionID: ""}, err
	}
	oi, err := v.StatVersion(ctx, rc.bucket, key, vid)
	switch {
	case errors.Is(err, store.ErrDeleteMarker):
	case errors.Is(err, store.ErrNoSuchVersion), errors.Is(err, store.ErrNoSuchKey):
		return store.ObjectInfo{VersionID: vid}, nil // nothing to delete: 204, as S3
	case err != nil:
		return store.ObjectInfo{}, err
	default:
		if err := s.checkLockedDelete(ctx, rc, r, key, oi); err != nil {
			return store.ObjectInfo{}, err
		}
	}
	return v.DeleteVersion(ctx, rc.bucket, key, vid)
}

// authorizeVersion checks the IAM action S3 requires, in addition to
// the operation's own, for a request naming a version
// (s3:GetObjectVersion, s3:DeleteObjectVersion).
func (s *Server) authorizeVersion(ctx context.Context, rc *reqCtx, action, bucket, key, vid string) error {
	if vid == "" {
		return nil
	}
	return s.authorize(ctx, rc, action, bucket, key)
}

// wireVersion is the x-amz-version-id / VersionId value of a version.
func wireVersion(oi store.ObjectInfo) string {
	if oi.VersionID == "" {
		return "null"
	}
	return oi.VersionID
}

// versionedObjectRequest reports whether r is an object request whose
// versionId parameter is served (GET, HEAD, DELETE of an object version;
// GET/PUT/DELETE of its tagging, GET/PUT of its acl, GET of its
// attributes: version_sub.go); other sub-resources with a versionId stay
// NotImplemented.
func versionedObjectRequest(r *http.Request, key string) bool {
	if key == "" {
		return false
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodDelete:
	case http.MethodPut:
		return hasQ(r, "tagging") || hasQ(r, "acl")
	default:
		return false
	}
	for _, sub := range []string{"uploadId", "torrent", "restore", "select"} {
		if hasQ(r, sub) {
			return false
		}
	}
	return true
}
