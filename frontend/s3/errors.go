package s3

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"io"
	"net/http"
	"syscall"

	"github.com/tristore/tristore/frontend/s3/authz"
	"github.com/tristore/tristore/frontend/s3/sigv4"
	"github.com/tristore/tristore/store"
)

// APIError is an S3 error as sent on the wire: a code from the S3 error
// table, its HTTP status and a message. Handlers return either an *APIError
// or a store/auth error; toAPIError below is the one place that maps the
// latter to the former, so every protocol error code is chosen here.
type APIError struct {
	Code    string
	Status  int
	Message string
}

func (e *APIError) Error() string { return e.Code + ": " + e.Message }

// S3 errors used by the handlers (codes and statuses as in the S3 API reference).
var (
	ErrAccessDenied          = &APIError{"AccessDenied", http.StatusForbidden, "Access Denied"}
	ErrBadDigest             = &APIError{"BadDigest", http.StatusBadRequest, "The Content-MD5 or checksum you specified did not match what we received."}
	ErrInvalidDigest         = &APIError{"InvalidDigest", http.StatusBadRequest, "The Content-MD5 or checksum you specified is not valid."}
	ErrBucketAlreadyOwned    = &APIError{"BucketAlreadyOwnedByYou", http.StatusConflict, "Your previous request to create the named bucket succeeded and you already own it."}
	ErrBucketAlreadyExists   = &APIError{"BucketAlreadyExists", http.StatusConflict, "The requested bucket name is not available."}
	ErrBucketNotEmpty        = &APIError{"BucketNotEmpty", http.StatusConflict, "The bucket you tried to delete is not empty."}
	ErrEntityTooSmall        = &APIError{"EntityTooSmall", http.StatusBadRequest, "Your proposed upload is smaller than the minimum allowed object size."}
	ErrEntityTooLarge        = &APIError{"EntityTooLarge", http.StatusBadRequest, "Your proposed upload exceeds the maximum allowed object size."}
	ErrIncompleteBody        = &APIError{"IncompleteBody", http.StatusBadRequest, "You did not provide the number of bytes specified by the Content-Length HTTP header."}
	ErrInternal              = &APIError{"InternalError", http.StatusInternalServerError, "We encountered an internal error. Please try again."}
	ErrInvalidArgument       = &APIError{"InvalidArgument", http.StatusBadRequest, "Invalid Argument"}
	ErrInvalidBucketName     = &APIError{"InvalidBucketName", http.StatusBadRequest, "The specified bucket is not valid."}
	ErrInvalidPart           = &APIError{"InvalidPart", http.StatusBadRequest, "One or more of the specified parts could not be found or its entity tag did not match."}
	ErrInvalidPartOrder      = &APIError{"InvalidPartOrder", http.StatusBadRequest, "The list of parts was not in ascending order."}
	ErrInvalidRange          = &APIError{"InvalidRange", http.StatusRequestedRangeNotSatisfiable, "The requested range is not satisfiable"}
	ErrInvalidRequest        = &APIError{"InvalidRequest", http.StatusBadRequest, "Invalid Request"}
	ErrKeyTooLong            = &APIError{"KeyTooLongError", http.StatusBadRequest, "Your key is too long"}
	ErrMalformedXML          = &APIError{"MalformedXML", http.StatusBadRequest, "The XML you provided was not well-formed or did not validate against our published schema."}
	ErrMalformedACL          = &APIError{"MalformedACLError", http.StatusBadRequest, "The XML you provided was not well-formed or did not validate against our published schema."}
	ErrMethodNotAllowed      = &APIError{"MethodNotAllowed", http.StatusMethodNotAllowed, "The specified method is not allowed against this resource."}
	ErrMissingContentLength  = &APIError{"MissingContentLength", http.StatusLengthRequired, "You must provide the Content-Length HTTP header."}
	ErrNoSuchBucket          = &APIError{"NoSuchBucket", http.StatusNotFound, "The specified bucket does not exist."}
	ErrNoSuchBucketPolicy    = &APIError{"NoSuchBucketPolicy", http.StatusNotFound, "The bucket policy does not exist."}
	ErrNoSuchKey             = &APIError{"NoSuchKey", http.StatusNotFound, "The specified key does not exist."}
	ErrNoSuchUpload          = &APIError{"NoSuchUpload", http.StatusNotFound, "The specified multipart upload does not exist."}
	ErrNotImplemented        = &APIError{"NotImplemented", http.StatusNotImplemented, "A header or query you provided implies functionality that is not implemented."}
	ErrPreconditionFailed    = &APIError{"PreconditionFailed", http.StatusPreconditionFailed, "At least one of the pre-conditions you specified did not hold."}
	ErrRequestTimeTooSkewed  = &APIError{"RequestTimeTooSkewed", http.StatusForbidden, "The difference between the request time and the server's time is too large."}
	ErrServiceUnavailable    = &APIError{"ServiceUnavailable", http.StatusServiceUnavailable, "Reduce your request rate."}
	ErrSlowDown              = &APIError{"SlowDown", http.StatusServiceUnavailable, "Please reduce your request rate."}
	ErrInsufficientStorage   = &APIError{"InsufficientStorage", http.StatusInsufficientStorage, "The server's disk is full; the object was not stored."}
	ErrReadOnly              = &APIError{"AccessDenied", http.StatusForbidden, "The store is read-only."}
	ErrKeyConflict           = &APIError{"InvalidArgument", http.StatusConflict, "The key conflicts with an existing key (a key cannot be both an object and a prefix of another object's key in this store)."}
	ErrInvalidKey            = &APIError{"InvalidArgument", http.StatusBadRequest, "The object key is not valid in this store."}
	ErrNotModified           = &APIError{"NotModified", http.StatusNotModified, "Not Modified"}
	ErrInvalidCopySource     = &APIError{"InvalidArgument", http.StatusBadRequest, "Copy Source must mention the source bucket and key: sourcebucket/sourcekey."}
	ErrIllegalCopy           = &APIError{"InvalidRequest", http.StatusBadRequest, "This copy request is illegal because it is trying to copy an object to itself without changing the object's metadata, storage class, website redirect location or encryption attributes."}
	ErrMaxMessageLength      = &APIError{"MaxMessageLengthExceeded", http.StatusBadRequest, "Your request was too big."}
	ErrInvalidToken          = &APIError{"InvalidArgument", http.StatusBadRequest, "The continuation token provided is incorrect."}
	ErrMetadataTooLarge      = &APIError{"MetadataTooLarge", http.StatusBadRequest, "Your metadata headers exceed the maximum allowed metadata size."}
	ErrSignatureDoesNotMatch = &APIError{"SignatureDoesNotMatch", http.StatusForbidden, "The request signature we calculated does not match the signature you provided."}
	ErrInvalidAccessKeyID    = &APIError{"InvalidAccessKeyId", http.StatusForbidden, "The AWS Access Key Id you provided does not exist in our records."}
	// ErrVolumeInUse: PUT, CopyObject, CompleteMultipartUpload or DELETE
	// onto an object that is a block volume being served over iSCSI. 409
	// OperationAborted ("a conflicting operation is in progress on this
	// resource") because it is a conflict that ends when the initiators
	// log out, not a matter of permissions (403 would send users hunting
	// for a wrong key or policy); SDKs do not retry it.
	ErrVolumeInUse = &APIError{"OperationAborted", http.StatusConflict, "The object is a block volume being served over iSCSI: it cannot be replaced or deleted while an initiator is logged in to it. Log the initiators out first; delete a volume with `tristore volume delete`."}
)

