package s3

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/aws/smithy-go"
)

// Batches: many files in flight over one engine
//
// Seed 001 §4.1.3: small files are latency-bound, so the way to use a link
// is to keep many of them in flight. A batch runs its files on Files
// goroutines that share the engine's connection pool and its buffer pool:
// a file of up to ChunkSize holds one buffer for one request, a larger one
// fans out into parallel parts that draw from the same pool, so the memory
// bound (ChunkSize × Parallelism) holds for the whole batch.
//
//	items ──► [worker 1..Files] ──► UploadFile / DownloadFile ──► shared pool ──► HTTP pool

// maxBatchErrors bounds the error messages a BatchResult keeps.
const maxBatchErrors = 100

// Item is one file of a batch.
type Item struct {
	Upload bool   // true: Path -> s3://Bucket/Key; false: s3://Bucket/Key -> Path
	Bucket string // bucket
	Key    string // object key
	Path   string // local file
	Size   int64  // size as listed (informational)
	// SrcBucket and SrcKey, when SrcKey is set, make the item a copy on
	// the server from s3://SrcBucket/SrcKey to s3://Bucket/Key (Path and
	// Upload unused; IfMatch applies to the source).
	SrcBucket, SrcKey string
	// IfMatch and MTime (downloads), Resume and StateDir (uploads): see
	// FileOptions. BatchOptions.Resume/StateDir fill the upload ones.
	FileOptions
}

// ItemResult is one finished file.
type ItemResult struct {
	Item   Item
	Result Result
	Err    error
}

// BatchOptions tune Batch.
type BatchOptions struct {
	// Files in flight (default: the engine's Parallelism).
	Files int
	// Resume and StateDir apply to every upload (see FileOptions).
	Resume   bool
	StateDir string
	// OnDone, when set, is called once per file as it finishes, never
	// concurrently.
	OnDone func(ItemResult)
	// Tally, when set, also counts the batch's requests, and the result
	// then covers everything the tally saw since it started (the listing
	// that chose the files, say), wall time included.
	Tally *Tally
}

// BatchResult summarises a batch: the embedded Result counts every file's
// bytes and every request (latency percentiles over all of them), the wall
// time is the batch's.
type BatchResult struct {
	Result
	Files  int      `json:"files"`            // files attempted
	Failed int      `json:"failed"`           // files that failed (or never started)
	Errors []string `json:"errors,omitempty"` // the first failures, each naming its file
}

// Batch moves items, Files at a time, and returns once all have finished
// or failed; one file's failure does not stop the others. An error that
// would fail every file alike (the bucket does not exist, the keys are
// wrong, nothing listens at the endpoint: see batchFatal) stops the batch
// instead of repeating itself once per file; so does a cancelled ctx. The
// files never started, and those in flight that the stop cut off, count as
// failed under one message.
func (e *Engine) Batch(ctx context.Context, items []Item, o BatchOptions) BatchResult {
	files := o.Files
	if files <= 0 {
		files = e.cfg.Parallelism
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	total := newStats()
	if o.Tally != nil {
		total = o.Tally.st
	}
	var (
		mu         sync.Mutex
		bytes      int64
		res        = BatchResult{Files: len(items)}
		next       atomic.Int64
		wg         sync.WaitGroup
		notStarted int
	)
	for range min(files, len(items)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= len(items) {
					return
				}
				it := items[i]
				if ctx.Err() != nil {
					mu.Lock()
					notStarted++
					mu.Unlock()
					continue
				}
				st := newStats()
				var (
					n   int64
					err error
				)
				if it.SrcKey != "" {
					n, err = e.copyObject(ctx, st, it.SrcBucket, it.SrcKey, it.Bucket, it.Key, it.IfMatch)
				} else if it.Upload {
					fo := it.FileOptions
					fo.Resume = fo.Resume || o.Resume
					if fo.StateDir == "" {
						fo.StateDir = o.StateDir
					}
					n, err = e.uploadFile(ctx, st, it.Bucket, it.Key, it.Path, fo)
				} else {
					n, err = e.downloadFile(ctx, st, it.Bucket, it.Key, it.Path, it.FileOptions)
				}
				// A file cut off by the batch's stop (another file's
				// fatal error, or ctx) is counted with those not started,
				// not listed once per file in flight as "context canceled".
				stopped := false
				if err != nil {
					if batchFatal(err) {
						cancel(err)
					} else if ctx.Err() != nil && errors.Is(err, context.Canceled) {
						stopped = true
					}
					err = fmt.Errorf("%s: %w", describe(it), err)
					n = 0
				}
				total.merge(st)
				ir := ItemResult{Item: it, Result: st.result(n), Err: err}
				mu.Lock()
				bytes += n
				switch {
				case stopped:
					notStarted++
				case err != nil:
					res.Failed++
					if len(res.Errors) < maxBatchErrors {
						res.Errors = append(res.Errors, err.Error())
					}
				}
				if o.OnDone != nil {
					o.OnDone(ir)
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	res.Result = total.result(bytes)
	if listed := len(res.Errors); res.Failed > listed {
		res.Errors = append(res.Errors, fmt.Sprintf("... and %d more failures", res.Failed-listed))
	}
	if notStarted > 0 {
		res.Failed += notStarted
		res.Errors = append(res.Errors, fmt.Sprintf("%d files stopped or not started: %v", notStarted, context.Cause(ctx)))
	}
	return res
}

// batchFatal says whether err would fail every other file of a batch the
// same way, so going on would only repeat it.
func batchFatal(err error) bool {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		switch ae.ErrorCode() {
		case "NoSuchBucket", "InvalidAccessKeyId", "SignatureDoesNotMatch", "InvalidBucketName", "AccountProblem":
			return true
		}
	}
	return errors.Is(err, syscall.ECONNREFUSED)
}

func describe(it Item) string {
	if it.SrcKey != "" {
		return fmt.Sprintf("copy s3://%s/%s to s3://%s/%s", it.SrcBucket, it.SrcKey, it.Bucket, it.Key)
	}
	if it.Upload {
		return fmt.Sprintf("upload %s to s3://%s/%s", it.Path, it.Bucket, it.Key)
	}
	return fmt.Sprintf("download s3://%s/%s to %s", it.Bucket, it.Key, it.Path)
}
