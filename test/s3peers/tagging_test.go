package s3peers

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"reflect"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// TestSDKUnsetSettingsAndTagging: aws-sdk-go-v2 sees S3's own error codes
// for settings never set, 501 for setting one tristore does not implement,
// and real object and bucket tags (issue 13 items 1 and 2).
func TestSDKUnsetSettingsAndTagging(t *testing.T) {
	srv := startServer(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := sdkClient(srv.endpoint, rootAK, rootSK)
	bkt := aws.String("sdk-tags")
	if _, err := c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: bkt}); err != nil {
		t.Fatal(err)
	}

	t.Run("unset settings", func(t *testing.T) {
		for name, call := range map[string]func() error{
			"NoSuchTagSet": func() error { _, err := c.GetBucketTagging(ctx, &awss3.GetBucketTaggingInput{Bucket: bkt}); return err },
			"NoSuchCORSConfiguration": func() error {
				_, err := c.GetBucketCors(ctx, &awss3.GetBucketCorsInput{Bucket: bkt})
				return err
			},
			"NoSuchLifecycleConfiguration": func() error {
				_, err := c.GetBucketLifecycleConfiguration(ctx, &awss3.GetBucketLifecycleConfigurationInput{Bucket: bkt})
				return err
			},
			"ServerSideEncryptionConfigurationNotFoundError": func() error {
				_, err := c.GetBucketEncryption(ctx, &awss3.GetBucketEncryptionInput{Bucket: bkt})
				return err
			},
			"ObjectLockConfigurationNotFoundError": func() error {
				_, err := c.GetObjectLockConfiguration(ctx, &awss3.GetObjectLockConfigurationInput{Bucket: bkt})
				return err
			},
			"NoSuchWebsiteConfiguration": func() error {
				_, err := c.GetBucketWebsite(ctx, &awss3.GetBucketWebsiteInput{Bucket: bkt})
				return err
			},
			"ReplicationConfigurationNotFoundError": func() error {
				_, err := c.GetBucketReplication(ctx, &awss3.GetBucketReplicationInput{Bucket: bkt})
				return err
			},
			"NoSuchPublicAccessBlockConfiguration": func() error {
				_, err := c.GetPublicAccessBlock(ctx, &awss3.GetPublicAccessBlockInput{Bucket: bkt})
				return err
			},
			"OwnershipControlsNotFoundError": func() error {
				_, err := c.GetBucketOwnershipControls(ctx, &awss3.GetBucketOwnershipControlsInput{Bucket: bkt})
				return err
			},
		} {
			err := call()
			if errCode(err) != name || httpStatus(err) != http.StatusNotFound {
				t.Errorf("%s: got %v (code %q status %d)", name, err, errCode(err), httpStatus(err))
			}
		}
		rp, err := c.GetBucketRequestPayment(ctx, &awss3.GetBucketRequestPaymentInput{Bucket: bkt})
		if err != nil || rp.Payer != types.PayerBucketOwner {
			t.Errorf("GetBucketRequestPayment: %+v %v", rp, err)
		}
		v, err := c.GetBucketVersioning(ctx, &awss3.GetBucketVersioningInput{Bucket: bkt})
		if err != nil || v.Status != "" {
			t.Errorf("GetBucketVersioning: %+v %v", v, err)
		}
		_, err = c.PutBucketCors(ctx, &awss3.PutBucketCorsInput{Bucket: bkt, CORSConfiguration: &types.CORSConfiguration{
			CORSRules: []types.CORSRule{{AllowedMethods: []string{"GET"}, AllowedOrigins: []string{"*"}}}}})
		if err != nil { // implemented since (cors.go); TestCORSPeers has the details
			t.Errorf("PutBucketCors: %v", err)
		}
	})

	tagsOf := func(t *testing.T, key string) map[string]string {
		t.Helper()
		out, err := c.GetObjectTagging(ctx, &awss3.GetObjectTaggingInput{Bucket: bkt, Key: aws.String(key)})
		if err != nil {
			t.Fatalf("GetObjectTagging %s: %v", key, err)
		}
		m := map[string]string{}
		for _, tg := range out.TagSet {
			m[aws.ToString(tg.Key)] = aws.ToString(tg.Value)
		}
		return m
	}

	t.Run("object tagging", func(t *testing.T) {
		if _, err := c.PutObject(ctx, &awss3.PutObjectInput{Bucket: bkt, Key: aws.String("o"), Body: bytes.NewReader([]byte("data")),
			Tagging: aws.String("project=blue&note=two%20words")}); err != nil {
			t.Fatal(err)
		}
		if got := tagsOf(t, "o"); !reflect.DeepEqual(got, map[string]string{"project": "blue", "note": "two words"}) {
			t.Fatalf("tags %v", got)
		}
		g, err := c.GetObject(ctx, &awss3.GetObjectInput{Bucket: bkt, Key: aws.String("o")})
		if err != nil {
			t.Fatal(err)
		}
		g.Body.Close()
		if aws.ToInt32(g.TagCount) != 2 {
			t.Fatalf("GetObject TagCount %v", g.TagCount)
		}
		if _, err := c.PutObjectTagging(ctx, &awss3.PutObjectTaggingInput{Bucket: bkt, Key: aws.String("o"),
			Tagging: &types.Tagging{TagSet: []types.Tag{{Key: aws.String("k"), Value: aws.String("v")}}}}); err != nil {
			t.Fatal(err)
		}
		if got := tagsOf(t, "o"); !reflect.DeepEqual(got, map[string]string{"k": "v"}) {
			t.Fatalf("after PutObjectTagging %v", got)
		}
		var many []types.Tag
		for i := range 11 {
			many = append(many, types.Tag{Key: aws.String(fmt.Sprint("k", i)), Value: aws.String("v")})
		}
		_, err = c.PutObjectTagging(ctx, &awss3.PutObjectTaggingInput{Bucket: bkt, Key: aws.String("o"), Tagging: &types.Tagging{TagSet: many}})
		if errCode(err) != "BadRequest" || httpStatus(err) != http.StatusBadRequest { // AWS's code for this one
			t.Fatalf("11 tags: %v", err)
		}
		if _, err := c.CopyObject(ctx, &awss3.CopyObjectInput{Bucket: bkt, Key: aws.String("copy"), CopySource: aws.String("sdk-tags/o"),
			TaggingDirective: types.TaggingDirectiveReplace, Tagging: aws.String("copied=yes")}); err != nil {
			t.Fatal(err)
		}
		if got := tagsOf(t, "copy"); !reflect.DeepEqual(got, map[string]string{"copied": "yes"}) {
			t.Fatalf("copy tags %v", got)
		}
		mp, err := c.CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{Bucket: bkt, Key: aws.String("mp"), Tagging: aws.String("mp=1")})
		if err != nil {
			t.Fatal(err)
		}
		p, err := c.UploadPart(ctx, &awss3.UploadPartInput{Bucket: bkt, Key: aws.String("mp"), UploadId: mp.UploadId, PartNumber: aws.Int32(1), Body: bytes.NewReader([]byte("part"))})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.CompleteMultipartUpload(ctx, &awss3.CompleteMultipartUploadInput{Bucket: bkt, Key: aws.String("mp"), UploadId: mp.UploadId,
			MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{{PartNumber: aws.Int32(1), ETag: p.ETag}}}}); err != nil {
			t.Fatal(err)
		}
		if got := tagsOf(t, "mp"); !reflect.DeepEqual(got, map[string]string{"mp": "1"}) {
			t.Fatalf("multipart tags %v", got)
		}
		if _, err := c.DeleteObjectTagging(ctx, &awss3.DeleteObjectTaggingInput{Bucket: bkt, Key: aws.String("o")}); err != nil {
			t.Fatal(err)
		}
		if got := tagsOf(t, "o"); len(got) != 0 {
			t.Fatalf("after DeleteObjectTagging %v", got)
		}
	})

	t.Run("bucket tagging", func(t *testing.T) {
		if _, err := c.PutBucketTagging(ctx, &awss3.PutBucketTaggingInput{Bucket: bkt, Tagging: &types.Tagging{TagSet: []types.Tag{
			{Key: aws.String("env"), Value: aws.String("prod")}, {Key: aws.String("team"), Value: aws.String("storage")}}}}); err != nil {
			t.Fatal(err)
		}
		out, err := c.GetBucketTagging(ctx, &awss3.GetBucketTaggingInput{Bucket: bkt})
		if err != nil || len(out.TagSet) != 2 || aws.ToString(out.TagSet[0].Key) != "env" || aws.ToString(out.TagSet[1].Value) != "storage" {
			t.Fatalf("GetBucketTagging: %+v %v", out, err)
		}
		if _, err := c.DeleteBucketTagging(ctx, &awss3.DeleteBucketTaggingInput{Bucket: bkt}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.GetBucketTagging(ctx, &awss3.GetBucketTaggingInput{Bucket: bkt}); errCode(err) != "NoSuchTagSet" {
			t.Fatalf("after delete: %v", err)
		}
	})

	t.Run("any delimiter", func(t *testing.T) {
		for _, k := range []string{"d/a-1", "d/a-2", "d/b", "d/b-x-y", "d/c-"} {
			if _, err := c.PutObject(ctx, &awss3.PutObjectInput{Bucket: bkt, Key: aws.String(k), Body: bytes.NewReader(nil)}); err != nil {
				t.Fatal(err)
			}
		}
		var keys, cps []string
		pg := awss3.NewListObjectsV2Paginator(c, &awss3.ListObjectsV2Input{Bucket: bkt, Prefix: aws.String("d/"), Delimiter: aws.String("-"), MaxKeys: aws.Int32(1)})
		for n := 0; pg.HasMorePages() && n < 20; n++ {
			page, err := pg.NextPage(ctx)
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range page.Contents {
				keys = append(keys, aws.ToString(o.Key))
			}
			for _, p := range page.CommonPrefixes {
				cps = append(cps, aws.ToString(p.Prefix))
			}
		}
		if fmt.Sprint(keys) != "[d/b]" || fmt.Sprint(cps) != "[d/a- d/b- d/c-]" {
			t.Fatalf("delimiter '-' pages: keys %v prefixes %v", keys, cps)
		}
	})
}
