package s3peers

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

func TestMinioGo(t *testing.T) {
	srv := startServer(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	mc, err := minio.New(srv.addr, &minio.Options{Creds: credentials.NewStaticV4(rootAK, rootSK, ""),
		Secure: false, Region: "us-east-1", BucketLookup: minio.BucketLookupPath})
	if err != nil {
		t.Fatal(err)
	}
	bkt := "minio-bucket"
	if err := mc.MakeBucket(ctx, bkt, minio.MakeBucketOptions{Region: "us-east-1"}); err != nil {
		t.Fatal(err)
	}
	if ok, err := mc.BucketExists(ctx, bkt); err != nil || !ok {
		t.Fatalf("BucketExists: %v %v", ok, err)
	}
	small := []byte("small object from minio-go")
	if _, err := mc.PutObject(ctx, bkt, "a/small", bytes.NewReader(small), int64(len(small)),
		minio.PutObjectOptions{ContentType: "text/plain", UserMetadata: map[string]string{"tag": "m"}}); err != nil {
		t.Fatal(err)
	}
	big := randBytes(t, 12<<20)
	info, err := mc.PutObject(ctx, bkt, "b/big", bytes.NewReader(big), int64(len(big)), minio.PutObjectOptions{PartSize: 5 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(info.ETag, "-3") {
		t.Fatalf("multipart ETag %q", info.ETag)
	}
	for key, want := range map[string][]byte{"a/small": small, "b/big": big} {
		obj, err := mc.GetObject(ctx, bkt, key, minio.GetObjectOptions{})
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(obj)
		obj.Close()
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s: content differs (%v)", key, err)
		}
	}
	st, err := mc.StatObject(ctx, bkt, "a/small", minio.StatObjectOptions{})
	if err != nil || st.UserMetadata["Tag"] != "m" || st.ContentType != "text/plain" {
		t.Fatalf("StatObject: %+v %v", st, err)
	}
	var keys []string
	for o := range mc.ListObjects(ctx, bkt, minio.ListObjectsOptions{Recursive: true}) {
		if o.Err != nil {
			t.Fatal(o.Err)
		}
		keys = append(keys, o.Key)
	}
	if strings.Join(keys, ",") != "a/small,b/big" {
		t.Fatalf("ListObjects: %v", keys)
	}
	if err := mc.RemoveObject(ctx, bkt, "a/small", minio.RemoveObjectOptions{}); err != nil {
		t.Fatal(err)
	}
	objs := make(chan minio.ObjectInfo, 1)
	objs <- minio.ObjectInfo{Key: "b/big"}
	close(objs)
	for e := range mc.RemoveObjects(ctx, bkt, objs, minio.RemoveObjectsOptions{}) {
		t.Fatalf("RemoveObjects: %v", e.Err)
	}
	if err := mc.RemoveBucket(ctx, bkt); err != nil {
		t.Fatal(err)
	}
}
