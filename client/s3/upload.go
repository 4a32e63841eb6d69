package s3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// Upload stores size bytes of r as bucket/key: one PUT up to ChunkSize,
// else a parallel multipart upload that is aborted if anything fails.
func (e *Engine) Upload(ctx context.Context, bucket, key string, r io.ReaderAt, size int64) (Result, error) {
	st := newStats()
	err := e.upload(ctx, st, bucket, key, r, size, uploadHooks{})
	res := st.result(size)
	if err != nil {
		res.Bytes = 0
		return res, fmt.Errorf("upload s3://%s/%s: %w", bucket, key, err)
	}
	return res, nil
}

// uploadHooks are what UploadFile adds to a plain upload.
type uploadHooks struct {
	// check runs after every byte was read and before the object is
	// published (PUT sent / Complete sent); an error aborts the upload
	// even when it would otherwise be left resumable (a changed source
	// makes the uploaded parts worthless).
	check func() error
	// resume, when set, continues a matching earlier multipart upload and
	// leaves this one resumable (not aborted) when it fails.
	resume *resumer
}

// errSourceChanged marks a check failure: never resumable.
var errSourceChanged = errors.New("source changed during the upload")

func (e *Engine) upload(ctx context.Context, st *stats, bucket, key string, r io.ReaderAt, size int64, h uploadHooks) error {
	if size < 0 {
		return fmt.Errorf("negative size %d", size)
	}
	chunk := e.cfg.ChunkSize
	if size <= chunk {
		buf, err := e.pool.get(ctx)
		if err != nil {
			return err
		}
		defer e.pool.put(buf)
		b := buf[:size]
		if err := readFull(r, b, 0); err != nil {
			return err
		}
		if h.check != nil {
			if err := h.check(); err != nil {
				return err
			}
		}
		sum := crcB64(crc32.Checksum(b, castagnoli))
		err = e.do(ctx, st, func(ctx context.Context) error {
			_, err := e.api.PutObject(ctx, &awss3.PutObjectInput{
				Bucket: &bucket, Key: &key, Body: bytes.NewReader(b), ContentLength: aws.Int64(size),
				ChecksumAlgorithm: types.ChecksumAlgorithmCrc32c, ChecksumCRC32C: &sum,
			})
			return err
		})
		if err == nil {
			e.progress(size)
		}
		return err
	}
	if chunk < MinPartSize {
		return fmt.Errorf("chunk size %d is under S3's minimum part size %d for a multipart upload", chunk, MinPartSize)
	}
	nparts := (size + chunk - 1) / chunk
	if nparts > maxParts {
		return fmt.Errorf("%d bytes in %d-byte parts need %d parts, over S3's limit of %d: use a larger chunk size", size, chunk, nparts, maxParts)
	}
	var (
		uploadID string
		have     map[int32]types.Part // parts an earlier attempt left
	)
	if h.resume != nil {
		uploadID, have = h.resume.find(ctx, e, st, bucket, key, size, chunk)
	}
	if uploadID == "" {
		err := e.do(ctx, st, func(ctx context.Context) error {
			out, err := e.api.CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{
				Bucket: &bucket, Key: &key, ChecksumAlgorithm: types.ChecksumAlgorithmCrc32c,
			})
			if err == nil {
				uploadID = aws.ToString(out.UploadId)
			}
			return err
		})
		if err == nil && uploadID == "" {
			err = errors.New("CreateMultipartUpload answered without an UploadId")
		}
		if err != nil {
			return err
		}
		if h.resume != nil {
			h.resume.started(uploadID, size, chunk)
		}
	}
	parts := make([]types.CompletedPart, nparts)
	err := e.parallel(ctx, int(nparts), func(ctx context.Context, i int) error {
		off := int64(i) * chunk
		n := min(chunk, size-off)
		buf, err := e.pool.get(ctx)
		if err != nil {
			return err
		}
		defer e.pool.put(buf)
		b := buf[:n]
		if err := readFull(r, b, off); err != nil {
			return err
		}
		sum := crcB64(crc32.Checksum(b, castagnoli))
		pn := int32(i + 1)
		if p, ok := have[pn]; ok && partMatches(p, b, sum) {
			// Already on the server with exactly these bytes.
			parts[i] = types.CompletedPart{PartNumber: &pn, ETag: p.ETag, ChecksumCRC32C: &sum}
			if h.resume != nil {
				h.resume.reused(n)
			}
			e.progress(n)
			return nil
		}
		err = e.do(ctx, st, func(ctx context.Context) error {
			out, err := e.api.UploadPart(ctx, &awss3.UploadPartInput{
				Bucket: &bucket, Key: &key, UploadId: &uploadID, PartNumber: &pn,
				Body: bytes.NewReader(b), ContentLength: aws.Int64(n),
				ChecksumAlgorithm: types.ChecksumAlgorithmCrc32c, ChecksumCRC32C: &sum,
			})
			if err != nil {
				return err
			}
			if got := aws.ToString(out.ChecksumCRC32C); got != "" && got != sum {
				return fmt.Errorf("part %d: server stored CRC32C %s, sent %s: %w", pn, got, sum, ErrChecksum)
			}
			parts[i] = types.CompletedPart{PartNumber: &pn, ETag: out.ETag, ChecksumCRC32C: &sum}
			return nil
		})
		if err == nil {
			e.progress(n)
		}
		return err
	})
	if err == nil && h.check != nil {
		err = h.check()
	}
	if err == nil {
		err = e.do(ctx, st, func(ctx context.Context) error {
			_, err := e.api.CompleteMultipartUpload(ctx, &awss3.CompleteMultipartUploadInput{
				Bucket: &bucket, Key: &key, UploadId: &uploadID,
				MultipartUpload: &types.CompletedMultipartUpload{Parts: parts},
			})
			return err
		})
	}
	if err == nil {
		if h.resume != nil {
			h.resume.finished()
		}
		return nil
	}
	if h.resume != nil && !errors.Is(err, errSourceChanged) {
		// Left for the next run to continue; the parts stay on the server.
		return fmt.Errorf("%w (multipart upload %s left to resume: run the same upload again)", err, uploadID)
	}
	// Nothing partial stays behind: abort even when ctx is cancelled.
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	aerr := e.do(actx, st, func(ctx context.Context) error {
		_, err := e.api.AbortMultipartUpload(ctx, &awss3.AbortMultipartUploadInput{
			Bucket: &bucket, Key: &key, UploadId: &uploadID,
		})
		return err
	})
	if h.resume != nil {
		h.resume.finished()
	}
	if aerr != nil {
		return fmt.Errorf("%w (and aborting upload %s failed: %v)", err, uploadID, aerr)
	}
	return err
}

// readFull reads len(b) bytes at off; a short source is an error (the file
// shrank under us), not a silently short object.
func readFull(r io.ReaderAt, b []byte, off int64) error {
	n, err := r.ReadAt(b, off)
	if n == len(b) {
		return nil
	}
	if err == nil || errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF
	}
	return fmt.Errorf("read source at %d: got %d of %d bytes: %w", off, n, len(b), err)
}
