package sigv4

import (
	"errors"
	"net/http"
)

// Error is an authentication failure with its S3 error code and HTTP
// status; frontend/s3 renders it as an S3 XML error.
type Error struct {
	Code    string
	Status  int
	Message string
}

func (e *Error) Error() string { return e.Code + ": " + e.Message }

func newErr(code string, status int, msg string) *Error {
	return &Error{Code: code, Status: status, Message: msg}
}

// Error constructors, one per S3 code used here, so codes and statuses stay
// consistent.
func errSignature() *Error {
	return newErr("SignatureDoesNotMatch", http.StatusForbidden,
		"The request signature we calculated does not match the signature you provided. Check your key and signing method.")
}
func errChunkSignature() *Error {
	return newErr("SignatureDoesNotMatch", http.StatusForbidden,
		"The chunk signature we calculated does not match the signature you provided.")
}
func errUnknownKey() *Error {
	return newErr("InvalidAccessKeyId", http.StatusForbidden,
		"The AWS Access Key Id you provided does not exist in our records.")
}
func errHeaderMalformed(msg string) *Error {
	return newErr("AuthorizationHeaderMalformed", http.StatusBadRequest,
		"The authorization header is malformed; "+msg)
}
func errQueryMalformed(msg string) *Error {
	return newErr("AuthorizationQueryParametersError", http.StatusBadRequest, msg)
}
func errContentSHA() *Error {
	return newErr("XAmzContentSHA256Mismatch", http.StatusBadRequest,
		"The provided 'x-amz-content-sha256' header does not match what was computed.")
}
func errIncomplete() *Error {
	return newErr("IncompleteBody", http.StatusBadRequest,
		"You did not provide the number of bytes specified by the Content-Length HTTP header.")
}
func errAccessDenied(msg string) *Error { return newErr("AccessDenied", http.StatusForbidden, msg) }
func errSkewed() *Error {
	return newErr("RequestTimeTooSkewed", http.StatusForbidden,
		"The difference between the request time and the server's time is too large.")
}
func errInvalidArg(msg string) *Error { return newErr("InvalidArgument", http.StatusBadRequest, msg) }
func errInvalidReq(msg string) *Error { return newErr("InvalidRequest", http.StatusBadRequest, msg) }
func errMissingHeader(msg string) *Error {
	return newErr("MissingSecurityHeader", http.StatusBadRequest, msg)
}
func errNotImplemented(msg string) *Error {
	return newErr("NotImplemented", http.StatusNotImplemented, msg)
}
func errBadDigest(msg string) *Error { return newErr("BadDigest", http.StatusBadRequest, msg) }
func errInternal() *Error {
	return newErr("InternalError", http.StatusInternalServerError, "We encountered an internal error. Please try again.")
}

// unknownKeyError is the type of ErrUnknownAccessKey.
type unknownKeyError struct{}

func (unknownKeyError) Error() string          { return "unknown access key" }
func (unknownKeyError) UnknownAccessKey() bool { return true }

// ErrUnknownAccessKey is what a Credentials implementation returns for an
// access key it does not know. Other packages (iam) may instead return any
// error with a method UnknownAccessKey() bool reporting true, so they need
// not import this package.
var ErrUnknownAccessKey error = unknownKeyError{}

// IsUnknownAccessKey reports whether err (or an error it wraps) says the
// access key does not exist.
func IsUnknownAccessKey(err error) bool {
	var u interface{ UnknownAccessKey() bool }
	return errors.As(err, &u) && u.UnknownAccessKey()
}
