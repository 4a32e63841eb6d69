package s3peers

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"io"
	"math/big"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/feature/s3/manager"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/tristore/tristore/frontend/s3"
)

// selfSigned makes a certificate for 127.0.0.1 and a pool trusting it.
func selfSigned(t *testing.T) (tls.Certificate, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "tristore test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(leaf)
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}, pool
}

// payloadRecorder notes the x-amz-content-sha256 mode of each request.
type payloadRecorder struct {
	c     *http.Client
	mu    sync.Mutex
	modes map[string]int
}

func (p *payloadRecorder) Do(r *http.Request) (*http.Response, error) {
	p.mu.Lock()
	p.modes[r.Header.Get("X-Amz-Content-Sha256")]++
	p.mu.Unlock()
	return p.c.Do(r)
}

// TestTLSWithSDKDefaults serves HTTPS and uses aws-sdk-go-v2 with its
// default checksum behaviour, which over TLS streams aws-chunked bodies
// with a trailing CRC32 (STREAMING-UNSIGNED-PAYLOAD-TRAILER): single PUT,
// manager multipart upload and download must round-trip.
func TestTLSWithSDKDefaults(t *testing.T) {
	cert, pool := selfSigned(t)
	srv := startServer(t, false, func(o *s3.Options) {
		o.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	})
	rec := &payloadRecorder{modes: map[string]int{}, c: &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}}
	cfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider(rootAK, rootSK, "")}
	c := awss3.NewFromConfig(cfg, func(o *awss3.Options) {
		o.BaseEndpoint = aws.String("https://" + srv.addr)
		o.UsePathStyle = true
		o.HTTPClient = rec
	})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	bkt := aws.String("tls-bucket")
	if _, err := c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: bkt}); err != nil {
		t.Fatal(err)
	}
	small := randBytes(t, 300_000)
	// A non-seekable body makes the SDK stream it with a trailing checksum.
	if _, err := c.PutObject(ctx, &awss3.PutObjectInput{Bucket: bkt, Key: aws.String("small"), Body: io.MultiReader(bytes.NewReader(small)),
		ContentLength: aws.Int64(int64(len(small)))}); err != nil {
		t.Fatal(err)
	}
	big := randBytes(t, 11<<20)
	up := manager.NewUploader(c, func(u *manager.Uploader) { u.PartSize = 5 << 20 })
	if _, err := up.Upload(ctx, &awss3.PutObjectInput{Bucket: bkt, Key: aws.String("big"), Body: bytes.NewReader(big)}); err != nil {
		t.Fatal(err)
	}
	for key, want := range map[string][]byte{"small": small, "big": big} {
		o, err := c.GetObject(ctx, &awss3.GetObjectInput{Bucket: bkt, Key: aws.String(key)})
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(o.Body)
		o.Body.Close()
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s differs after HTTPS round trip (%v)", key, err)
		}
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	t.Logf("payload modes used: %v", rec.modes)
	if rec.modes["STREAMING-UNSIGNED-PAYLOAD-TRAILER"] == 0 {
		t.Errorf("the SDK never streamed with a trailer; modes: %v", rec.modes)
	}
}
