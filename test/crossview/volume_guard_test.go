package crossview

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	iscsi "github.com/tristore/tristore/client/iscsi"
	"github.com/tristore/tristore/client/nfs"
	"github.com/tristore/tristore/internal/testutil"
)

func s3Client(addr string) *s3.Client {
	return s3.New(s3.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String("http://" + addr),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(accessKey, secretKey, ""),
		// One attempt: a refusal must come back as it is, not be retried.
		RetryMaxAttempts: 1,
	})
}

// wantS3InUse checks that err is S3's 409 OperationAborted.
func wantS3InUse(t *testing.T, what string, err error) {
	t.Helper()
	var ae smithy.APIError
	var re *awshttp.ResponseError
	if !errors.As(err, &ae) || ae.ErrorCode() != "OperationAborted" || !errors.As(err, &re) || re.HTTPStatusCode() != 409 {
		t.Fatalf("%s of a served volume: %v, want 409 OperationAborted", what, err)
	}
}

// mountNFS mounts the server's NFS export with `tristore mount` (FUSE)
// and returns the mount point; cleanup unmounts it.
func mountNFS(t *testing.T, bin, addr string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "mnt")
	os.Mkdir(dir, 0o755)
	// Not bound to ctx: cancelling it would SIGKILL the mount and leave a
	// dead FUSE mount behind; cleanup stops it with SIGINT (it unmounts).
	cmd := exec.Command(bin, "mount", "nfs://"+addr+"/", dir)
	var logb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &logb, &logb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-exited:
		case <-time.After(20 * time.Second):
			cmd.Process.Kill()
			<-exited
		}
		if testutil.IsMounted(dir) {
			testutil.Quiet("umount", "-l", dir)
		}
	})
	for i := 0; i < 600; i++ { // up to 60 s
		if testutil.IsMounted(dir) {
			return dir
		}
		select {
		case err := <-exited:
			t.Fatalf("tristore mount exited: %v\n%s", err, logb.String())
		case <-time.After(100 * time.Millisecond):
		}
	}
	t.Fatalf("not mounted after 60 s\n%s", logb.String())
	return ""
}

