package s3

import (
	"bytes"
	"context"
	"crypto/md5"
	"crypto/tls"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"hash/crc32"
	"io"
	"io/fs"
	"log/slog"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"

	"github.com/tristore/tristore/blockdev/filelun"
	"github.com/tristore/tristore/iam"
	"github.com/tristore/tristore/internal/sse"
	"github.com/tristore/tristore/internal/testutil"
	"github.com/tristore/tristore/store/posix"
)

// sseEnv is a server over a posix store in dir with SSE-S3 configured
// (the key where `tristore serve` keeps it) and an aws-sdk-go-v2 client.
type sseEnv struct {
	logs       *lockedBuf
	dir        string
	c          *awss3.Client
	ts         *testServer
	ak, secret string
}

func newSSEEnv(t *testing.T) *sseEnv {
	t.Helper()
	dir := t.TempDir()
	logs := &lockedBuf{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	st, err := posix.Open(dir, posix.Options{Log: log})
	if err != nil {
		t.Fatal(err)
	}
	users, err := iam.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	u, secret, _, err := users.EnsureRoot("", "")
	if err != nil {
		t.Fatal(err)
	}
	srv, err := New(st, Options{AllowAnonymous: true, Log: log, Auth: NewSigV4Auth(users, ""), Authz: NewPolicyAuthz(),
		ShutdownTimeout: 20 * time.Second, SSEKeyFile: filepath.Join(dir, ".tristore", "sse", "server.key")})
	if err != nil {
		t.Fatal(err)
	}
	url, _ := serveTest(t, srv, st)
	c := awss3.NewFromConfig(aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider(u.AccessKey, secret, "")},
		func(o *awss3.Options) {
			o.BaseEndpoint = aws.String(url)
			o.UsePathStyle = true
			o.RetryMaxAttempts = 1
		})
	if _, err := c.CreateBucket(context.Background(), &awss3.CreateBucketInput{Bucket: aws.String("enc")}); err != nil {
		t.Fatal(err)
	}
	return &sseEnv{logs: logs, dir: dir, c: c, ts: &testServer{url: url, srv: srv, st: st}, ak: u.AccessKey, secret: secret}
}

// lockedBuf collects the server's log lines.
type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
func (l *lockedBuf) String() string { l.mu.Lock(); defer l.mu.Unlock(); return l.b.String() }

// pattern is plaintext no two 64-byte windows of which are alike, so a
// window found on disk can only be a copy of the plaintext.
func pattern(n int) []byte {
	b := make([]byte, 0, n+16)
	for i := 0; len(b) < n; i++ {
		b = append(b, []byte(hex.EncodeToString([]byte{byte(i >> 16), byte(i >> 8), byte(i)}))...)
		b = append(b, '.', ' ')
	}
	return b[:n]
}

func apiCode(err error) string {
	var ae smithy.APIError
	if errors.As(err, &ae) {
		return ae.ErrorCode()
	}
	return ""
}

func httpStatus(err error) int {
	var re interface{ HTTPStatusCode() int }
	if errors.As(err, &re) {
		return re.HTTPStatusCode()
	}
	return 0
}

