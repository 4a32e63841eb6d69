package powerloss_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/tristore/tristore/internal/powerloss"
)

const (
	s3Bucket  = "plb"
	s3Workers = 6
	s3Keys    = 5 // per worker
)

// absent is the state of a key that does not exist.
const absent = "<absent>"

// keyState is what a key may hold after a cut: the acknowledged state, or
// the state of the one operation on it still in flight. One worker owns
// each key, so there is at most one.
type keyState struct {
	acked   string
	pending string // "" = nothing in flight
}

func s3Client(addr string) *awss3.Client {
	cfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider(accessKey, secretKey, "")}
	return awss3.NewFromConfig(cfg, func(o *awss3.Options) {
		o.BaseEndpoint = aws.String("http://" + addr)
		o.UsePathStyle = true
		o.RetryMaxAttempts = 1 // one request, one acknowledgement
	})
}

// s3Key is worker w's key number k. Keys sit at different depths so that
// PUTs create parent directories (which DELETE removes again when empty).
// Key 3 has no plain path and key 4 lies under key 0, so each is kept in
// the store's hidden area or as a plain file depending on what exists
// when it is written (store/posix hidden.go): both move between the two.
func s3Key(w, k int) string {
	switch k {
	case 0:
		return fmt.Sprintf("w%d/k0", w)
	case 1:
		return fmt.Sprintf("w%d/s1/k1", w)
	case 3:
		return fmt.Sprintf("w%d//odd/../k3", w)
	case 4:
		return fmt.Sprintf("w%d/k0/k4", w)
	}
	return fmt.Sprintf("w%d/s%d/deep/k%d", w, k, k)
}

// sumMeta is the user metadata every object carries: its content's sum,
// so a check can tell metadata that belongs to another version (or none).
// CopyObject copies it with the content.
func sumMeta(b []byte) map[string]string { return map[string]string{"sum": sum(b)} }

func sum(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:8]) }

// s3Ops names the operations a run may use; with cutOnDelete only DELETE
// replies count towards the cut (so it lands right after one). With sse
// the bucket's default encryption is SSE-S3, so every object is stored
// encrypted (s3sse_test.go).
type s3Ops struct{ put, multipart, copy, del, cutOnDelete, sse bool }

var allS3Ops = s3Ops{put: true, multipart: true, copy: true, del: true}

// s3Scenario: workers PUT, multipart-upload, copy and delete their own
// keys while the power is cut after a random number of acknowledgements;
// after each reboot every key must hold its acknowledged content (or that
// of the operation in flight), the listing must show exactly the existing
// keys, and no temp file may remain.
func s3Scenario(t testing.TB, r *rig, seed uint64, rounds int, ops s3Ops) *report {
	rep := &report{}
	ctx, cancel := context.WithTimeout(context.Background(), scenarioTimeout())
	defer cancel()
	rng := rand.New(rand.NewPCG(seed, 1))
	srv := r.start(ctx)
	if _, err := s3Client(srv.addrs["s3"]).CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String(s3Bucket)}); err != nil {
		t.Fatalf("CreateBucket: %v", err)
	}
	if ops.sse {
		encryptByDefault(ctx, t, s3Client(srv.addrs["s3"]))
	}
	keys := map[string]*keyState{}
	for w := range s3Workers {
		for k := range s3Keys {
			keys[s3Key(w, k)] = &keyState{acked: absent}
		}
	}
	var mu sync.Mutex // guards keys
	for round := range rounds {
		c := s3Client(srv.addrs["s3"])
		cut := newCutter(rng, 40)
		stop := make(chan struct{})
		rctx, rcancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		for w := range s3Workers {
			wseed := rng.Uint64()
			wg.Add(1)
			go func() {
				defer wg.Done()
				s3Worker(rctx, c, w, wseed, ops, keys, &mu, cut, stop)
			}()
		}
		go func() { wg.Wait(); cut.now() }()
		cut.wait(20 * time.Second)
		r.crash()
		close(stop)
		rcancel() // requests in flight stay unacknowledged
		wg.Wait()
		srv = r.start(ctx)
		s3Check(ctx, r, s3Client(srv.addrs["s3"]), keys, rep, round)
		t.Logf("s3 round %d: cut after %d acks; %d violations so far; fs %+v", round, cut.acks, len(rep.errs), r.fs.Stats())
	}
	return rep
}

