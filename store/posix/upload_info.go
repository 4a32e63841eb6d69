package posix

import (
	"context"

	"github.com/tristore/tristore/internal/sse"
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

// plainParts are the parts as their plaintext: for an upload encrypted at
// rest by the S3 front end (meta.Encryption set) each part is sealed, and
// its plaintext size follows from its stored size (internal/sse). FULL_OBJECT
// CRCs are combined over the plaintext lengths, which the clients' CRCs
// are of.
func plainParts(meta store.ObjectMeta, parts []store.PartInfo) []store.PartInfo {
	if meta.Encryption == nil {
		return parts
	}
	out := make([]store.PartInfo, len(parts))
	for i, p := range parts {
		if n, ok := sse.PlainSize(p.Size); ok {
			p.Size = n
		}
		out[i] = p
	}
	return out
}