// noPlaintextOnDisk fails if any 64-byte window of plain is in any file
// under the data tree, and returns the object file's bytes.
func (e *sseEnv) noPlaintextOnDisk(t *testing.T, plain []byte, key string) []byte {
	t.Helper()
	err := filepath.WalkDir(e.dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for off := 0; off+64 <= len(plain); off += max(4096, len(plain)/32) {
			if bytes.Contains(b, plain[off:off+64]) {
				t.Errorf("%s holds plaintext (from offset %d)", p, off)
				return nil
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(e.dir, "enc", key))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func (e *sseEnv) get(t *testing.T, in *awss3.GetObjectInput) ([]byte, *awss3.GetObjectOutput, error) {
	t.Helper()
	in.Bucket = aws.String("enc")
	out, err := e.c.GetObject(context.Background(), in)
	if err != nil {
		return nil, nil, err
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	return b, out, err
}

// TestSSES3RoundTrip: an SSE-S3 object is stored encrypted (no plaintext
// anywhere in the tree, the layout's size, mode 0600) and read back whole,
// by ranges across segment boundaries, listed with its plaintext size and
// MD5 ETag; a flipped byte on disk fails the read instead of giving
// wrong bytes.
func TestSSES3RoundTrip(t *testing.T) {
	e := newSSEEnv(t)
	ctx := context.Background()
	plain := pattern(3*sse.SegSize + 1234)
	sum := md5.Sum(plain)
	etag := `"` + hex.EncodeToString(sum[:]) + `"`
	put, err := e.c.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String("enc"), Key: aws.String("dir/obj"),
		Body: bytes.NewReader(plain), ServerSideEncryption: types.ServerSideEncryptionAes256})
	if err != nil {
		t.Fatal(err)
	}
	if put.ServerSideEncryption != types.ServerSideEncryptionAes256 || aws.ToString(put.ETag) != etag {
		t.Errorf("PUT answered SSE %q ETag %s, want AES256 %s", put.ServerSideEncryption, aws.ToString(put.ETag), etag)
	}
	stored := e.noPlaintextOnDisk(t, plain, "dir/obj")
	if int64(len(stored)) != sse.CipherSize(int64(len(plain))) {
		t.Errorf("stored %d bytes, want %d", len(stored), sse.CipherSize(int64(len(plain))))
	}
	if st, _ := os.Stat(filepath.Join(e.dir, "enc", "dir/obj")); st.Mode().Perm() != 0o600 {
		t.Errorf("encrypted file mode %v, want 0600", st.Mode())
	}
	if st, err := os.Stat(filepath.Join(e.dir, ".tristore", "sse", "server.key")); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("server key file: %v", err)
	}
	got, out, err := e.get(t, &awss3.GetObjectInput{Key: aws.String("dir/obj")})
	if err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("GET: %v (equal %v)", err, bytes.Equal(got, plain))
	}
	if out.ServerSideEncryption != types.ServerSideEncryptionAes256 || aws.ToString(out.ETag) != etag || aws.ToInt64(out.ContentLength) != int64(len(plain)) {
		t.Errorf("GET headers: SSE %q ETag %s length %d", out.ServerSideEncryption, aws.ToString(out.ETag), aws.ToInt64(out.ContentLength))
	}
	for _, rg := range [][2]int{{0, 0}, {sse.SegSize - 3, sse.SegSize + 2}, {100, 2*sse.SegSize + 5}, {3 * sse.SegSize, len(plain) - 1}, {len(plain) - 1, len(plain) - 1}} {
		got, out, err := e.get(t, &awss3.GetObjectInput{Key: aws.String("dir/obj"), Range: aws.String("bytes=" + itoa(rg[0]) + "-" + itoa(rg[1]))})
		if err != nil || !bytes.Equal(got, plain[rg[0]:rg[1]+1]) {
			t.Fatalf("range %v: %v (got %d bytes)", rg, err, len(got))
		}
		if want := "bytes " + itoa(rg[0]) + "-" + itoa(rg[1]) + "/" + itoa(len(plain)); aws.ToString(out.ContentRange) != want {
			t.Errorf("Content-Range %q, want %q", aws.ToString(out.ContentRange), want)
		}
	}
	head, err := e.c.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: aws.String("enc"), Key: aws.String("dir/obj")})
	if err != nil || aws.ToInt64(head.ContentLength) != int64(len(plain)) || head.ServerSideEncryption != types.ServerSideEncryptionAes256 {
		t.Fatalf("HEAD: %v %+v", err, head)
	}
	list, err := e.c.ListObjectsV2(ctx, &awss3.ListObjectsV2Input{Bucket: aws.String("enc")})
	if err != nil || len(list.Contents) != 1 || aws.ToInt64(list.Contents[0].Size) != int64(len(plain)) || aws.ToString(list.Contents[0].ETag) != etag {
		t.Fatalf("list: %v %+v", err, list.Contents)
	}
	// If-Match compares the ETag clients were given (the plaintext's MD5).
	if _, err := e.c.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String("enc"), Key: aws.String("dir/obj"), IfMatch: aws.String(etag),
		Body: bytes.NewReader(plain), ServerSideEncryption: types.ServerSideEncryptionAes256}); err != nil {
		t.Fatalf("PUT If-Match with the plaintext ETag: %v", err)
	}
	// A copy without SSE headers into a bucket without default
	// encryption is plain again, with the same bytes.
	if _, err := e.c.CopyObject(ctx, &awss3.CopyObjectInput{Bucket: aws.String("enc"), Key: aws.String("plain-copy"), CopySource: aws.String("enc/dir/obj")}); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(filepath.Join(e.dir, "enc", "plain-copy")); !bytes.Equal(b, plain) {
		t.Error("a copy of an SSE-S3 object to a plain one is not the plaintext")
	}

	// Tamper: one flipped byte in the second segment.
	p := filepath.Join(e.dir, "enc", "dir/obj")
	stored, err = os.ReadFile(p) // the If-Match PUT rewrote it
	if err != nil {
		t.Fatal(err)
	}
	stored[sse.SegSize+sse.TagSize+7] ^= 0x40
	if err := os.WriteFile(p, stored, 0o600); err != nil {
		t.Fatal(err)
	}
	_, _, err = e.get(t, &awss3.GetObjectInput{Key: aws.String("dir/obj"), Range: aws.String("bytes=70000-70010")})
	if httpStatus(err) != 500 || apiCode(err) != "InternalError" {
		t.Errorf("ranged GET of a tampered segment: %v, want 500 InternalError", err)
	}
	got, _, err = e.get(t, &awss3.GetObjectInput{Key: aws.String("dir/obj")})
	if err == nil {
		t.Errorf("whole GET of a tampered object succeeded (equal to the plaintext: %v)", bytes.Equal(got, plain))
	}
	if !strings.Contains(e.logs.String(), "level=ERROR msg=\"s3: encrypted object failed authentication while read\"") {
		t.Errorf("no ERROR line for the mid-body failure; log:\n%s", e.logs.String())
	}
	// The first segment is intact: a range inside it still reads.
	if got, _, err := e.get(t, &awss3.GetObjectInput{Key: aws.String("dir/obj"), Range: aws.String("bytes=0-99")}); err != nil || !bytes.Equal(got, plain[:100]) {
		t.Errorf("intact first segment: %v", err)
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

// ssec is one customer key in the SDK's form.
type ssec struct{ key, md5 string }

func newSSEC(seed byte) ssec {
	k := bytes.Repeat([]byte{seed}, 32)
	m := md5.Sum(k)
	return ssec{base64.StdEncoding.EncodeToString(k), base64.StdEncoding.EncodeToString(m[:])}
}

// TestSSECustomerKey: SSE-C objects need their key to be read (400
// without, 403 with another), bad keys are refused on PUT, ranged reads
// work, a copy re-encrypts under the destination's key, and the key is
// nowhere in the tree.
func TestSSECustomerKey(t *testing.T) {
	e := newSSEEnv(t)
	ctx := context.Background()
	k1, k2 := newSSEC(1), newSSEC(2)
	plain := pattern(2*sse.SegSize + 99)
	put, err := e.c.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String("enc"), Key: aws.String("c"), Body: bytes.NewReader(plain),
		SSECustomerAlgorithm: aws.String("AES256"), SSECustomerKey: aws.String(k1.key), SSECustomerKeyMD5: aws.String(k1.md5)})
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToString(put.SSECustomerAlgorithm) != "AES256" || aws.ToString(put.SSECustomerKeyMD5) != k1.md5 {
		t.Errorf("PUT answered %q %q", aws.ToString(put.SSECustomerAlgorithm), aws.ToString(put.SSECustomerKeyMD5))
	}
	e.noPlaintextOnDisk(t, plain, "c")
	raw, _ := base64.StdEncoding.DecodeString(k1.key)
	filepath.WalkDir(e.dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if b, _ := os.ReadFile(p); bytes.Contains(b, raw) || bytes.Contains(b, []byte(k1.key)) || bytes.Contains(b, []byte(k1.md5)) {
				t.Errorf("%s holds the customer key or its MD5", p)
			}
		}
		return nil
	})
	withKey := func(k ssec, in *awss3.GetObjectInput) *awss3.GetObjectInput {
		in.SSECustomerAlgorithm, in.SSECustomerKey, in.SSECustomerKeyMD5 = aws.String("AES256"), aws.String(k.key), aws.String(k.md5)
		return in
	}
	got, out, err := e.get(t, withKey(k1, &awss3.GetObjectInput{Key: aws.String("c")}))
	if err != nil || !bytes.Equal(got, plain) || aws.ToString(out.SSECustomerKeyMD5) != k1.md5 {
		t.Fatalf("GET with the key: %v", err)
	}
	got, _, err = e.get(t, withKey(k1, &awss3.GetObjectInput{Key: aws.String("c"), Range: aws.String("bytes=65000-131100")}))
	if err != nil || !bytes.Equal(got, plain[65000:131101]) {
		t.Fatalf("ranged GET with the key: %v", err)
	}
	if _, _, err := e.get(t, &awss3.GetObjectInput{Key: aws.String("c")}); httpStatus(err) != 400 || apiCode(err) != "InvalidRequest" {
		t.Errorf("GET without the key: %v, want 400 InvalidRequest", err)
	}
	if _, err := e.c.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: aws.String("enc"), Key: aws.String("c")}); httpStatus(err) != 400 {
		t.Errorf("HEAD without the key: %v, want 400", err)
	}
	if _, _, err := e.get(t, withKey(k2, &awss3.GetObjectInput{Key: aws.String("c")})); httpStatus(err) != 403 || apiCode(err) != "AccessDenied" {
		t.Errorf("GET with another key: %v, want 403 AccessDenied", err)
	}
	bad := []struct {
		name string
		k    ssec
	}{
		{"MD5 mismatch", ssec{k1.key, k2.md5}},
		{"16-byte key", ssec{base64.StdEncoding.EncodeToString(make([]byte, 16)), func() string { m := md5.Sum(make([]byte, 16)); return base64.StdEncoding.EncodeToString(m[:]) }()}},
	}
	for _, b := range bad {
		_, err := e.c.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String("enc"), Key: aws.String("bad"), Body: strings.NewReader("x"),
			SSECustomerAlgorithm: aws.String("AES256"), SSECustomerKey: aws.String(b.k.key), SSECustomerKeyMD5: aws.String(b.k.md5)})
		if httpStatus(err) != 400 || apiCode(err) != "InvalidArgument" {
			t.Errorf("%s: %v, want 400 InvalidArgument", b.name, err)
		}
	}
	if _, err := e.c.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: aws.String("enc"), Key: aws.String("bad")}); httpStatus(err) != 404 {
		t.Errorf("a refused PUT stored something: %v", err)
	}
	// Copy from key 1 to key 2.
	cp, err := e.c.CopyObject(ctx, &awss3.CopyObjectInput{Bucket: aws.String("enc"), Key: aws.String("c2"), CopySource: aws.String("enc/c"),
		CopySourceSSECustomerAlgorithm: aws.String("AES256"), CopySourceSSECustomerKey: aws.String(k1.key), CopySourceSSECustomerKeyMD5: aws.String(k1.md5),
		SSECustomerAlgorithm: aws.String("AES256"), SSECustomerKey: aws.String(k2.key), SSECustomerKeyMD5: aws.String(k2.md5)})
	if err != nil {
		t.Fatal(err)
	}
	if aws.ToString(cp.SSECustomerKeyMD5) != k2.md5 {
		t.Errorf("copy answered key MD5 %q", aws.ToString(cp.SSECustomerKeyMD5))
	}
	if got, _, err := e.get(t, withKey(k2, &awss3.GetObjectInput{Key: aws.String("c2")})); err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("GET of the copy with key 2: %v", err)
	}
	if _, _, err := e.get(t, withKey(k1, &awss3.GetObjectInput{Key: aws.String("c2")})); httpStatus(err) != 403 {
		t.Errorf("GET of the copy with key 1: %v, want 403", err)
	}
	// A copy without the source key is refused.
	_, err = e.c.CopyObject(ctx, &awss3.CopyObjectInput{Bucket: aws.String("enc"), Key: aws.String("c3"), CopySource: aws.String("enc/c")})
	if httpStatus(err) != 400 {
		t.Errorf("copy without the source key: %v, want 400", err)
	}
	// Listings show the plaintext size.
	list, err := e.c.ListObjectsV2(ctx, &awss3.ListObjectsV2Input{Bucket: aws.String("enc"), Prefix: aws.String("c")})
	if err != nil || len(list.Contents) != 2 || aws.ToInt64(list.Contents[0].Size) != int64(len(plain)) {
		t.Fatalf("list: %v %+v", err, list.Contents)
	}
}

