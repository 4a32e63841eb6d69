package s3

import (
	"io"
	"log/slog"
	"net/http"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/tristore/tristore/store/posix"
)

// headerAuth is an in-test Authenticator: X-Test-User names the caller
// ("root" is an admin), no header means anonymous. It lets the access
// tests pick identities without signing requests.
type headerAuth struct{}

func (headerAuth) Authenticate(r *http.Request) (Identity, error) {
	u := r.Header.Get("X-Test-User")
	if u == "" {
		return Identity{Anonymous: true}, nil
	}
	return Identity{AccessKey: "AK" + u, User: u, Admin: u == "root"}, nil
}

// newAccessTestServer runs a Server over a posix store with access control
// on (no anonymous access) and headerAuth identities.
func newAccessTestServer(t *testing.T) *testServer {
	t.Helper()
	dir := t.TempDir()
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := posix.Open(dir, posix.Options{Log: log})
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	srv, err := New(st, Options{Log: log, Metrics: reg, Auth: headerAuth{}, Authz: NewPolicyAuthz(),
		MaxHeaderBytes: 16 << 10, ShutdownTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	url, _ := serveTest(t, srv, st)
	return &testServer{url: url, srv: srv, st: st, reg: reg}
}

// TestAdminSubjectToPolicyDeny: an admin is allowed everything on a
// bucket it does not own, unless the bucket policy explicitly denies it;
// even then it may read, replace and delete the policy itself.
func TestAdminSubjectToPolicyDeny(t *testing.T) {
	ts := newAccessTestServer(t)
	alice := map[string]string{"X-Test-User": "alice"}
	root := map[string]string{"X-Test-User": "root"}
	bob := map[string]string{"X-Test-User": "bob"}

	wantStatus(t, ts.do(t, "PUT", "/abk", nil, alice), 200)
	wantStatus(t, ts.do(t, "PUT", "/abk/doc", []byte("alice's"), alice), 200)
	// Without a policy: the admin may do anything, bob nothing, anonymous nothing.
	wantStatus(t, ts.do(t, "GET", "/abk/doc", nil, root), 200)
	wantStatus(t, ts.do(t, "PUT", "/abk/by-root", []byte("root's"), root), 200)
	wantErr(t, ts.do(t, "GET", "/abk/doc", nil, bob), 403, "AccessDenied")
	wantErr(t, ts.do(t, "GET", "/abk/doc", nil, nil), 403, "AccessDenied")

	// Alice denies root reading and writing objects (and bob reading).
	pol := `{"Version":"2012-10-17","Statement":[
	 {"Effect":"Deny","Principal":{"AWS":["root"]},"Action":["s3:GetObject","s3:PutObject"],"Resource":"arn:aws:s3:::abk/*"},
	 {"Effect":"Deny","Principal":{"AWS":["root","bob"]},"Action":"s3:DeleteObject","Resource":"arn:aws:s3:::abk/doc"}]}`
	wantStatus(t, ts.do(t, "PUT", "/abk?policy", []byte(pol), alice), 204)

	wantErr(t, ts.do(t, "GET", "/abk/doc", nil, root), 403, "AccessDenied")
	wantErr(t, ts.do(t, "HEAD", "/abk/doc", nil, root), 403, "")
	wantErr(t, ts.do(t, "PUT", "/abk/doc", []byte("overwritten"), root), 403, "AccessDenied")
	wantErr(t, ts.do(t, "DELETE", "/abk/doc", nil, root), 403, "AccessDenied")
	// CopyObject reads its source with the caller's rights: denied too.
	wantStatus(t, ts.do(t, "PUT", "/rootb", nil, root), 200)
	wantErr(t, ts.do(t, "PUT", "/rootb/copy", nil, map[string]string{"X-Test-User": "root", "X-Amz-Copy-Source": "/abk/doc"}), 403, "AccessDenied")
	// What the policy does not deny stays allowed for the admin.
	wantStatus(t, ts.do(t, "GET", "/abk?list-type=2", nil, root), 200)
	wantStatus(t, ts.do(t, "DELETE", "/abk/by-root", nil, root), 204)
	// The owner is not named in the Deny and keeps access.
	if g := ts.do(t, "GET", "/abk/doc", nil, alice); g.status != 200 || string(g.body) != "alice's" {
		t.Fatalf("owner GET after policy: %d %q", g.status, g.body)
	}
	// The denied PUT changed nothing.
	wantErr(t, ts.do(t, "GET", "/abk/by-root", nil, alice), 404, "NoSuchKey")

	// Policy management stays open to the admin, so it can repair the policy.
	g := ts.do(t, "GET", "/abk?policy", nil, root)
	if g.status != 200 || string(g.body) != pol {
		t.Fatalf("admin GetBucketPolicy: %d %q", g.status, g.body)
	}
	wantStatus(t, ts.do(t, "PUT", "/abk?policy", []byte(pol), root), 204)
	wantErr(t, ts.do(t, "GET", "/abk?policy", nil, bob), 403, "AccessDenied")
	wantStatus(t, ts.do(t, "DELETE", "/abk?policy", nil, root), 204)
	wantStatus(t, ts.do(t, "GET", "/abk/doc", nil, root), 200)

	// A Deny-everything policy on everyone still leaves the policy manageable
	// by the admin and the owner.
	all := `{"Version":"2012-10-17","Statement":[{"Effect":"Deny","Principal":"*","Action":"s3:*","Resource":["arn:aws:s3:::abk","arn:aws:s3:::abk/*"]}]}`
	wantStatus(t, ts.do(t, "PUT", "/abk?policy", []byte(all), alice), 204)
	wantErr(t, ts.do(t, "GET", "/abk/doc", nil, root), 403, "AccessDenied")
	wantErr(t, ts.do(t, "GET", "/abk?list-type=2", nil, root), 403, "AccessDenied")
	wantErr(t, ts.do(t, "GET", "/abk/doc", nil, alice), 403, "AccessDenied")
	wantStatus(t, ts.do(t, "DELETE", "/abk?policy", nil, root), 204)
	wantStatus(t, ts.do(t, "GET", "/abk/doc", nil, root), 200)
	wantStatus(t, ts.do(t, "GET", "/abk/doc", nil, alice), 200)
	// Buckets that do not exist still say so to the admin.
	wantErr(t, ts.do(t, "GET", "/nosuch/doc", nil, root), 404, "NoSuchBucket")
}