// withMessage returns a copy of e with a more specific message.
func (e *APIError) withMessage(msg string) *APIError {
	c := *e
	c.Message = msg
	return &c
}

// CodedError is implemented by errors from the authentication layer
// (frontend/s3/sigv4) that already carry an S3 code and status.
type CodedError interface {
	error
	S3Code() string
	HTTPStatus() int
}

// toAPIError maps any error a handler meets to the S3 error sent to the
// client. Full disk: S3 itself never reports one; we answer 507
// InsufficientStorage (a WebDAV status clients treat as a non-retryable
// server error) because ServiceUnavailable would make SDKs retry a write
// that cannot succeed until an operator frees space.
func toAPIError(err error) *APIError {
	var ae *APIError
	var ce CodedError
	var se *sigv4.Error
	var pe *authz.PolicyError
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.As(err, &ce):
		return &APIError{Code: ce.S3Code(), Status: ce.HTTPStatus(), Message: ce.Error()}
	case errors.As(err, &se):
		return &APIError{Code: se.Code, Status: se.Status, Message: se.Message}
	case errors.As(err, &pe):
		return &APIError{Code: pe.Code, Status: http.StatusBadRequest, Message: pe.Message}
	case sigv4.IsUnknownAccessKey(err):
		return ErrInvalidAccessKeyID
	case errors.Is(err, store.ErrNoSuchBucket):
		return ErrNoSuchBucket
	case errors.Is(err, store.ErrBucketExists):
		return ErrBucketAlreadyOwned
	case errors.Is(err, store.ErrBucketNotEmpty):
		return ErrBucketNotEmpty
	case errors.Is(err, store.ErrInvalidBucketName):
		return ErrInvalidBucketName
	case errors.Is(err, store.ErrNoSuchKey):
		return ErrNoSuchKey
	case errors.Is(err, store.ErrInvalidKey):
		return ErrInvalidKey.withMessage(err.Error())
	case errors.Is(err, store.ErrKeyConflict):
		return ErrKeyConflict
	case errors.Is(err, store.ErrInvalidRange):
		return ErrInvalidRange
	case errors.Is(err, store.ErrNoSuchUpload):
		return ErrNoSuchUpload
	case errors.Is(err, store.ErrInvalidPart):
		return ErrInvalidPart
	case errors.Is(err, store.ErrInvalidPartOrder):
		return ErrInvalidPartOrder
	case errors.Is(err, store.ErrEntityTooSmall):
		return ErrEntityTooSmall
	case errors.Is(err, store.ErrIncompleteBody), errors.Is(err, io.ErrUnexpectedEOF):
		return ErrIncompleteBody
	case errors.Is(err, store.ErrBadDigest):
		return ErrBadDigest
	case errors.Is(err, store.ErrPreconditionFailed):
		return ErrPreconditionFailed
	case errors.Is(err, store.ErrInUse):
		return ErrVolumeInUse
	case errors.Is(err, store.ErrNoSuchVersion):
		return ErrNoSuchVersion
	case errors.Is(err, store.ErrInvalidVersion):
		return ErrInvalidVersionID
	case errors.Is(err, store.ErrDeleteMarker):
		return ErrDeleteMarkerMethod
	case errors.Is(err, store.ErrNoSpace), errors.Is(err, syscall.ENOSPC), errors.Is(err, syscall.EDQUOT):
		return ErrInsufficientStorage
	case errors.Is(err, store.ErrReadOnly), errors.Is(err, syscall.EROFS):
		return ErrReadOnly
	case errors.Is(err, store.ErrNotSupported):
		return ErrNotImplemented
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return ErrServiceUnavailable.withMessage("request cancelled")
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return ErrMaxMessageLength
	}
	return ErrInternal
}

