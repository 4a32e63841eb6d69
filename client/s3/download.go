package s3

import (
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"net/http"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// Download writes bucket/key to w with parallel ranged GETs of ChunkSize
// (and, at the tail, halves of the ranges left: see rangeDownload).
// Every GET carries If-Match on the ETag seen first, and every part's
// length is checked, so an object replaced mid-download is an error, not
// a mix; a single-GET object with a stored full-object CRC32C/CRC32 has
// its bytes compared against it.
func (e *Engine) Download(ctx context.Context, bucket, key string, w io.WriterAt) (Result, error) {
	st := newStats()
	size, err := e.download(ctx, st, bucket, key, w, "", -1)
	res := st.result(size)
	if err != nil {
		res.Bytes = 0
		return res, fmt.Errorf("download s3://%s/%s: %w", bucket, key, err)
	}
	return res, nil
}

// download writes the object to w; ifMatch, when set, is the ETag the
// object must still have (seen in a listing), so an object replaced since
// is ErrChanged before a byte is fetched. listed is the size a listing
// gave (-1: unknown); an object listed at up to ChunkSize is fetched with
// one GET and no HEAD, which halves the requests of a small-file batch.
func (e *Engine) download(ctx context.Context, st *stats, bucket, key string, w io.WriterAt, ifMatch string, listed int64) (int64, error) {
	var (
		size int64
		err  error
	)
	if listed >= 0 && listed <= e.cfg.ChunkSize {
		var im *string
		if ifMatch != "" {
			im = &ifMatch
		}
		size, err = listed, e.getWhole(ctx, st, bucket, key, w, im, listed)
	} else {
		size, err = e.download1(ctx, st, bucket, key, w, ifMatch)
	}
	return size, changed(err)
}

// changed marks a failed If-Match (412 Precondition Failed) as ErrChanged.
func changed(err error) error {
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) && re.HTTPStatusCode() == http.StatusPreconditionFailed {
		return fmt.Errorf("%w: %w", ErrChanged, err)
	}
	return err
}

func (e *Engine) download1(ctx context.Context, st *stats, bucket, key string, w io.WriterAt, ifMatch string) (int64, error) {
	var head *awss3.HeadObjectOutput
	err := e.do(ctx, st, func(ctx context.Context) error {
		var err error
		in := &awss3.HeadObjectInput{Bucket: &bucket, Key: &key, ChecksumMode: types.ChecksumModeEnabled}
		if ifMatch != "" {
			in.IfMatch = &ifMatch
		}
		head, err = e.api.HeadObject(ctx, in)
		return err
	})
	if err != nil {
		return 0, err
	}
	size := aws.ToInt64(head.ContentLength)
	etag := head.ETag
	chunk := e.cfg.ChunkSize
	if size == 0 {
		return 0, nil
	}
	if size <= chunk {
		return size, e.getWhole(ctx, st, bucket, key, w, etag, size)
	}
	err = e.rangeDownload(ctx, st, bucket, key, etag, size, chunk, w)
	if err != nil {
		return 0, err
	}
	return size, nil
}

// getWhole fetches an object of size bytes (at most ChunkSize) with one
// GET, under If-Match when ifMatch is set, and compares it with its stored
// full-object checksum. A length other than size means the object is not
// the one expected: ErrChanged, not retried.
func (e *Engine) getWhole(ctx context.Context, st *stats, bucket, key string, w io.WriterAt, ifMatch *string, size int64) error {
	buf, err := e.pool.get(ctx)
	if err != nil {
		return err
	}
	defer e.pool.put(buf)
	b := buf[:size]
	err = e.do(ctx, st, func(ctx context.Context) error {
		out, err := e.api.GetObject(ctx, &awss3.GetObjectInput{Bucket: &bucket, Key: &key, IfMatch: ifMatch, ChecksumMode: types.ChecksumModeEnabled})
		if err != nil {
			return err
		}
		defer out.Body.Close()
		if n := aws.ToInt64(out.ContentLength); n != size {
			return fmt.Errorf("object has %d bytes, expected %d: %w", n, size, ErrChanged)
		}
		if err := readBody(out.Body, b, size); err != nil {
			return err
		}
		return verifyFull(out, b)
	})
	if err != nil {
		return err
	}
	if _, err := w.WriteAt(b, 0); err != nil {
		return fmt.Errorf("write local: %w", err)
	}
	e.progress(size)
	return nil
}

// readBody fills b from body, which must hold exactly len(b) bytes.
func readBody(body io.Reader, b []byte, contentLength int64) error {
	if contentLength != int64(len(b)) {
		return fmt.Errorf("response has %d bytes, want %d: %w", contentLength, len(b), ErrChecksum)
	}
	if _, err := io.ReadFull(body, b); err != nil {
		return err
	}
	var one [1]byte
	if n, _ := body.Read(one[:]); n != 0 {
		return fmt.Errorf("response longer than %d bytes: %w", len(b), ErrChecksum)
	}
	return nil
}

// verifyFull compares a whole object's bytes with its stored full-object
// checksum, when the server returned one (composite, per-part checksums
// of multipart objects cannot be compared against one GET's bytes).
func verifyFull(out *awss3.GetObjectOutput, b []byte) error {
	if out.ChecksumType == types.ChecksumTypeComposite {
		return nil
	}
	check := func(name, want string, tab *crc32.Table) error {
		if want == "" || strings.Contains(want, "-") {
			return nil
		}
		if got := crcB64(crc32.Checksum(b, tab)); got != want {
			return fmt.Errorf("%s of received bytes %s, stored %s: %w", name, got, want, ErrChecksum)
		}
		return nil
	}
	if err := check("CRC32C", aws.ToString(out.ChecksumCRC32C), castagnoli); err != nil {
		return err
	}
	return check("CRC32", aws.ToString(out.ChecksumCRC32), crc32.IEEETable)
}