// TestSSEBucketDefault: GetBucketEncryption answers not found until a
// configuration is put; with AES256 as default a plain PUT is stored
// encrypted, a multipart upload is refused (not stored in the clear), and
// DeleteBucketEncryption ends it.
func TestSSEBucketDefault(t *testing.T) {
	e := newSSEEnv(t)
	ctx := context.Background()
	b := aws.String("enc")
	if _, err := e.c.GetBucketEncryption(ctx, &awss3.GetBucketEncryptionInput{Bucket: b}); httpStatus(err) != 404 || apiCode(err) != "ServerSideEncryptionConfigurationNotFoundError" {
		t.Fatalf("GetBucketEncryption unset: %v", err)
	}
	cfg := &types.ServerSideEncryptionConfiguration{Rules: []types.ServerSideEncryptionRule{{
		ApplyServerSideEncryptionByDefault: &types.ServerSideEncryptionByDefault{SSEAlgorithm: types.ServerSideEncryptionAes256}}}}
	if _, err := e.c.PutBucketEncryption(ctx, &awss3.PutBucketEncryptionInput{Bucket: b, ServerSideEncryptionConfiguration: cfg}); err != nil {
		t.Fatal(err)
	}
	got, err := e.c.GetBucketEncryption(ctx, &awss3.GetBucketEncryptionInput{Bucket: b})
	if err != nil || len(got.ServerSideEncryptionConfiguration.Rules) != 1 ||
		got.ServerSideEncryptionConfiguration.Rules[0].ApplyServerSideEncryptionByDefault.SSEAlgorithm != types.ServerSideEncryptionAes256 {
		t.Fatalf("GetBucketEncryption: %v %+v", err, got)
	}
	kms := &types.ServerSideEncryptionConfiguration{Rules: []types.ServerSideEncryptionRule{{
		ApplyServerSideEncryptionByDefault: &types.ServerSideEncryptionByDefault{SSEAlgorithm: types.ServerSideEncryptionAwsKms}}}}
	if _, err := e.c.PutBucketEncryption(ctx, &awss3.PutBucketEncryptionInput{Bucket: b, ServerSideEncryptionConfiguration: kms}); httpStatus(err) != 501 {
		t.Errorf("aws:kms default: %v, want 501", err)
	}
	wantErr(t, e.ts.do(t, "PUT", "/enc?encryption", []byte("<ServerSideEncryptionConfiguration><Rule>"), nil), 400, "MalformedXML")
	plain := pattern(100000)
	put, err := e.c.PutObject(ctx, &awss3.PutObjectInput{Bucket: b, Key: aws.String("d"), Body: bytes.NewReader(plain)})
	if err != nil || put.ServerSideEncryption != types.ServerSideEncryptionAes256 {
		t.Fatalf("plain PUT into a default-encrypted bucket: %v SSE %q", err, put.ServerSideEncryption)
	}
	e.noPlaintextOnDisk(t, plain, "d")
	if g, out, err := e.get(t, &awss3.GetObjectInput{Key: aws.String("d")}); err != nil || !bytes.Equal(g, plain) || out.ServerSideEncryption != types.ServerSideEncryptionAes256 {
		t.Fatalf("GET: %v", err)
	}
	if up, err := e.c.CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{Bucket: b, Key: aws.String("mp")}); err != nil || up.ServerSideEncryption != types.ServerSideEncryptionAes256 {
		t.Errorf("multipart into a default-encrypted bucket: %v, want an SSE-S3 upload", err)
	}
	// POST Object is not encrypted here: refused, not stored in the clear.
	// POST Object is not encrypted here: refused, not stored in the clear.
	auth := signedPolicy(t, e.ak, e.secret, time.Now().Add(time.Hour), []any{map[string]string{"bucket": "enc"}, []any{"starts-with", "$key", ""}})
	auth["key"] = "posted"
	if r := sendPostForm(t, e.ts.url+"/enc", keysOf(auth), auth, "f.txt", bytes.NewReader(plain)); r.status != 501 {
		t.Errorf("POST Object into a default-encrypted bucket: %d %s, want 501", r.status, r.body)
	}
	if _, err := e.c.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: b, Key: aws.String("posted")}); httpStatus(err) != 404 {
		t.Errorf("the refused POST stored something: %v", err)
	}
	if _, err := e.c.DeleteBucketEncryption(ctx, &awss3.DeleteBucketEncryptionInput{Bucket: b}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.GetBucketEncryption(ctx, &awss3.GetBucketEncryptionInput{Bucket: b}); httpStatus(err) != 404 {
		t.Errorf("after delete: %v", err)
	}
	if put, err := e.c.PutObject(ctx, &awss3.PutObjectInput{Bucket: b, Key: aws.String("p"), Body: bytes.NewReader(plain)}); err != nil || put.ServerSideEncryption != "" {
		t.Errorf("PUT after the default was deleted: %v SSE %q", err, put.ServerSideEncryption)
	}
}

