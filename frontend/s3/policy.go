package s3

import (
	"net/http"

	"github.com/tristore/tristore/frontend/s3/authz"
)

var (
	opGetBucketPolicy    = &operation{"GetBucketPolicy", "s3:GetBucketPolicy", (*Server).getBucketPolicy}
	opPutBucketPolicy    = &operation{"PutBucketPolicy", "s3:PutBucketPolicy", (*Server).putBucketPolicy}
	opDeleteBucketPolicy = &operation{"DeleteBucketPolicy", "s3:DeleteBucketPolicy", deleteBucketSetting(cfgPolicy)}
)

// maxPolicySize is S3's limit on a bucket policy document (20 KB).
const maxPolicySize = 20 << 10

// bucketPolicy returns the bucket's policy document, or
// ErrNoSuchBucketPolicy (NoSuchBucket first if the bucket is missing).
func (s *Server) bucketPolicy(r *http.Request, rc *reqCtx) (string, error) {
	if _, err := s.st.StatBucket(r.Context(), rc.bucket); err != nil {
		return "", err
	}
	bc, err := s.bucketConfigurer()
	if err != nil {
		return "", err
	}
	doc, err := bc.GetBucketConfig(r.Context(), rc.bucket, cfgPolicy)
	if err != nil {
		return "", err
	}
	if doc == "" {
		return "", ErrNoSuchBucketPolicy
	}
	return doc, nil
}

func (s *Server) getBucketPolicy(w http.ResponseWriter, r *http.Request, rc *reqCtx) error {
	doc, err := s.bucketPolicy(r, rc)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	w.Write([]byte(doc))
	return nil
}

// putBucketPolicy validates the document with the Authorizer (which
// reports MalformedPolicy) before storing it.
func (s *Server) putBucketPolicy(w http.ResponseWriter, r *http.Request, rc *reqCtx) error {
	if _, err := s.st.StatBucket(r.Context(), rc.bucket); err != nil {
		return err
	}
	b, err := readBody(r, maxPolicySize)
	if err != nil {
		if err == ErrMaxMessageLength {
			return &APIError{"PolicyTooLarge", http.StatusBadRequest, "Policies must be no larger than 20 KB."}
		}
		return err
	}
	if len(b) == 0 {
		return &APIError{"MalformedPolicy", http.StatusBadRequest, "Policies must be valid JSON and the first byte must be '{'"}
	}
	if err := s.opts.Authz.CheckPolicy(b, rc.bucket); err != nil {
		return err
	}
	if pab, err := s.publicAccessBlock(r.Context(), rc.bucket); err != nil {
		return err
	} else if pab.BlockPolicy {
		if pol, err := authz.ParsePolicy(b, rc.bucket); err == nil && pol.IsPublic() {
			return errPublicPolicyBlocked
		}
	}
	if err := s.setBucketConfig(r, rc.bucket, cfgPolicy, string(b)); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
