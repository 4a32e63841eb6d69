package s3peers

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/tristore/tristore/internal/testutil"
	"github.com/tristore/tristore/store"
	"github.com/tristore/tristore/store/storetest"
)

// oddBody is what the end-to-end tests store under storetest.OddKeys[i].
func oddBody(i int) []byte { return []byte(fmt.Sprintf("odd key #%d\n", i)) }

// putOddKeys creates bucket and stores every odd key shape in it with
// aws-sdk-go-v2, checking each answer.
func putOddKeys(t *testing.T, ctx context.Context, c *awss3.Client, bucket string) {
	t.Helper()
	if _, err := c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: &bucket}); err != nil {
		t.Fatal(err)
	}
	for i, k := range storetest.OddKeys {
		if _, err := c.PutObject(ctx, &awss3.PutObjectInput{Bucket: &bucket, Key: aws.String(k), Body: bytes.NewReader(oddBody(i))}); err != nil {
			t.Fatalf("PutObject %q: %v", k, err)
		}
	}
}

// listAll lists bucket page by page (pageSize keys) with ListObjectsV2.
func listAll(t *testing.T, ctx context.Context, c *awss3.Client, bucket string, pageSize int32) map[string]string {
	t.Helper()
	got := map[string]string{}
	var order []string
	p := awss3.NewListObjectsV2Paginator(c, &awss3.ListObjectsV2Input{Bucket: &bucket, MaxKeys: aws.Int32(pageSize)})
	for page := 0; p.HasMorePages() && page < 1000; page++ {
		out, err := p.NextPage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, o := range out.Contents {
			got[aws.ToString(o.Key)] = strings.Trim(aws.ToString(o.ETag), `"`)
			order = append(order, aws.ToString(o.Key))
		}
	}
	if !sort.StringsAreSorted(order) || len(order) != len(got) {
		t.Fatalf("ListObjectsV2 of %s not in byte order or with repeats: %q", bucket, order)
	}
	return got
}

func md5hexOf(b []byte) string {
	s := md5.Sum(b)
	return hex.EncodeToString(s[:])
}

