package s3

import (
	"bytes"
	"crypto/md5"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"hash"
	"hash/crc32"
	"hash/crc64"
	"io"
	"net/http"
	"strings"
)

// checksumAlgs are the additional checksums S3 accepts, by the suffix of
// their x-amz-checksum-<alg> header, with a constructor for each.
var checksumAlgs = map[string]func() hash.Hash{
	"crc32":     func() hash.Hash { return crc32.NewIEEE() },
	"crc32c":    func() hash.Hash { return crc32.New(crc32.MakeTable(crc32.Castagnoli)) },
	"crc64nvme": func() hash.Hash { return crc64.New(crc64NVMe) },
	"sha1":      sha1.New,
	"sha256":    sha256.New,
}

// crc64NVMe is the CRC-64/NVME table (reflected polynomial 0x9A6C9329AC4BC9B5).
var crc64NVMe = crc64.MakeTable(0x9A6C9329AC4BC9B5)

// checksumSizes are the raw digest sizes, to reject malformed header values early.
var checksumSizes = map[string]int{"crc32": 4, "crc32c": 4, "crc64nvme": 8, "sha1": 20, "sha256": 32}

// expected is one digest the client sent, to compare at the end of the body.
type expected struct {
	name string // "md5" or a checksumAlgs key
	h    hash.Hash
	want []byte
}

// verifyingReader streams a request body into the store while computing
// the digests the client supplied (Content-MD5, x-amz-checksum-*). When the
// last byte arrives — counted, because a store that knows the size stops
// reading without seeing EOF — it compares them, and on a mismatch returns
// an error instead of the final bytes, so the store fails the write and
// discards its temporary file: nothing unverified is ever published. It
// also remembers the first error of the underlying body (truncation, a bad
// chunk signature) so the handler reports that, not the store's wrapping.
type verifyingReader struct {
	r       io.Reader
	size    int64 // expected total, -1 if unknown
	n       int64
	exp     []expected
	err     error // first failure seen (body error or digest mismatch)
	done    bool
	drained bool
}

func (v *verifyingReader) Read(p []byte) (int, error) {
	if v.err != nil {
		return 0, v.err
	}
	if v.size >= 0 && v.n+int64(len(p)) > v.size {
		p = p[:v.size-v.n]
		if len(p) == 0 {
			if err := v.drain(); err != nil {
				return 0, err
			}
			if err := v.finish(); err != nil {
				return 0, err
			}
			return 0, io.EOF
		}
	}
	n, err := v.r.Read(p)
	v.n += int64(n)
	for _, e := range v.exp {
		e.h.Write(p[:n])
	}
	// Errors never come with data: io.ReadFull (and so the store) drops
	// an error returned together with a full buffer, and would publish.
	if err != nil && err != io.EOF {
		v.err = err
		return 0, err
	}
	if err == io.EOF && v.size >= 0 && v.n < v.size {
		v.err = ErrIncompleteBody
		return 0, v.err
	}
	if err == nil && v.size >= 0 && v.n == v.size {
		if derr := v.drain(); derr != nil {
			return 0, derr
		}
	}
	if err == io.EOF || (v.size >= 0 && v.n == v.size) {
		if ferr := v.finish(); ferr != nil {
			// Withhold the final bytes: consumers such as io.ReadFull
			// drop an error that comes with a full buffer.
			return 0, ferr
		}
	}
	return n, err
}

// drain reads the body to its end once all size bytes have arrived. A
// store that knows the size stops reading there, but an aws-chunked body
// still has its final chunk, trailer checksum and trailer signature to be
// verified, which the sigv4 reader does only when it reaches EOF; without
// this a forged trailer would go unnoticed. Bounded: a reader that keeps
// returning (0, nil) is left after a few tries.
func (v *verifyingReader) drain() error {
	if v.drained {
		return v.err
	}
	v.drained = true
	var b [1]byte
	for i := 0; i < 16; i++ {
		m, err := v.r.Read(b[:])
		if m > 0 {
			v.err = ErrInvalidRequest.withMessage("the body is longer than its declared length")
			return v.err
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			v.err = err
			return err
		}
	}
	return nil
}

func (v *verifyingReader) finish() error {
	if v.done {
		return v.err
	}
	v.done = true
	for _, e := range v.exp {
		if !bytes.Equal(e.h.Sum(nil), e.want) {
			if e.name == "md5" {
				v.err = ErrBadDigest
			} else {
				v.err = ErrBadDigest.withMessage("The " + strings.ToUpper(e.name) + " you specified did not match the calculated checksum.")
			}
			return v.err
		}
	}
	return nil
}

// newVerifyingReader reads the digest headers of r and wraps body. The
// returned map holds the verified additional checksums to keep with the
// object (upper-case algorithm -> base64), valid once the body is read.
func newVerifyingReader(body io.Reader, size int64, h http.Header) (*verifyingReader, map[string]string, error) {
	v := &verifyingReader{r: body, size: size}
	if cm := h.Get("Content-MD5"); cm != "" {
		want, err := base64.StdEncoding.DecodeString(cm)
		if err != nil || len(want) != md5.Size {
			return nil, nil, ErrInvalidDigest
		}
		v.exp = append(v.exp, expected{"md5", md5.New(), want})
	}
	var sums map[string]string
	for alg, mk := range checksumAlgs {
		val := h.Get("X-Amz-Checksum-" + alg)
		if val == "" {
			continue
		}
		want, err := base64.StdEncoding.DecodeString(val)
		if err != nil || len(want) != checksumSizes[alg] {
			return nil, nil, ErrInvalidDigest.withMessage("Value for x-amz-checksum-" + alg + " header is invalid.")
		}
		v.exp = append(v.exp, expected{alg, mk(), want})
		if sums == nil {
			sums = map[string]string{}
		}
		sums[strings.ToUpper(alg)] = val
	}
	if a := h.Get("X-Amz-Sdk-Checksum-Algorithm"); a != "" {
		if _, ok := checksumAlgs[strings.ToLower(a)]; !ok {
			return nil, nil, ErrInvalidArgument.withMessage("Unsupported checksum algorithm " + a)
		}
	}
	return v, sums, nil
}

// bodyError picks the error to report after a store write failed: the
// body's own failure (digest mismatch, truncation, bad chunk signature)
// explains the store's error better than the store's wrapping of it.
func (v *verifyingReader) bodyError(storeErr error) error {
	if v.err != nil {
		if errors.Is(v.err, io.ErrUnexpectedEOF) {
			return ErrIncompleteBody
		}
		return v.err
	}
	return storeErr
}

var _ io.Reader = (*verifyingReader)(nil)
