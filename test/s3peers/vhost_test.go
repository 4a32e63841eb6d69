package s3peers

import (
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/tristore/tristore/frontend/s3"
)

// TestVirtualHostStyle drives the server with the SDK in virtual-host
// style (Host: <bucket>.s3.tristore.test, signed as such); every name is
// dialled at the server's loopback address, so no DNS is involved.
func TestVirtualHostStyle(t *testing.T) {
	srv := startServer(t, false, func(o *s3.Options) { o.VirtualHosts = []string{"s3.tristore.test"} })
	_, port, _ := net.SplitHostPort(srv.addr)
	dial := func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{Timeout: 10 * time.Second}).DialContext(ctx, network, srv.addr)
	}
	cfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider(rootAK, rootSK, ""),
		HTTPClient: &http.Client{Transport: &http.Transport{DialContext: dial}}}
	var hosts []string
	c := awss3.NewFromConfig(cfg, func(o *awss3.Options) {
		o.BaseEndpoint = aws.String("http://s3.tristore.test:" + port)
		o.UsePathStyle = false
		o.HTTPClient = &hostRecorder{c: cfg.HTTPClient.(*http.Client), hosts: &hosts}
	})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	bkt := aws.String("vhost-bucket")
	if _, err := c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: bkt}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.PutObject(ctx, &awss3.PutObjectInput{Bucket: bkt, Key: aws.String("a/b"), Body: strings.NewReader("virtual")}); err != nil {
		t.Fatal(err)
	}
	o, err := c.GetObject(ctx, &awss3.GetObjectInput{Bucket: bkt, Key: aws.String("a/b")})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(o.Body)
	o.Body.Close()
	l, err := c.ListObjectsV2(ctx, &awss3.ListObjectsV2Input{Bucket: bkt})
	if err != nil || string(b) != "virtual" || len(l.Contents) != 1 {
		t.Fatalf("vhost GET %q, list %v %v", b, l, err)
	}
	if len(hosts) == 0 || hosts[len(hosts)-1] != "vhost-bucket.s3.tristore.test:"+port {
		t.Fatalf("requests did not use virtual-host style: %v", hosts)
	}
	// The same object path-style.
	p := sdkClient(srv.endpoint, rootAK, rootSK)
	if _, err := p.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: bkt, Key: aws.String("a/b")}); err != nil {
		t.Fatal(err)
	}
}

type hostRecorder struct {
	c     *http.Client
	hosts *[]string
}

func (h *hostRecorder) Do(r *http.Request) (*http.Response, error) {
	*h.hosts = append(*h.hosts, r.Host)
	if r.Host == "" {
		*h.hosts = append((*h.hosts)[:len(*h.hosts)-1], r.URL.Host)
	}
	return h.c.Do(r)
}