// TestOddKeysSDK: every key shape S3 accepts and a directory tree cannot
// hold as a plain path works through aws-sdk-go-v2: PUT, HEAD, GET,
// tagging, copy, multipart, V1 and V2 listings with "/" and paging
// compared with the S3 model, DeleteObject (204, also when missing); the
// data directory keeps them out of sight of the other views.
func TestOddKeysSDK(t *testing.T) {
	srv := startServer(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := sdkClient(srv.endpoint, rootAK, rootSK)
	bkt := "odd"
	putOddKeys(t, ctx, c, bkt)
	for i, k := range storetest.OddKeys {
		h, err := c.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: &bkt, Key: aws.String(k)})
		if err != nil || aws.ToInt64(h.ContentLength) != int64(len(oddBody(i))) {
			t.Fatalf("HeadObject %q: %v", k, err)
		}
		g, err := c.GetObject(ctx, &awss3.GetObjectInput{Bucket: &bkt, Key: aws.String(k)})
		if err != nil {
			t.Fatalf("GetObject %q: %v", k, err)
		}
		body, _ := io.ReadAll(g.Body)
		g.Body.Close()
		if !bytes.Equal(body, oddBody(i)) {
			t.Fatalf("GetObject %q = %q", k, body)
		}
	}
	want := map[string]string{}
	for i, k := range storetest.OddKeys {
		want[k] = md5hexOf(oddBody(i))
	}
	for _, size := range []int32{1000, 7, 1} {
		if got := listAll(t, ctx, c, bkt, size); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("ListObjectsV2 (pages of %d):\n got %q\nwant %q", size, got, want)
		}
	}
	// V1 with delimiter and prefix, page by page, against the model.
	for _, prefix := range []string{"", "/", "a/", "x/", "q/"} {
		wo, wc, _, _ := storetest.ListModel(storetest.OddKeys, store.ListOptions{Prefix: prefix, Delimiter: "/"})
		var gotO, gotC []string
		marker := ""
		for page := 0; page < 100; page++ {
			out, err := c.ListObjects(ctx, &awss3.ListObjectsInput{Bucket: &bkt, Prefix: aws.String(prefix), Delimiter: aws.String("/"), Marker: aws.String(marker), MaxKeys: aws.Int32(2)})
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range out.Contents {
				gotO = append(gotO, aws.ToString(o.Key))
			}
			for _, p := range out.CommonPrefixes {
				gotC = append(gotC, aws.ToString(p.Prefix))
			}
			if !aws.ToBool(out.IsTruncated) {
				break
			}
			marker = aws.ToString(out.NextMarker)
		}
		if fmt.Sprint(gotO) != fmt.Sprint(wo) || fmt.Sprint(gotC) != fmt.Sprint(wc) {
			t.Fatalf("ListObjects prefix %q delimiter /:\n got %q %q\nwant %q %q", prefix, gotO, gotC, wo, wc)
		}
	}

	// Tagging, copy and multipart on odd keys.
	tk := "x/.."
	if _, err := c.PutObjectTagging(ctx, &awss3.PutObjectTaggingInput{Bucket: &bkt, Key: &tk, Tagging: &types.Tagging{TagSet: []types.Tag{{Key: aws.String("k"), Value: aws.String("v")}}}}); err != nil {
		t.Fatalf("PutObjectTagging %q: %v", tk, err)
	}
	tg, err := c.GetObjectTagging(ctx, &awss3.GetObjectTaggingInput{Bucket: &bkt, Key: &tk})
	if err != nil || len(tg.TagSet) != 1 || aws.ToString(tg.TagSet[0].Value) != "v" {
		t.Fatalf("GetObjectTagging %q = %+v, %v", tk, tg, err)
	}
	if _, err := c.CopyObject(ctx, &awss3.CopyObjectInput{Bucket: &bkt, Key: aws.String("copy//of/./a"), CopySource: aws.String(bkt + "/a//b")}); err != nil {
		t.Fatalf("CopyObject a//b -> copy//of/./a: %v", err)
	}
	g, err := c.GetObject(ctx, &awss3.GetObjectInput{Bucket: &bkt, Key: aws.String("copy//of/./a")})
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(g.Body)
	g.Body.Close()
	if !bytes.Equal(body, oddBody(indexOfKey("a//b"))) {
		t.Fatalf("copied object reads %q", body)
	}
	mk := "mp/../big"
	cm, err := c.CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{Bucket: &bkt, Key: &mk})
	if err != nil {
		t.Fatal(err)
	}
	p1, p2 := bytes.Repeat([]byte("1"), store.MinPartSize), []byte("last part")
	var parts []types.CompletedPart
	for n, data := range [][]byte{p1, p2} {
		up, err := c.UploadPart(ctx, &awss3.UploadPartInput{Bucket: &bkt, Key: &mk, UploadId: cm.UploadId, PartNumber: aws.Int32(int32(n + 1)), Body: bytes.NewReader(data)})
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, types.CompletedPart{ETag: up.ETag, PartNumber: aws.Int32(int32(n + 1))})
	}
	if _, err := c.CompleteMultipartUpload(ctx, &awss3.CompleteMultipartUploadInput{Bucket: &bkt, Key: &mk, UploadId: cm.UploadId, MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}}); err != nil {
		t.Fatalf("CompleteMultipartUpload %q: %v", mk, err)
	}
	h, err := c.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: &bkt, Key: &mk})
	if err != nil || aws.ToInt64(h.ContentLength) != int64(len(p1)+len(p2)) {
		t.Fatalf("HeadObject %q after multipart: %v", mk, err)
	}

	// The data directory: plain keys are plain files; nothing else is
	// visible outside the hidden area (names starting with .tristore,
	// which NFS never shows).
	bdir := filepath.Join(srv.dir, bkt)
	if b, err := os.ReadFile(filepath.Join(bdir, "q", "plain")); err != nil || !bytes.Equal(b, oddBody(indexOfKey("q/plain"))) {
		t.Fatalf("plain key q/plain is not the file q/plain: %q %v", b, err)
	}
	ents, _ := os.ReadDir(bdir)
	var top []string
	for _, e := range ents {
		top = append(top, e.Name())
	}
	if fmt.Sprint(top) != "[.tristore-hidden a a- a. a0 d q x]" {
		t.Fatalf("bucket directory holds %q", top)
	}

	// DeleteObject answers 204 for every shape, present or not.
	for _, k := range append(append([]string(nil), storetest.OddKeys...), "copy//of/./a", mk, "never//there", "../../none") {
		for range 2 {
			if _, err := c.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: &bkt, Key: aws.String(k)}); err != nil {
				t.Fatalf("DeleteObject %q: %v", k, err)
			}
		}
	}
	if got := listAll(t, ctx, c, bkt, 1000); len(got) != 0 {
		t.Fatalf("after deleting everything the bucket lists %q", got)
	}
	if _, err := c.DeleteBucket(ctx, &awss3.DeleteBucketInput{Bucket: &bkt}); err != nil {
		t.Fatal(err)
	}
}