func s3Worker(ctx context.Context, c *awss3.Client, w int, seed uint64, ops s3Ops, keys map[string]*keyState, mu *sync.Mutex, cut *cutter, stop chan struct{}) {
	rng := rand.New(rand.NewPCG(seed, 2))
	for i := 0; i < 500; i++ {
		select {
		case <-stop:
			return
		default:
		}
		key := s3Key(w, rng.IntN(s3Keys))
		mu.Lock()
		st := keys[key]
		mu.Unlock()
		var body []byte
		var do func(context.Context) error
		switch op := rng.IntN(8); {
		case op < 3 && ops.put || !ops.multipart && !ops.copy && !ops.del:
			size := 1 + rng.IntN(300<<10)
			if rng.IntN(8) == 0 {
				// 1-2 MiB: large enough for the store's O_DIRECT path
				// (whole chunks direct, the unaligned tail buffered).
				size = 1<<20 + rng.IntN(1<<20)
			}
			body = payload(rng.Uint64(), size)
			do = func(ctx context.Context) error {
				_, err := c.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String(s3Bucket), Key: aws.String(key), Body: bytes.NewReader(body), Metadata: sumMeta(body)})
				return err
			}
		case op < 5 && ops.multipart:
			body = payload(rng.Uint64(), 1+rng.IntN(200<<10))
			do = func(ctx context.Context) error { return multipart(ctx, c, key, body) }
		case op < 7 && ops.copy:
			src := s3Key(w, rng.IntN(s3Keys))
			mu.Lock()
			srcState := keys[src].acked
			mu.Unlock()
			if src == key || srcState == absent {
				continue
			}
			mu.Lock()
			st.pending = srcState
			mu.Unlock()
			_, err := c.CopyObject(ctx, &awss3.CopyObjectInput{Bucket: aws.String(s3Bucket), Key: aws.String(key), CopySource: aws.String(s3Bucket + "/" + src)})
			if err != nil {
				return
			}
			mu.Lock()
			st.acked, st.pending = srcState, ""
			mu.Unlock()
			if !ops.cutOnDelete {
				cut.ack()
			}
			continue
		case ops.del:
			if st.acked == absent {
				continue
			}
			do = func(ctx context.Context) error {
				_, err := c.DeleteObject(ctx, &awss3.DeleteObjectInput{Bucket: aws.String(s3Bucket), Key: aws.String(key)})
				return err
			}
		default:
			continue
		}
		want := absent
		if body != nil {
			want = sum(body)
		}
		mu.Lock()
		st.pending = want
		mu.Unlock()
		octx, ocancel := context.WithTimeout(ctx, 30*time.Second)
		err := do(octx)
		ocancel()
		if err != nil {
			return // the power is out (or the server gone): this op stays pending
		}
		mu.Lock()
		st.acked, st.pending = want, ""
		mu.Unlock()
		if !ops.cutOnDelete || want == absent {
			cut.ack()
		}
	}
}

// multipart uploads body as one or two parts (the first 5 MiB when two)
// and completes the upload.
func multipart(ctx context.Context, c *awss3.Client, key string, body []byte) error {
	up, err := c.CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{Bucket: aws.String(s3Bucket), Key: aws.String(key), Metadata: sumMeta(body)})
	if err != nil {
		return err
	}
	pr, err := c.UploadPart(ctx, &awss3.UploadPartInput{Bucket: aws.String(s3Bucket), Key: aws.String(key), UploadId: up.UploadId, PartNumber: aws.Int32(1), Body: bytes.NewReader(body)})
	if err != nil {
		return err
	}
	_, err = c.CompleteMultipartUpload(ctx, &awss3.CompleteMultipartUploadInput{Bucket: aws.String(s3Bucket), Key: aws.String(key), UploadId: up.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{{ETag: pr.ETag, PartNumber: aws.Int32(1)}}}})
	return err
}

