package s3

import (
	"fmt"
	"testing"
	"time"

	"github.com/tristore/tristore/store/posix"
)

// settleStamps waits until the bucket directory's stamp is old enough for
// the store to keep its state in memory (store/posix bucketcache.go: 50 ms).
func settleStamps() { time.Sleep(120 * time.Millisecond) }

// TestPutReadsBucketOnce pins what a PUT costs in bucket lookups: the S3
// handler asks for the policy, ownership controls, Object Lock, default
// encryption and versioning documents (and the store for versioning again),
// and a settled bucket is read from disk once for ten PUTs, not 50 times.
// And a change through the API is seen by the very next request while the
// state is cached: versioning, then a bucket policy.
func TestPutReadsBucketOnce(t *testing.T) {
	ts := newAccessTestServer(t)
	b := ts.st.(*posix.Backend)
	alice := map[string]string{"X-Test-User": "alice"}
	bob := map[string]string{"X-Test-User": "bob"}
	wantStatus(t, ts.do(t, "PUT", "/cbk", nil, alice), 200)
	wantStatus(t, ts.do(t, "PUT", "/cbk/d/0", []byte("x"), alice), 200) // makes d/
	settleStamps()
	r0 := b.BucketStateReads()
	for i := 1; i <= 10; i++ {
		r := ts.do(t, "PUT", fmt.Sprintf("/cbk/d/%d", i), []byte("x"), alice)
		wantStatus(t, r, 200)
		if v := r.header.Get("X-Amz-Version-Id"); v != "" {
			t.Fatalf("unversioned bucket answered version %q", v)
		}
	}
	if n := b.BucketStateReads() - r0; n != 1 {
		t.Fatalf("10 PUTs into a settled bucket read its state %d times, want 1", n)
	}

	// Versioning enabled while the state is cached: the next PUT gets a version.
	settleStamps()
	wantStatus(t, ts.do(t, "PUT", "/cbk/d/a", []byte("x"), alice), 200)
	wantStatus(t, ts.do(t, "PUT", "/cbk?versioning", []byte(enableVersioning), alice), 200)
	r := ts.do(t, "PUT", "/cbk/d/b", []byte("x"), alice)
	wantStatus(t, r, 200)
	if v := r.header.Get("X-Amz-Version-Id"); v == "" || v == "null" {
		t.Fatalf("PUT right after enabling versioning: version %q", v)
	}

	// A policy granting bob PutObject: allowed by the next request; deleted: denied again.
	settleStamps()
	wantErr(t, ts.do(t, "PUT", "/cbk/d/bob", []byte("x"), bob), 403, "AccessDenied")
	pol := `{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"AWS":["bob"]},"Action":"s3:PutObject","Resource":"arn:aws:s3:::cbk/*"}]}`
	wantStatus(t, ts.do(t, "PUT", "/cbk?policy", []byte(pol), alice), 204)
	wantStatus(t, ts.do(t, "PUT", "/cbk/d/bob", []byte("x"), bob), 200)
	settleStamps()
	wantStatus(t, ts.do(t, "PUT", "/cbk/d/bob", []byte("y"), bob), 200)
	wantStatus(t, ts.do(t, "DELETE", "/cbk?policy", nil, alice), 204)
	wantErr(t, ts.do(t, "PUT", "/cbk/d/bob", []byte("z"), bob), 403, "AccessDenied")
}
