// Package store defines the one place tristore keeps data. Every front end
// (S3, NFS, iSCSI) reads and writes through a Store, so an object PUT over S3
// is a file over NFS and a LUN is an object.
//
// Error contract: methods return the sentinel errors below (possibly wrapped
// with %w) and nothing else for the conditions they name; each front end
// translates them to its protocol's codes in exactly one place.
package store

import (
	"context"
	"errors"
	"io"
	"os"
	"time"
)

// Sentinel errors. Wrap with fmt.Errorf("...: %w", ErrX) to add context.
var (
	ErrNoSuchBucket      = errors.New("no such bucket")
	ErrBucketExists      = errors.New("bucket already exists")
	ErrBucketNotEmpty    = errors.New("bucket not empty")
	ErrInvalidBucketName = errors.New("invalid bucket name")
	ErrNoSuchKey         = errors.New("no such key")
	ErrInvalidKey        = errors.New("invalid key")                        // "..", NUL, too long, reserved name, escapes the tree
	ErrKeyConflict       = errors.New("key conflicts with an existing key") // e.g. "a" is a file and "a/b" is wanted
	ErrInvalidRange      = errors.New("invalid range")
	ErrNoSuchUpload      = errors.New("no such upload")
	ErrInvalidPart       = errors.New("invalid part")       // unknown part number or ETag mismatch
	ErrInvalidPartOrder  = errors.New("invalid part order") // parts not in ascending order
	ErrEntityTooSmall    = errors.New("entity too small")   // a non-last part under MinPartSize
	ErrIncompleteBody    = errors.New("incomplete body")    // reader ended before size bytes
	ErrBadDigest         = errors.New("bad digest")         // content did not match a supplied checksum
	ErrNoSpace           = errors.New("no space left on device")
	ErrReadOnly          = errors.New("read-only")
	ErrNotSupported      = errors.New("operation not supported by this backend")
	// ErrPreconditionFailed: a conditional write lost, e.g. PutIfAbsent found the key present.
	ErrPreconditionFailed = errors.New("precondition failed")
	// ErrInUse: the object is a block volume being served (an iSCSI LUN
	// with a logged-in initiator), so it may be read and written in place
	// but not replaced, truncated, renamed or deleted; see package
	// store/inuse for the lock that decides it.
	ErrInUse = errors.New("in use as a served block volume")
	// ErrNoSuchVersion: a well-formed version ID that the key does not have.
	ErrNoSuchVersion = errors.New("no such version")
	// ErrInvalidVersion: a version ID that no version can have (malformed).
	ErrInvalidVersion = errors.New("invalid version id")
	// ErrDeleteMarker: the version asked for (or the latest one) is a
	// delete marker; the ObjectInfo returned with it describes the marker.
	ErrDeleteMarker = errors.New("version is a delete marker")
)

// MinPartSize is the smallest size of any multipart part except the last, as in S3.
const MinPartSize = 5 << 20

// MaxKeyLen is the longest object key accepted, in bytes (S3's limit).
const MaxKeyLen = 1024

// ReservedPrefix starts every name tristore keeps for itself (temp files,
// the system directory). Keys with a path component starting with it are
// refused, and such names are hidden from listings.
const ReservedPrefix = ".tristore"

// BucketInfo describes a bucket.
type BucketInfo struct {
	Name    string
	Created time.Time
	Owner   string // access-control owner (user name); "" if unknown
}