// s3Check verifies every key after a reboot and makes what it found the
// new acknowledged state.
func s3Check(ctx context.Context, r *rig, c *awss3.Client, keys map[string]*keyState, rep *report, round int) {
	if left := r.tempFiles(); len(left) > 0 {
		rep.violate("round %d: temp files left after restart: %v", round, left)
	}
	var present []string
	for key, st := range keys {
		got := absent
		out, err := c.GetObject(ctx, &awss3.GetObjectInput{Bucket: aws.String(s3Bucket), Key: aws.String(key)})
		var ae smithy.APIError
		switch {
		case err == nil:
			b, rerr := io.ReadAll(out.Body)
			out.Body.Close()
			if rerr != nil {
				rep.violate("round %d: GET %s: %v", round, key, rerr)
				continue
			}
			got = sum(b)
			if m := out.Metadata["sum"]; m != got {
				rep.violate("round %d: %s: user metadata sum=%q does not describe its content %s (metadata lost or stale)", round, key, m, got)
			}
			if etag := aws.ToString(out.ETag); len(etag) == 34 { // plain md5 ETag (not multipart)
				if m := md5.Sum(b); etag[1:33] != hex.EncodeToString(m[:]) {
					rep.violate("round %d: %s: ETag %s does not match its %d bytes", round, key, etag, len(b))
				}
			}
			present = append(present, key)
		case errors.As(err, &ae) && ae.ErrorCode() == "NoSuchKey":
		default:
			rep.violate("round %d: GET %s after restart: %v", round, key, err)
			continue
		}
		if got != st.acked && (st.pending == "" || got != st.pending) {
			rep.violate("round %d: %s holds %s; acknowledged %s, in flight %q", round, key, got, st.acked, st.pending)
		}
		st.acked, st.pending = got, ""
	}
	var listed []string
	p := awss3.NewListObjectsV2Paginator(c, &awss3.ListObjectsV2Input{Bucket: aws.String(s3Bucket)})
	for i := 0; p.HasMorePages() && i < 100; i++ {
		page, err := p.NextPage(ctx)
		if err != nil {
			rep.violate("round %d: list after restart: %v", round, err)
			return
		}
		for _, o := range page.Contents {
			listed = append(listed, aws.ToString(o.Key))
		}
	}
	sort.Strings(present)
	sort.Strings(listed)
	if fmt.Sprint(present) != fmt.Sprint(listed) {
		rep.violate("round %d: listing %v, want exactly the existing keys %v", round, listed, present)
	}
}

// TestS3PowerLossSidecar runs the S3 scenario on a file system without
// xattrs, so the store keeps object metadata in sidecar files.
func TestS3PowerLossSidecar(t *testing.T) {
	r := newSidecarRig(t, ourBin(t))
	rep := s3Scenario(t, r, uint64(time.Now().UnixNano()), iterations(20), allS3Ops)
	rep.errorAll(t)
}

func TestS3PowerLoss(t *testing.T) {
	r := newRig(t, ourBin(t))
	rep := s3Scenario(t, r, uint64(time.Now().UnixNano()), iterations(20), allS3Ops)
	rep.errorAll(t)
}

// TestS3UploadSurvivesPowerLoss: an acknowledged CreateMultipartUpload and
// UploadPart survive a power cut on a freshly made data tree (the store's
// own directories must be durable before the first upload is).
func TestS3UploadSurvivesPowerLoss(t *testing.T) {
	for _, noXattr := range []bool{false, true} {
		t.Run(fmt.Sprintf("noxattr=%v", noXattr), func(t *testing.T) {
			pfs := powerloss.New()
			if noXattr {
				pfs.DisableXattrs()
			}
			r := newRigOn(t, pfs, ourBin(t))
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			c := s3Client(r.start(ctx).addrs["s3"])
			if _, err := c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String(s3Bucket)}); err != nil {
				t.Fatal(err)
			}
			body := payload(7, 1000)
			up, err := c.CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{Bucket: aws.String(s3Bucket), Key: aws.String("a/b"), Metadata: sumMeta(body)})
			if err != nil {
				t.Fatal(err)
			}
			pr, err := c.UploadPart(ctx, &awss3.UploadPartInput{Bucket: aws.String(s3Bucket), Key: aws.String("a/b"), UploadId: up.UploadId, PartNumber: aws.Int32(1), Body: bytes.NewReader(body)})
			if err != nil {
				t.Fatal(err)
			}
			r.crash()
			c = s3Client(r.start(ctx).addrs["s3"])
			if _, err := c.CompleteMultipartUpload(ctx, &awss3.CompleteMultipartUploadInput{Bucket: aws.String(s3Bucket), Key: aws.String("a/b"), UploadId: up.UploadId,
				MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{{ETag: pr.ETag, PartNumber: aws.Int32(1)}}}}); err != nil {
				t.Fatalf("Complete after the cut of an acknowledged upload and part: %v\ndurable: %v", err, r.fs.DurablePaths())
			}
			out, err := c.GetObject(ctx, &awss3.GetObjectInput{Bucket: aws.String(s3Bucket), Key: aws.String("a/b")})
			if err != nil {
				t.Fatal(err)
			}
			got, _ := io.ReadAll(out.Body)
			out.Body.Close()
			if !bytes.Equal(got, body) || out.Metadata["sum"] != sum(body) {
				t.Fatalf("completed object: %d bytes, metadata %v", len(got), out.Metadata)
			}
		})
	}
}
