package posix_test

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"io"
	"math/rand"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tristore/tristore/store"
	"github.com/tristore/tristore/store/posix"
)

// gateReader blocks its first Read until the gate opens, then reads like
// oddReader; a PUT's hash is chosen before its first Read.
type gateReader struct {
	gate <-chan struct{}
	odd  oddReader
	once bool
}

func (r *gateReader) Read(p []byte) (int, error) {
	if !r.once {
		r.once = true
		select {
		case <-r.gate:
		case <-time.After(20 * time.Second):
			return 0, fmt.Errorf("gate never opened")
		}
	}
	return r.odd.Read(p)
}

// TestBodyHashSameSum: large bodies PUT at once (here 8) are hashed in
// md5-simd's lanes once 3 or more are under way, and every ETag is still
// the body's MD5, for odd sizes written in odd pieces; a lone large body
// and a small one keep crypto/md5. Fails if no body ever goes to the lanes.
func TestBodyHashSameSum(t *testing.T) {
	ctx := context.Background()
	b := open(t, posix.Options{})
	if err := b.CreateBucket(ctx, "bkt", ""); err != nil {
		t.Fatal(err)
	}
	var simd, plain atomic.Int64
	posix.SetHookBodyHash(func(s bool) {
		if s {
			simd.Add(1)
		} else {
			plain.Add(1)
		}
	})
	defer posix.SetHookBodyHash(nil)

	// Alone: crypto/md5.
	rng := rand.New(rand.NewSource(2))
	one := make([]byte, 2<<20+77)
	rng.Read(one)
	if _, err := b.Put(ctx, "bkt", "alone", &oddReader{data: one}, int64(len(one)), store.ObjectMeta{}); err != nil {
		t.Fatal(err)
	}
	if simd.Load() != 0 || plain.Load() != 1 {
		t.Fatalf("a lone 2 MiB body: simd %d plain %d, want 0 and 1", simd.Load(), plain.Load())
	}

	const n = 8
	gate := make(chan struct{})
	var started sync.WaitGroup
	started.Add(n)
	sizes := []int{1 << 20, 1<<20 + 1, 3<<20 + 12345, 4 << 20, 2<<20 - 63, 5<<20 + 7, 1<<20 + 64, 6 << 20}
	bodies := make([][]byte, n)
	errs := make([]error, n)
	etags := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		bodies[i] = make([]byte, sizes[i])
		rng.Read(bodies[i])
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := &gateReader{gate: gate, odd: oddReader{data: bodies[i]}}
			started.Done()
			oi, err := b.Put(ctx, "bkt", fmt.Sprintf("k%d", i), r, int64(sizes[i]), store.ObjectMeta{})
			errs[i], etags[i] = err, oi.ETag
		}()
	}
	started.Wait()
	// Every Put has chosen its hash once all of them wait at their gate.
	deadline := time.Now().Add(10 * time.Second)
	for simd.Load()+plain.Load() < n+1 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	close(gate)
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("put %d: %v", i, errs[i])
		}
		sum := md5.Sum(bodies[i])
		if want := hex.EncodeToString(sum[:]); etags[i] != want {
			t.Errorf("put %d (%d bytes): ETag %s, want %s", i, sizes[i], etags[i], want)
		}
		rc, _, err := b.Get(ctx, "bkt", fmt.Sprintf("k%d", i), 0, -1)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(rc)
		rc.Close()
		if md5.Sum(got) != sum {
			t.Errorf("put %d: content differs", i)
		}
	}
	if simd.Load() < n-2 {
		t.Errorf("%d of %d concurrent large bodies hashed in md5-simd's lanes, want at least %d", simd.Load(), n, n-2)
	}

	// Small bodies never go to the lanes.
	simd.Store(0)
	if _, err := b.Put(ctx, "bkt", "small", &oddReader{data: one[:4096]}, 4096, store.ObjectMeta{}); err != nil {
		t.Fatal(err)
	}
	if simd.Load() != 0 {
		t.Errorf("a 4 KiB body went to the lanes")
	}
}
