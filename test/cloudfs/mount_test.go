// Package cloudfs tests `tristore mount s3://...` end to end: the real
// binary mounts a bucket of `tristore serve`, is killed with dirty data,
// and the next mount uploads it.
package cloudfs

import (
	"context"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	s3client "github.com/tristore/tristore/client/s3"
	"github.com/tristore/tristore/internal/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

const ak, sk = "TRISTORECLOUDFS00001", "tristore-cloudfs-secret-0001"

func sums(t *testing.T, dir string) map[string]string {
	t.Helper()
	s, err := testutil.TreeSums(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestMountCrash: cp a source tree into a mount whose write-back never
// fires and whose close does not upload; kill -9 the mount; a second
// gateway is refused while the dead one's lease runs; the next mount with
// the same cache uploads everything, and a mount with an empty cache then
// sees the tree identical.
func TestMountCrash(t *testing.T) {
	testutil.NeedRoot(t, "FUSE mounts")
	testutil.NeedFUSE(t)
	ctx := context.Background()
	bin := testutil.TristoreBin(ctx, t)
	sv := testutil.StartServe(t, testutil.ServeOptions{Bin: bin, Data: t.TempDir(), On: []string{"s3"},
		Args: []string{"--access-key", ak, "--secret-key", sk}})
	ep := "http://" + sv.Addrs["s3"]
	e, err := s3client.New(s3client.Config{Endpoint: ep, AccessKey: ak, SecretKey: sk, PathStyle: true})
	if err != nil {
		t.Fatal(err)
	}
	b := "tree"
	if _, err := e.API().CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: &b}); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_ACCESS_KEY_ID", ak)
	t.Setenv("AWS_SECRET_ACCESS_KEY", sk)
	common := []string{"--s3-endpoint", ep, "--s3-lease-ttl", "4s", "--s3-chunk-size", "256KiB"}
	src := filepath.Join(runtime.GOROOT(), "src", "encoding", "json")
	want := sums(t, src)

	cache := t.TempDir()
	dir := t.TempDir()
	m := testutil.StartMount(t, bin, "s3://tree/home", dir, append([]string{"--cache", cache, "--cache-size", "64MiB",
		"--s3-write-back-age", "1h", "--s3-flush-on-close=false"}, common...)...)
	testutil.Run(t, 2*time.Minute, "cp", "-a", src, filepath.Join(dir, "json"))
	if got := sums(t, filepath.Join(dir, "json")); !maps.Equal(got, want) {
		t.Fatal("tree differs inside the first mount")
	}
	m.Kill()
	syscall.Unmount(dir, syscall.MNT_DETACH)

	// The dead mount's lease still holds: a second gateway is refused.
	other := exec.Command(bin, append([]string{"mount", "s3://tree/home", t.TempDir(), "--cache", t.TempDir()}, common...)...)
	out, err := other.CombinedOutput()
	if err == nil || !strings.Contains(string(out), "leased by another gateway") {
		t.Fatalf("second gateway during the lease: %v\n%s", err, out)
	}
	time.Sleep(4 * time.Second)

	dir2 := t.TempDir()
	m2 := testutil.StartMount(t, bin, "s3://tree/home", dir2, append([]string{"--cache", cache}, common...)...)
	if !strings.Contains(m2.Output(), "found dirty chunks") {
		t.Errorf("the remount did not report recovering dirty chunks:\n%s", m2.Output())
	}
	m2.Stop(t, 90*time.Second)

	dir3 := t.TempDir()
	m3 := testutil.StartMount(t, bin, "s3://tree/home", dir3, append([]string{"--cache", t.TempDir(), "--s3-read-only"}, common...)...)
	if got := sums(t, filepath.Join(dir3, "json")); !maps.Equal(got, want) {
		t.Fatal("tree differs after crash, recovery and a fresh mount")
	}
	if err := os.WriteFile(filepath.Join(dir3, "x"), nil, 0o644); err == nil || !strings.Contains(err.Error(), "read-only") {
		t.Fatalf("write on a read-only mount: %v", err)
	}
	m3.Stop(t, 90*time.Second)
}
