package s3

import (
	"bytes"
	"crypto/md5"
	"encoding/base64"
	"io"
	"net/http"
)

// readBody reads a small request body (an XML or JSON document) of at most
// limit bytes; a longer one is MaxMessageLengthExceeded, a truncated one
// IncompleteBody.
func readBody(r *http.Request, limit int64) ([]byte, error) {
	b, err := io.ReadAll(io.LimitReader(r.Body, limit+1))
	if err != nil {
		if err == io.ErrUnexpectedEOF {
			return nil, ErrIncompleteBody
		}
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, ErrMaxMessageLength
	}
	return b, nil
}

// checkContentMD5 verifies a Content-MD5 header against a body held in memory.
func checkContentMD5(cm string, b []byte) error {
	want, err := base64.StdEncoding.DecodeString(cm)
	if err != nil || len(want) != md5.Size {
		return ErrInvalidDigest
	}
	got := md5.Sum(b)
	if !bytes.Equal(got[:], want) {
		return ErrBadDigest
	}
	return nil
}

// readVerifiedBody is readBody that also checks the digests the client
// sent with the document (Content-MD5 or an x-amz-checksum-* header, which
// current SDKs send on PutBucketTagging/PutObjectTagging): a mismatch is
// BadDigest, a malformed value InvalidDigest.
func readVerifiedBody(r *http.Request, limit int64) ([]byte, error) {
	size, err := bodySize(r)
	if err != nil {
		return nil, err
	}
	vr, _, err := newVerifyingReader(r.Body, size, r.Header)
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(io.LimitReader(vr, limit+1))
	if err != nil {
		if err == io.ErrUnexpectedEOF {
			return nil, ErrIncompleteBody
		}
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, ErrMaxMessageLength
	}
	return b, nil
}