// TestSSEVersioned: encrypted versions of a versioned key each read back
// by version ID; the older one stays encrypted in the hidden versions area.
func TestSSEVersioned(t *testing.T) {
	e := newSSEEnv(t)
	ctx := context.Background()
	b := aws.String("enc")
	if _, err := e.c.PutBucketVersioning(ctx, &awss3.PutBucketVersioningInput{Bucket: b,
		VersioningConfiguration: &types.VersioningConfiguration{Status: types.BucketVersioningStatusEnabled}}); err != nil {
		t.Fatal(err)
	}
	v1, v2 := pattern(70000), bytes.ToUpper(pattern(90000))
	var ids []string
	for _, body := range [][]byte{v1, v2} {
		out, err := e.c.PutObject(ctx, &awss3.PutObjectInput{Bucket: b, Key: aws.String("v"), Body: bytes.NewReader(body), ServerSideEncryption: types.ServerSideEncryptionAes256})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, aws.ToString(out.VersionId))
	}
	for i, body := range [][]byte{v1, v2} {
		got, _, err := e.get(t, &awss3.GetObjectInput{Key: aws.String("v"), VersionId: aws.String(ids[i]), Range: aws.String("bytes=65530-65600")})
		if err != nil || !bytes.Equal(got, body[65530:65601]) {
			t.Fatalf("version %d: %v", i, err)
		}
	}
	e.noPlaintextOnDisk(t, v1, "v")
	e.noPlaintextOnDisk(t, v2, "v")
	// A versioned encrypted multipart object (one part).
	up, err := e.c.CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{Bucket: b, Key: aws.String("w"), ServerSideEncryption: types.ServerSideEncryptionAes256})
	if err != nil {
		t.Fatal(err)
	}
	pt, err := e.c.UploadPart(ctx, &awss3.UploadPartInput{Bucket: b, Key: aws.String("w"), UploadId: up.UploadId, PartNumber: aws.Int32(1), Body: bytes.NewReader(v1)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.CompleteMultipartUpload(ctx, &awss3.CompleteMultipartUploadInput{Bucket: b, Key: aws.String("w"), UploadId: up.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{{PartNumber: aws.Int32(1), ETag: pt.ETag}}}}); err != nil {
		t.Fatal(err)
	}
	lv, err := e.c.ListObjectVersions(ctx, &awss3.ListObjectVersionsInput{Bucket: b})
	if err != nil || len(lv.Versions) != 3 || aws.ToInt64(lv.Versions[1].Size) != int64(len(v1)) || aws.ToInt64(lv.Versions[2].Size) != int64(len(v1)) {
		t.Fatalf("versions: %v %+v", err, lv.Versions)
	}
}

