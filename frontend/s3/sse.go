package s3

import (
	"bufio"
	"context"
	"crypto/hmac"
	"crypto/md5"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/tristore/tristore/blockdev/filelun"
	"github.com/tristore/tristore/internal/sse"
	"github.com/tristore/tristore/store"
)

// Encryption at rest (SSE-S3 and SSE-C). The layout and key wrapping are
// internal/sse; here the S3 side: which requests encrypt, the envelope
// kept in store.ObjectMeta.Encryption, and plaintext views of stored
// ciphertext for GET, HEAD, Copy and listings.
//
// Envelope entries:
//
//	mode  "S3" (server key) or "C" (customer key)
//	wk    the data key wrapped by the server or customer key (base64)
//	np    the nonce prefix (base64)
//	size  the plaintext size
//	etag  the plaintext's MD5 (hex), filled when the body has been read
//	salt, kh  SSE-C: a random salt and HMAC-SHA256(salt, key), to tell a
//	      wrong key (403) from a tampered object; the key itself is never kept

const (
	sseHdr        = "X-Amz-Server-Side-Encryption"
	sseCHdr       = "X-Amz-Server-Side-Encryption-Customer-"
	sseCopyCHdr   = "X-Amz-Copy-Source-Server-Side-Encryption-Customer-"
	sseModeServer = "S3"
	sseModeCust   = "C"
)

// errKMS: SSE-KMS (aws:kms, aws:kms:dsse, or an SSE-KMS key ID or
// context header) on a write or as a bucket default. tristore has no key
// management service, so this stays 501 (a server feature not offered,
// as AWS answers features a bucket or region lacks) and names the two
// modes it does offer; nothing is stored (docs/s3.md, "Encryption at rest").
var errKMS = ErrNotImplemented.withMessage("SSE-KMS (aws:kms, aws:kms:dsse) is not supported by this server: it has no key management service. " +
	"Use SSE-S3 (x-amz-server-side-encryption: AES256) or SSE-C (x-amz-server-side-encryption-customer-* headers) instead.")

// sseKeyCache holds the server key once loaded.
type sseKeyCache struct {
	mu  sync.Mutex
	key []byte
}

// serverKey returns the SSE-S3 server key, creating its file on first use.
func (s *Server) serverKey() ([]byte, error) {
	if s.opts.SSEKeyFile == "" {
		return nil, ErrNotImplemented.withMessage("Server-side encryption with server keys is not configured on this server")
	}
	s.sseKey.mu.Lock()
	defer s.sseKey.mu.Unlock()
	if s.sseKey.key == nil {
		k, err := sse.LoadOrCreateKey(s.opts.SSEKeyFile)
		if err != nil {
			return nil, fmt.Errorf("s3: SSE server key: %w", err)
		}
		s.sseKey.key = k
	}
	return s.sseKey.key, nil
}

// customerKey is an SSE-C key from a request.
type customerKey struct {
	key []byte
	md5 string // base64, as sent
}

// parseCustomerKey reads the SSE-C headers with prefix (the object's or
// the copy source's); nil when none is present. AWS's checks: algorithm
// AES256, a 32-byte base64 key, and its MD5 matching.
func parseCustomerKey(r *http.Request, prefix string) (*customerKey, error) {
	h := r.Header
	alg, k64, m64 := h.Get(prefix+"Algorithm"), h.Get(prefix+"Key"), h.Get(prefix+"Key-Md5")
	if alg == "" && k64 == "" && m64 == "" {
		return nil, nil
	}
	if !secureForKeys(r) {
		return nil, ErrInvalidRequest.withMessage("Requests specifying Server Side Encryption with Customer provided keys must be made over a secure connection.")
	}
	if alg == "" {
		return nil, ErrInvalidArgument.withMessage("Requests specifying Server Side Encryption with Customer provided keys must provide a valid encryption algorithm.")
	}
	if alg != "AES256" {
		return nil, ErrInvalidArgument.withMessage("The encryption algorithm specified is not valid.")
	}
	key, err := base64.StdEncoding.DecodeString(k64)
	if err != nil || len(key) != sse.KeySize {
		return nil, ErrInvalidArgument.withMessage("The secret key was invalid for the specified algorithm.")
	}
	sum := md5.Sum(key)
	if m64 == "" || m64 != base64.StdEncoding.EncodeToString(sum[:]) {
		return nil, ErrInvalidArgument.withMessage("The calculated MD5 hash of the key did not match the hash that was provided.")
	}
	return &customerKey{key: key, md5: m64}, nil
}