// ObjectMeta is what a writer supplies with an object and what is kept with it.
type ObjectMeta struct {
	ContentType string
	// UserMeta holds x-amz-meta-* values; keys are lower-case without the prefix.
	UserMeta map[string]string
	// Headers holds the standard headers kept verbatim: Cache-Control,
	// Content-Disposition, Content-Encoding, Content-Language, Expires
	// (canonical header names as keys).
	Headers map[string]string
	// Checksums holds verified additional checksums (e.g. "CRC32C" -> base64).
	Checksums map[string]string
	// ACL is an opaque access-control document kept for the front end (e.g. a canned ACL name).
	ACL   string
	Owner string
	// Tags are the object's S3 tags (key -> value). The front end enforces
	// S3's limits (10 tags, key <= 128 and value <= 256 characters); the
	// store keeps them with the rest of the metadata, as durably.
	Tags map[string]string
	// ChecksumType is, for a multipart upload, the whole-object checksum
	// the client asked for: "" or "COMPOSITE" (a PartChecksummer computes
	// it) or "FULL_OBJECT" (not computed: the object then gets no
	// whole-object checksum rather than one of the wrong type).
	ChecksumType string `json:",omitempty"`
	// ChecksumAlgorithm is, for a multipart upload, the algorithm given
	// at CreateMultipartUpload (x-amz-checksum-algorithm, upper case: "CRC32",
	// "CRC32C", "CRC64NVME", "SHA1", "SHA256"), "" for none. The front end
	// checks parts and Complete against it and ListParts shows the parts'
	// checksums of it; the store only keeps it with the upload.
	ChecksumAlgorithm string `json:",omitempty"`
	// Object Lock (versioned buckets): LockMode is "", "GOVERNANCE" or
	// "COMPLIANCE"; LockUntil the retain-until date; LegalHold the legal
	// hold. The front end enforces them; the store keeps them per version.
	LockMode  string    `json:",omitempty"`
	LockUntil time.Time `json:",omitzero"`
	LegalHold bool      `json:",omitempty"`
	// Encryption is the front end's envelope of an object encrypted at
	// rest (the wrapped data key, plaintext size and ETag; opaque to the
	// store, kept like Tags). The store records it only after the body
	// reader has returned its last byte, so a writer may complete it
	// (the plaintext's MD5) from that reader. A store keeps an object
	// with an envelope out of the other views' reach (posix: mode 0600).
	// Metadata-only updates (MetaUpdater, UpdateVersionMeta) keep the
	// stored envelope whatever they are given: the content is unchanged.
	Encryption map[string]string `json:",omitempty"`
}

// PartInfo describes one part of a multipart upload (or of a completed multipart object).
type PartInfo struct {
	Number  int
	Size    int64
	ETag    string // quoted-less hex MD5 of the part
	ModTime time.Time
	// Checksums holds the part's verified additional checksums
	// ("CRC32" -> base64), as given to PutPartChecksums.
	Checksums map[string]string
}

// ObjectInfo describes a stored object.
type ObjectInfo struct {
	Bucket  string
	Key     string
	Size    int64
	ModTime time.Time
	// ETag is the S3 ETag without quotes: hex MD5 for single PUTs,
	// "hexmd5-of-md5s-N" for multipart objects.
	ETag string
	Meta ObjectMeta
	// Parts lists the parts of a multipart object (for GET ?partNumber=), nil otherwise.
	Parts []PartInfo
	// VersionID is the version's ID; "" is the null version (every
	// object of a bucket that never had versioning on).
	VersionID string
	// IsLatest and DeleteMarker are set by Versioner methods.
	IsLatest     bool
	DeleteMarker bool
}

// ListOptions selects keys for List. Keys come back in S3 order (byte-wise
// lexicographic order of the UTF-8 key).
type ListOptions struct {
	Prefix string
	// Delimiter groups keys into CommonPrefixes: any non-empty string, as
	// in S3 (the first occurrence after Prefix ends the group). A backend
	// that cannot group by some delimiter returns ErrNotSupported.
	Delimiter string
	// After: only keys (and common prefixes) strictly greater than this are returned.
	After string
	Limit int // maximum number of Objects+CommonPrefixes; <=0 means 1000
}

// ListResult is one page of a listing.
type ListResult struct {
	Objects        []ObjectInfo
	CommonPrefixes []string
	IsTruncated    bool
	// NextAfter is the value to pass as ListOptions.After for the next page
	// (the last key or common prefix returned) when IsTruncated.
	NextAfter string
}

// Store is the object view of the data tree. Implementations must be safe
// for concurrent use. A Put is atomic and durable: once it returns nil the
// new content survives a crash, and no reader ever sees a partial object.
type Store interface {
	ListBuckets(ctx context.Context) ([]BucketInfo, error)
	CreateBucket(ctx context.Context, bucket, owner string) error // ErrBucketExists, ErrInvalidBucketName
	StatBucket(ctx context.Context, bucket string) (BucketInfo, error)
	DeleteBucket(ctx context.Context, bucket string) error // ErrBucketNotEmpty

	// Put stores size bytes from r (size < 0: read to EOF) under key,
	// replacing any old object atomically. If r yields fewer than size bytes
	// it returns ErrIncompleteBody and the old object (if any) is untouched.
	Put(ctx context.Context, bucket, key string, r io.Reader, size int64, meta ObjectMeta) (ObjectInfo, error)
	// Get returns n bytes from offset off (n < 0: to the end). An offset past
	// the end returns ErrInvalidRange. The reader reads one consistent version.
	Get(ctx context.Context, bucket, key string, off, n int64) (io.ReadCloser, ObjectInfo, error)
	Stat(ctx context.Context, bucket, key string) (ObjectInfo, error)
	Delete(ctx context.Context, bucket, key string) error // deleting a missing key returns ErrNoSuchKey
	List(ctx context.Context, bucket string, opts ListOptions) (ListResult, error)
}