// TestSSEVolumeRefused: no encrypted object is ever a block volume: an
// encrypted PUT or copy onto a volume's name is refused (the volume keeps
// its blocks), and `volume create` refuses an encrypted object's name.
func TestSSEVolumeRefused(t *testing.T) {
	e := newSSEEnv(t)
	ctx := context.Background()
	fs := e.ts.st.(filelun.Store)
	if _, err := filelun.Create(ctx, fs, "enc", "vol1", 1<<20); err != nil {
		t.Fatal(err)
	}
	_, err := e.c.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String("enc"), Key: aws.String("vol1"), Body: strings.NewReader("secret"),
		ServerSideEncryption: types.ServerSideEncryptionAes256})
	if httpStatus(err) != 400 || apiCode(err) != "InvalidRequest" {
		t.Errorf("SSE PUT onto a volume: %v, want 400 InvalidRequest", err)
	}
	if _, err := e.c.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String("enc"), Key: aws.String("src"), Body: strings.NewReader("x")}); err != nil {
		t.Fatal(err)
	}
	_, err = e.c.CopyObject(ctx, &awss3.CopyObjectInput{Bucket: aws.String("enc"), Key: aws.String("vol1"), CopySource: aws.String("enc/src"),
		ServerSideEncryption: types.ServerSideEncryptionAes256})
	if httpStatus(err) != 400 {
		t.Errorf("SSE copy onto a volume: %v, want 400", err)
	}
	if st, err := os.Stat(filepath.Join(e.dir, "enc", "vol1")); err != nil || st.Size() != 1<<20 {
		t.Fatalf("the volume's file changed: %v", err)
	}
	if _, err := e.c.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String("enc"), Key: aws.String("sec"), Body: strings.NewReader("secret"),
		ServerSideEncryption: types.ServerSideEncryptionAes256}); err != nil {
		t.Fatal(err)
	}
	if _, err := filelun.Create(ctx, fs, "enc", "sec", 1<<20); !errors.Is(err, filelun.ErrVolumeExists) {
		t.Errorf("volume create over an encrypted object: %v, want ErrVolumeExists", err)
	}
}

// TestSSEMultipart: SSE-S3 and SSE-C multipart uploads (parts sent out
// of order, one copied from an encrypted object) read back whole, by
// ranges across part and segment boundaries and by part number; every
// SSE-C part needs the upload's key; nothing is stored in the clear.
func TestSSEMultipart(t *testing.T) {
	e := newSSEEnv(t)
	ctx := context.Background()
	b := aws.String("enc")
	k1, k2 := newSSEC(7), newSSEC(8)
	p1, p2 := pattern(5<<20+3), bytes.ToUpper(pattern(5<<20+100000))
	src := bytes.ToLower(pattern(70000))[:70000]
	copy(src, "copied-part:")
	if _, err := e.c.PutObject(ctx, &awss3.PutObjectInput{Bucket: b, Key: aws.String("src"), Body: bytes.NewReader(src), ServerSideEncryption: types.ServerSideEncryptionAes256}); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		k    *ssec
	}{{"SSE-S3", nil}, {"SSE-C", &k1}} {
		key := aws.String("mp-" + c.name)
		cin := &awss3.CreateMultipartUploadInput{Bucket: b, Key: key}
		if c.k == nil {
			cin.ServerSideEncryption = types.ServerSideEncryptionAes256
		} else {
			cin.SSECustomerAlgorithm, cin.SSECustomerKey, cin.SSECustomerKeyMD5 = aws.String("AES256"), aws.String(c.k.key), aws.String(c.k.md5)
		}
		up, err := e.c.CreateMultipartUpload(ctx, cin)
		if err != nil {
			t.Fatalf("%s: create: %v", c.name, err)
		}
		part := func(n int32, body []byte, k *ssec) (*awss3.UploadPartOutput, error) {
			in := &awss3.UploadPartInput{Bucket: b, Key: key, UploadId: up.UploadId, PartNumber: aws.Int32(n), Body: bytes.NewReader(body)}
			if k != nil {
				in.SSECustomerAlgorithm, in.SSECustomerKey, in.SSECustomerKeyMD5 = aws.String("AES256"), aws.String(k.key), aws.String(k.md5)
			}
			return e.c.UploadPart(ctx, in)
		}
		if c.k != nil {
			if _, err := part(2, p2, nil); httpStatus(err) != 400 {
				t.Errorf("SSE-C part without the key: %v, want 400", err)
			}
			if _, err := part(2, p2, &k2); httpStatus(err) != 403 {
				t.Errorf("SSE-C part with another key: %v, want 403", err)
			}
		}
		o2, err := part(2, p2, c.k)
		if err != nil {
			t.Fatalf("%s: part 2: %v", c.name, err)
		}
		o1, err := part(1, p1, c.k)
		if err != nil {
			t.Fatalf("%s: part 1: %v", c.name, err)
		}
		lp, err := e.c.ListParts(ctx, &awss3.ListPartsInput{Bucket: b, Key: key, UploadId: up.UploadId})
		if err != nil || len(lp.Parts) != 2 || aws.ToInt64(lp.Parts[0].Size) != int64(len(p1)) {
			t.Fatalf("%s: ListParts: %v %+v", c.name, err, lp)
		}
		cp := &awss3.UploadPartCopyInput{Bucket: b, Key: key, UploadId: up.UploadId, PartNumber: aws.Int32(3), CopySource: aws.String("enc/src")}
		if c.k != nil {
			cp.SSECustomerAlgorithm, cp.SSECustomerKey, cp.SSECustomerKeyMD5 = aws.String("AES256"), aws.String(c.k.key), aws.String(c.k.md5)
		}
		o3, err := e.c.UploadPartCopy(ctx, cp)
		if err != nil {
			t.Fatalf("%s: part copy: %v", c.name, err)
		}
		done, err := e.c.CompleteMultipartUpload(ctx, &awss3.CompleteMultipartUploadInput{Bucket: b, Key: key, UploadId: up.UploadId,
			MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{
				{PartNumber: aws.Int32(1), ETag: o1.ETag}, {PartNumber: aws.Int32(2), ETag: o2.ETag}, {PartNumber: aws.Int32(3), ETag: o3.CopyPartResult.ETag}}}})
		if err != nil {
			t.Fatalf("%s: complete: %v", c.name, err)
		}
		if c.k == nil && done.ServerSideEncryption != types.ServerSideEncryptionAes256 {
			t.Errorf("complete answered SSE %q", done.ServerSideEncryption)
		}
		whole := append(append(append([]byte{}, p1...), p2...), src...)
		get := func(in *awss3.GetObjectInput) ([]byte, *awss3.GetObjectOutput, error) {
			in.Key = key
			if c.k != nil {
				in.SSECustomerAlgorithm, in.SSECustomerKey, in.SSECustomerKeyMD5 = aws.String("AES256"), aws.String(c.k.key), aws.String(c.k.md5)
			}
			return e.get(t, in)
		}
		got, out, err := get(&awss3.GetObjectInput{})
		if err != nil || !bytes.Equal(got, whole) || aws.ToInt64(out.ContentLength) != int64(len(whole)) {
			t.Fatalf("%s: GET: %v (%d of %d bytes, equal %v)", c.name, err, len(got), len(whole), bytes.Equal(got, whole))
		}
		for _, rg := range [][2]int{{len(p1) - 10, len(p1) + 70000}, {5, 3*sse.SegSize + 7}, {len(p1) + len(p2) - 1, len(whole) - 1}, {100, len(whole) - 100}} {
			got, _, err := get(&awss3.GetObjectInput{Range: aws.String("bytes=" + itoa(rg[0]) + "-" + itoa(rg[1]))})
			if err != nil || !bytes.Equal(got, whole[rg[0]:rg[1]+1]) {
				t.Fatalf("%s: range %v: %v", c.name, rg, err)
			}
		}
		got, out, err = get(&awss3.GetObjectInput{PartNumber: aws.Int32(2)})
		if err != nil || !bytes.Equal(got, p2) || aws.ToInt32(out.PartsCount) != 3 {
			t.Fatalf("%s: part 2: %v (equal %v)", c.name, err, bytes.Equal(got, p2))
		}
		list, err := e.c.ListObjectsV2(ctx, &awss3.ListObjectsV2Input{Bucket: b, Prefix: key})
		if err != nil || len(list.Contents) != 1 || aws.ToInt64(list.Contents[0].Size) != int64(len(whole)) {
			t.Fatalf("%s: list: %v", c.name, err)
		}
		e.noPlaintextOnDisk(t, p1, *key)
		e.noPlaintextOnDisk(t, p2, *key)
		if st, _ := os.Stat(filepath.Join(e.dir, "enc", *key)); st.Mode().Perm() != 0o600 {
			t.Errorf("%s: mode %v", c.name, st.Mode())
		}
	}
	if _, _, err := e.get(t, &awss3.GetObjectInput{Key: aws.String("mp-SSE-C")}); httpStatus(err) != 400 {
		t.Errorf("SSE-C multipart object without the key: %v", err)
	}
}

