package s3

import (
	"encoding/xml"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/tristore/tristore/store"
)

// s3NS is the XML namespace of S3 responses.
const s3NS = "http://s3.amazonaws.com/doc/2006-03-01/"

// iso8601 is the time format of S3 XML bodies.
const iso8601 = "2006-01-02T15:04:05.000Z"

func xmlTime(t time.Time) string { return t.UTC().Format(iso8601) }

var (
	opListBuckets         = &operation{"ListBuckets", "s3:ListAllMyBuckets", (*Server).listBuckets}
	opCreateBucket        = &operation{"CreateBucket", "s3:CreateBucket", (*Server).createBucket}
	opHeadBucket          = &operation{"HeadBucket", "s3:ListBucket", (*Server).headBucket}
	opDeleteBucket        = &operation{"DeleteBucket", "s3:DeleteBucket", (*Server).deleteBucket}
	opGetBucketLocation   = &operation{"GetBucketLocation", "s3:GetBucketLocation", (*Server).getBucketLocation}
	opGetBucketVersioning = &operation{"GetBucketVersioning", "s3:GetBucketVersioning", (*Server).getBucketVersioning}
)

type owner struct {
	ID          string `xml:"ID"`
	DisplayName string `xml:"DisplayName"`
}

type listBucketsResult struct {
	XMLName xml.Name `xml:"ListAllMyBucketsResult"`
	NS      string   `xml:"xmlns,attr"`
	Owner   owner    `xml:"Owner"`
	Buckets []struct {
		Name         string `xml:"Name"`
		CreationDate string `xml:"CreationDate"`
	} `xml:"Buckets>Bucket"`
}

// listBuckets lists the caller's buckets (all buckets for admins).
func (s *Server) listBuckets(w http.ResponseWriter, r *http.Request, rc *reqCtx) error {
	bs, err := s.st.ListBuckets(r.Context())
	if err != nil {
		return err
	}
	res := listBucketsResult{NS: s3NS, Owner: owner{rc.ident.User, rc.ident.User}}
	all := rc.ident.Admin || rc.ident.Anonymous
	for _, b := range bs {
		if !all && b.Owner != rc.ident.User {
			continue
		}
		res.Buckets = append(res.Buckets, struct {
			Name         string `xml:"Name"`
			CreationDate string `xml:"CreationDate"`
		}{b.Name, xmlTime(b.Created)})
	}
	return writeXML(w, res)
}

type createBucketConfiguration struct {
	XMLName            xml.Name `xml:"CreateBucketConfiguration"`
	LocationConstraint string   `xml:"LocationConstraint"`
}

// maxXMLBody bounds request XML documents (S3 allows 1000 keys in a
// Delete request, about 100 KB; a policy is at most 20 KB).
const maxXMLBody = 1 << 20

// readXML decodes a bounded XML request body into v; empty bodies are
// allowed only when allowEmpty. Any decoding error is MalformedXML.
func readXML(r *http.Request, v any, allowEmpty bool) (empty bool, err error) {
	b, err := readBody(r, maxXMLBody)
	if err != nil {
		return false, err
	}
	if len(b) == 0 {
		if allowEmpty {
			return true, nil
		}
		return true, ErrMalformedXML
	}
	if err := xml.Unmarshal(b, v); err != nil {
		return false, ErrMalformedXML
	}
	return false, nil
}

func (s *Server) createBucket(w http.ResponseWriter, r *http.Request, rc *reqCtx) error {
	if !validBucketName(rc.bucket) {
		return ErrInvalidBucketName
	}
	var conf createBucketConfiguration
	if _, err := readXML(r, &conf, true); err != nil {
		return err
	}
	access, err := s.createBucketAccess(r.Header) // access_config.go: ACL headers, object ownership
	if err != nil {
		return err
	}
	lock := strings.EqualFold(r.Header.Get("X-Amz-Bucket-Object-Lock-Enabled"), "true")
	if lock {
		if _, _, err := s.versioner(); err != nil {
			return err
		}
	}
	err = s.st.CreateBucket(r.Context(), rc.bucket, rc.ident.User)
	if errors.Is(err, store.ErrBucketExists) {
		if bi, serr := s.st.StatBucket(r.Context(), rc.bucket); serr == nil && bi.Owner != rc.ident.User {
			return ErrBucketAlreadyExists
		}
		return ErrBucketAlreadyOwned
	}
	if err != nil {
		return err
	}
	if err := access(r.Context(), rc.bucket); err != nil {
		return err
	}
	if lock {
		if err := s.enableObjectLock(r.Context(), rc.bucket); err != nil { // objectlock.go
			return err
		}
	}
	w.Header().Set("Location", "/"+rc.bucket)
	w.WriteHeader(http.StatusOK)
	return nil
}

func (s *Server) headBucket(w http.ResponseWriter, r *http.Request, rc *reqCtx) error {
	if _, err := s.st.StatBucket(r.Context(), rc.bucket); err != nil {
		return err
	}
	w.Header().Set("X-Amz-Bucket-Region", s.opts.Region)
	w.WriteHeader(http.StatusOK)
	return nil
}

func (s *Server) deleteBucket(w http.ResponseWriter, r *http.Request, rc *reqCtx) error {
	if err := s.st.DeleteBucket(r.Context(), rc.bucket); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

type locationConstraint struct {
	XMLName xml.Name `xml:"LocationConstraint"`
	NS      string   `xml:"xmlns,attr"`
	Value   string   `xml:",chardata"`
}

// getBucketLocation answers like S3: empty for us-east-1, else the region.
func (s *Server) getBucketLocation(w http.ResponseWriter, r *http.Request, rc *reqCtx) error {
	if _, err := s.st.StatBucket(r.Context(), rc.bucket); err != nil {
		return err
	}
	loc := s.opts.Region
	if loc == "us-east-1" {
		loc = ""
	}
	return writeXML(w, locationConstraint{NS: s3NS, Value: loc})
}

func (s *Server) bucketConfigurer() (store.BucketConfigurer, error) {
	bc, ok := s.st.(store.BucketConfigurer)
	if !ok {
		return nil, ErrNotImplemented.withMessage("this store keeps no bucket configuration (ACL, policy)")
	}
	return bc, nil
}

// deleteBucketSetting is the handler of every DeleteBucketX that clears one
// stored bucket setting (CORS, lifecycle, policy, tagging, ownership controls,
// public access block): the bucket must exist, the setting is cleared, and
// S3 answers 204 whether or not it was set.
func deleteBucketSetting(name string) func(*Server, http.ResponseWriter, *http.Request, *reqCtx) error {
	return func(s *Server, w http.ResponseWriter, r *http.Request, rc *reqCtx) error {
		if _, err := s.st.StatBucket(r.Context(), rc.bucket); err != nil {
			return err
		}
		if err := s.setBucketConfig(r, rc.bucket, name, ""); err != nil {
			return err
		}
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
}

func (s *Server) setBucketConfig(r *http.Request, bucket, name, value string) error {
	bc, err := s.bucketConfigurer()
	if err != nil {
		return err
	}
	return bc.SetBucketConfig(r.Context(), bucket, name, value)
}