// MetaUpdater replaces the metadata of an existing object without rewriting
// its content (used by PutObjectAcl and CopyObject onto itself).
type MetaUpdater interface {
	UpdateMeta(ctx context.Context, bucket, key string, meta ObjectMeta) (ObjectInfo, error)
}

// ExclusivePutter is implemented by stores that can create an object only
// if its key is absent, atomically (S3's PUT with If-None-Match: *). A check
// in the front end before the body arrives cannot do this: two racing
// writers would both see the key missing and both succeed. Here the test
// and the publish are one step, so exactly one of them wins; the others
// get ErrPreconditionFailed and leave no trace. Durability is as for Put.
type ExclusivePutter interface {
	PutIfAbsent(ctx context.Context, bucket, key string, r io.Reader, size int64, meta ObjectMeta) (ObjectInfo, error)
}

// ExclusiveCompleter is the multipart counterpart of ExclusivePutter:
// CompleteMultipartIfAbsent publishes the upload only if key is absent,
// else returns ErrPreconditionFailed and keeps the upload (it can be
// completed or aborted later).
type ExclusiveCompleter interface {
	CompleteMultipartIfAbsent(ctx context.Context, bucket, key, uploadID string, parts []CompletePart) (ObjectInfo, error)
}

// BucketConfigurer keeps small per-bucket documents (ACL, policy, ...) by name.
// GetBucketConfig returns ("", nil) when the document is not set.
type BucketConfigurer interface {
	GetBucketConfig(ctx context.Context, bucket, name string) (string, error)
	SetBucketConfig(ctx context.Context, bucket, name, value string) error // value "" deletes
}

// Versioning states of a bucket, kept as the BucketConfigurer document
// named VersioningConfig ("" = never enabled).
const (
	VersioningConfig    = "versioning"
	VersioningEnabled   = "Enabled"
	VersioningSuspended = "Suspended"
)

// ListVersionsOptions selects versions for ListVersions: keys as in
// ListOptions; KeyMarker/VersionIDMarker continue a listing as S3's
// key-marker/version-id-marker do ("null" names the null version).
type ListVersionsOptions struct {
	Prefix, Delimiter          string
	KeyMarker, VersionIDMarker string
	Limit                      int // versions + delete markers + common prefixes; <=0 means 1000
}

// ListVersionsResult is one page of versions, newest first within a key.
type ListVersionsResult struct {
	Versions                           []ObjectInfo // DeleteMarker entries included
	CommonPrefixes                     []string
	IsTruncated                        bool
	NextKeyMarker, NextVersionIDMarker string
}

// Versioner is implemented by stores that keep S3 object versions. The
// bucket's state is its VersioningConfig document: when Enabled, every
// Put/CompleteMultipart keeps the object it replaces as an older version
// and gets a new version ID; when Suspended, the new object is the null
// version (replacing an older null version). Delete on a versioned bucket
// adds a delete marker. versionID "" means the latest version and "null"
// the null version; a missing one is ErrNoSuchVersion, a malformed one
// ErrInvalidVersion.
type Versioner interface {
	GetVersion(ctx context.Context, bucket, key, versionID string, off, n int64) (io.ReadCloser, ObjectInfo, error)
	// StatVersion returns ErrDeleteMarker (with the marker's info) for a delete marker.
	StatVersion(ctx context.Context, bucket, key, versionID string) (ObjectInfo, error)
	// DeleteObject is Delete that reports what it did: on a versioned
	// bucket the delete marker it added (DeleteMarker, VersionID).
	DeleteObject(ctx context.Context, bucket, key string) (ObjectInfo, error)
	// DeleteVersion removes one version for good (a missing one is not an
	// error: the returned info is zero). Removing the latest makes the
	// next newer one current again.
	DeleteVersion(ctx context.Context, bucket, key, versionID string) (ObjectInfo, error)
	UpdateVersionMeta(ctx context.Context, bucket, key, versionID string, meta ObjectMeta) (ObjectInfo, error)
	ListVersions(ctx context.Context, bucket string, opts ListVersionsOptions) (ListVersionsResult, error)
}

