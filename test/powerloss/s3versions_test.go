package powerloss_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// The versioned S3 scenario: on a bucket with versioning enabled, workers
// PUT new versions, DELETE (adding delete markers) and remove the latest
// delete marker by version ID (which makes the previous version current
// again) while the power is cut. After each reboot every acknowledged
// version must still be there with its content and metadata, every
// acknowledged marker must still be a marker, acknowledged versions must
// keep their order, and the current object must be the last acknowledged
// state (or that of the one operation in flight).

const vBucket = "plv"

// vEntry is one version in a key's history, oldest first.
type vEntry struct {
	id     string
	sum    string // content sum; "" for a delete marker
	marker bool
}

type vKey struct {
	hist    []vEntry // acknowledged versions and markers, oldest first
	pending bool     // an operation on the key is in flight
}

func (k *vKey) latest() string {
	if len(k.hist) == 0 || k.hist[len(k.hist)-1].marker {
		return absent
	}
	return k.hist[len(k.hist)-1].sum
}

func vKeyName(w, k int) string {
	switch k {
	case 0:
		return fmt.Sprintf("w%d/v0", w)
	case 1:
		return fmt.Sprintf("w%d/d/v1", w)
	}
	return fmt.Sprintf("w%d//odd", w) // kept in the hidden area
}

func s3VersionsScenario(t testing.TB, r *rig, seed uint64, rounds int) *report {
	rep := &report{}
	ctx, cancel := context.WithTimeout(context.Background(), scenarioTimeout())
	defer cancel()
	rng := rand.New(rand.NewPCG(seed, 3))
	srv := r.start(ctx)
	c := s3Client(srv.addrs["s3"])
	if _, err := c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String(vBucket)}); err != nil {
		t.Fatalf("CreateBucket: %v", err)
	}
	if _, err := c.PutBucketVersioning(ctx, &awss3.PutBucketVersioningInput{Bucket: aws.String(vBucket),
		VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled}}); err != nil {
		t.Fatalf("PutBucketVersioning: %v", err)
	}
	const workers = 4
	keys := map[string]*vKey{}
	for w := range workers {
		for k := range 3 {
			keys[vKeyName(w, k)] = &vKey{}
		}
	}
	var mu sync.Mutex
	for round := range rounds {
		c := s3Client(srv.addrs["s3"])
		cut := newCutter(rng, 30)
		stop := make(chan struct{})
		rctx, rcancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		for w := range workers {
			wseed := rng.Uint64()
			wg.Add(1)
			go func() {
				defer wg.Done()
				vWorker(rctx, c, w, wseed, keys, &mu, cut, stop)
			}()
		}
		go func() { wg.Wait(); cut.now() }()
		cut.wait(20 * time.Second)
		r.crash()
		close(stop)
		rcancel()
		wg.Wait()
		srv = r.start(ctx)
		vCheck(ctx, r, s3Client(srv.addrs["s3"]), keys, rep, round)
		t.Logf("versioned s3 round %d: cut after %d acks; %d violations so far", round, cut.acks, len(rep.errs))
	}
	return rep
}

func vWorker(ctx context.Context, c *awss3.Client, w int, seed uint64, keys map[string]*vKey, mu *sync.Mutex, cut *cutter, stop chan struct{}) {
	rng := rand.New(rand.NewPCG(seed, 4))
	b := aws.String(vBucket)
	for range 300 {
		select {
		case <-stop:
			return
		default:
		}
		name := vKeyName(w, rng.IntN(3))
		mu.Lock()
		k := keys[name]
		k.pending = true
		var lastMarker string
		if n := len(k.hist); n > 0 && k.hist[n-1].marker {
			lastMarker = k.hist[n-1].id
		}
		mu.Unlock()
		octx, ocancel := context.WithTimeout(ctx, 30*time.Second)
		var e vEntry
		var err error
		pop := false
		switch op := rng.IntN(6); {
		case op < 3:
			body := payload(rng.Uint64(), 1+rng.IntN(100<<10))
			var out *awss3.PutObjectOutput
			out, err = c.PutObject(octx, &awss3.PutObjectInput{Bucket: b, Key: aws.String(name), Body: bytes.NewReader(body), Metadata: sumMeta(body)})
			if err == nil {
				e = vEntry{id: aws.ToString(out.VersionId), sum: sum(body)}
			}
		case op < 5 || lastMarker == "":
			var out *awss3.DeleteObjectOutput
			out, err = c.DeleteObject(octx, &awss3.DeleteObjectInput{Bucket: b, Key: aws.String(name)})
			if err == nil {
				e = vEntry{id: aws.ToString(out.VersionId), marker: true}
			}
		default:
			_, err = c.DeleteObject(octx, &awss3.DeleteObjectInput{Bucket: b, Key: aws.String(name), VersionId: aws.String(lastMarker)})
			pop = true
		}
		ocancel()
		if err != nil {
			return // the power is out: the operation stays in flight
		}
		mu.Lock()
		if pop {
			k.hist = k.hist[:len(k.hist)-1]
		} else {
			k.hist = append(k.hist, e)
		}
		k.pending = false
		mu.Unlock()
		cut.ack()
	}
}

