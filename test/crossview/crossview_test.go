// Package crossview checks the central promise of README.md end to end, through
// the real `tristore serve` binary and real clients of each protocol: one
// tree, three views. An object PUT over S3 is a file over NFS; a file
// written over NFS is an object with the right ETag over S3; a block
// written over iSCSI is in the volume object that S3 and NFS read.
package crossview

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	iscsi "github.com/tristore/tristore/client/iscsi"
	"github.com/tristore/tristore/client/nfs"
	"github.com/tristore/tristore/internal/testutil"
)

func TestMain(m *testing.M) { testutil.Main(m) }

const (
	accessKey = "CROSSVIEWTESTKEY0001"
	secretKey = "crossviewtestsecret0000000000000000000001"
)

// server is a running `tristore serve` with S3, NFS and iSCSI on 127.0.0.1:0.
type server struct {
	addrs map[string]string
	log   string // the log file
}

func startServe(ctx context.Context, t *testing.T, bin, data string) *server {
	t.Helper()
	sv := testutil.StartServe(t, testutil.ServeOptions{Bin: bin, Data: data, On: []string{"s3", "nfs", "iscsi"},
		Env: []string{"TRISTORE_ACCESS_KEY=" + accessKey, "TRISTORE_SECRET_KEY=" + secretKey}})
	return &server{addrs: sv.Addrs, log: sv.LogPath()}
}

func md5hex(b []byte) string { s := md5.Sum(b); return hex.EncodeToString(s[:]) }

func TestThreeViews(t *testing.T) {
	testutil.NeedCmd(t, "go")
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	bin := testutil.TristoreBin(ctx, t)
	data := t.TempDir()

	// A 16 MiB volume made with the CLI before serve starts.
	if out, err := exec.CommandContext(ctx, bin, "volume", "create", "vols/lun0", "16Mi", "--data", data).CombinedOutput(); err != nil {
		t.Fatalf("volume create: %v\n%s", err, out)
	}
	srv := startServe(ctx, t, bin, data)

	s3c := s3.New(s3.Options{
		Region:       "us-east-1",
		BaseEndpoint: aws.String("http://" + srv.addrs["s3"]),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(accessKey, secretKey, ""),
	})
	nc, err := nfs.Dial(ctx, srv.addrs["nfs"], nfs.Options{})
	if err != nil {
		t.Fatalf("nfs dial: %v", err)
	}
	defer nc.Close()
	if _, err := nc.Mount(ctx, "/"); err != nil {
		t.Fatalf("nfs mount /: %v", err)
	}

	// S3 PUT -> NFS READ.
	if _, err := s3c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("xview")}); err != nil {
		t.Fatalf("CreateBucket: %v", err)
	}
	a := bytes.Repeat([]byte("object written over S3\n"), 3000)
	if _, err := s3c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("xview"), Key: aws.String("dir/from-s3.txt"), Body: bytes.NewReader(a)}); err != nil {
		t.Fatalf("PutObject: %v", err)
	}
	fh, attr, err := nc.LookupPath(ctx, "xview/dir/from-s3.txt")
	if err != nil {
		t.Fatalf("NFS lookup of the S3 object: %v", err)
	}
	if attr.Size != uint64(len(a)) {
		t.Fatalf("NFS size %d, want %d", attr.Size, len(a))
	}
	got, err := nc.ReadFile(ctx, fh)
	if err != nil || !bytes.Equal(got, a) {
		t.Fatalf("NFS read of the S3 object: %d bytes, %v", len(got), err)
	}

	// NFS CREATE + FILE_SYNC WRITE -> S3 GET with the MD5 ETag.
	dir, _, err := nc.LookupPath(ctx, "xview/dir")
	if err != nil {
		t.Fatal(err)
	}
	b := bytes.Repeat([]byte("file written over NFS\n"), 5000)
	nfh, _, err := nc.Create(ctx, dir, "from-nfs.txt", nfs.Unchecked, nfs.SetAttr{}, nfs.Verifier{})
	if err != nil {
		t.Fatalf("NFS create: %v", err)
	}
	if err := nc.WriteFile(ctx, nfh, b, nfs.FileSync); err != nil {
		t.Fatalf("NFS write: %v", err)
	}
	checkS3 := func(key string, want []byte) {
		t.Helper()
		out, err := s3c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("xview"), Key: aws.String(key)})
		if err != nil {
			t.Fatalf("GetObject %s: %v", key, err)
		}
		body, err := io.ReadAll(out.Body)
		out.Body.Close()
		if err != nil || !bytes.Equal(body, want) {
			t.Fatalf("S3 GET %s: %d bytes (%v), want the %d bytes written over NFS", key, len(body), err, len(want))
		}
		if etag := strings.Trim(aws.ToString(out.ETag), `"`); etag != md5hex(want) {
			t.Fatalf("S3 ETag of %s = %s, want MD5 %s", key, etag, md5hex(want))
		}
	}
	checkS3("dir/from-nfs.txt", b)

	// An in-place NFS overwrite of the S3 object changes its ETag too.
	patch := []byte("PATCHED OVER NFS")
	if _, err := nc.Write(ctx, fh, 100, patch, nfs.FileSync); err != nil {
		t.Fatalf("NFS overwrite: %v", err)
	}
	copy(a[100:], patch)
	checkS3("dir/from-s3.txt", a)

	// The NFS listing shows what S3 lists.
	ents, err := nc.Readdir(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		if e.Name != "." && e.Name != ".." {
			names = append(names, e.Name)
		}
	}
	if fmt.Sprint(names) != "[from-nfs.txt from-s3.txt]" && fmt.Sprint(names) != "[from-s3.txt from-nfs.txt]" {
		t.Fatalf("NFS READDIR of xv/dir = %v", names)
	}

	// iSCSI WRITE -> the volume object over S3 (ranged GET) and NFS.
	sess, err := iscsi.Open(ctx, iscsi.Config{Portal: srv.addrs["iscsi"], Target: "iqn.2026-11.io.tristore:vols:lun0"})
	if err != nil {
		log, _ := os.ReadFile(srv.log)
		t.Fatalf("iSCSI login: %v\n%s", err, log)
	}
	defer sess.Close()
	if sess.Size() != 16<<20 {
		t.Fatalf("LUN size %d, want 16 MiB", sess.Size())
	}
	blk := bytes.Repeat([]byte("iSCSI block data"), 4096/16)
	const off = 1 << 20
	if _, err := sess.WriteAtFUA(ctx, blk, off); err != nil {
		t.Fatalf("iSCSI write: %v", err)
	}
	rng := fmt.Sprintf("bytes=%d-%d", off, off+len(blk)-1)
	out, err := s3c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("vols"), Key: aws.String("lun0"), Range: aws.String(rng)})
	if err != nil {
		t.Fatalf("ranged GET of the volume: %v", err)
	}
	body, _ := io.ReadAll(out.Body)
	out.Body.Close()
	if !bytes.Equal(body, blk) {
		t.Fatalf("S3 ranged GET of the volume returned %d bytes that differ from the iSCSI write", len(body))
	}
	vfh, _, err := nc.LookupPath(ctx, "vols/lun0")
	if err != nil {
		t.Fatal(err)
	}
	nb := make([]byte, len(blk))
	if n, err := nc.ReadAt(ctx, vfh, nb, off); err != nil || n != len(nb) || !bytes.Equal(nb, blk) {
		t.Fatalf("NFS read of the volume: %d bytes, %v", n, err)
	}
}
