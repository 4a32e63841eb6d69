package netemlink

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/tristore/tristore/internal/testutil/s3server"
	"github.com/tristore/tristore/netem"
)

const (
	rootAK = "TRISTORENETEMROOT001"
	rootSK = "tristore-netem-root-secret-0001"
)

// s3Client talks to endpoint; dial (if not nil) makes every connection,
// so that the client side of a link can be used from this process.
func s3Client(endpoint string, dial func(ctx context.Context, network, addr string) (net.Conn, error)) *awss3.Client {
	hc := awshttp.NewBuildableClient().WithTransportOptions(func(tr *http.Transport) {
		if dial != nil {
			tr.DialContext = dial
		}
		tr.MaxIdleConnsPerHost = 16
		tr.DisableCompression = true
	})
	cfg := aws.Config{Region: "us-east-1", HTTPClient: hc, Credentials: credentials.NewStaticCredentialsProvider(rootAK, rootSK, "")}
	return awss3.NewFromConfig(cfg, func(o *awss3.Options) {
		o.BaseEndpoint = aws.String(endpoint)
		o.UsePathStyle = true
	})
}

// TestSeed000ParallelConnections is seed 000's central effect: on the
// `realistic` link (12.5 MiB/s, 50 ms RTT, 0.1 % loss, jitter) one TCP
// connection cannot fill the pipe (every loss halves its window and it
// regrows at one MSS per RTT), while 8 connections sharing the same
// bottleneck keep it nearly full.
// Takes ~25 s (16 MiB at ~0.8 MiB/s, then at ~6 MiB/s).
func TestSeed000ParallelConnections(t *testing.T) {
	needLink(t)
	const size = 16 << 20
	ctx, cancel := context.WithTimeout(context.Background(), 240*time.Second)
	defer cancel()

	// Upload over loopback (not the subject of the test).
	sv := s3server.Start(t, s3server.Config{AccessKey: rootAK, SecretKey: rootSK})
	data := make([]byte, size)
	rand.Read(data)
	lc := s3Client(sv.Endpoint, nil)
	if _, err := lc.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String("seed000")}); err != nil {
		t.Fatal(err)
	}
	if _, err := lc.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String("seed000"), Key: aws.String("obj"), Body: bytes.NewReader(data)}); err != nil {
		t.Fatal(err)
	}

	cfg, _ := netem.PresetConfig("realistic")
	cfg.Name = linkName(t)
	l, err := netem.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		l.Close()
		waitGone(t, cfg.Name, "")
	}()
	ln, err := l.Listen(netem.ServerSide, "tcp", net.JoinHostPort(l.ServerAddr().String(), "9000"))
	if err != nil {
		t.Fatal(err)
	}
	endpoint := s3server.Start(t, s3server.Config{Store: sv.Store, Users: sv.Users, Listener: ln}).Endpoint

	// download fetches the object in n ranged GETs over n fresh connections.
	download := func(n int) (time.Duration, error) {
		c := s3Client(endpoint, l.DialContext)
		got := make([]byte, size)
		part := size / n
		start := time.Now()
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i := 0; i < n; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				in := &awss3.GetObjectInput{Bucket: aws.String("seed000"), Key: aws.String("obj")}
				if n > 1 {
					in.Range = aws.String("bytes=" + strconv.Itoa(i*part) + "-" + strconv.Itoa((i+1)*part-1))
				}
				out, err := c.GetObject(ctx, in)
				if err != nil {
					errs <- err
					return
				}
				defer out.Body.Close()
				if _, err := io.ReadFull(out.Body, got[i*part:(i+1)*part]); err != nil {
					errs <- err
				}
			}(i)
		}
		wg.Wait()
		el := time.Since(start)
		close(errs)
		if err := <-errs; err != nil {
			return 0, err
		}
		if !bytes.Equal(got, data) {
			return 0, fmt.Errorf("%d-connection download differs from the object", n)
		}
		return el, nil
	}
	one, err := download(1)
	if err != nil {
		t.Fatal(err)
	}
	eight, err := download(8)
	if err != nil {
		t.Fatal(err)
	}
	mibs := func(d time.Duration) float64 { return float64(size) / (1 << 20) / d.Seconds() }
	ratio := one.Seconds() / eight.Seconds()
	c := l.Counters()
	t.Logf("realistic link: 16 MiB over 1 connection %.2fs (%.2f MiB/s), over 8 connections %.2fs (%.2f MiB/s): %.2fx; down: %d packets, %d lost, %d queue drops; wire/payload %.3f",
		one.Seconds(), mibs(one), eight.Seconds(), mibs(eight), ratio, c.Down.Packets, c.Down.DroppedLoss, c.Down.DroppedQueue, float64(c.Down.Bytes)/float64(c.Down.PayloadBytes))
	if ratio < 2.5 {
		t.Errorf("8 connections got %.2fx the goodput of one; seed 000 predicts >= 2.5x", ratio)
	}
}