func indexOfKey(k string) int {
	for i, x := range storetest.OddKeys {
		if x == k {
			return i
		}
	}
	panic("no key " + k)
}

// TestOddKeysSync: a bucket holding every odd key shape (stored with
// aws-sdk-go-v2) is synced to another bucket with aws-cli (`aws s3 sync
// s3://src s3://dst`, from the repository's .venv) and then with boto3
// (list_objects_v2 pages of 5 + copy_object); each destination holds
// exactly the source's keys with the same bytes.
func TestOddKeysSync(t *testing.T) {
	py := testutil.NeedPython(t, "boto3")
	srv := startServer(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := sdkClient(srv.endpoint, rootAK, rootSK)
	putOddKeys(t, ctx, c, "src")
	want := map[string]string{}
	for i, k := range storetest.OddKeys {
		want[k] = md5hexOf(oddBody(i))
	}
	env := append(os.Environ(), "ENDPOINT="+srv.endpoint, "AWS_ACCESS_KEY_ID="+rootAK, "AWS_SECRET_ACCESS_KEY="+rootSK,
		"AWS_DEFAULT_REGION=us-east-1", "AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null")
	check := func(dst string) {
		t.Helper()
		got := listAll(t, ctx, c, dst, 4)
		for k, etag := range want {
			if got[k] != etag {
				t.Errorf("%s: key %q has ETag %q, want %q", dst, k, got[k], etag)
			}
		}
		for k := range got {
			if _, ok := want[k]; !ok {
				t.Errorf("%s: extra key %q", dst, k)
			}
		}
		for i, k := range storetest.OddKeys {
			g, err := c.GetObject(ctx, &awss3.GetObjectInput{Bucket: aws.String(dst), Key: aws.String(k)})
			if err != nil {
				t.Fatalf("%s: GetObject %q: %v", dst, k, err)
			}
			body, _ := io.ReadAll(g.Body)
			g.Body.Close()
			if !bytes.Equal(body, oddBody(i)) {
				t.Errorf("%s: %q reads %q", dst, k, body)
			}
		}
	}

	aws := testutil.NeedCmd(t, "aws")
	if _, err := c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: awsString("cli-dst")}); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, aws, "--endpoint-url", srv.endpoint, "s3", "sync", "--no-progress", "s3://src", "s3://cli-dst")
	cmd.Env = env
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("aws s3 sync: %v\n%s", err, out)
	}
	check("cli-dst")

	cmd = exec.CommandContext(ctx, py, "testdata/boto3_sync.py", "src", "py-dst")
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "OK") {
		t.Fatalf("boto3 sync failed: %v\n%s", err, out)
	}
	check("py-dst")
}

func awsString(s string) *string { return &s }