// TestSSEBoto3: boto3 as a real client: SSE-S3 and SSE-C PUT/GET/HEAD and
// ranges, copy between customer keys, bucket default encryption, and
// s3transfer's multipart upload and parallel ranged download with SSE-C.
func TestSSEBoto3(t *testing.T) {
	py := testutil.NeedPython(t, "boto3")
	e := newSSEEnv(t)
	script := `import boto3, sys, os, hashlib
from botocore.config import Config
from botocore.exceptions import ClientError
from boto3.s3.transfer import TransferConfig
c = boto3.client("s3", endpoint_url=sys.argv[1], aws_access_key_id=sys.argv[2], aws_secret_access_key=sys.argv[3],
    region_name="us-east-1", config=Config(signature_version="s3v4", s3={"addressing_style": "path"}, retries={"max_attempts": 1}))
data = b"".join(b"%08d;" % i for i in range(30000))
r = c.put_object(Bucket="enc", Key="s3", Body=data, ServerSideEncryption="AES256")
assert r["ServerSideEncryption"] == "AES256", r
assert r["ETag"].strip('"') == hashlib.md5(data).hexdigest()
g = c.get_object(Bucket="enc", Key="s3", Range="bytes=65530-131080")
assert g["Body"].read() == data[65530:131081] and g["ServerSideEncryption"] == "AES256"
assert c.head_object(Bucket="enc", Key="s3")["ContentLength"] == len(data)
k1, k2 = b"k" * 32, b"K" * 32
c.put_object(Bucket="enc", Key="c", Body=data, SSECustomerAlgorithm="AES256", SSECustomerKey=k1)
assert c.get_object(Bucket="enc", Key="c", SSECustomerAlgorithm="AES256", SSECustomerKey=k1, Range="bytes=1-70000")["Body"].read() == data[1:70001]
for kw, code in (({}, 400), ({"SSECustomerAlgorithm": "AES256", "SSECustomerKey": k2}, 403)):
    try:
        c.get_object(Bucket="enc", Key="c", **kw)
        raise SystemExit("GET of an SSE-C object with %r succeeded" % kw)
    except ClientError as e:
        assert e.response["ResponseMetadata"]["HTTPStatusCode"] == code, e.response
c.copy_object(Bucket="enc", Key="c2", CopySource={"Bucket": "enc", "Key": "c"},
    CopySourceSSECustomerAlgorithm="AES256", CopySourceSSECustomerKey=k1, SSECustomerAlgorithm="AES256", SSECustomerKey=k2)
assert c.get_object(Bucket="enc", Key="c2", SSECustomerAlgorithm="AES256", SSECustomerKey=k2)["Body"].read() == data
big = os.path.join(sys.argv[4], "big")
with open(big, "wb") as f:
    f.write(os.urandom(12 << 20))
tc = TransferConfig(multipart_threshold=5 << 20, multipart_chunksize=5 << 20, max_concurrency=4)
extra = {"SSECustomerAlgorithm": "AES256", "SSECustomerKey": k1}
c.upload_file(big, "enc", "big", ExtraArgs=extra, Config=tc)
c.download_file("enc", "big", big + ".back", ExtraArgs=extra, Config=tc)
assert open(big, "rb").read() == open(big + ".back", "rb").read()
c.put_bucket_encryption(Bucket="enc", ServerSideEncryptionConfiguration={"Rules": [{"ApplyServerSideEncryptionByDefault": {"SSEAlgorithm": "AES256"}}]})
assert c.get_bucket_encryption(Bucket="enc")["ServerSideEncryptionConfiguration"]["Rules"][0]["ApplyServerSideEncryptionByDefault"]["SSEAlgorithm"] == "AES256"
assert c.put_object(Bucket="enc", Key="d", Body=data)["ServerSideEncryption"] == "AES256"
c.delete_bucket_encryption(Bucket="enc")
print("OK")
`
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, py, "-c", script, e.ts.url, e.ak, e.secret, t.TempDir()).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "OK") {
		t.Fatalf("boto3: %v\n%s", err, out)
	}
	b, err := os.ReadFile(filepath.Join(e.dir, "enc", "d"))
	if err != nil || bytes.Contains(b, []byte("00000001;00000002;")) {
		t.Fatalf("the default-encrypted object is stored in the clear (%v)", err)
	}
}

