package cloudfs

import (
	"context"
	"maps"
	"os"
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

func mountFS(t *testing.T, dev, dir string, opts ...string) {
	t.Helper()
	testutil.Run(t, 2*time.Minute, "mount", append(opts, dev, dir)...)
	t.Cleanup(func() {
		if testutil.IsMounted(dir) {
			syscall.Unmount(dir, syscall.MNT_DETACH)
		}
	})
}

// TestCloudVolume: a block volume made with `volume create --backend` in a
// bucket of one `tristore serve` (standing in for a remote cluster):
// ext4 on it through `tristore mount` + loop, a real source tree untarred
// into it, e2fsck clean; a second gateway refused while the first holds
// it; a read-only remount with an empty cache (everything from the
// bucket) holds the same tree; then a second `tristore serve` offers it
// as an iSCSI LUN, qemu-img (libiscsi) copies it out, and the copy is a
// clean ext4 holding the same tree.
func TestCloudVolume(t *testing.T) {
	testutil.NeedRoot(t, "loop devices and mounts")
	testutil.NeedFUSE(t)
	for _, c := range []string{"losetup", "mkfs.ext4", "e2fsck", "qemu-img", "iscsi-ls", "tar"} {
		testutil.NeedCmd(t, c)
	}
	ctx := context.Background()
	bin := testutil.TristoreBin(ctx, t)
	cluster := testutil.StartServe(t, testutil.ServeOptions{Bin: bin, Data: t.TempDir(), On: []string{"s3"},
		Args: []string{"--access-key", ak, "--secret-key", sk}})
	hostport := cluster.Addrs["s3"]
	ep := "http://" + hostport
	e, err := s3client.New(s3client.Config{Endpoint: ep, AccessKey: ak, SecretKey: sk, PathStyle: true})
	if err != nil {
		t.Fatal(err)
	}
	b := "vols"
	if _, err := e.API().CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: &b}); err != nil {
		t.Fatal(err)
	}
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	gw := t.TempDir() // the gateway's data directory
	keys := []string{"--s3-access-key", ak, "--s3-secret-key", sk}
	out := testutil.Run(t, 2*time.Minute, bin, append([]string{"volume", "create", "--data", gw, "--backend", "s3://" + hostport + "/vols", "--s3-lease-ttl", "4s", "vol1", "96Mi"}, keys...)...)
	if !strings.Contains(out, "iqn.2026-11.io.tristore:-cloud:vol1") {
		t.Fatalf("volume create said: %s", out)
	}
	if out, err := testutil.TryRun(2*time.Minute, bin, append([]string{"volume", "create", "--data", t.TempDir(), "--backend", "s3://" + hostport + "/vols", "vol1", "96Mi"}, keys...)...); err == nil || !strings.Contains(out, "already exists") {
		t.Fatalf("creating it twice: %v %s", err, out)
	}

	src := filepath.Join(runtime.GOROOT(), "src", "encoding")
	want := sums(t, src)
	tarball := filepath.Join(t.TempDir(), "src.tar")
	testutil.Run(t, 2*time.Minute, "tar", "-C", filepath.Dir(src), "-cf", tarball, "encoding")
	common := append([]string{"--s3-endpoint", ep, "--s3-lease-ttl", "4s"}, keys...)
	dir := t.TempDir()
	m := testutil.StartMount(t, bin, "s3://vols/volumes/vol1", dir, append([]string{"--cache", t.TempDir()}, common...)...)
	lun := filepath.Join(dir, "lun")
	if fi, err := os.Stat(lun); err != nil || fi.Size() != 96<<20 {
		t.Fatalf("volume file: %v %v", fi, err)
	}
	dev := testutil.AttachLoop(t, lun)
	testutil.Run(t, 2*time.Minute, "mkfs.ext4", "-q", "-F", dev.Dev)
	mnt := t.TempDir()
	mountFS(t, dev.Dev, mnt)
	testutil.Run(t, 2*time.Minute, "tar", "-C", mnt, "-xf", tarball)
	if got := sums(t, filepath.Join(mnt, "encoding")); !maps.Equal(got, want) {
		t.Fatal("tree differs on ext4 over the cloud volume")
	}
	testutil.Run(t, 2*time.Minute, "umount", mnt)
	testutil.Run(t, 2*time.Minute, "e2fsck", "-fn", dev.Dev)

	// A second gateway is refused while this one holds the volume.
	out2, err := testutil.TryRun(2*time.Minute, bin, append([]string{"mount", "s3://vols/volumes/vol1", t.TempDir(), "--cache", t.TempDir()}, common...)...)
	if err == nil || !strings.Contains(out2, "leased by another gateway") {
		t.Fatalf("second gateway: %v\n%s", err, out2)
	}
	if err := dev.Detach(t); err != nil {
		t.Fatal(err)
	}
	m.Stop(t, 90*time.Second)

	// Remounted read-only with an empty cache: every block from the bucket.
	dir2 := t.TempDir()
	m2 := testutil.StartMount(t, bin, "s3://vols/volumes/vol1", dir2, append([]string{"--cache", t.TempDir(), "--s3-read-only"}, common...)...)
	lun2 := filepath.Join(dir2, "lun")
	dev2 := testutil.AttachLoop(t, lun2, "-r")
	testutil.Run(t, 2*time.Minute, "e2fsck", "-fn", dev2.Dev)
	mnt1 := t.TempDir()
	mountFS(t, dev2.Dev, mnt1, "-o", "ro")
	if got := sums(t, filepath.Join(mnt1, "encoding")); !maps.Equal(got, want) {
		t.Fatal("tree differs after a remount with an empty cache")
	}
	testutil.Run(t, 2*time.Minute, "umount", mnt1)
	if err := dev2.Detach(t); err != nil {
		t.Fatal(err)
	}
	m2.Stop(t, 90*time.Second)

	// The gateway's serve offers it over iSCSI.
	mnt2 := copyOverISCSI(t, bin, gw, "vol1")
	if got := sums(t, filepath.Join(mnt2, "encoding")); !maps.Equal(got, want) {
		t.Fatal("tree differs in the copy read over iSCSI")
	}
}

// copyOverISCSI serves the volume name of the gateway data directory gw
// as an iSCSI LUN of `tristore serve`, copies it out with libiscsi
// (qemu-img), checks the copy with e2fsck and mounts it read-only; it
// returns the mount point.
func copyOverISCSI(t *testing.T, bin, gw, name string) string {
	t.Helper()
	sv := testutil.StartServe(t, testutil.ServeOptions{Bin: bin, Data: gw, On: []string{"iscsi"}})
	addr := sv.Addrs["iscsi"]
	iqn := "iqn.2026-11.io.tristore:-cloud:" + name
	if out := testutil.Run(t, 2*time.Minute, "iscsi-ls", "-s", "iscsi://"+addr); !strings.Contains(out, iqn) {
		t.Fatalf("iscsi-ls:\n%s", out)
	}
	raw := filepath.Join(t.TempDir(), "copy.raw")
	testutil.Run(t, 2*time.Minute, "qemu-img", "convert", "-f", "raw", "-O", "raw", "iscsi://"+addr+"/"+iqn+"/0", raw)
	testutil.Run(t, 2*time.Minute, "e2fsck", "-fn", raw)
	mnt := t.TempDir()
	mountFS(t, testutil.AttachLoop(t, raw, "-r").Dev, mnt, "-o", "ro")
	return mnt
}
