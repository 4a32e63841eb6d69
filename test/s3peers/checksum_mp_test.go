package s3peers

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// TestSDKMultipartCompositeChecksum: aws-sdk-go-v2 uploads parts with
// CRC32 (the SDK computes and sends them) and gets the COMPOSITE checksum
// back from CompleteMultipartUpload and from HeadObject/GetObject with
// ChecksumMode ENABLED.
func TestSDKMultipartCompositeChecksum(t *testing.T) {
	srv := startServer(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := sdkClient(srv.endpoint, rootAK, rootSK)
	bkt, key := aws.String("sdk-mpcs"), aws.String("obj")
	if _, err := c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: bkt}); err != nil {
		t.Fatal(err)
	}
	mp, err := c.CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{Bucket: bkt, Key: key, ChecksumAlgorithm: types.ChecksumAlgorithmCrc32})
	if err != nil {
		t.Fatal(err)
	}
	var done []types.CompletedPart
	for i, p := range [][]byte{randBytes(t, 5<<20), randBytes(t, 1000)} {
		out, err := c.UploadPart(ctx, &awss3.UploadPartInput{Bucket: bkt, Key: key, UploadId: mp.UploadId, PartNumber: aws.Int32(int32(i + 1)),
			Body: bytes.NewReader(p), ChecksumAlgorithm: types.ChecksumAlgorithmCrc32})
		if err != nil {
			t.Fatal(err)
		}
		if aws.ToString(out.ChecksumCRC32) == "" {
			t.Fatalf("part %d: no CRC32 echoed", i+1)
		}
		done = append(done, types.CompletedPart{PartNumber: aws.Int32(int32(i + 1)), ETag: out.ETag, ChecksumCRC32: out.ChecksumCRC32})
	}
	cr, err := c.CompleteMultipartUpload(ctx, &awss3.CompleteMultipartUploadInput{Bucket: bkt, Key: key, UploadId: mp.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: done}})
	if err != nil {
		t.Fatal(err)
	}
	sum := aws.ToString(cr.ChecksumCRC32)
	if !strings.HasSuffix(sum, "-2") || cr.ChecksumType != types.ChecksumTypeComposite {
		t.Fatalf("CompleteMultipartUpload checksum %q type %q, want ...-2 COMPOSITE", sum, cr.ChecksumType)
	}
	h, err := c.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: bkt, Key: key, ChecksumMode: types.ChecksumModeEnabled})
	if err != nil || aws.ToString(h.ChecksumCRC32) != sum || h.ChecksumType != types.ChecksumTypeComposite {
		t.Fatalf("HeadObject checksum %q type %q err %v, want %s COMPOSITE", aws.ToString(h.ChecksumCRC32), h.ChecksumType, err, sum)
	}
	g, err := c.GetObject(ctx, &awss3.GetObjectInput{Bucket: bkt, Key: key, ChecksumMode: types.ChecksumModeEnabled})
	if err != nil {
		t.Fatal(err)
	}
	g.Body.Close()
	if aws.ToString(g.ChecksumCRC32) != sum {
		t.Fatalf("GetObject checksum %q, want %s", aws.ToString(g.ChecksumCRC32), sum)
	}
	at, err := c.GetObjectAttributes(ctx, &awss3.GetObjectAttributesInput{Bucket: bkt, Key: key, ObjectAttributes: []types.ObjectAttributes{
		types.ObjectAttributesEtag, types.ObjectAttributesChecksum, types.ObjectAttributesObjectParts, types.ObjectAttributesObjectSize}})
	if err != nil {
		t.Fatal(err)
	}
	// GetObjectAttributes gives the COMPOSITE value without "-N", and the
	// parts' checksums, as S3.
	if at.Checksum == nil || aws.ToString(at.Checksum.ChecksumCRC32) != strings.TrimSuffix(sum, "-2") || at.ObjectParts == nil || aws.ToInt32(at.ObjectParts.TotalPartsCount) != 2 ||
		len(at.ObjectParts.Parts) != 2 || aws.ToString(at.ObjectParts.Parts[0].ChecksumCRC32) != aws.ToString(done[0].ChecksumCRC32) ||
		aws.ToInt64(at.ObjectSize) != 5<<20+1000 || aws.ToString(at.ETag) == "" {
		t.Fatalf("GetObjectAttributes: %+v checksum %+v parts %+v", at, at.Checksum, at.ObjectParts)
	}
}
