package s3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/tristore/tristore/internal/testutil"
	"github.com/tristore/tristore/internal/testutil/faultproxy"
)

func writeFile(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

func uploadsLeft(t *testing.T, e *Engine, bucket string) int {
	t.Helper()
	out, err := e.API().ListMultipartUploads(context.Background(), &awss3.ListMultipartUploadsInput{Bucket: &bucket})
	if err != nil {
		t.Fatal(err)
	}
	return len(out.Uploads)
}

func objectExists(e *Engine, bucket, key string) bool {
	_, err := e.API().HeadObject(context.Background(), &awss3.HeadObjectInput{Bucket: &bucket, Key: &key})
	return err == nil
}

func readObject(t *testing.T, e *Engine, bucket, key string) []byte {
	t.Helper()
	var w memWriterAt
	if _, err := e.Download(context.Background(), bucket, key, &w); err != nil {
		t.Fatal(err)
	}
	return w.buf
}

// An upload cut off by a server that stopped taking parts is left on the
// server; the next run finds it, keeps the parts whose bytes still match
// the local file, sends the changed and missing ones, and publishes
// exactly the local file.
func TestUploadFileResumes(t *testing.T) {
	ep := startServer(t)
	direct := newEngine(t, testConfig(ep, 1))
	mkBucket(t, direct, "res")
	px := faultproxy.Start(t, ep)
	// Parts 1 and 2 arrive, part 3 and later are refused for good.
	px.SetRule(faultproxy.After("PUT partNumber", 2, faultproxy.SlowDown))
	cfg := testConfig(px.URL, 1)
	cfg.Retries = 1
	e := newEngine(t, cfg)
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	src := filepath.Join(dir, "big")
	data := randBytes(31, 5*chunk+123)
	writeFile(t, src, data)
	_, err := e.UploadFile(context.Background(), "res", "big", src, FileOptions{Resume: true, StateDir: state})
	if err == nil || !strings.Contains(err.Error(), "SlowDown") || !strings.Contains(err.Error(), src) ||
		!strings.Contains(err.Error(), "left to resume") {
		t.Fatalf("first attempt: %v", err)
	}
	if px.Count("DELETE uploadId") != 0 || uploadsLeft(t, direct, "res") != 1 || objectExists(direct, "res", "big") {
		t.Fatalf("after the failure: %d aborts, %d uploads, object published %v",
			px.Count("DELETE uploadId"), uploadsLeft(t, direct, "res"), objectExists(direct, "res", "big"))
	}
	if ents, _ := os.ReadDir(state); len(ents) != 1 {
		t.Fatalf("state dir holds %d files, want the one upload", len(ents))
	}
	// The local file changes inside part 2 before the retry: part 1 is
	// kept, part 2 is sent again.
	data[chunk+10] ^= 0xff
	writeFile(t, src, data)
	px.SetRule(nil)
	px.ResetCounts()
	res, err := e.UploadFile(context.Background(), "res", "big", src, FileOptions{Resume: true, StateDir: state})
	if err != nil {
		t.Fatal(err)
	}
	if got := px.Count("PUT partNumber"); got != 5 {
		t.Errorf("resumed upload sent %d parts, want 5 of 6 (part 1 kept)", got)
	}
	if px.Count("POST uploads") != 0 {
		t.Errorf("resumed upload created a new multipart upload")
	}
	if res.ResumedBytes != chunk || res.Bytes != int64(len(data)) {
		t.Errorf("result %+v, want %d resumed bytes", res, chunk)
	}
	if !bytes.Equal(readObject(t, direct, "res", "big"), data) {
		t.Fatal("published object differs from the local file")
	}
	if n := uploadsLeft(t, direct, "res"); n != 0 {
		t.Errorf("%d multipart uploads left", n)
	}
	if ents, _ := os.ReadDir(state); len(ents) != 0 {
		t.Errorf("state file not removed after completion")
	}
}

// Without the state file (another machine, a lost cache) the interrupted
// upload is still found by ListMultipartUploads; a different chunk size
// cannot reuse its parts and starts afresh.
func TestUploadFileResumeByListing(t *testing.T) {
	ep := startServer(t)
	direct := newEngine(t, testConfig(ep, 1))
	mkBucket(t, direct, "lst")
	px := faultproxy.Start(t, ep)
	px.SetRule(faultproxy.After("PUT partNumber", 3, faultproxy.Internal))
	cfg := testConfig(px.URL, 2)
	cfg.Retries = NoRetries
	e := newEngine(t, cfg)
	src := filepath.Join(t.TempDir(), "f")
	data := randBytes(41, 4*chunk+1)
	writeFile(t, src, data)
	if _, err := e.UploadFile(context.Background(), "lst", "f", src, FileOptions{Resume: true}); err == nil {
		t.Fatal("first attempt succeeded through a failing server")
	}
	px.SetRule(nil)
	px.ResetCounts()
	res, err := e.UploadFile(context.Background(), "lst", "f", src, FileOptions{Resume: true})
	if err != nil {
		t.Fatal(err)
	}
	sent := px.Count("PUT partNumber")
	if res.ResumedBytes == 0 || sent+res.ResumedBytes/chunk != 5 {
		t.Errorf("sent %d parts, resumed %d bytes: want the 5 parts split between them", sent, res.ResumedBytes)
	}
	if !bytes.Equal(readObject(t, direct, "lst", "f"), data) {
		t.Fatal("object differs")
	}
}

// progressHook runs fn once, the first time Progress reports bytes.
func progressHook(fn func()) func(int64) {
	var once atomic.Bool
	return func(int64) {
		if once.CompareAndSwap(false, true) {
			fn()
		}
	}
}

// A local file that changes while it is uploaded is never published: the
// multipart upload is aborted (even with Resume), and the error names the
// file.
func TestUploadFileChangedAborts(t *testing.T) {
	ep := startServer(t)
	px := faultproxy.Start(t, ep)
	src := filepath.Join(t.TempDir(), "moving")
	data := randBytes(51, 3*chunk)
	writeFile(t, src, data)
	cfg := testConfig(px.URL, 1)
	cfg.Progress = progressHook(func() {
		f, err := os.OpenFile(src, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Error(err)
			return
		}
		f.Write([]byte("more"))
		f.Close()
	})
	e := newEngine(t, cfg)
	mkBucket(t, e, "chg")
	_, err := e.UploadFile(context.Background(), "chg", "moving", src, FileOptions{Resume: true})
	if err == nil || !strings.Contains(err.Error(), src+" changed during the upload") {
		t.Fatalf("got %v", err)
	}
	if px.Count("POST uploadId") != 0 || px.Count("DELETE uploadId") != 1 {
		t.Errorf("%d completes, %d aborts; want 0 and 1", px.Count("POST uploadId"), px.Count("DELETE uploadId"))
	}
	if uploadsLeft(t, e, "chg") != 0 || objectExists(e, "chg", "moving") {
		t.Error("the changed file left an upload or an object")
	}
}

// Downloads land under the final name only when complete: a failure, an
// object replaced since the listing, or a full disk leave neither the
// file nor a temporary one behind.
func TestDownloadFile(t *testing.T) {
	ep := startServer(t)
	px := faultproxy.Start(t, ep)
	cfg := testConfig(px.URL, 2)
	cfg.ChunkSize = 1 << 20
	cfg.Retries = 2
	e := newEngine(t, cfg)
	mkBucket(t, e, "dlb")
	data := randBytes(61, 3<<20+5)
	up := newEngine(t, testConfig(ep, 1))
	if _, err := up.Upload(context.Background(), "dlb", "obj", bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	head, err := up.API().HeadObject(context.Background(), &awss3.HeadObjectInput{Bucket: aws.String("dlb"), Key: aws.String("obj")})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	dst := filepath.Join(dir, "sub", "obj")
	mtime := time.Date(2020, 1, 2, 3, 4, 5, 0, time.UTC)
	res, err := e.DownloadFile(context.Background(), "dlb", "obj", dst, FileOptions{IfMatch: aws.ToString(head.ETag), MTime: mtime})
	if err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(dst)
	fi, _ := os.Stat(dst)
	if !bytes.Equal(got, data) || res.Bytes != int64(len(data)) || !fi.ModTime().Equal(mtime) {
		t.Fatalf("content equal %v, result %+v, mtime %v", bytes.Equal(got, data), res, fi.ModTime())
	}
	onlyFile := func(what string) {
		t.Helper()
		ents, _ := os.ReadDir(filepath.Join(dir, "sub"))
		if len(ents) != 1 || ents[0].Name() != "obj" {
			t.Errorf("%s: directory holds %v", what, ents)
		}
		if b, _ := os.ReadFile(dst); !bytes.Equal(b, data) {
			t.Errorf("%s: the earlier complete file was touched", what)
		}
	}
	// The object as listed is gone: If-Match fails before any byte moves.
	_, err = e.DownloadFile(context.Background(), "dlb", "obj", dst, FileOptions{IfMatch: `"0123456789abcdef0123456789abcdef"`})
	if !errors.Is(err, ErrChanged) || !strings.Contains(err.Error(), "s3://dlb/obj") {
		t.Errorf("stale ETag: %v", err)
	}
	onlyFile("stale ETag")
	// Size and ETag from a listing: one GET, no HEAD; a size that no
	// longer matches is ErrChanged at once, not retried.
	px.ResetCounts()
	small := filepath.Join(dir, "small")
	cfg2 := cfg
	cfg2.ChunkSize = 4 << 20
	e2 := newEngine(t, cfg2)
	res, err = e2.DownloadFile(context.Background(), "dlb", "obj", small, FileOptions{IfMatch: aws.ToString(head.ETag), ListedSize: int64(len(data)), SizeListed: true})
	if got, _ := os.ReadFile(small); err != nil || !bytes.Equal(got, data) || res.Requests != 1 || px.Count("HEAD") != 0 {
		t.Fatalf("listed download: %v, %+v, %d HEADs", err, res, px.Count("HEAD"))
	}
	os.Remove(small)
	res, err = e2.DownloadFile(context.Background(), "dlb", "obj", small, FileOptions{ListedSize: 1000, SizeListed: true})
	if !errors.Is(err, ErrChanged) || res.Requests != 1 {
		t.Errorf("listed size 1000: %v, %+v", err, res)
	}
	if _, err := os.Stat(small); !os.IsNotExist(err) {
		t.Errorf("a file was written for a changed object")
	}
	// Ranged GETs that keep failing after the HEAD.
	px.SetRule(faultproxy.Always("GET", faultproxy.Reset))
	_, err = e.DownloadFile(context.Background(), "dlb", "obj", dst, FileOptions{})
	if err == nil || !strings.Contains(err.Error(), dst) {
		t.Errorf("resets: %v", err)
	}
	onlyFile("resets")
	px.SetRule(nil)
}

// A batch keeps Files transfers in flight over one engine, finishes the
// others when one fails, and sums every request into one summary.
func TestBatch(t *testing.T) {
	ep := startServer(t)
	px := faultproxy.Start(t, ep)
	e := newEngine(t, testConfig(px.URL, 8))
	mkBucket(t, e, "bat")
	dir := t.TempDir()
	const n = 40
	var items []Item
	want := map[string][]byte{}
	for i := range n {
		p := filepath.Join(dir, "up", fmt.Sprintf("f%02d", i))
		os.MkdirAll(filepath.Dir(p), 0o755)
		data := randBytes(uint64(100+i), int64(1000+i*517))
		writeFile(t, p, data)
		want[p] = data
		items = append(items, Item{Upload: true, Bucket: "bat", Key: fmt.Sprintf("k/f%02d", i), Path: p})
	}
	items = append(items, Item{Upload: true, Bucket: "bat", Key: "k/missing", Path: filepath.Join(dir, "up", "missing")})
	var done atomic.Int64
	px.ResetCounts()
	res := e.Batch(context.Background(), items, BatchOptions{OnDone: func(ItemResult) { done.Add(1) }})
	if res.Files != n+1 || res.Failed != 1 || len(res.Errors) != 1 || !strings.Contains(res.Errors[0], "missing") || done.Load() != n+1 {
		t.Fatalf("upload batch %+v (done %d)", res, done.Load())
	}
	if res.Requests != n || res.Bytes <= 0 || res.LatencyP99Ms <= 0 {
		t.Errorf("upload summary %+v", res.Result)
	}
	if p := px.Peak(); p < 2 || p > 8 {
		t.Errorf("peak requests in flight %d, want 2..8", p)
	}
	// A missing bucket fails every file alike: the batch stops after the
	// files already in flight instead of sending 40 doomed requests.
	for i := range items {
		items[i].Bucket = "nosuchbucket"
	}
	res = e.Batch(context.Background(), items[:n], BatchOptions{Files: 2})
	if res.Failed != n || res.Requests > 2 || !strings.Contains(strings.Join(res.Errors, "\n"), "files stopped or not started: ") ||
		!strings.Contains(res.Errors[0], "NoSuchBucket") {
		t.Fatalf("batch into a missing bucket: %+v", res)
	}
	// The files in flight when the batch stops are cut off: they count
	// with those not started, under one message, not once each as
	// "context canceled" (the first PUT gets the 404, the others stall
	// until the stop cancels them).
	px.SetRule(func(shape string, c int64, _ *http.Request) faultproxy.Fault {
		if shape == "PUT" && c > 1 {
			return faultproxy.Stall
		}
		return faultproxy.Pass
	})
	px.ResetCounts()
	res = e.Batch(context.Background(), items[:n], BatchOptions{Files: 8})
	px.SetRule(nil)
	all := strings.Join(res.Errors, "\n")
	if res.Failed != n || len(res.Errors) != 2 || !strings.Contains(res.Errors[0], "NoSuchBucket") ||
		!strings.Contains(res.Errors[1], fmt.Sprintf("%d files stopped or not started: ", n-1)) || strings.Contains(all, "context canceled") {
		t.Fatalf("batch stopped with files in flight: %d failed, errors:\n%s", res.Failed, all)
	}
	// And back, into another directory.
	var down []Item
	for i := range n {
		down = append(down, Item{Bucket: "bat", Key: fmt.Sprintf("k/f%02d", i), Path: filepath.Join(dir, "down", fmt.Sprintf("f%02d", i))})
	}
	res = e.Batch(context.Background(), down, BatchOptions{Files: 4})
	if res.Failed != 0 || res.Requests != 2*n {
		t.Fatalf("download batch %+v", res)
	}
	for i := range n {
		got, _ := os.ReadFile(filepath.Join(dir, "down", fmt.Sprintf("f%02d", i)))
		if !bytes.Equal(got, want[filepath.Join(dir, "up", fmt.Sprintf("f%02d", i))]) {
			t.Fatalf("file %d differs", i)
		}
	}
}

// A download that fills the local disk fails naming the object and the
// path, and leaves neither a half file nor the temporary one.
func TestDownloadFileDiskFull(t *testing.T) {
	dir := t.TempDir()
	testutil.MountTmpfs(t, dir, "1m", "tristore-s3client-full")
	ep := startServer(t)
	cfg := testConfig(ep, 2)
	cfg.ChunkSize = 256 << 10
	e := newEngine(t, cfg)
	mkBucket(t, e, "full")
	data := randBytes(71, 3<<20)
	if _, err := newEngine(t, testConfig(ep, 1)).Upload(context.Background(), "full", "big", bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	dst := filepath.Join(dir, "big")
	_, err := e.DownloadFile(context.Background(), "full", "big", dst, FileOptions{})
	if !errors.Is(err, syscall.ENOSPC) || !strings.Contains(err.Error(), "s3://full/big") || !strings.Contains(err.Error(), dst) {
		t.Fatalf("got %v", err)
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Fatalf("left on the full disk: %v", ents)
	}
}

// Stream writes the chunks in order although they arrive in parallel, and
// a failure part way says how far it got.
func TestStream(t *testing.T) {
	ep := startServer(t)
	px := faultproxy.Start(t, ep)
	cfg := testConfig(px.URL, 3)
	cfg.ChunkSize = 1 << 20
	cfg.Retries = 1
	e := newEngine(t, cfg)
	mkBucket(t, e, "str")
	data := randBytes(81, 7<<20+99)
	if _, err := newEngine(t, testConfig(ep, 2)).Upload(context.Background(), "str", "k", bytes.NewReader(data), int64(len(data))); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	res, err := e.Stream(context.Background(), "str", "k", &out)
	if err != nil || !bytes.Equal(out.Bytes(), data) || res.Requests != 1+8 {
		t.Fatalf("stream: %v, equal %v, %+v", err, bytes.Equal(out.Bytes(), data), res)
	}
	if p := e.pool.peak.Load(); p > 3 {
		t.Errorf("peak buffers %d > parallelism 3", p)
	}
	// The fifth GET and all after it fail: at most four chunks written.
	px.ResetCounts()
	px.SetRule(faultproxy.After("GET", 4, faultproxy.Internal))
	out.Reset()
	_, err = e.Stream(context.Background(), "str", "k", &out)
	if err == nil || !strings.Contains(err.Error(), "s3://str/k") || !strings.Contains(err.Error(), fmt.Sprintf("(%d bytes written)", out.Len())) {
		t.Fatalf("got %v after %d bytes", err, out.Len())
	}
	if out.Len() > 4<<20 || !bytes.Equal(out.Bytes(), data[:out.Len()]) {
		t.Fatalf("%d bytes written before the failure, or not a prefix", out.Len())
	}
	if n := e.pool.inUse.Load(); n != 0 {
		t.Errorf("%d buffers not returned", n)
	}
}

// Copies on the server: one CopyObject up to ChunkSize, parallel
// UploadPartCopy ranges above it; a source replaced since the listing is
// ErrChanged, and a failed multipart copy is aborted.
func TestCopy(t *testing.T) {
	ep := startServer(t)
	px := faultproxy.Start(t, ep)
	cfg := testConfig(px.URL, 3)
	cfg.Retries = 1
	e := newEngine(t, cfg)
	mkBucket(t, e, "cpa")
	mkBucket(t, e, "cpb")
	big := randBytes(91, 3*chunk+17)
	small := randBytes(92, 1000)
	up := newEngine(t, testConfig(ep, 2))
	for k, b := range map[string][]byte{"src dir/big+1 é": big, "small": small} {
		if _, err := up.Upload(context.Background(), "cpa", k, bytes.NewReader(b), int64(len(b))); err != nil {
			t.Fatal(err)
		}
	}
	res, err := e.Copy(context.Background(), "cpa", "src dir/big+1 é", "cpb", "dir/big copy")
	if err != nil || res.Bytes != int64(len(big)) || px.Count("PUT partNumber") != 4 {
		t.Fatalf("multipart copy: %v %+v, %d part copies", err, res, px.Count("PUT partNumber"))
	}
	if !bytes.Equal(readObject(t, up, "cpb", "dir/big copy"), big) {
		t.Fatal("multipart copy differs")
	}
	if _, err := e.Copy(context.Background(), "cpa", "small", "cpb", "small"); err != nil || !bytes.Equal(readObject(t, up, "cpb", "small"), small) {
		t.Fatalf("small copy: %v", err)
	}
	r := e.Batch(context.Background(), []Item{{SrcBucket: "cpa", SrcKey: "small", Bucket: "cpb", Key: "stale",
		FileOptions: FileOptions{IfMatch: `"0123456789abcdef0123456789abcdef"`}}}, BatchOptions{})
	if r.Failed != 1 || !strings.Contains(r.Errors[0], "changed") || objectExists(up, "cpb", "stale") {
		t.Errorf("stale source: %+v", r)
	}
	px.ResetCounts()
	px.SetRule(faultproxy.After("PUT partNumber", 1, faultproxy.Internal))
	if _, err := e.Copy(context.Background(), "cpa", "src dir/big+1 é", "cpb", "failed"); err == nil || !strings.Contains(err.Error(), "InternalError") {
		t.Fatalf("failing copy: %v", err)
	}
	px.SetRule(nil)
	if uploadsLeft(t, up, "cpb") != 0 || objectExists(up, "cpb", "failed") {
		t.Error("a failed copy left an upload or an object")
	}
}

// State files of uploads that were given up are pruned after a week when a
// new upload records its own; fresh ones and other files stay.
func TestResumeStatePruned(t *testing.T) {
	ep := startServer(t)
	e := newEngine(t, testConfig(ep, 1))
	mkBucket(t, e, "prune")
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	if err := os.MkdirAll(state, 0o700); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-8 * 24 * time.Hour)
	for _, n := range []string{"stale.json", "stale2.json.tmp", "fresh.json", "notes.txt"} {
		p := filepath.Join(state, n)
		writeFile(t, p, []byte("{}"))
		if n != "fresh.json" {
			if err := os.Chtimes(p, old, old); err != nil {
				t.Fatal(err)
			}
		}
	}
	src := filepath.Join(dir, "big")
	writeFile(t, src, randBytes(7, 2*chunk+1))
	if _, err := e.UploadFile(context.Background(), "prune", "big", src, FileOptions{Resume: true, StateDir: state}); err != nil {
		t.Fatal(err)
	}
	var left []string
	ents, _ := os.ReadDir(state)
	for _, ent := range ents {
		left = append(left, ent.Name())
	}
	if strings.Join(left, ",") != "fresh.json,notes.txt" {
		t.Fatalf("state dir holds %v, want fresh.json and notes.txt", left)
	}
}
