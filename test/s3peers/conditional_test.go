package s3peers

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/tristore/tristore/iam"
)

// TestAdminPolicyDenySDK: with real SigV4 and iam users, a bucket policy
// that denies the admin (root) GetObject binds it, while root can still
// delete the policy and then read again.
func TestAdminPolicyDenySDK(t *testing.T) {
	srv := startServer(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	alice, aliceSK, err := srv.users.Add("alice", false)
	if err != nil {
		t.Fatal(err)
	}
	a := sdkClient(srv.endpoint, alice.AccessKey, aliceSK)
	root := sdkClient(srv.endpoint, rootAK, rootSK)
	bkt := aws.String("alice-denies")
	if _, err := a.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: bkt}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.PutObject(ctx, &awss3.PutObjectInput{Bucket: bkt, Key: aws.String("doc"), Body: strings.NewReader("alice's")}); err != nil {
		t.Fatal(err)
	}
	get := func(c *awss3.Client) error {
		o, err := c.GetObject(ctx, &awss3.GetObjectInput{Bucket: bkt, Key: aws.String("doc")})
		if err == nil {
			io.Copy(io.Discard, o.Body)
			o.Body.Close()
		}
		return err
	}
	if err := get(root); err != nil {
		t.Fatalf("admin GET without a policy: %v", err)
	}
	pol := fmt.Sprintf(`{"Version":"2012-10-17","Statement":[{"Effect":"Deny","Principal":{"AWS":[%q]},"Action":"s3:GetObject","Resource":"arn:aws:s3:::alice-denies/*"}]}`, iam.RootName)
	if _, err := a.PutBucketPolicy(ctx, &awss3.PutBucketPolicyInput{Bucket: bkt, Policy: aws.String(pol)}); err != nil {
		t.Fatal(err)
	}
	if err := get(root); errCode(err) != "AccessDenied" {
		t.Fatalf("admin GET denied by policy: got %v, want AccessDenied", err)
	}
	if err := get(a); err != nil {
		t.Fatalf("owner GET: %v", err)
	}
	if _, err := root.ListObjectsV2(ctx, &awss3.ListObjectsV2Input{Bucket: bkt}); err != nil {
		t.Fatalf("admin list (not denied): %v", err)
	}
	if _, err := root.DeleteBucketPolicy(ctx, &awss3.DeleteBucketPolicyInput{Bucket: bkt}); err != nil {
		t.Fatalf("admin DeleteBucketPolicy: %v", err)
	}
	if err := get(root); err != nil {
		t.Fatalf("admin GET after the policy is gone: %v", err)
	}
}

// TestIfNoneMatchSDK: concurrent aws-sdk-go-v2 PutObject calls with
// IfNoneMatch "*" to one key: one wins, the rest get 412
// PreconditionFailed, and the key holds the winner's body. Then a
// CompleteMultipartUpload with IfNoneMatch "*" onto the existing key is
// refused.
func TestIfNoneMatchSDK(t *testing.T) {
	const writers = 12
	srv := startServer(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// Its own transport, whose idle connections are closed before the
	// server stops: racing requests can leave a dialed but unused
	// connection, which http.Server.Shutdown waits 5 s for.
	tr := &http.Transport{MaxIdleConnsPerHost: writers}
	t.Cleanup(tr.CloseIdleConnections)
	c := awss3.NewFromConfig(aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider(rootAK, rootSK, "")},
		func(o *awss3.Options) {
			o.BaseEndpoint = aws.String(srv.endpoint)
			o.UsePathStyle = true
			o.HTTPClient = &http.Client{Transport: tr}
		})
	bkt := aws.String("inm")
	if _, err := c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: bkt}); err != nil {
		t.Fatal(err)
	}
	bodies := make([][]byte, writers)
	errs := make([]error, writers)
	var wg sync.WaitGroup
	for w := range writers {
		bodies[w] = bytes.Repeat([]byte(fmt.Sprintf("writer %02d|", w)), 20000)
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, errs[w] = c.PutObject(ctx, &awss3.PutObjectInput{Bucket: bkt, Key: aws.String("once"),
				Body: bytes.NewReader(bodies[w]), IfNoneMatch: aws.String("*")})
		}()
	}
	wg.Wait()
	winner := -1
	for w, err := range errs {
		switch {
		case err == nil:
			if winner >= 0 {
				t.Fatalf("writers %d and %d both succeeded", winner, w)
			}
			winner = w
		case errCode(err) != "PreconditionFailed" || httpStatus(err) != 412:
			t.Fatalf("writer %d: %v, want 412 PreconditionFailed", w, err)
		}
	}
	if winner < 0 {
		t.Fatal("no writer succeeded")
	}
	o, err := c.GetObject(ctx, &awss3.GetObjectInput{Bucket: bkt, Key: aws.String("once")})
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(o.Body)
	o.Body.Close()
	sum := md5.Sum(bodies[winner])
	if err != nil || !bytes.Equal(got, bodies[winner]) || strings.Trim(aws.ToString(o.ETag), `"`) != hex.EncodeToString(sum[:]) {
		t.Fatalf("stored object is not writer %d's body (%d bytes, ETag %s, %v)", winner, len(got), aws.ToString(o.ETag), err)
	}

	up, err := c.CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{Bucket: bkt, Key: aws.String("once")})
	if err != nil {
		t.Fatal(err)
	}
	p, err := c.UploadPart(ctx, &awss3.UploadPartInput{Bucket: bkt, Key: aws.String("once"), UploadId: up.UploadId,
		PartNumber: aws.Int32(1), Body: strings.NewReader("multipart body")})
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.CompleteMultipartUpload(ctx, &awss3.CompleteMultipartUploadInput{Bucket: bkt, Key: aws.String("once"), UploadId: up.UploadId,
		IfNoneMatch:     aws.String("*"),
		MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{{PartNumber: aws.Int32(1), ETag: p.ETag}}}})
	if errCode(err) != "PreconditionFailed" {
		t.Fatalf("conditional complete onto an existing key: %v, want PreconditionFailed", err)
	}
	if _, err := c.AbortMultipartUpload(ctx, &awss3.AbortMultipartUploadInput{Bucket: bkt, Key: aws.String("once"), UploadId: up.UploadId}); err != nil {
		t.Fatalf("abort after refused complete: %v", err)
	}
}
