package s3

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"io"
	"net/http"

	"github.com/tristore/tristore/internal/sse"
	"github.com/tristore/tristore/store"
)

// Multipart uploads encrypted at rest. CreateMultipartUpload makes the
// upload's envelope (as a PUT does, marked "mp"); each part is its own
// segment stream (internal/sse) sealed under a part key
// HMAC-SHA256(data key, "part" || number), so parts may arrive in any
// order or be uploaded again, and no two parts share a (key, nonce). The
// object's plaintext size is the sum of its parts' plaintext sizes, each
// known from its stored size (sse.PlainSize); a ranged GET decrypts only
// the segments of the parts it touches.

// uploadInfoer is a Multiparter that returns one upload's metadata
// without listing its parts (store/posix).
type uploadInfoer interface {
	UploadInfo(ctx context.Context, bucket, key, uploadID string) (store.Upload, error)
}

// partKey is the key part n of an encrypted upload is sealed with.
func partKey(dataKey []byte, n int) []byte {
	m := hmac.New(sha256.New, dataKey)
	var b [8]byte
	copy(b[:4], "part")
	binary.BigEndian.PutUint32(b[4:], uint32(n))
	m.Write(b[:])
	return m.Sum(nil)
}

// sseUploadMeta sets the envelope of a new upload that is to be
// encrypted (its headers, else the bucket default) and the response's SSE
// headers. Stores that cannot give an upload's metadata back cheaply get
// no encrypted uploads (501), never unencrypted ones that should be.
func (s *Server) sseUploadMeta(ctx context.Context, r *http.Request, bucket, key string, meta *store.ObjectMeta, h http.Header) error {
	sw, err := s.sseForWrite(ctx, r, bucket)
	if err != nil || sw.mode == "" {
		return err
	}
	if _, ok := s.st.(uploadInfoer); !ok {
		return ErrNotImplemented.withMessage("Server-side encryption of multipart uploads is not supported by this store")
	}
	env, _, _, err := s.newEnvelope(ctx, sw, bucket, key)
	if err != nil {
		return err
	}
	env["mp"] = "1"
	meta.Encryption = env
	sseResponseHeaders(h, store.ObjectInfo{Meta: *meta}, r.Header, sseCHdr)
	return nil
}

// ssePart returns the stored bytes of one part of upload up (and their
// size): the plaintext itself for an upload that is not encrypted, else
// sealed under the part's key after the SSE-C key (every part must carry
// it, as in S3) has been checked. up is nil for a store that cannot
// describe an upload (uploadOf), whose uploads are never encrypted.
func (s *Server) ssePart(r *http.Request, up *store.Upload, pn int, body io.Reader, size int64, h http.Header) (io.Reader, int64, error) {
	if up == nil {
		return body, size, nil
	}
	if up.Meta.Encryption == nil {
		if ck, err := parseCustomerKey(r, sseCHdr); err != nil || ck != nil {
			if err == nil {
				err = errNotEncryptedWithKey
			}
			return nil, 0, err
		}
		return body, size, nil
	}
	oi := store.ObjectInfo{Bucket: up.Bucket, Key: up.Key, Meta: up.Meta}
	dk, np, err := s.dataKey(oi, r, sseCHdr)
	if err != nil {
		return nil, 0, err
	}
	er, err := sse.NewEncryptReader(body, size, partKey(dk, pn), np, nil)
	if err != nil {
		return nil, 0, err
	}
	sseResponseHeaders(h, oi, r.Header, sseCHdr)
	return er, sse.CipherSize(size), nil
}

// mpPlainSizes are the plaintext sizes of an encrypted multipart object's parts.
func mpPlainSizes(oi store.ObjectInfo) ([]int64, bool) {
	out := make([]int64, len(oi.Parts))
	for i, p := range oi.Parts {
		n, ok := sse.PlainSize(p.Size)
		if !ok {
			return nil, false
		}
		out[i] = n
	}
	return out, len(out) > 0
}

// mpSpan is where plaintext [off, off+n) of an encrypted multipart object
// lives in its stored bytes, and the reader that decrypts it from there.
func mpSpan(oi store.ObjectInfo, off, n int64, dk, np []byte) (coff, cn int64, open func(io.Reader) io.Reader, ok bool) {
	ps, ok := mpPlainSizes(oi)
	if !ok {
		return 0, 0, nil, false
	}
	type piece struct {
		pn               int
		size, off, n, cn int64
	}
	var (
		pieces       []piece
		pstart, cpos int64
		first        = true
	)
	for i, p := range oi.Parts {
		pend := pstart + ps[i]
		if n > 0 && off < pend && off+n > pstart {
			lo := max(off, pstart) - pstart
			hi := min(off+n, pend) - pstart
			sc, sn := sse.Span(ps[i], lo, hi-lo)
			if first {
				coff, first = cpos+sc, false
			}
			cn = cpos + sc + sn - coff
			pieces = append(pieces, piece{p.Number, ps[i], lo, hi - lo, sn})
		}
		pstart, cpos = pend, cpos+p.Size
	}
	open = func(r io.Reader) io.Reader {
		readers := make([]io.Reader, len(pieces))
		for i, pc := range pieces {
			readers[i] = &lazyReader{open: func() (io.Reader, error) {
				return sse.NewDecryptReader(io.LimitReader(r, pc.cn), pc.size, pc.off, pc.n, partKey(dk, pc.pn), np)
			}}
		}
		return io.MultiReader(readers...)
	}
	return coff, cn, open, true
}

// lazyReader makes its reader on the first Read, so a range over many
// parts holds one segment buffer at a time.
type lazyReader struct {
	open func() (io.Reader, error)
	r    io.Reader
}

func (l *lazyReader) Read(p []byte) (int, error) {
	if l.r == nil {
		r, err := l.open()
		if err != nil {
			return 0, err
		}
		l.r = r
	}
	return l.r.Read(p)
}

// mpSize is the plaintext size of an encrypted multipart object.
func mpSize(oi store.ObjectInfo) (int64, bool) {
	ps, ok := mpPlainSizes(oi)
	var t int64
	for _, n := range ps {
		t += n
	}
	return t, ok
}