// secureForKeys reports whether r may carry an SSE-C key: over TLS, or
// from a loopback peer (a key that never leaves the machine). AWS refuses
// SSE-C over plain HTTP; tristore does too except on loopback, where its
// tests and local tools talk plain HTTP (docs/s3.md).
func secureForKeys(r *http.Request) bool {
	if r.TLS != nil {
		return true
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// keyHash is what an SSE-C object keeps to recognise its key.
func keyHash(salt, key []byte) string {
	m := hmac.New(sha256.New, salt)
	m.Write(key)
	return base64.StdEncoding.EncodeToString(m.Sum(nil))
}

// sseWrite is how a new object is to be encrypted: mode "" for not at all.
type sseWrite struct {
	mode string
	ck   *customerKey
}

// sseForWrite decides from a PUT/Copy's headers, and else the bucket's
// default encryption, how the new object is encrypted.
func (s *Server) sseForWrite(ctx context.Context, r *http.Request, bucket string) (sseWrite, error) {
	h := r.Header
	ck, err := parseCustomerKey(r, sseCHdr)
	if err != nil {
		return sseWrite{}, err
	}
	alg := h.Get(sseHdr)
	for k := range h {
		lk := strings.ToLower(k)
		if strings.HasPrefix(lk, "x-amz-server-side-encryption-aws-kms-") || lk == "x-amz-server-side-encryption-context" {
			return sseWrite{}, errKMS
		}
	}
	switch {
	case ck != nil && alg != "":
		return sseWrite{}, ErrInvalidArgument.withMessage("Server Side Encryption with Customer provided key is incompatible with the encryption method specified")
	case ck != nil:
		return sseWrite{mode: sseModeCust, ck: ck}, nil
	case alg == "AES256":
		return sseWrite{mode: sseModeServer}, nil
	case alg == "aws:kms" || alg == "aws:kms:dsse":
		return sseWrite{}, errKMS
	case alg != "":
		return sseWrite{}, ErrInvalidArgument.withMessage("The encryption method specified is not supported")
	}
	def, err := s.bucketDefaultSSE(ctx, bucket)
	if err != nil {
		return sseWrite{}, err
	}
	return sseWrite{mode: def}, nil
}

// encryptBody sets meta's envelope and returns the stored bytes of the
// size plaintext bytes of body, and their size. With mode "" it returns
// body unchanged. The plaintext's MD5 enters the envelope when the last
// byte has been read, before the store records it (see store.ObjectMeta).
func (s *Server) encryptBody(ctx context.Context, sw sseWrite, bucket, key string, body io.Reader, size int64, meta *store.ObjectMeta) (io.Reader, int64, error) {
	meta.Encryption = nil
	if sw.mode == "" {
		return body, size, nil
	}
	env, dk, prefix, err := s.newEnvelope(ctx, sw, bucket, key)
	if err != nil {
		return nil, 0, err
	}
	env["size"] = strconv.FormatInt(size, 10)
	h := md5.New()
	er, err := sse.NewEncryptReader(io.TeeReader(body, h), size, dk, prefix, func() { env["etag"] = hex.EncodeToString(h.Sum(nil)) })
	if err != nil {
		return nil, 0, err
	}
	meta.Encryption = env
	return er, sse.CipherSize(size), nil
}

// newEnvelope makes a new object's (or upload's) envelope: a fresh data
// key and nonce prefix, the data key wrapped by the server or customer key.
func (s *Server) newEnvelope(ctx context.Context, sw sseWrite, bucket, key string) (env map[string]string, dk, prefix []byte, err error) {
	if fs, ok := s.st.(filelun.Store); ok {
		// A volume's object is served as blocks over iSCSI: it is never
		// replaced by ciphertext (and `volume create` refuses an existing
		// object), so no encrypted object is ever a volume.
		vol, err := filelun.Registered(ctx, fs, bucket, key)
		if err != nil {
			return nil, nil, nil, err
		}
		if vol {
			return nil, nil, nil, errVolumeEncrypted
		}
	}
	var kek []byte
	env = map[string]string{"mode": sw.mode}
	if sw.mode == sseModeCust {
		kek = sw.ck.key
		salt := make([]byte, 16)
		if _, err := rand.Read(salt); err != nil {
			return nil, nil, nil, err
		}
		env["salt"], env["kh"] = base64.StdEncoding.EncodeToString(salt), keyHash(salt, sw.ck.key)
	} else {
		if kek, err = s.serverKey(); err != nil {
			return nil, nil, nil, err
		}
	}
	if dk, prefix, err = sse.NewDataKey(); err != nil {
		return nil, nil, nil, err
	}
	wk, err := sse.Wrap(kek, dk)
	if err != nil {
		return nil, nil, nil, err
	}
	env["wk"], env["np"] = base64.StdEncoding.EncodeToString(wk), base64.StdEncoding.EncodeToString(prefix)
	return env, dk, prefix, nil
}

// errVolumeEncrypted: an encrypted PUT or copy onto a block volume's name.
var errVolumeEncrypted = ErrInvalidRequest.withMessage("The key is an iSCSI block volume (tristore volume list); a volume cannot be encrypted at rest: its blocks are served as they are stored.")

// plainInfo is oi as S3 shows it: for an encrypted object the plaintext's
// size and, for SSE-S3, its MD5 as ETag (SSE-C ETags are not the
// plaintext's MD5 in S3 either: the stored bytes' MD5 is kept).
func plainInfo(oi store.ObjectInfo) store.ObjectInfo {
	env := oi.Meta.Encryption
	if env == nil {
		return oi
	}
	if env["mp"] == "1" {
		// Multipart (sse_multipart.go): sizes from the parts'.
		if n, ok := mpSize(oi); ok {
			oi.Size = n
			parts := make([]store.PartInfo, len(oi.Parts))
			for i, p := range oi.Parts {
				p.Size, _ = sse.PlainSize(p.Size)
				parts[i] = p
			}
			oi.Parts = parts
		}
	} else if n, err := strconv.ParseInt(env["size"], 10, 64); err == nil {
		oi.Size = n
	}
	if env["mode"] == sseModeServer && env["etag"] != "" {
		oi.ETag = env["etag"]
	}
	return oi
}

// errSSEOnRead: x-amz-server-side-encryption (or an SSE-KMS header) on a
// GET or HEAD. These headers say how to store an object; AWS refuses them
// on reads with 400 InvalidArgument whatever the object's encryption (its
// GetObject/HeadObject reference: "you'll get an HTTP 400 Bad Request
// error"), before looking the object up. Only the SSE-C headers belong on
// a read.
var errSSEOnRead = ErrInvalidArgument.withMessage("x-amz-server-side-encryption header is not supported for this operation.")

// refuseSSEOnRead returns errSSEOnRead when a read carries a storing header.
func refuseSSEOnRead(h http.Header) error {
	for _, k := range []string{sseHdr, sseHdr + "-Aws-Kms-Key-Id", sseHdr + "-Context"} {
		if _, ok := h[k]; ok {
			return errSSEOnRead
		}
	}
	return nil
}

// errNotEncryptedWithKey: SSE-C headers on reading an object that is not SSE-C.
var errNotEncryptedWithKey = ErrInvalidRequest.withMessage("The encryption parameters are not applicable to this object.")

// errNeedKey: reading an SSE-C object without its key.
var errNeedKey = ErrInvalidRequest.withMessage("The object was stored using a form of Server Side Encryption. The correct parameters must be provided to retrieve the object.")

// dataKey checks the reading request's keys against oi (stored info) and
// returns the data key and nonce prefix of an encrypted object (nil for a
// plain one).
func (s *Server) dataKey(oi store.ObjectInfo, r *http.Request, prefix string) ([]byte, []byte, error) {
	ck, err := parseCustomerKey(r, prefix)
	if err != nil {
		return nil, nil, err
	}
	env := oi.Meta.Encryption
	if env == nil || env["mode"] != sseModeCust {
		if ck != nil {
			return nil, nil, errNotEncryptedWithKey
		}
		if env == nil {
			return nil, nil, nil
		}
	}
	var kek []byte
	switch env["mode"] {
	case sseModeCust:
		if ck == nil {
			return nil, nil, errNeedKey
		}
		salt, err := base64.StdEncoding.DecodeString(env["salt"])
		if err != nil || !hmac.Equal([]byte(keyHash(salt, ck.key)), []byte(env["kh"])) {
			return nil, nil, ErrAccessDenied
		}
		kek = ck.key
	case sseModeServer:
		if kek, err = s.serverKey(); err != nil {
			return nil, nil, err
		}
	default:
		return nil, nil, fmt.Errorf("s3: %s/%s: unknown encryption mode %q", oi.Bucket, oi.Key, env["mode"])
	}
	wk, err1 := base64.StdEncoding.DecodeString(env["wk"])
	np, err2 := base64.StdEncoding.DecodeString(env["np"])
	if err1 != nil || err2 != nil || len(np) != sse.PrefixSize {
		return nil, nil, fmt.Errorf("s3: %s/%s: damaged encryption envelope", oi.Bucket, oi.Key)
	}
	dk, err := sse.Unwrap(kek, wk)
	if err != nil {
		return nil, nil, fmt.Errorf("s3: %s/%s: data key: %w", oi.Bucket, oi.Key, err)
	}
	return dk, np, nil
}

// statPlain is statObject for HEAD (and copy sources): the reading
// request's keys are checked and the info is the plaintext's.
func (s *Server) statPlain(ctx context.Context, w http.ResponseWriter, r *http.Request, prefix, bucket, key, vid string) (store.ObjectInfo, error) {
	oi, err := s.statObject(ctx, w, bucket, key, vid)
	if err != nil {
		return oi, err
	}
	if _, _, err := s.dataKey(oi, r, prefix); err != nil {
		return oi, err
	}
	return plainInfo(oi), nil
}

// getPlain is getObjectVersion in plaintext: n bytes from off of the
// plaintext (n < 0: to the end). For an encrypted object only the
// segments the range touches are read, and the first is authenticated
// before this returns, so a damaged object fails before any header is
// sent (later segments fail mid-body: the connection is cut).
func (s *Server) getPlain(ctx context.Context, w http.ResponseWriter, r *http.Request, prefix, bucket, key, vid string, off, n int64) (io.ReadCloser, store.ObjectInfo, error) {
	for attempt := 0; ; attempt++ {
		var (
			rd  io.ReadCloser
			raw store.ObjectInfo
			err error
		)
		if off == 0 && n < 0 {
			rd, raw, err = s.getObjectVersion(ctx, w, bucket, key, vid, 0, -1)
			if err != nil {
				return nil, raw, err
			}
		} else {
			// Optimistically the object is plain: then this one read is
			// all (no extra stat). An encrypted one tells its envelope
			// and sizes, and is read again at the ciphertext's offsets.
			if rd, raw, err = s.getObjectVersion(ctx, w, bucket, key, vid, off, n); err != nil {
				return nil, raw, err
			}
			if raw.Meta.Encryption == nil {
				if _, _, err := s.dataKey(raw, r, prefix); err != nil { // SSE-C headers on a plain object
					rd.Close()
					return nil, raw, err
				}
				return rd, raw, nil
			}
			rd.Close()
			size := plainInfo(raw).Size
			if off >= size && !(off == 0 && size == 0) {
				return nil, raw, ErrInvalidRange
			}
			if n < 0 || off+n > size {
				n = size - off
			}
			var coff, cn int64
			if raw.Meta.Encryption["mp"] == "1" {
				var ok bool
				if coff, cn, _, ok = mpSpan(raw, off, n, nil, nil); !ok {
					return nil, raw, fmt.Errorf("s3: %s/%s: encrypted multipart object without part sizes", bucket, key)
				}
			} else {
				coff, cn = sse.Span(size, off, n)
			}
			var got store.ObjectInfo
			rd, got, err = s.getObjectVersion(ctx, w, bucket, key, vid, coff, cn)
			if err != nil {
				return nil, got, err
			}
			if got.ETag != raw.ETag || (got.Meta.Encryption == nil) != (raw.Meta.Encryption == nil) {
				rd.Close()
				if attempt >= 3 {
					return nil, got, fmt.Errorf("s3: %s/%s keeps changing while read", bucket, key)
				}
				continue // replaced between the stat and the read
			}
			raw = got
		}
		dk, np, err := s.dataKey(raw, r, prefix)
		if err != nil || dk == nil {
			if err != nil {
				rd.Close()
			}
			return rd, raw, err
		}
		oi := plainInfo(raw)
		if off == 0 && n < 0 {
			n = oi.Size
		}
		var dr io.Reader
		if raw.Meta.Encryption["mp"] == "1" {
			_, _, open, ok := mpSpan(raw, off, n, dk, np)
			if !ok {
				rd.Close()
				return nil, oi, fmt.Errorf("s3: %s/%s: encrypted multipart object without part sizes", bucket, key)
			}
			dr = open(rd)
		} else if dr, err = sse.NewDecryptReader(rd, oi.Size, off, n, dk, np); err != nil {
			rd.Close()
			return nil, oi, err
		}
		br := bufio.NewReaderSize(dr, sse.SegSize)
		if n > 0 {
			if _, err := br.Peek(1); err != nil {
				rd.Close()
				return nil, oi, fmt.Errorf("s3: %s/%s: %w", bucket, key, err)
			}
		}
		return readCloser{&authLogReader{r: br, s: s, bucket: bucket, key: key}, rd}, oi, nil
	}
}

// authLogReader logs at ERROR a segment that fails authentication after
// the response has started: the server then only cuts the connection
// (logged at WARN as any mid-body failure), but a damaged object is a
// server fault someone must look at.
type authLogReader struct {
	r           io.Reader
	s           *Server
	bucket, key string
	logged      bool
}

func (a *authLogReader) Read(p []byte) (int, error) {
	n, err := a.r.Read(p)
	if err != nil && !a.logged && errors.Is(err, sse.ErrAuth) {
		a.logged = true
		a.s.log.Error("s3: encrypted object failed authentication while read", "bucket", a.bucket, "key", a.key, "err", err)
	}
	return n, err
}

type readCloser struct {
	io.Reader
	io.Closer
}

// sseResponseHeaders tells the client how oi (stored info) is encrypted,
// as S3 does on PUT, GET, HEAD and Copy.
func sseResponseHeaders(h http.Header, oi store.ObjectInfo, req http.Header, prefix string) {
	switch oi.Meta.Encryption["mode"] {
	case sseModeServer:
		h.Set(sseHdr, "AES256")
	case sseModeCust:
		h.Set(sseCHdr+"Algorithm", "AES256")
		if m := req.Get(prefix + "Key-Md5"); m != "" {
			h.Set(sseCHdr+"Key-Md5", m)
		}
	}
}
