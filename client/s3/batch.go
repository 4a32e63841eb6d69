package s3

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
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
// or failed; one file's failure does not stop the others. A cancelled ctx
// stops starting new files; those count as failed.
func (e *Engine) Batch(ctx context.Context, items []Item, o BatchOptions) BatchResult {
	files := o.Files
	if files <= 0 {
		files = e.cfg.Parallelism
	}
	total := newStats()
	var (
		mu     sync.Mutex
		bytes  int64
		res    = BatchResult{Files: len(items)}
		next   atomic.Int64
		wg     sync.WaitGroup
		failed = func(msg string) {
			res.Failed++
			if len(res.Errors) < maxBatchErrors {
				res.Errors = append(res.Errors, msg)
			}
		}
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
				if err := ctx.Err(); err != nil {
					mu.Lock()
					failed(fmt.Sprintf("%s: not started: %v", describe(it), err))
					mu.Unlock()
					continue
				}
				st := newStats()
				var (
					n   int64
					err error
				)
				if it.Upload {
					fo := it.FileOptions
					fo.Resume = fo.Resume || o.Resume
					if fo.StateDir == "" {
						fo.StateDir = o.StateDir
					}
					n, err = e.uploadFile(ctx, st, it.Bucket, it.Key, it.Path, fo)
					if err != nil {
						err = fmt.Errorf("upload %s to s3://%s/%s: %w", it.Path, it.Bucket, it.Key, err)
					}
				} else {
					n, err = e.downloadFile(ctx, st, it.Bucket, it.Key, it.Path, it.FileOptions)
					if err != nil {
						err = fmt.Errorf("download s3://%s/%s to %s: %w", it.Bucket, it.Key, it.Path, err)
					}
				}
				if err != nil {
					n = 0
				}
				total.merge(st)
				ir := ItemResult{Item: it, Result: st.result(n), Err: err}
				mu.Lock()
				bytes += n
				if err != nil {
					failed(err.Error())
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
	if res.Failed > len(res.Errors) {
		res.Errors = append(res.Errors, fmt.Sprintf("... and %d more failures", res.Failed-len(res.Errors)))
	}
	return res
}

func describe(it Item) string {
	if it.Upload {
		return fmt.Sprintf("upload %s to s3://%s/%s", it.Path, it.Bucket, it.Key)
	}
	return fmt.Sprintf("download s3://%s/%s to %s", it.Bucket, it.Key, it.Path)
}
