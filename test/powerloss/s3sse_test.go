package powerloss_test

import (
	"context"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// encryptByDefault makes SSE-S3 the bucket's default encryption.
func encryptByDefault(ctx context.Context, t testing.TB, c *awss3.Client) {
	t.Helper()
	_, err := c.PutBucketEncryption(ctx, &awss3.PutBucketEncryptionInput{Bucket: aws.String(s3Bucket),
		ServerSideEncryptionConfiguration: &types.ServerSideEncryptionConfiguration{Rules: []types.ServerSideEncryptionRule{{
			ApplyServerSideEncryptionByDefault: &types.ServerSideEncryptionByDefault{SSEAlgorithm: types.ServerSideEncryptionAes256}}}}})
	if err != nil {
		t.Fatalf("PutBucketEncryption: %v", err)
	}
}

// TestS3SSEPowerLoss is the S3 scenario with every object encrypted at
// rest (SSE-S3 by bucket default: PUT, multipart, copy): after each cut
// every key decrypts to its acknowledged (or in-flight) content, its
// SSE-S3 ETag is the plaintext's MD5, and the server key made on the first
// encrypted PUT survived the cuts with the objects sealed under it.
func TestS3SSEPowerLoss(t *testing.T) {
	r := newRig(t, ourBin(t))
	ops := allS3Ops
	ops.sse = true
	rep := s3Scenario(t, r, uint64(time.Now().UnixNano()), iterations(6), ops)
	rep.errorAll(t)
}
