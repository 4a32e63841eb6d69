package s3peers

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
)

// TestConcurrentOverwrites has writers replace one key with whole versions
// (every byte of version v is v) while readers GET it: each GET must
// return one complete version whose ETag matches its bytes, never a mix.
func TestConcurrentOverwrites(t *testing.T) {
	srv := startServer(t, false)
	c := sdkClient(srv.endpoint, rootAK, rootSK)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	bkt := aws.String("hot-bucket")
	if _, err := c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: bkt}); err != nil {
		t.Fatal(err)
	}
	const size = 256 << 10
	put := func(v byte) error {
		_, err := c.PutObject(ctx, &awss3.PutObjectInput{Bucket: bkt, Key: aws.String("hot"), Body: bytes.NewReader(bytes.Repeat([]byte{v}, size))})
		return err
	}
	if err := put(1); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(3 * time.Second)
	var wg sync.WaitGroup
	var reads, writes atomic.Int64
	errc := make(chan error, 16)
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 500 && time.Now().Before(deadline); i++ {
				if err := put(byte(2 + (w*500+i)%250)); err != nil {
					errc <- err
					return
				}
				writes.Add(1)
			}
		}()
	}
	for r := 0; r < 4; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 2000 && time.Now().Before(deadline); i++ {
				o, err := c.GetObject(ctx, &awss3.GetObjectInput{Bucket: bkt, Key: aws.String("hot")})
				if err != nil {
					errc <- err
					return
				}
				b, err := io.ReadAll(o.Body)
				o.Body.Close()
				if err != nil {
					errc <- err
					return
				}
				if len(b) != size || !bytes.Equal(b, bytes.Repeat(b[:1], size)) {
					t.Errorf("GET saw a mixed or partial object: %d bytes", len(b))
					return
				}
				if sum := md5.Sum(b); aws.ToString(o.ETag) != `"`+hex.EncodeToString(sum[:])+`"` {
					t.Errorf("ETag %s does not belong to the bytes returned", aws.ToString(o.ETag))
					return
				}
				reads.Add(1)
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	t.Logf("%d PUTs and %d consistent GETs", writes.Load(), reads.Load())
}