// TestServedVolumeGuardedAcrossViews: while an initiator is logged in to a
// volume, no view can replace, truncate, rename or delete its object —
// S3 (served by the same process and by a second `tristore serve` over the
// same tree), NFS (our client and the FUSE mount) and `tristore volume
// delete` from another process — and what the initiator wrote stays in
// the object. After logout the volume is an ordinary object again; deleting
// it over S3 leaves a broken registration that `volume list` reports,
// discovery skips and `volume delete` removes.
func TestServedVolumeGuardedAcrossViews(t *testing.T) {
	testutil.NeedCmd(t, "go")
	testutil.NeedRoot(t, "FUSE mount of the NFS export")
	testutil.NeedFUSE(t)
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	bin := testutil.TristoreBin(ctx, t)
	data := t.TempDir()
	for _, v := range []string{"vols/lun0", "vols/spare"} {
		if out, err := exec.CommandContext(ctx, bin, "volume", "create", v, "16Mi", "--data", data).CombinedOutput(); err != nil {
			t.Fatalf("volume create: %v\n%s", err, out)
		}
	}
	srv := startServe(ctx, t, bin, data)
	other := startServe(ctx, t, bin, data) // a second process over the same tree
	iqn := "iqn.2026-11.io.tristore:vols:lun0"
	sess, err := iscsi.Open(ctx, iscsi.Config{Portal: srv.addrs["iscsi"], Target: iqn})
	if err != nil {
		log, _ := os.ReadFile(srv.log)
		t.Fatalf("iSCSI login: %v\n%s", err, log)
	}
	defer sess.Close()
	blk := bytes.Repeat([]byte("written by iSCSI"), 4096/16)
	const off = 1 << 20
	if _, err := sess.WriteAtFUA(ctx, blk, off); err != nil {
		t.Fatalf("iSCSI write: %v", err)
	}

	// S3, through the serving process and through the other one.
	for name, addr := range map[string]string{"same process": srv.addrs["s3"], "other process": other.addrs["s3"]} {
		c := s3Client(addr)
		_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("vols"), Key: aws.String("lun0"), Body: strings.NewReader("x\n")})
		wantS3InUse(t, "PUT ("+name+")", err)
		_, err = c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("vols"), Key: aws.String("lun0")})
		wantS3InUse(t, "DELETE ("+name+")", err)
		_, err = c.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String("vols"), Key: aws.String("lun0"), CopySource: aws.String("vols/spare")})
		wantS3InUse(t, "CopyObject onto ("+name+")", err)
	}

	// NFS with our client.
	nc, err := nfs.Dial(ctx, srv.addrs["nfs"], nfs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if _, err := nc.Mount(ctx, "/"); err != nil {
		t.Fatal(err)
	}
	vols, _, err := nc.LookupPath(ctx, "vols")
	if err != nil {
		t.Fatal(err)
	}
	if err := nc.Remove(ctx, vols, "lun0"); !errors.Is(err, nfs.ErrAcces) {
		t.Fatalf("NFS REMOVE of a served volume: %v, want ACCES", err)
	}

	// The FUSE mount shows the refusal as EACCES.
	mnt := mountNFS(t, bin, srv.addrs["nfs"])
	lun := filepath.Join(mnt, "vols", "lun0")
	if err := os.Remove(lun); !errors.Is(err, syscall.EACCES) {
		t.Errorf("rm through the FUSE mount: %v, want EACCES", err)
	}
	if err := os.Truncate(lun, 1<<20); !errors.Is(err, syscall.EACCES) {
		t.Errorf("truncate through the FUSE mount: %v, want EACCES", err)
	}
	if err := os.Rename(filepath.Join(mnt, "vols", "spare"), lun); !errors.Is(err, syscall.EACCES) {
		t.Errorf("mv over through the FUSE mount: %v, want EACCES", err)
	}
	if err := os.Rename(lun, filepath.Join(mnt, "vols", "moved")); !errors.Is(err, syscall.EACCES) {
		t.Errorf("mv away through the FUSE mount: %v, want EACCES", err)
	}

	// `tristore volume delete` and `volume list` from yet another process.
	out, err := exec.CommandContext(ctx, bin, "volume", "delete", "vols/lun0", "--data", data).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "in use") {
		t.Fatalf("volume delete of a served volume: %v\n%s", err, out)
	}
	out, err = exec.CommandContext(ctx, bin, "volume", "list", "--data", data).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "served") {
		t.Fatalf("volume list while served: %v\n%s", err, out)
	}

	// Everything the initiator wrote is still the object's content.
	s3c := s3Client(srv.addrs["s3"])
	rangeGET := func() ([]byte, error) {
		o, err := s3c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("vols"), Key: aws.String("lun0"),
			Range: aws.String(fmt.Sprintf("bytes=%d-%d", off, off+len(blk)-1))})
		if err != nil {
			return nil, err
		}
		defer o.Body.Close()
		return io.ReadAll(o.Body)
	}
	if got, err := rangeGET(); err != nil || !bytes.Equal(got, blk) {
		t.Fatalf("volume data after refused changes: %v", err)
	}
	if got, err := sess.ReadAt(ctx, make([]byte, len(blk)), off); err != nil || got != len(blk) {
		t.Fatalf("LUN still serves: %d %v", got, err)
	}

	// After logout: an ordinary object. S3 DELETE works (bounded wait for
	// the target to close the LUN after the session ends).
	sess.Close()
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := s3c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String("vols"), Key: aws.String("lun0")})
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("S3 DELETE after logout: %v", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// The registration is now broken: listed as such, not discovered, deletable.
	out, err = exec.CommandContext(ctx, bin, "volume", "list", "--data", data).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "broken") || !strings.Contains(string(out), "spare") {
		t.Fatalf("volume list after the object was deleted: %v\n%s", err, out)
	}
	ts, err := iscsi.Discover(ctx, iscsi.Config{Portal: srv.addrs["iscsi"]})
	if err != nil || len(ts) != 1 || ts[0].Name != "iqn.2026-11.io.tristore:vols:spare" {
		t.Fatalf("discovery with one broken volume: %+v %v", ts, err)
	}
	if out, err := exec.CommandContext(ctx, bin, "volume", "delete", "vols/lun0", "--data", data).CombinedOutput(); err != nil {
		t.Fatalf("volume delete of the broken volume: %v\n%s", err, out)
	}
	out, err = exec.CommandContext(ctx, bin, "volume", "list", "--data", data).CombinedOutput()
	if err != nil || strings.Contains(string(out), "lun0") {
		t.Fatalf("volume list after delete: %v\n%s", err, out)
	}
}