// Upload describes an in-progress multipart upload.
type Upload struct {
	Bucket, Key, UploadID string
	Initiated             time.Time
	Meta                  ObjectMeta
}

// CompletePart names a part in CompleteMultipart.
type CompletePart struct {
	Number int
	ETag   string // without quotes
	// Checksums are the part's checksums as the client listed them
	// (upper-case algorithm -> base64); one that differs from the part's
	// stored checksum is ErrInvalidPart.
	Checksums map[string]string
}

// ChecksumCompleter is implemented by PartChecksummers that check, before
// publishing, the whole-object checksums the client sent with
// CompleteMultipartUpload (x-amz-checksum-<alg>: upper-case algorithm ->
// base64; a COMPOSITE one with or without its "-N"). A mismatch, or an
// algorithm the object gets no checksum of, is ErrBadDigest and nothing is
// published. ifAbsent is CompleteMultipartIfAbsent's no-replace publish.
// An upload created with Meta.ChecksumType FULL_OBJECT gets, for every CRC
// algorithm all its parts have, the CRC of the whole object (combined from
// the parts' CRCs) instead of a COMPOSITE checksum.
type ChecksumCompleter interface {
	CompleteMultipartChecked(ctx context.Context, bucket, key, uploadID string, parts []CompletePart, want map[string]string, ifAbsent bool) (ObjectInfo, error)
}

// Multiparter is implemented by stores that support S3 multipart uploads.
// CompleteMultipart checks order (ErrInvalidPartOrder), existence and ETag
// (ErrInvalidPart) and sizes (ErrEntityTooSmall), then publishes atomically
// with ETag hex(md5(concat(binary part md5s)))-N (and, for a
// PartChecksummer, composite checksums).
type Multiparter interface {
	CreateMultipart(ctx context.Context, bucket, key string, meta ObjectMeta) (uploadID string, err error)
	PutPart(ctx context.Context, bucket, key, uploadID string, number int, r io.Reader, size int64) (PartInfo, error)
	ListParts(ctx context.Context, bucket, key, uploadID string) ([]PartInfo, Upload, error)
	CompleteMultipart(ctx context.Context, bucket, key, uploadID string, parts []CompletePart) (ObjectInfo, error)
	AbortMultipart(ctx context.Context, bucket, key, uploadID string) error
	ListMultipartUploads(ctx context.Context, bucket, prefix string) ([]Upload, error)
}

// PartChecksummer is implemented by Multiparters that keep each part's
// verified additional checksums and give the completed object S3's
// COMPOSITE checksums: for every algorithm that all chosen parts have,
// Meta.Checksums[alg] = base64(alg(concat(raw part digests))) + "-N".
// sums is called once the body has been read to its end, so checksums that
// arrive in an aws-chunked trailer are included.
type PartChecksummer interface {
	PutPartChecksums(ctx context.Context, bucket, key, uploadID string, number int, r io.Reader, size int64, sums func() map[string]string) (PartInfo, error)
}

// File is random access to one object's bytes, for block volumes and file
// protocols. Writes through a File change the object in place (they are not
// atomic like Put); Sync makes them durable.
type File interface {
	io.ReaderAt
	io.WriterAt
	Sync() error
	Truncate(size int64) error
	Size() (int64, error)
	Close() error
}

// Filer opens objects for random access. flag is as for os.OpenFile
// (os.O_CREATE creates a new empty object; parent "directories" are made).
type Filer interface {
	OpenFile(ctx context.Context, bucket, key string, flag int, perm os.FileMode) (File, error)
}

// HolePuncher is implemented by Files that can deallocate a range (UNMAP, WRITE SAME with UNMAP).
type HolePuncher interface {
	PunchHole(off, n int64) error
}

// LocalPather is implemented by stores whose data is a local directory tree
// (the embedded posix backend). The vfs layer serves NFS from that tree.
type LocalPather interface {
	// Root is the absolute path of the data tree.
	Root() string
}
