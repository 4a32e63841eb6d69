package s3peers

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
)

// TestCrossUserAccess checks ownership, canned ACLs and bucket policies
// between two users made with iam, plus anonymous access.
func TestCrossUserAccess(t *testing.T) {
	srv := startServer(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	alice, aliceSK, err := srv.users.Add("alice", false)
	if err != nil {
		t.Fatal(err)
	}
	bob, bobSK, err := srv.users.Add("bob", false)
	if err != nil {
		t.Fatal(err)
	}
	a := sdkClient(srv.endpoint, alice.AccessKey, aliceSK)
	b := sdkClient(srv.endpoint, bob.AccessKey, bobSK)
	bkt := aws.String("alice-bucket")
	if _, err := a.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: bkt}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.PutObject(ctx, &awss3.PutObjectInput{Bucket: bkt, Key: aws.String("doc"), Body: strings.NewReader("alice's")}); err != nil {
		t.Fatal(err)
	}
	denied := func(what string, err error) {
		t.Helper()
		if errCode(err) != "AccessDenied" {
			t.Fatalf("%s: want AccessDenied, got %v", what, err)
		}
	}
	allowed := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	getAs := func(c *awss3.Client) error {
		o, err := c.GetObject(ctx, &awss3.GetObjectInput{Bucket: bkt, Key: aws.String("doc")})
		if err == nil {
			io.Copy(io.Discard, o.Body)
			o.Body.Close()
		}
		return err
	}
	putAs := func(c *awss3.Client, key string) error {
		_, err := c.PutObject(ctx, &awss3.PutObjectInput{Bucket: bkt, Key: aws.String(key), Body: strings.NewReader("x")})
		return err
	}
	anonGet := func() int {
		res, err := http.Get(srv.endpoint + "/alice-bucket/doc")
		if err != nil {
			t.Fatal(err)
		}
		res.Body.Close()
		return res.StatusCode
	}

	// Private by default.
	denied("bob GET", getAs(b))
	denied("bob PUT", putAs(b, "bob1"))
	_, err = b.ListObjectsV2(ctx, &awss3.ListObjectsV2Input{Bucket: bkt})
	denied("bob LIST", err)
	_, err = b.PutBucketAcl(ctx, &awss3.PutBucketAclInput{Bucket: bkt, ACL: types.BucketCannedACLPublicReadWrite})
	denied("bob PutBucketAcl", err)
	if s := anonGet(); s != 403 {
		t.Fatalf("anonymous GET of private: %d", s)
	}
	lb, err := b.ListBuckets(ctx, &awss3.ListBucketsInput{})
	if err != nil || len(lb.Buckets) != 0 {
		t.Fatalf("bob sees others' buckets: %v %v", lb, err)
	}

	// public-read: everyone reads, nobody else writes.
	_, err = a.PutBucketAcl(ctx, &awss3.PutBucketAclInput{Bucket: bkt, ACL: types.BucketCannedACLPublicRead})
	allowed("alice PutBucketAcl", err)
	acl, err := a.GetBucketAcl(ctx, &awss3.GetBucketAclInput{Bucket: bkt})
	if err != nil || len(acl.Grants) != 2 || aws.ToString(acl.Owner.ID) != "alice" {
		t.Fatalf("GetBucketAcl: %+v %v", acl, err)
	}
	allowed("bob GET public-read", getAs(b))
	denied("bob PUT public-read", putAs(b, "bob2"))
	if s := anonGet(); s != 200 {
		t.Fatalf("anonymous GET of public-read: %d", s)
	}

	// A policy granting bob PutObject; then an explicit Deny of GetObject wins over the ACL.
	pol := `{"Version":"2012-10-17","Statement":[
	 {"Effect":"Allow","Principal":{"AWS":["bob"]},"Action":["s3:PutObject"],"Resource":["arn:aws:s3:::alice-bucket/*"]},
	 {"Effect":"Deny","Principal":{"AWS":["bob"]},"Action":"s3:GetObject","Resource":"arn:aws:s3:::alice-bucket/doc"}]}`
	_, err = b.PutBucketPolicy(ctx, &awss3.PutBucketPolicyInput{Bucket: bkt, Policy: &pol})
	denied("bob PutBucketPolicy", err)
	_, err = a.PutBucketPolicy(ctx, &awss3.PutBucketPolicyInput{Bucket: bkt, Policy: &pol})
	allowed("alice PutBucketPolicy", err)
	allowed("bob PUT via policy", putAs(b, "bob3"))
	denied("bob GET denied by policy", getAs(b))
	allowed("alice GET", getAs(a))
	_, err = a.PutBucketPolicy(ctx, &awss3.PutBucketPolicyInput{Bucket: bkt, Policy: aws.String(`{"Statement":[{"Effect":"Maybe"}]}`)})
	if errCode(err) != "MalformedPolicy" {
		t.Fatalf("bad policy: %v", err)
	}
	_, err = a.DeleteBucketPolicy(ctx, &awss3.DeleteBucketPolicyInput{Bucket: bkt})
	allowed("alice DeleteBucketPolicy", err)
	allowed("bob GET after policy removal", getAs(b))

	// Object ACL: private bucket, one public object.
	_, err = a.PutBucketAcl(ctx, &awss3.PutBucketAclInput{Bucket: bkt, ACL: types.BucketCannedACLPrivate})
	allowed("alice private", err)
	denied("bob GET private again", getAs(b))
	_, err = a.PutObjectAcl(ctx, &awss3.PutObjectAclInput{Bucket: bkt, Key: aws.String("doc"), ACL: types.ObjectCannedACLAuthenticatedRead})
	allowed("alice PutObjectAcl", err)
	allowed("bob GET authenticated-read object", getAs(b))
	if s := anonGet(); s != 403 {
		t.Fatalf("anonymous GET of authenticated-read: %d", s)
	}
	oacl, err := a.GetObjectAcl(ctx, &awss3.GetObjectAclInput{Bucket: bkt, Key: aws.String("doc")})
	if err != nil || len(oacl.Grants) != 2 {
		t.Fatalf("GetObjectAcl: %+v %v", oacl, err)
	}
	// Batch delete is authorised per key: bob gets AccessDenied for each.
	d, err := b.DeleteObjects(ctx, &awss3.DeleteObjectsInput{Bucket: bkt, Delete: &types.Delete{Objects: []types.ObjectIdentifier{{Key: aws.String("doc")}}}})
	if err != nil || len(d.Errors) != 1 || aws.ToString(d.Errors[0].Code) != "AccessDenied" || len(d.Deleted) != 0 {
		t.Fatalf("bob DeleteObjects: %+v %v", d, err)
	}
	allowed("doc survives bob's batch delete", getAs(a))
	// Root (admin) may do anything.
	root := sdkClient(srv.endpoint, rootAK, rootSK)
	_, err = root.ListObjectsV2(ctx, &awss3.ListObjectsV2Input{Bucket: bkt})
	allowed("root LIST", err)
}
