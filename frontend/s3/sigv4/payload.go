package sigv4

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"hash"
	"io"
)

func hexEncode(b []byte) string { return hex.EncodeToString(b) }

// readErr maps an error of the underlying body (the client went away or
// sent fewer bytes than announced) to S3's IncompleteBody.
func readErr(err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return errIncomplete()
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return err
}

// hashReader checks a body against the hex SHA-256 the client signed. The
// check happens at EOF: the caller must not publish data before it has
// seen io.EOF (tristore's store publishes atomically only after a complete
// read, so a mismatch leaves nothing behind).
type hashReader struct {
	rc   io.ReadCloser
	h    hash.Hash
	want string
	n    int64
	size int64 // Content-Length or -1
	err  error
}

func newHashReader(rc io.ReadCloser, want string, size int64) io.ReadCloser {
	if rc == nil {
		rc = io.NopCloser(eofReader{})
	}
	return &hashReader{rc: rc, h: sha256.New(), want: want, size: size}
}

type eofReader struct{}

func (eofReader) Read([]byte) (int, error) { return 0, io.EOF }

func (h *hashReader) Read(p []byte) (int, error) {
	if h.err != nil {
		return 0, h.err
	}
	n, err := h.rc.Read(p)
	h.h.Write(p[:n])
	h.n += int64(n)
	// With a known length, finish as soon as the last byte arrives so a
	// caller that stops after Content-Length bytes (io.CopyN) still gets
	// the verdict with them.
	if err == nil && h.size >= 0 && h.n >= h.size {
		err = io.EOF
	}
	if err == io.EOF {
		switch {
		case h.size >= 0 && h.n != h.size:
			h.err = errIncomplete()
		case hexEncode(h.h.Sum(nil)) != h.want:
			h.err = errContentSHA()
		default:
			h.err = io.EOF
		}
		return n, h.err
	}
	if err != nil {
		h.err = readErr(err)
		return n, h.err
	}
	return n, nil
}

func (h *hashReader) Close() error { return h.rc.Close() }

// lengthReader only maps a short body to IncompleteBody (UNSIGNED-PAYLOAD).
type lengthReader struct {
	rc   io.ReadCloser
	want int64
	n    int64
	err  error
}

func (l *lengthReader) Read(p []byte) (int, error) {
	if l.err != nil {
		return 0, l.err
	}
	n, err := l.rc.Read(p)
	l.n += int64(n)
	if err == nil && l.want >= 0 && l.n >= l.want {
		err = io.EOF
	}
	if err == io.EOF {
		if l.want >= 0 && l.n != l.want {
			l.err = errIncomplete()
		} else {
			l.err = io.EOF
		}
		return n, l.err
	}
	if err != nil {
		l.err = readErr(err)
	}
	return n, l.err
}

func (l *lengthReader) Close() error { return l.rc.Close() }

var (
	_ io.ReadCloser = (*hashReader)(nil)
	_ io.ReadCloser = (*lengthReader)(nil)
)
