package s3

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// maxCopyObject is the largest object one CopyObject may copy.
const maxCopyObject = 5 << 30

// Copy copies an object to another key (or bucket) on the server, no bytes
// through the client: one CopyObject up to ChunkSize, above it a multipart
// upload whose parts are UploadPartCopy ranges of ChunkSize, Parallelism at
// a time (aborted if anything fails). Every request carries
// x-amz-copy-source-if-match on the ETag the HEAD saw, so a source replaced
// meanwhile is ErrChanged, never a mix.
func (e *Engine) Copy(ctx context.Context, srcBucket, srcKey, dstBucket, dstKey string) (Result, error) {
	st := newStats()
	n, err := e.copyObject(ctx, st, srcBucket, srcKey, dstBucket, dstKey, "")
	res := st.result(n)
	if err != nil {
		res.Bytes = 0
		return res, fmt.Errorf("copy s3://%s/%s to s3://%s/%s: %w", srcBucket, srcKey, dstBucket, dstKey, err)
	}
	return res, nil
}

func (e *Engine) copyObject(ctx context.Context, st *stats, srcBucket, srcKey, dstBucket, dstKey, ifMatch string) (int64, error) {
	var head *awss3.HeadObjectOutput
	err := e.do(ctx, st, func(ctx context.Context) error {
		in := &awss3.HeadObjectInput{Bucket: &srcBucket, Key: &srcKey}
		if ifMatch != "" {
			in.IfMatch = &ifMatch
		}
		var err error
		head, err = e.api.HeadObject(ctx, in)
		return err
	})
	if err != nil {
		return 0, changed(err)
	}
	size, etag, chunk := aws.ToInt64(head.ContentLength), aws.ToString(head.ETag), e.cfg.ChunkSize
	source := url.PathEscape(srcBucket) + "/" + escapeKey(srcKey)
	if size <= chunk && size <= maxCopyObject {
		err := e.do(ctx, st, func(ctx context.Context) error {
			_, err := e.api.CopyObject(ctx, &awss3.CopyObjectInput{Bucket: &dstBucket, Key: &dstKey,
				CopySource: &source, CopySourceIfMatch: &etag})
			return err
		})
		if err != nil {
			return 0, changed(err)
		}
		e.progress(size)
		return size, nil
	}
	if chunk < MinPartSize {
		return 0, fmt.Errorf("chunk size %d is under S3's minimum part size %d for a multipart copy", chunk, MinPartSize)
	}
	nparts := (size + chunk - 1) / chunk
	if nparts > maxParts {
		return 0, fmt.Errorf("%d bytes in %d-byte parts need %d parts, over S3's limit of %d: use a larger chunk size", size, chunk, nparts, maxParts)
	}
	var uploadID string
	err = e.do(ctx, st, func(ctx context.Context) error {
		out, err := e.api.CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{Bucket: &dstBucket, Key: &dstKey})
		if err == nil {
			uploadID = aws.ToString(out.UploadId)
		}
		return err
	})
	if err == nil && uploadID == "" {
		err = errors.New("CreateMultipartUpload answered without an UploadId")
	}
	if err != nil {
		return 0, err
	}
	parts := make([]types.CompletedPart, nparts)
	err = e.parallel(ctx, int(nparts), func(ctx context.Context, i int) error {
		off := int64(i) * chunk
		n := min(chunk, size-off)
		rng := fmt.Sprintf("bytes=%d-%d", off, off+n-1)
		pn := int32(i + 1)
		err := e.do(ctx, st, func(ctx context.Context) error {
			out, err := e.api.UploadPartCopy(ctx, &awss3.UploadPartCopyInput{Bucket: &dstBucket, Key: &dstKey,
				UploadId: &uploadID, PartNumber: &pn, CopySource: &source, CopySourceRange: &rng, CopySourceIfMatch: &etag})
			if err != nil {
				return err
			}
			if out.CopyPartResult == nil {
				return fmt.Errorf("part %d: UploadPartCopy answered without a result", pn)
			}
			parts[i] = types.CompletedPart{PartNumber: &pn, ETag: out.CopyPartResult.ETag}
			return nil
		})
		if err == nil {
			e.progress(n)
		}
		return err
	})
	if err == nil {
		err = e.do(ctx, st, func(ctx context.Context) error {
			_, err := e.api.CompleteMultipartUpload(ctx, &awss3.CompleteMultipartUploadInput{Bucket: &dstBucket, Key: &dstKey,
				UploadId: &uploadID, MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}})
			return err
		})
	}
	if err == nil {
		return size, nil
	}
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if aerr := e.do(actx, st, func(ctx context.Context) error {
		_, err := e.api.AbortMultipartUpload(ctx, &awss3.AbortMultipartUploadInput{Bucket: &dstBucket, Key: &dstKey, UploadId: &uploadID})
		return err
	}); aerr != nil {
		return 0, fmt.Errorf("%w (and aborting upload %s failed: %v)", changed(err), uploadID, aerr)
	}
	return 0, changed(err)
}

// escapeKey escapes a key for x-amz-copy-source, keeping its slashes.
func escapeKey(key string) string {
	return (&url.URL{Path: key}).EscapedPath()
}
