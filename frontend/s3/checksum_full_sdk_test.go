package s3

import (
	"bytes"
	"context"
	"encoding/base64"
	"io"
	"net/http"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// TestMultipartFullObjectSDK: aws-sdk-go-v2 uploads three parts with a
// CRC32, CRC32C or CRC64NVME per part under x-amz-checksum-type
// FULL_OBJECT and completes with the whole object's CRC, which the server
// combines from the part CRCs; GetObject with checksum mode ENABLED is
// then validated by the SDK itself against the bytes (the validation
// metadata names the algorithm), and HeadObject and GetObjectAttributes
// report the same value with ChecksumType FULL_OBJECT. A Complete naming a
// wrong whole-object CRC is BadDigest and leaves no object.
func TestMultipartFullObjectSDK(t *testing.T) {
	e := newSSEEnv(t) // an SDK client with a signed-in user, bucket "enc"
	ctx := context.Background()
	sizes := []int{5 << 20, 5<<20 + 7, 1234}
	total := 0
	for _, n := range sizes {
		total += n
	}
	data := pattern(total)[:total]
	for _, alg := range []types.ChecksumAlgorithm{types.ChecksumAlgorithmCrc32, types.ChecksumAlgorithmCrc32c, types.ChecksumAlgorithmCrc64nvme} {
		key := "full-" + string(alg)
		h := checksumAlgs[map[types.ChecksumAlgorithm]string{"CRC32": "crc32", "CRC32C": "crc32c", "CRC64NVME": "crc64nvme"}[alg]]()
		h.Write(data)
		full := base64.StdEncoding.EncodeToString(h.Sum(nil))
		cr, err := e.c.CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{Bucket: aws.String("enc"), Key: &key,
			ChecksumAlgorithm: alg, ChecksumType: types.ChecksumTypeFullObject})
		if err != nil {
			t.Fatal(err)
		}
		var parts []types.CompletedPart
		off := 0
		for i, n := range sizes {
			up, err := e.c.UploadPart(ctx, &awss3.UploadPartInput{Bucket: aws.String("enc"), Key: &key, UploadId: cr.UploadId,
				PartNumber: aws.Int32(int32(i + 1)), Body: bytes.NewReader(data[off : off+n]), ChecksumAlgorithm: alg})
			if err != nil {
				t.Fatalf("%s part %d: %v", alg, i+1, err)
			}
			off += n
			parts = append(parts, types.CompletedPart{PartNumber: aws.Int32(int32(i + 1)), ETag: up.ETag,
				ChecksumCRC32: up.ChecksumCRC32, ChecksumCRC32C: up.ChecksumCRC32C, ChecksumCRC64NVME: up.ChecksumCRC64NVME})
		}
		complete := func(sum string) (*awss3.CompleteMultipartUploadOutput, error) {
			in := &awss3.CompleteMultipartUploadInput{Bucket: aws.String("enc"), Key: &key, UploadId: cr.UploadId,
				MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}, ChecksumType: types.ChecksumTypeFullObject}
			switch alg {
			case types.ChecksumAlgorithmCrc32:
				in.ChecksumCRC32 = &sum
			case types.ChecksumAlgorithmCrc32c:
				in.ChecksumCRC32C = &sum
			default:
				in.ChecksumCRC64NVME = &sum
			}
			return e.c.CompleteMultipartUpload(ctx, in)
		}
		wrong := []byte(full)
		wrong[0] ^= 1 // still base64 of the right length
		if _, err := complete(string(wrong)); apiCode(err) != "BadDigest" {
			t.Fatalf("%s: Complete with a wrong CRC: %v", alg, err)
		}
		if _, err := e.c.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: aws.String("enc"), Key: &key}); httpStatus(err) != http.StatusNotFound {
			t.Fatalf("%s: object after a refused Complete: %v", alg, err)
		}
		out, err := complete(full)
		if err != nil {
			t.Fatalf("%s: Complete: %v", alg, err)
		}
		got := func(c1, c2, c3 *string) string {
			return aws.ToString(map[types.ChecksumAlgorithm]*string{"CRC32": c1, "CRC32C": c2, "CRC64NVME": c3}[alg])
		}
		if out.ChecksumType != types.ChecksumTypeFullObject || got(out.ChecksumCRC32, out.ChecksumCRC32C, out.ChecksumCRC64NVME) != full {
			t.Fatalf("%s: Complete answered %s %q, want FULL_OBJECT %s", alg, out.ChecksumType,
				got(out.ChecksumCRC32, out.ChecksumCRC32C, out.ChecksumCRC64NVME), full)
		}
		g, err := e.c.GetObject(ctx, &awss3.GetObjectInput{Bucket: aws.String("enc"), Key: &key, ChecksumMode: types.ChecksumModeEnabled})
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(g.Body) // the SDK compares the CRC at EOF and fails the read on a mismatch
		g.Body.Close()
		if err != nil || !bytes.Equal(body, data) {
			t.Fatalf("%s: GET: %d bytes, %v", alg, len(body), err)
		}
		if vm, ok := awss3.GetChecksumValidationMetadata(g.ResultMetadata); !ok || len(vm.AlgorithmsUsed) != 1 || vm.AlgorithmsUsed[0] != string(alg) {
			t.Fatalf("%s: the SDK did not validate the GET: %+v %v", alg, vm, ok)
		}
		if g.ChecksumType != types.ChecksumTypeFullObject {
			t.Fatalf("%s: GET checksum type %q", alg, g.ChecksumType)
		}
		hd, err := e.c.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: aws.String("enc"), Key: &key, ChecksumMode: types.ChecksumModeEnabled})
		if err != nil || hd.ChecksumType != types.ChecksumTypeFullObject || got(hd.ChecksumCRC32, hd.ChecksumCRC32C, hd.ChecksumCRC64NVME) != full {
			t.Fatalf("%s: HEAD %v", alg, err)
		}
		at, err := e.c.GetObjectAttributes(ctx, &awss3.GetObjectAttributesInput{Bucket: aws.String("enc"), Key: &key,
			ObjectAttributes: []types.ObjectAttributes{types.ObjectAttributesChecksum, types.ObjectAttributesObjectSize}})
		if err != nil || at.Checksum == nil || at.Checksum.ChecksumType != types.ChecksumTypeFullObject ||
			got(at.Checksum.ChecksumCRC32, at.Checksum.ChecksumCRC32C, at.Checksum.ChecksumCRC64NVME) != full {
			t.Fatalf("%s: GetObjectAttributes %+v %v", alg, at, err)
		}
	}
}