// errorResponse is the S3 XML error body.
type errorResponse struct {
	XMLName   xml.Name `xml:"Error"`
	Code      string   `xml:"Code"`
	Message   string   `xml:"Message"`
	Resource  string   `xml:"Resource,omitempty"`
	BucketN   string   `xml:"BucketName,omitempty"`
	Key       string   `xml:"Key,omitempty"`
	RequestID string   `xml:"RequestId"`
	HostID    string   `xml:"HostId"`
}

// newRequestID returns a random 16-hex-digit id, as S3's x-amz-request-id.
func newRequestID() string {
	var b [8]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// writeError sends err as an S3 XML error (no body for HEAD and 304).
func writeError(w http.ResponseWriter, r *http.Request, rc *reqCtx, err error) *APIError {
	ae := toAPIError(err)
	if ae.Status == http.StatusNotModified {
		w.WriteHeader(http.StatusNotModified)
		return ae
	}
	h := w.Header()
	h.Set("Content-Type", "application/xml")
	if r.Method == http.MethodHead {
		w.WriteHeader(ae.Status)
		return ae
	}
	body := errorResponse{
		Code: ae.Code, Message: ae.Message, Resource: r.URL.Path,
		BucketN: rc.bucket, Key: rc.key, RequestID: rc.id, HostID: rc.id,
	}
	b, _ := xml.Marshal(body)
	w.WriteHeader(ae.Status)
	w.Write([]byte(xml.Header))
	w.Write(b)
	return ae
}

var _ error = (*APIError)(nil)