// vCheck verifies every key after a reboot against its acknowledged
// history and adopts what it finds (the in-flight operation may or may
// not have happened) as the new history.
func vCheck(ctx context.Context, r *rig, c *awss3.Client, keys map[string]*vKey, rep *report, round int) {
	if left := r.tempFiles(); len(left) > 0 {
		rep.violate("round %d: temp files left after restart: %v", round, left)
	}
	b := aws.String(vBucket)
	for name, k := range keys {
		// The listing of the key's versions, newest first.
		var listed []vEntry
		p := awss3.NewListObjectVersionsPaginator(c, &awss3.ListObjectVersionsInput{Bucket: b, Prefix: aws.String(name), MaxKeys: aws.Int32(7)})
		for i := 0; p.HasMorePages() && i < 200; i++ {
			page, err := p.NextPage(ctx)
			if err != nil {
				rep.violate("round %d: ListObjectVersions %s: %v", round, name, err)
				return
			}
			// Versions and markers come in two lists; merge by the
			// store's order (newest first within the key), which the
			// IsLatest flag and the version IDs' order reflect.
			var all []vEntry
			for _, v := range page.Versions {
				if aws.ToString(v.Key) == name {
					all = append(all, vEntry{id: aws.ToString(v.VersionId)})
				}
			}
			for _, m := range page.DeleteMarkers {
				if aws.ToString(m.Key) == name {
					all = append(all, vEntry{id: aws.ToString(m.VersionId), marker: true})
				}
			}
			listed = append(listed, all...)
		}
		// Order: version IDs are creation-ordered (store/posix versions.go).
		sortNewestFirst(listed)
		byID := map[string]int{}
		for i, e := range listed {
			byID[e.id] = i
		}
		last := -1
		for hi, e := range k.hist {
			i, ok := byID[e.id]
			if !ok && k.pending && hi == len(k.hist)-1 && e.marker {
				continue // the removal of this marker was in flight
			}
			if !ok {
				rep.violate("round %d: %s: acknowledged %s %s lost", round, name, kind(e), e.id)
				continue
			}
			if listed[i].marker != e.marker {
				rep.violate("round %d: %s: version %s is a %s, acknowledged as a %s", round, name, e.id, kind(listed[i]), kind(e))
			}
			if last >= 0 && i >= last {
				rep.violate("round %d: %s: acknowledged versions out of order", round, name)
			}
			last = i
			if !e.marker {
				got, meta, err := vGet(ctx, c, name, e.id)
				if err != nil || got != e.sum || meta != e.sum {
					rep.violate("round %d: %s version %s: content %s meta %s (%v), acknowledged %s", round, name, e.id, got, meta, err, e.sum)
				}
			}
		}
		extra := len(listed) - len(k.hist)
		if extra < -1 || extra > 1 || (extra != 0 && !k.pending) {
			rep.violate("round %d: %s: %d versions listed, %d acknowledged (in flight: %v)", round, name, len(listed), len(k.hist), k.pending)
		}
		// The current object.
		cur, _, err := vGet(ctx, c, name, "")
		if err != nil {
			rep.violate("round %d: GET %s: %v", round, name, err)
			continue
		}
		if cur != k.latest() && !k.pending {
			rep.violate("round %d: %s is %s, acknowledged %s", round, name, cur, k.latest())
		}
		// Adopt what is there.
		hist := make([]vEntry, 0, len(listed))
		for i := len(listed) - 1; i >= 0; i-- {
			e := listed[i]
			if !e.marker {
				e.sum, _, _ = vGet(ctx, c, name, e.id)
			}
			hist = append(hist, e)
		}
		k.hist, k.pending = hist, false
		if cur != k.latest() {
			rep.violate("round %d: %s is %s but its newest version says %s", round, name, cur, k.latest())
		}
	}
}

func kind(e vEntry) string {
	if e.marker {
		return "delete marker"
	}
	return "version"
}

// sortNewestFirst orders entries by version ID, descending (IDs start
// with the creation sequence in hex).
func sortNewestFirst(es []vEntry) {
	for i := 1; i < len(es); i++ {
		for j := i; j > 0 && es[j].id > es[j-1].id; j-- {
			es[j], es[j-1] = es[j-1], es[j]
		}
	}
}

// vGet returns the content sum and the metadata sum of a version ("" =
// the current one); absent for NoSuchKey.
func vGet(ctx context.Context, c *awss3.Client, key, id string) (string, string, error) {
	in := &awss3.GetObjectInput{Bucket: aws.String(vBucket), Key: aws.String(key)}
	if id != "" {
		in.VersionId = aws.String(id)
	}
	out, err := c.GetObject(ctx, in)
	var ae smithy.APIError
	var re *smithyhttp.ResponseError
	if errors.As(err, &ae) && ae.ErrorCode() == "NoSuchKey" || errors.As(err, &re) && re.HTTPStatusCode() == 404 && id == "" {
		return absent, "", nil
	}
	if err != nil {
		return "", "", err
	}
	defer out.Body.Close()
	data, err := io.ReadAll(out.Body)
	if err != nil {
		return "", "", err
	}
	return sum(data), out.Metadata["sum"], nil
}

func TestS3VersionsPowerLoss(t *testing.T) {
	r := newRig(t, ourBin(t))
	rep := s3VersionsScenario(t, r, uint64(time.Now().UnixNano()), iterations(4))
	rep.errorAll(t)
}

func TestS3VersionsPowerLossSidecar(t *testing.T) {
	r := newSidecarRig(t, ourBin(t))
	rep := s3VersionsScenario(t, r, uint64(time.Now().UnixNano()), iterations(4))
	rep.errorAll(t)
}