// TestSSECTransport: SSE-C keys are taken over TLS or from a loopback
// peer only (AWS refuses them over plain HTTP), and SSE-C headers on a
// plain object's GET, whole or ranged, are refused.
func TestSSECTransport(t *testing.T) {
	k := newSSEC(3)
	for _, c := range []struct {
		remote string
		tls    bool
		ok     bool
	}{{"127.0.0.1:5000", false, true}, {"[::1]:5000", false, true}, {"192.0.2.7:5000", false, false}, {"192.0.2.7:5000", true, true}} {
		r := httptest.NewRequest("PUT", "/b/k", nil)
		r.RemoteAddr = c.remote
		if c.tls {
			r.TLS = &tls.ConnectionState{}
		}
		r.Header.Set(sseCHdr+"Algorithm", "AES256")
		r.Header.Set(sseCHdr+"Key", k.key)
		r.Header.Set(sseCHdr+"Key-Md5", k.md5)
		ck, err := parseCustomerKey(r, sseCHdr)
		if c.ok != (err == nil && ck != nil) {
			t.Errorf("%s tls=%v: key %v, err %v", c.remote, c.tls, ck != nil, err)
		}
		if !c.ok && toAPIError(err).Code != "InvalidRequest" {
			t.Errorf("%s: %v, want InvalidRequest", c.remote, err)
		}
	}
	e := newSSEEnv(t)
	ctx := context.Background()
	if _, err := e.c.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String("enc"), Key: aws.String("plain"), Body: strings.NewReader("plain bytes")}); err != nil {
		t.Fatal(err)
	}
	for _, rg := range []*string{nil, aws.String("bytes=2-4")} {
		_, _, err := e.get(t, &awss3.GetObjectInput{Key: aws.String("plain"), Range: rg,
			SSECustomerAlgorithm: aws.String("AES256"), SSECustomerKey: aws.String(k.key), SSECustomerKeyMD5: aws.String(k.md5)})
		if httpStatus(err) != 400 {
			t.Errorf("SSE-C GET of a plain object (range %v): %v, want 400", aws.ToString(rg), err)
		}
	}
	if got, _, err := e.get(t, &awss3.GetObjectInput{Key: aws.String("plain"), Range: aws.String("bytes=2-4")}); err != nil || string(got) != "ain" {
		t.Errorf("plain ranged GET: %q %v", got, err)
	}
}

// TestSSEMultipartFullObject: a FULL_OBJECT CRC32 multipart upload
// encrypted at rest gets the plaintext's CRC (combined over the parts'
// plaintext lengths, not their sealed ones): Complete accepts the client's
// whole-object CRC and the SDK validates the GET with it.
func TestSSEMultipartFullObject(t *testing.T) {
	e := newSSEEnv(t)
	ctx := context.Background()
	b, key := aws.String("enc"), aws.String("full")
	data := pattern(5<<20 + 77777)
	up, err := e.c.CreateMultipartUpload(ctx, &awss3.CreateMultipartUploadInput{Bucket: b, Key: key, ServerSideEncryption: types.ServerSideEncryptionAes256,
		ChecksumAlgorithm: types.ChecksumAlgorithmCrc32, ChecksumType: types.ChecksumTypeFullObject})
	if err != nil {
		t.Fatal(err)
	}
	var parts []types.CompletedPart
	for i, rg := range [][2]int{{0, 5 << 20}, {5 << 20, len(data)}} {
		o, err := e.c.UploadPart(ctx, &awss3.UploadPartInput{Bucket: b, Key: key, UploadId: up.UploadId, PartNumber: aws.Int32(int32(i + 1)),
			Body: bytes.NewReader(data[rg[0]:rg[1]]), ChecksumAlgorithm: types.ChecksumAlgorithmCrc32})
		if err != nil {
			t.Fatal(err)
		}
		parts = append(parts, types.CompletedPart{PartNumber: aws.Int32(int32(i + 1)), ETag: o.ETag, ChecksumCRC32: o.ChecksumCRC32})
	}
	var crc [4]byte
	binary.BigEndian.PutUint32(crc[:], crc32.ChecksumIEEE(data))
	sum := base64.StdEncoding.EncodeToString(crc[:])
	done, err := e.c.CompleteMultipartUpload(ctx, &awss3.CompleteMultipartUploadInput{Bucket: b, Key: key, UploadId: up.UploadId,
		MultipartUpload: &types.CompletedMultipartUpload{Parts: parts}, ChecksumType: types.ChecksumTypeFullObject, ChecksumCRC32: aws.String(sum)})
	if err != nil {
		t.Fatalf("complete with the plaintext's CRC32: %v", err)
	}
	if aws.ToString(done.ChecksumCRC32) != sum {
		t.Fatalf("complete answered CRC32 %q, want %q", aws.ToString(done.ChecksumCRC32), sum)
	}
	got, out, err := e.get(t, &awss3.GetObjectInput{Key: key, ChecksumMode: types.ChecksumModeEnabled})
	if err != nil || !bytes.Equal(got, data) || aws.ToString(out.ChecksumCRC32) != sum {
		t.Fatalf("GET with checksum mode: %v", err)
	}
}

