package s3

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// FileOptions tune UploadFile and DownloadFile.
type FileOptions struct {
	// Resume (uploads): continue a matching earlier multipart upload of
	// this key, and leave this one resumable instead of aborting it when
	// it fails (a changed source file is still aborted).
	Resume bool
	// StateDir (uploads with Resume): where the upload IDs of unfinished
	// uploads are recorded; empty: found by listing only.
	StateDir string
	// IfMatch (downloads): the ETag the object must still have, e.g. from
	// the listing that chose it; a replaced object is ErrChanged.
	IfMatch string
	// MTime (downloads): set as the local file's modification time, so a
	// later size+mtime comparison (sync) sees the file as current.
	MTime time.Time
	// ListedSize (downloads, when SizeListed): the object's size from a
	// listing. An object of up to ChunkSize is then fetched with one GET
	// and no HEAD; a different size is ErrChanged.
	ListedSize int64
	SizeListed bool
}

// UploadFile uploads the local file path as bucket/key. The file's size
// and mtime are checked again after every byte was read and before the
// object is published; a file that changed meanwhile is aborted (never
// left resumable) with an error naming it.
func (e *Engine) UploadFile(ctx context.Context, bucket, key, path string, o FileOptions) (Result, error) {
	st := newStats()
	size, err := e.uploadFile(ctx, st, bucket, key, path, o)
	res := st.result(size)
	if err != nil {
		res.Bytes = 0
		return res, fmt.Errorf("upload %s to s3://%s/%s: %w", path, bucket, key, err)
	}
	return res, nil
}

func (e *Engine) uploadFile(ctx context.Context, st *stats, bucket, key, path string, o FileOptions) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, err
	}
	if !fi.Mode().IsRegular() {
		return 0, fmt.Errorf("%s: not a regular file", path)
	}
	h := uploadHooks{check: func() error {
		now, err := f.Stat()
		if err != nil {
			return err
		}
		if now.Size() != fi.Size() || !now.ModTime().Equal(fi.ModTime()) {
			return fmt.Errorf("%s changed during the upload (size %d -> %d, mtime %s -> %s); nothing was published: %w",
				path, fi.Size(), now.Size(), fi.ModTime().Format(time.RFC3339Nano), now.ModTime().Format(time.RFC3339Nano), errSourceChanged)
		}
		return nil
	}}
	if o.Resume {
		abs, err := filepath.Abs(path)
		if err != nil {
			return 0, err
		}
		h.resume = newResumer(o.StateDir, e.cfg.Endpoint, bucket, key, abs, fi.Size(), fi.ModTime())
	}
	err = e.upload(ctx, st, bucket, key, f, fi.Size(), h)
	if h.resume != nil {
		st.addReused(h.resume.reusedN.Load())
	}
	return fi.Size(), err
}

// DownloadFile downloads bucket/key to the local path. The bytes go to a
// temporary file next to path (".name.tristore-*"), renamed over path only
// when all arrived and checked; on any failure (a full disk included) the
// temporary file is removed and path is untouched. Missing parent
// directories are created.
func (e *Engine) DownloadFile(ctx context.Context, bucket, key, path string, o FileOptions) (Result, error) {
	st := newStats()
	size, err := e.downloadFile(ctx, st, bucket, key, path, o)
	res := st.result(size)
	if err != nil {
		res.Bytes = 0
		return res, fmt.Errorf("download s3://%s/%s to %s: %w", bucket, key, path, err)
	}
	return res, nil
}

func (e *Engine) downloadFile(ctx context.Context, st *stats, bucket, key, path string, o FileOptions) (int64, error) {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return 0, err
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tristore-*")
	if err != nil {
		return 0, err
	}
	ok := false
	defer func() {
		if !ok {
			tmp.Close()
			os.Remove(tmp.Name())
		}
	}()
	listed := int64(-1)
	if o.SizeListed {
		listed = o.ListedSize
	}
	size, err := e.download(ctx, st, bucket, key, tmp, o.IfMatch, listed)
	if err != nil {
		return 0, err
	}
	// WriteAt never shrinks the file, and a fresh temporary file holds
	// exactly what was written.
	if err := tmp.Close(); err != nil {
		return 0, err
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return 0, err
	}
	if !o.MTime.IsZero() {
		if err := os.Chtimes(tmp.Name(), o.MTime, o.MTime); err != nil {
			return 0, err
		}
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return 0, err
	}
	ok = true
	return size, nil
}
