package s3

import (
	"context"
	"encoding/xml"
	"net/http"
	"strings"

	"github.com/tristore/tristore/store"
)

// Bucket default encryption (PutBucketEncryption and friends). Only
// SSE-S3 (AES256) can be the default: an aws:kms rule is refused with
// NotImplemented rather than stored and then ignored.

const cfgEncryption = "encryption"

var (
	opGetBucketEncryption    = &operation{"GetBucketEncryption", "s3:GetEncryptionConfiguration", (*Server).getBucketEncryption}
	opPutBucketEncryption    = &operation{"PutBucketEncryption", "s3:PutEncryptionConfiguration", (*Server).putBucketEncryption}
	opDeleteBucketEncryption = &operation{"DeleteBucketEncryption", "s3:PutEncryptionConfiguration", (*Server).deleteBucketEncryption}

	errNoEncryptionConfig = &APIError{"ServerSideEncryptionConfigurationNotFoundError", http.StatusNotFound, "The server side encryption configuration was not found"}
)

type sseConfigXML struct {
	XMLName xml.Name        `xml:"ServerSideEncryptionConfiguration"`
	NS      string          `xml:"xmlns,attr,omitempty"`
	Rules   []sseConfigRule `xml:"Rule"`
}

type sseConfigRule struct {
	Default *struct {
		SSEAlgorithm   string `xml:"SSEAlgorithm"`
		KMSMasterKeyID string `xml:"KMSMasterKeyID,omitempty"`
	} `xml:"ApplyServerSideEncryptionByDefault"`
	BucketKeyEnabled *bool `xml:"BucketKeyEnabled"`
}

// routeEncryption routes ?encryption on a bucket; nil for other requests.
func routeEncryption(r *http.Request, bucket, key string) *operation {
	if bucket == "" || key != "" || !hasQ(r, "encryption") {
		return nil
	}
	switch r.Method {
	case http.MethodGet:
		return opGetBucketEncryption
	case http.MethodPut:
		return opPutBucketEncryption
	case http.MethodDelete:
		return opDeleteBucketEncryption
	}
	return nil
}

// bucketDefaultSSE is the bucket's default encryption mode: sseModeServer or "".
func (s *Server) bucketDefaultSSE(ctx context.Context, bucket string) (string, error) {
	bc, ok := s.st.(store.BucketConfigurer)
	if !ok {
		return "", nil
	}
	doc, err := bc.GetBucketConfig(ctx, bucket, cfgEncryption)
	if err != nil || doc == "" {
		return "", err
	}
	if strings.Contains(doc, "<SSEAlgorithm>AES256</SSEAlgorithm>") {
		return sseModeServer, nil
	}
	return "", nil
}

func (s *Server) getBucketEncryption(w http.ResponseWriter, r *http.Request, rc *reqCtx) error {
	if _, err := s.st.StatBucket(r.Context(), rc.bucket); err != nil {
		return err
	}
	bc, ok := s.st.(store.BucketConfigurer)
	if !ok {
		return errNoEncryptionConfig
	}
	doc, err := bc.GetBucketConfig(r.Context(), rc.bucket, cfgEncryption)
	if err != nil {
		return err
	}
	if doc == "" {
		return errNoEncryptionConfig
	}
	w.Header().Set("Content-Type", "application/xml")
	_, err = w.Write([]byte(xml.Header + doc))
	return err
}

// putBucketEncryption validates the whole document before storing it, so
// a refused one leaves the previous configuration in force.
func (s *Server) putBucketEncryption(w http.ResponseWriter, r *http.Request, rc *reqCtx) error {
	if _, err := s.st.StatBucket(r.Context(), rc.bucket); err != nil {
		return err
	}
	b, err := readVerifiedBody(r, 64<<10)
	if err != nil {
		return err
	}
	var c sseConfigXML
	if xml.Unmarshal(b, &c) != nil || len(c.Rules) != 1 || c.Rules[0].Default == nil {
		return ErrMalformedXML
	}
	d := c.Rules[0].Default
	switch d.SSEAlgorithm {
	case "AES256":
		if d.KMSMasterKeyID != "" {
			return ErrInvalidArgument.withMessage("a KMSMasterKeyID is not applicable if the default sse algorithm is not aws:kms")
		}
	case "aws:kms", "aws:kms:dsse":
		return errKMS // sse.go
	default:
		return ErrMalformedXML
	}
	if _, err := s.serverKey(); err != nil {
		return err
	}
	c.NS = s3NS
	out, err := xml.Marshal(c)
	if err != nil {
		return err
	}
	if err := s.setBucketConfig(r, rc.bucket, cfgEncryption, string(out)); err != nil {
		return err
	}
	w.WriteHeader(http.StatusOK)
	return nil
}

func (s *Server) deleteBucketEncryption(w http.ResponseWriter, r *http.Request, rc *reqCtx) error {
	if _, err := s.st.StatBucket(r.Context(), rc.bucket); err != nil {
		return err
	}
	if _, ok := s.st.(store.BucketConfigurer); ok {
		if err := s.setBucketConfig(r, rc.bucket, cfgEncryption, ""); err != nil {
			return err
		}
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// refuseUnencrypted is for the writes this server does not encrypt
// (what: "multipart uploads", "POST Object"): one asking for encryption,
// or into a bucket whose default is encryption, is refused rather than
// stored in the clear.
func (s *Server) refuseUnencrypted(ctx context.Context, h http.Header, bucket, what string) error {
	for k := range h {
		if strings.HasPrefix(strings.ToLower(k), "x-amz-server-side-encryption") {
			return ErrNotImplemented.withMessage("Server-side encryption of " + what + " is not supported by this server")
		}
	}
	def, err := s.bucketDefaultSSE(ctx, bucket)
	if err != nil {
		return err
	}
	if def != "" {
		return ErrNotImplemented.withMessage("This bucket's default encryption applies to " + what + ", which this server does not encrypt: upload in one PUT (up to 5 GiB)")
	}
	return nil
}
