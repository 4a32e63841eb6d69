package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"
	"unsafe"
)

// Driver is one protocol's operations, as a benchmark needs them: whole
// files or objects (Put, Get), byte ranges of one file (OpenFile), names
// (List, Delete, Mkdir) and a recursive RemoveAll so that a run can always
// clean up what it created. Names are slash-separated paths relative to the
// target (a directory, a bucket, an export, a LUN); a Driver is safe for
// concurrent use by the workers of one step.
//
// Errors: a method returns the protocol's error wrapped with the operation;
// a Driver never retries behind the caller's back, so every failed request
// is seen (and recorded) by the suite.
type Driver interface {
	// Protocol is posix, s3, nfs or iscsi.
	Protocol() string
	// Target is the target's URL without secrets (for messages and run.json).
	Target() string
	// Forms are the access forms OpenFile accepts; the first is the default.
	Forms() []string
	// Mkdir creates directory dir (a no-op where names are flat).
	Mkdir(ctx context.Context, dir string) error
	// Put creates or replaces name with data.
	Put(ctx context.Context, name string, data []byte) error
	// Get reads name into buf (sized by the caller to the expected size)
	// and returns the bytes read and when the first byte arrived.
	Get(ctx context.Context, name string, buf []byte) (n int, firstByte time.Time, err error)
	// OpenFile creates name with size bytes (if it does not exist with that
	// size) and opens it for ReadAt/WriteAt with access form form.
	OpenFile(ctx context.Context, name string, size int64, form string) (File, error)
	// List returns the names directly under dir.
	List(ctx context.Context, dir string) ([]string, error)
	// Delete removes the file or object name.
	Delete(ctx context.Context, name string) error
	// RemoveAll removes dir and everything under it; a missing dir is not
	// an error.
	RemoveAll(ctx context.Context, dir string) error
	// Close releases connections; with cleanup, also what the driver itself
	// created on the target (a bucket it made).
	Close(ctx context.Context) error
}

// File is one open file of OpenFile.
type File interface {
	ReadAt(ctx context.Context, p []byte, off int64) (int, error)
	WriteAt(ctx context.Context, p []byte, off int64) (int, error)
	// Sync makes written data durable (fsync, COMMIT, SYNCHRONIZE CACHE).
	Sync(ctx context.Context) error
	Close(ctx context.Context) error
}

// ReadOnlyFile is implemented by Files whose WriteAt always fails with
// ErrNotSupported (S3 objects), so suites skip their write passes.
type ReadOnlyFile interface{ ReadOnly() bool }

// Access forms (seed 000 Table I). Protocols without a page cache in this
// process map them as their drivers document.
const (
	FormDefault = "default"
	FormSync    = "sync"
	FormDirect  = "direct"
)

// ErrNotSupported is returned for an operation a protocol cannot do (for
// example WriteAt on an S3 object).
var ErrNotSupported = errors.New("bench: not supported by this protocol")

// Options configure Open.
type Options struct {
	// AccessKey, SecretKey and Region are the S3 credentials (an s3:// URL
	// may also carry them as user info).
	AccessKey, SecretKey, Region string
	// CHAPUser and CHAPSecret log in to an iSCSI target (or user:secret@ in
	// the URL).
	CHAPUser, CHAPSecret string
	// Dial, when set, makes every TCP connection (an emulated link's client
	// side).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	// Timeout bounds connecting and each request's silence (default 30s).
	Timeout time.Duration
}

func (o *Options) timeout() time.Duration {
	if o.Timeout <= 0 {
		return 30 * time.Second
	}
	return o.Timeout
}

// Open connects to target: a directory path (or file:///path), s3://host:port/bucket
// (s3+https:// for TLS), nfs://host:port/export, fuse+nfs://host:port/export
// (the export mounted through FUSE here, driven as a directory),
// iscsi://host:port/iqn/lun or ext4+iscsi://host:port/iqn/lun (a new ext4
// on the LUN, mounted here).
// It checks that the target answers (and that the credentials are accepted)
// before returning, so a bad target fails here, naming the target.
func Open(ctx context.Context, target string, o Options) (Driver, error) {
	scheme, _, ok := strings.Cut(target, "://")
	if !ok {
		return OpenPOSIX(target)
	}
	u, err := url.Parse(target)
	if err != nil {
		return nil, fmt.Errorf("bench: bad target %q: %w", Redact(target), err)
	}
	switch scheme {
	case "file":
		return OpenPOSIX(u.Path)
	case "s3", "s3+http", "s3+https":
		return OpenS3(ctx, u, o)
	case "nfs":
		return OpenNFS(ctx, u, o)
	case "fuse+nfs":
		return OpenFUSENFS(ctx, u, o)
	case "iscsi":
		return OpenISCSI(ctx, u, o)
	case "ext4+iscsi":
		return OpenExt4ISCSI(ctx, u, o)
	}
	return nil, fmt.Errorf("bench: target %q: unknown scheme %q (want a path, s3://, nfs://, fuse+nfs://, iscsi:// or ext4+iscsi://)", Redact(target), scheme)
}

// Redact removes secrets from a target URL: the password of user info and
// query parameters that look like secrets.
func Redact(target string) string {
	if !strings.Contains(target, "://") {
		return target
	}
	u, err := url.Parse(target)
	if err != nil {
		return "(unparsable target)"
	}
	if u.User != nil {
		u.User = url.User(u.User.Username())
	}
	q := u.Query()
	for k := range q {
		lk := strings.ToLower(k)
		if strings.Contains(lk, "secret") || strings.Contains(lk, "key") || strings.Contains(lk, "password") || strings.Contains(lk, "token") {
			q.Set(k, "REDACTED")
		}
	}
	u.RawQuery = q.Encode()
	return u.String()
}

// Alignment is the buffer and size alignment O_DIRECT needs on Linux file
// systems (the logical block size is at most 4 KiB on the devices we use).
const Alignment = 4096

// AlignedBuffer returns a zeroed n-byte slice whose first byte is aligned to
// Alignment, as O_DIRECT requires; suites use it for every driver.
func AlignedBuffer(n int) []byte {
	b := make([]byte, n+Alignment)
	off := 0
	if r := int(uintptr(unsafe.Pointer(&b[0])) % Alignment); r != 0 {
		off = Alignment - r
	}
	return b[off : off+n : off+n]
}

// Fill writes a deterministic, incompressible-looking pattern into p, seeded
// by seed, so data read back can be checked and compression on the path
// cannot flatter the numbers.
func Fill(p []byte, seed uint64) {
	x := seed*0x9E3779B97F4A7C15 + 1
	i := 0
	for ; i+8 <= len(p); i += 8 {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		p[i], p[i+1], p[i+2], p[i+3] = byte(x), byte(x>>8), byte(x>>16), byte(x>>24)
		p[i+4], p[i+5], p[i+6], p[i+7] = byte(x>>32), byte(x>>40), byte(x>>48), byte(x>>56)
	}
	for ; i < len(p); i++ {
		p[i] = byte(x >> (8 * (i % 8)))
	}
}
