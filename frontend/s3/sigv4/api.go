// Package sigv4 verifies AWS Signature Version 4 on S3 requests: the
// Authorization header, presigned query strings (with expiry), signed and
// UNSIGNED-PAYLOAD bodies, and streaming aws-chunked bodies
// (STREAMING-AWS4-HMAC-SHA256-PAYLOAD and the -TRAILER /
// STREAMING-UNSIGNED-PAYLOAD-TRAILER variants current SDKs send).
//
// It is written here rather than taken from a library because the maintained
// Go SigV4 code (aws-sdk-go-v2/aws/signer/v4) only signs; no well-kept
// library verifies, and the server must.
//
// CONTRACT (used by frontend/s3; keep these names and meanings):
//
//	type Credentials interface { SecretFor(ctx, accessKey) (string, error) } // ErrUnknownAccessKey
//	func NewVerifier(creds Credentials, region string) *Verifier
//	func (v *Verifier) Verify(r *http.Request) (Result, error)
//
// Verify checks the signature of r. A request with no Authorization header
// and no X-Amz-Signature query is anonymous: Result{Anonymous: true}, nil
// (the caller decides whether anonymous access is allowed). On success it
// replaces r.Body with a reader of the decoded payload (aws-chunked framing
// removed) that returns an *Error (XAmzContentSHA256Mismatch,
// SignatureDoesNotMatch, IncompleteBody, ...) instead of io.EOF when the
// payload hash, a chunk signature or a trailer checksum does not match, and
// sets r.ContentLength to the decoded length when known. Failures are *Error
// values carrying the S3 error code and HTTP status.
package sigv4
