package crossview

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/tristore/tristore/client/nfs"
	"github.com/tristore/tristore/internal/sse"
	"github.com/tristore/tristore/internal/testutil"
)

// TestEncryptedObjectViews: what the other views see of an object
// encrypted at rest over S3, through the real `tristore serve` (which
// keeps the server key in DATA/.tristore/sse/server.key, 0600): NFS
// callers other than the owner get NFS3ERR_ACCES, root reads the
// ciphertext (never the plaintext), and `tristore volume create` refuses
// the object's name.
func TestEncryptedObjectViews(t *testing.T) {
	testutil.NeedRoot(t, "NFS callers with another uid (the server switches fsuid)")
	testutil.NeedCmd(t, "go")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	bin := testutil.TristoreBin(ctx, t)
	data := t.TempDir()
	srv := startServe(ctx, t, bin, data)
	s3c := s3.New(s3.Options{Region: "us-east-1", BaseEndpoint: aws.String("http://" + srv.addrs["s3"]), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(accessKey, secretKey, "")})
	if _, err := s3c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String("sealed")}); err != nil {
		t.Fatal(err)
	}
	plain := bytes.Repeat([]byte("top secret plaintext\n"), 5000)
	if _, err := s3c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("sealed"), Key: aws.String("secret"), Body: bytes.NewReader(plain),
		ServerSideEncryption: types.ServerSideEncryptionAes256}); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(filepath.Join(data, ".tristore", "sse", "server.key")); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("server key: %v", err)
	}
	uid, gid := uint32(1000), uint32(1000)
	user, err := nfs.Dial(ctx, srv.addrs["nfs"], nfs.Options{UID: &uid, GID: &gid})
	if err != nil {
		t.Fatal(err)
	}
	defer user.Close()
	if _, err := user.Mount(ctx, "/"); err != nil {
		t.Fatal(err)
	}
	fh, attr, err := user.LookupPath(ctx, "sealed/secret")
	if err != nil {
		t.Fatalf("lookup: %v", err)
	}
	if attr.Mode&0o777 != 0o600 || attr.Size != uint64(sse.CipherSize(int64(len(plain)))) {
		t.Errorf("NFS attributes: mode %o size %d, want 600 and the stored size %d", attr.Mode&0o777, attr.Size, sse.CipherSize(int64(len(plain))))
	}
	if _, err := user.ReadFile(ctx, fh); !errors.Is(err, nfs.ErrAcces) {
		t.Errorf("NFS read by uid 1000: %v, want NFS3ERR_ACCES", err)
	}
	root, err := nfs.Dial(ctx, srv.addrs["nfs"], nfs.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	if _, err := root.Mount(ctx, "/"); err != nil {
		t.Fatal(err)
	}
	rfh, _, err := root.LookupPath(ctx, "sealed/secret")
	if err != nil {
		t.Fatal(err)
	}
	got, err := root.ReadFile(ctx, rfh)
	if err != nil || len(got) != int(sse.CipherSize(int64(len(plain)))) || bytes.Contains(got, []byte("top secret")) {
		t.Errorf("NFS read by root: %d bytes, %v (plaintext in it: %v)", len(got), err, bytes.Contains(got, []byte("top secret")))
	}
	out, err := exec.CommandContext(ctx, bin, "volume", "create", "sealed/secret", "1Mi", "--data", data).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "exists") {
		t.Errorf("volume create over the encrypted object: %v\n%s", err, out)
	}
}