// TestSSECopyOntoItself: CopyObject onto itself with SSE headers (and the
// COPY directive) changes how the object is sealed: plain -> SSE-S3 ->
// SSE-C, keeping its bytes and user metadata; without SSE headers such a
// copy stays 400, as in S3.
func TestSSECopyOntoItself(t *testing.T) {
	e := newSSEEnv(t)
	ctx := context.Background()
	b, key := aws.String("enc"), aws.String("self")
	plain := pattern(150000)
	if _, err := e.c.PutObject(ctx, &awss3.PutObjectInput{Bucket: b, Key: key, Body: bytes.NewReader(plain), Metadata: map[string]string{"m": "v"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := e.c.CopyObject(ctx, &awss3.CopyObjectInput{Bucket: b, Key: key, CopySource: aws.String("enc/self")}); httpStatus(err) != 400 {
		t.Errorf("plain copy onto itself: %v, want 400", err)
	}
	if _, err := e.c.CopyObject(ctx, &awss3.CopyObjectInput{Bucket: b, Key: key, CopySource: aws.String("enc/self"), ServerSideEncryption: types.ServerSideEncryptionAes256}); err != nil {
		t.Fatal(err)
	}
	e.noPlaintextOnDisk(t, plain, "self")
	got, out, err := e.get(t, &awss3.GetObjectInput{Key: key})
	if err != nil || !bytes.Equal(got, plain) || out.ServerSideEncryption != types.ServerSideEncryptionAes256 || out.Metadata["m"] != "v" {
		t.Fatalf("after sealing with SSE-S3: %v", err)
	}
	k := newSSEC(9)
	if _, err := e.c.CopyObject(ctx, &awss3.CopyObjectInput{Bucket: b, Key: key, CopySource: aws.String("enc/self"),
		SSECustomerAlgorithm: aws.String("AES256"), SSECustomerKey: aws.String(k.key), SSECustomerKeyMD5: aws.String(k.md5)}); err != nil {
		t.Fatal(err)
	}
	if _, _, err := e.get(t, &awss3.GetObjectInput{Key: key}); httpStatus(err) != 400 {
		t.Errorf("GET without the new customer key: %v, want 400", err)
	}
	got, _, err = e.get(t, &awss3.GetObjectInput{Key: key, SSECustomerAlgorithm: aws.String("AES256"), SSECustomerKey: aws.String(k.key), SSECustomerKeyMD5: aws.String(k.md5)})
	if err != nil || !bytes.Equal(got, plain) {
		t.Fatalf("after re-sealing with SSE-C: %v", err)
	}
}

// TestSSEAWSCLI: aws-cli's `s3 cp` with --sse and --sse-c (12 MiB: a
// multipart upload and a parallel ranged download), and a server-side
// copy from an SSE-C source to SSE-S3 (multipart UploadPartCopy).
func TestSSEAWSCLI(t *testing.T) {
	awsBin := testutil.NeedCmd(t, "aws")
	e := newSSEEnv(t)
	dir := t.TempDir()
	env := []string{"AWS_ACCESS_KEY_ID=" + e.ak, "AWS_SECRET_ACCESS_KEY=" + e.secret, "AWS_DEFAULT_REGION=us-east-1",
		"AWS_CONFIG_FILE=" + filepath.Join(dir, "none"), "AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(dir, "none"), "PATH=" + os.Getenv("PATH")}
	run := func(args ...string) string {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, awsBin, append([]string{"--endpoint-url", e.ts.url}, args...)...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("aws %v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	src, keyFile := filepath.Join(dir, "src"), filepath.Join(dir, "key")
	data := pattern(12 << 20)
	if err := os.WriteFile(src, data, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, bytes.Repeat([]byte{0x5a}, 32), 0o600); err != nil {
		t.Fatal(err)
	}
	same := func(p string) {
		t.Helper()
		if got, err := os.ReadFile(p); err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%s differs from what was uploaded (%v)", p, err)
		}
	}
	run("s3", "cp", "--no-progress", src, "s3://enc/cli-s3", "--sse", "AES256")
	if out := run("s3api", "head-object", "--bucket", "enc", "--key", "cli-s3"); !strings.Contains(out, `"ServerSideEncryption": "AES256"`) {
		t.Errorf("head-object: %s", out)
	}
	run("s3", "cp", "--no-progress", "s3://enc/cli-s3", filepath.Join(dir, "back-s3"))
	same(filepath.Join(dir, "back-s3"))
	run("s3", "cp", "--no-progress", src, "s3://enc/cli-c", "--sse-c", "AES256", "--sse-c-key", "fileb://"+keyFile)
	run("s3", "cp", "--no-progress", "s3://enc/cli-c", filepath.Join(dir, "back-c"), "--sse-c", "AES256", "--sse-c-key", "fileb://"+keyFile)
	same(filepath.Join(dir, "back-c"))
	run("s3", "cp", "--no-progress", "s3://enc/cli-c", "s3://enc/cli-c2", "--sse-c-copy-source", "AES256", "--sse-c-copy-source-key", "fileb://"+keyFile, "--sse", "AES256")
	run("s3", "cp", "--no-progress", "s3://enc/cli-c2", filepath.Join(dir, "back-c2"))
	same(filepath.Join(dir, "back-c2"))
	e.noPlaintextOnDisk(t, data, "cli-c")
	e.noPlaintextOnDisk(t, data, "cli-c2")
}
