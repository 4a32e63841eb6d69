package posix

import (
	"context"

	"github.com/tristore/tristore/store"
)

// UploadInfo returns one upload's metadata as CreateMultipart was given
// it, reading only its info file (ListParts also lists every part). The S3
// front end asks for each UploadPart of an upload that may be encrypted
// at rest, to find its envelope.
func (b *Backend) UploadInfo(ctx context.Context, bucket, key, uploadID string) (store.Upload, error) {
	u, err := b.loadUpload(bucket, key, uploadID)
	if err != nil {
		return store.Upload{}, err
	}
	return store.Upload{Bucket: u.Bucket, Key: u.Key, UploadID: uploadID, Initiated: u.Initiated, Meta: u.Meta}, nil
}
