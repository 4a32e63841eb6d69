package s3

import (
	"context"
	"fmt"
	"io"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
)

// Stream writes bucket/key to w in order (stdout, a pipe): ranged GETs of
// ChunkSize run up to Parallelism ahead and are written as each next one
// completes. Buffers are taken in chunk order, so the chunk w waits for
// always holds one and the pool cannot deadlock. Every GET carries If-Match
// on the ETag of the first HEAD. A failure after some bytes were written
// cannot be undone on a stream: the error says how far it got.
//
//	HEAD ─► [get buf i] ─► GET range i (goroutine) ─► slot i ─► in order ─► w
func (e *Engine) Stream(ctx context.Context, bucket, key string, w io.Writer) (Result, error) {
	st := newStats()
	n, err := e.stream(ctx, st, bucket, key, w)
	res := st.result(n)
	if err != nil {
		return res, fmt.Errorf("stream s3://%s/%s (%d bytes written): %w", bucket, key, n, err)
	}
	return res, nil
}

type slot struct {
	buf  []byte
	b    []byte
	err  error
	done chan struct{}
}

func (e *Engine) stream(ctx context.Context, st *stats, bucket, key string, w io.Writer) (int64, error) {
	var head *awss3.HeadObjectOutput
	err := e.do(ctx, st, func(ctx context.Context) error {
		var err error
		head, err = e.api.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: &bucket, Key: &key})
		return err
	})
	if err != nil {
		return 0, err
	}
	size, etag, chunk := aws.ToInt64(head.ContentLength), head.ETag, e.cfg.ChunkSize
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	slots := make(chan *slot, e.cfg.Parallelism)
	go func() {
		defer close(slots)
		for off := int64(0); off < size; off += chunk {
			buf, err := e.pool.get(ctx)
			if err != nil {
				return
			}
			n := min(chunk, size-off)
			s := &slot{buf: buf, b: buf[:n], done: make(chan struct{})}
			select {
			case slots <- s:
			case <-ctx.Done():
				e.pool.put(buf)
				return
			}
			go func(off int64) {
				defer close(s.done)
				rng := fmt.Sprintf("bytes=%d-%d", off, off+n-1)
				s.err = e.do(ctx, st, func(ctx context.Context) error {
					out, err := e.api.GetObject(ctx, &awss3.GetObjectInput{Bucket: &bucket, Key: &key, IfMatch: etag, Range: &rng})
					if err != nil {
						return err
					}
					defer out.Body.Close()
					return readBody(out.Body, s.b, aws.ToInt64(out.ContentLength))
				})
			}(off)
		}
	}()
	var written int64
	var firstErr error
	for s := range slots {
		<-s.done
		if firstErr == nil && s.err != nil {
			firstErr = s.err
			cancel()
		}
		if firstErr == nil {
			if _, err := w.Write(s.b); err != nil {
				firstErr = fmt.Errorf("write: %w", err)
				cancel()
			} else {
				written += int64(len(s.b))
				e.progress(int64(len(s.b)))
			}
		}
		e.pool.put(s.buf)
	}
	if firstErr == nil && written != size {
		firstErr = ctx.Err()
		if firstErr == nil {
			firstErr = fmt.Errorf("wrote %d of %d bytes", written, size)
		}
	}
	return written, firstErr
}
