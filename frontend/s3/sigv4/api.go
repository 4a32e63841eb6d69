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
//
// Details the caller can rely on: for aws-chunked bodies Verify also removes
// "aws-chunked" from Content-Encoding and sets Content-Length to the decoded
// length; once the body has been read to io.EOF, r.Trailer holds the
// verified trailing headers (e.g. X-Amz-Checksum-Crc32c). A request whose
// body ends early fails with IncompleteBody. Credential scopes must name the
// Verifier's region (AuthorizationHeaderMalformed otherwise).
package sigv4

import (
	"context"
	"net/http"
	"sync"
	"time"
)

// Credentials looks up the secret key of an access key. Implementations
// return an error for which IsUnknownAccessKey reports true (for example
// ErrUnknownAccessKey, or iam.ErrUnknownAccessKey) when the key does not
// exist; any other error is treated as an internal failure (500).
type Credentials interface {
	SecretFor(ctx context.Context, accessKey string) (string, error)
}

// Result describes a request that passed verification.
type Result struct {
	// Anonymous is true when the request carried no signature at all.
	Anonymous bool
	// AccessKey is the access key id that signed the request.
	AccessKey string
	// Presigned is true for query-string (presigned URL) authentication.
	Presigned bool
	// SignedAt is the request's signing time (X-Amz-Date or Date).
	SignedAt time.Time
	// Expires is when a presigned URL stops being valid (zero otherwise).
	Expires time.Time
	// Payload is the payload mode: a hex SHA-256, UNSIGNED-PAYLOAD or one of
	// the STREAMING-* values.
	Payload string
	// Streaming is true when the body used aws-chunked framing (now removed).
	Streaming bool
}

// Payload modes of x-amz-content-sha256.
const (
	UnsignedPayload        = "UNSIGNED-PAYLOAD"
	StreamingPayload       = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
	StreamingPayloadTrail  = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER"
	StreamingUnsignedTrail = "STREAMING-UNSIGNED-PAYLOAD-TRAILER"
	streamingECDSA         = "STREAMING-AWS4-ECDSA-P256-SHA256-PAYLOAD"
	streamingECDSATrail    = "STREAMING-AWS4-ECDSA-P256-SHA256-PAYLOAD-TRAILER"
)

// Limits.
const (
	// MaxClockSkew is how far the signing time may be from the server clock
	// (S3's own limit).
	MaxClockSkew = 15 * time.Minute
	// MaxPresignExpiry is the longest X-Amz-Expires S3 accepts (7 days).
	MaxPresignExpiry = 7 * 24 * time.Hour
)

// Verifier checks SigV4 signatures against a Credentials source. It is safe
// for concurrent use.
type Verifier struct {
	creds  Credentials
	region string
	// Now returns the current time; tests replace it. Defaults to time.Now.
	Now func() time.Time

	mu   sync.Mutex
	keys map[signingKeyID][]byte // derived signing keys; they change once a day per key
}

type signingKeyID struct {
	secret, date, region, service string
}

// NewVerifier returns a Verifier that accepts signatures scoped to region
// (credential scope <date>/<region>/s3/aws4_request). An empty region
// accepts any region in the scope.
func NewVerifier(creds Credentials, region string) *Verifier {
	return &Verifier{creds: creds, region: region, Now: time.Now, keys: make(map[signingKeyID][]byte)}
}

// Verify checks the signature of r; see the package documentation.
func (v *Verifier) Verify(r *http.Request) (Result, error) {
	return v.verify(r)
}
