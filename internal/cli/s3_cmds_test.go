package cli

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/tristore/tristore/internal/testutil"
)

// exitCodeOf is the code Execute turns err into.
func exitCodeOf(err error) int {
	if err == nil {
		return 0
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return 1
}

func randData(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 99))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// s3Env starts `tristore serve` with S3 only and points the AWS variables
// at it; it returns the endpoint URL.
func s3Env(t *testing.T) string {
	t.Helper()
	const ak, sk = "TRISTORES3CMDS000001", "tristore-s3cmds-cli-secret-01"
	ep := serveS3(t, "", ak, sk)
	t.Setenv("AWS_ACCESS_KEY_ID", ak)
	t.Setenv("AWS_SECRET_ACCESS_KEY", sk)
	t.Setenv("AWS_ENDPOINT_URL", ep)
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	// No shared files of the machine's user leak in.
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_CONFIG_FILE", filepath.Join(t.TempDir(), "none"))
	t.Setenv("AWS_PROFILE", "")
	return ep
}

// s3Run runs `tristore s3 ARGS...` and fails the test unless it exits
// with want.
func s3Run(t *testing.T, want int, args ...string) (string, string) {
	t.Helper()
	out, errOut, err := runCLI3(t, append([]string{"s3"}, args...)...)
	if got := exitCodeOf(err); got != want {
		t.Fatalf("s3 %s: exit %d (%v), want %d\nstdout: %s\nstderr: %s", strings.Join(args, " "), got, err, want, out, errOut)
	}
	if err != nil {
		errOut += err.Error()
	}
	return out, errOut
}

type s3Summary struct {
	Bytes        int64    `json:"bytes"`
	Requests     int      `json:"requests"`
	Retries      int      `json:"retries"`
	LatencyP50Ms float64  `json:"latency_p50_ms"`
	LatencyP99Ms float64  `json:"latency_p99_ms"`
	ResumedBytes int64    `json:"resumed_bytes"`
	Files        int      `json:"files"`
	Failed       int      `json:"failed"`
	Errors       []string `json:"errors"`
	Skipped      int      `json:"skipped"`
	Deleted      int      `json:"deleted"`
}

func summary(t *testing.T, out string) s3Summary {
	t.Helper()
	var s s3Summary
	if err := json.Unmarshal([]byte(out), &s); err != nil {
		t.Fatalf("summary %q: %v", out, err)
	}
	return s
}

// makeTree writes a small tree: files of a few sizes (one multipart at
// 5 MiB chunks), a .log file for the filters, nested directories.
func makeTree(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	files := map[string][]byte{
		"a.txt":        []byte("hello\n"),
		"empty":        {},
		"sub/b.bin":    randData(1, 70_000),
		"sub/deep/c":   randData(2, 300_000),
		"sub/skip.log": []byte("not copied"),
		"big.bin":      randData(3, 12<<20+7),
	}
	for rel, b := range files {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return files
}

func sums(t *testing.T, dir string) map[string]string {
	t.Helper()
	m, err := testutil.TreeSums(dir)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestS3CommandsLoopback drives every subcommand against `tristore serve`
// and compares the trees end to end.
func TestS3CommandsLoopback(t *testing.T) {
	s3Env(t)
	tf := []string{"--chunk-size", "5MiB", "--parallel", "4"}
	out, _ := s3Run(t, 0, "mb", "s3://cmds")
	if !strings.Contains(out, "make_bucket: cmds") {
		t.Errorf("mb: %q", out)
	}
	src := t.TempDir()
	files := makeTree(t, src)

	// cp --recursive, filtered; --dry-run first moves nothing.
	out, _ = s3Run(t, 0, append([]string{"cp", "--recursive", src, "s3://cmds/tree", "--exclude", "*.log", "--dry-run"}, tf...)...)
	if n := strings.Count(out, "(dryrun) upload: "); n != 5 || strings.Contains(out, "skip.log") {
		t.Fatalf("dry run: %q", out)
	}
	if out, _ = s3Run(t, 0, "ls", "--recursive", "s3://cmds/"); out != "" {
		t.Fatalf("dry run uploaded: %q", out)
	}
	out, _ = s3Run(t, 0, append([]string{"cp", "--recursive", src, "s3://cmds/tree", "--exclude", "*.log", "--json"}, tf...)...)
	if s := summary(t, out); s.Files != 5 || s.Failed != 0 || s.Bytes != 6+70_000+300_000+12<<20+7 || s.LatencyP99Ms <= 0 {
		t.Fatalf("cp summary %+v", s)
	}

	// ls: one level with PRE, and recursive as JSON.
	out, _ = s3Run(t, 0, "ls", "s3://cmds/tree/")
	if !strings.Contains(out, "PRE sub/") || !strings.Contains(out, " a.txt") || strings.Contains(out, "deep") {
		t.Errorf("ls: %q", out)
	}
	out, _ = s3Run(t, 0, "ls", "--recursive", "--json", "s3://cmds/tree/")
	var ls lsResult
	if err := json.Unmarshal([]byte(out), &ls); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, o := range ls.Objects {
		keys = append(keys, o.Key)
	}
	sort.Strings(keys)
	if want := []string{"tree/a.txt", "tree/big.bin", "tree/empty", "tree/sub/b.bin", "tree/sub/deep/c"}; !reflect.DeepEqual(keys, want) {
		t.Fatalf("ls -r keys %v, want %v", keys, want)
	}
	_, errOut := s3Run(t, 1, "ls", "s3://cmds/tree/nothing")
	if !strings.Contains(errOut, "no objects") {
		t.Errorf("ls of a prefix with nothing under it: %q", errOut)
	}
	out, _ = s3Run(t, 0, "ls")
	if !strings.Contains(out, " cmds") {
		t.Errorf("ls buckets: %q", out)
	}

	// sync down into an empty directory: everything, identical; again:
	// nothing (mtimes were set), also by checksum (multipart ETag too).
	down := t.TempDir()
	out, _ = s3Run(t, 0, append([]string{"sync", "s3://cmds/tree", down, "--json"}, tf...)...)
	if s := summary(t, out); s.Files != 5 || s.Failed != 0 {
		t.Fatalf("sync down %+v", s)
	}
	os.Remove(filepath.Join(src, "sub", "skip.log"))
	if a, b := sums(t, src), sums(t, down); !reflect.DeepEqual(a, b) {
		t.Fatalf("trees differ after sync down:\n%v\n%v", a, b)
	}
	for _, extra := range [][]string{nil, {"--checksum"}} {
		out, _ = s3Run(t, 0, append(append([]string{"sync", "s3://cmds/tree", down, "--json"}, extra...), tf...)...)
		if s := summary(t, out); s.Files != 0 || s.Skipped != 5 {
			t.Fatalf("second sync down %v: %+v", extra, s)
		}
	}

	// sync up: nothing changed; then one file grows, one is removed
	// (--delete), one is new.
	out, _ = s3Run(t, 0, append([]string{"sync", src, "s3://cmds/tree", "--json"}, tf...)...)
	if s := summary(t, out); s.Files != 0 || s.Skipped != 5 {
		t.Fatalf("sync up unchanged %+v", s)
	}
	os.WriteFile(filepath.Join(src, "a.txt"), []byte("hello, world\n"), 0o644)
	os.Remove(filepath.Join(src, "sub", "b.bin"))
	os.WriteFile(filepath.Join(src, "new"), []byte("new file"), 0o644)
	out, _ = s3Run(t, 0, append([]string{"sync", src, "s3://cmds/tree", "--delete", "--dry-run"}, tf...)...)
	if !strings.Contains(out, "(dryrun) delete: s3://cmds/tree/sub/b.bin") || strings.Count(out, "(dryrun) upload:") != 2 {
		t.Fatalf("sync --delete --dry-run: %q", out)
	}
	out, _ = s3Run(t, 0, append([]string{"sync", src, "s3://cmds/tree", "--delete", "--json"}, tf...)...)
	if s := summary(t, out); s.Files != 2 || s.Deleted != 1 || s.Skipped != 3 {
		t.Fatalf("sync up %+v", s)
	}
	out, _ = s3Run(t, 0, append([]string{"sync", "s3://cmds/tree", down, "--delete", "--json"}, tf...)...)
	if s := summary(t, out); s.Files != 2 || s.Deleted != 1 {
		t.Fatalf("sync down after changes %+v", s)
	}
	if a, b := sums(t, src), sums(t, down); !reflect.DeepEqual(a, b) {
		t.Fatalf("trees differ after the second sync down:\n%v\n%v", a, b)
	}

	// prefetch: largest first, then identical.
	pf := t.TempDir()
	out, _ = s3Run(t, 0, append([]string{"prefetch", "s3://cmds/tree/", pf, "--dry-run"}, tf...)...)
	if lines := strings.Split(strings.TrimSpace(out), "\n"); len(lines) != 5 || !strings.Contains(lines[0], "big.bin") || !strings.Contains(lines[1], "sub/deep/c") {
		t.Fatalf("prefetch order: %q", out)
	}
	out, _ = s3Run(t, 0, append([]string{"prefetch", "s3://cmds/tree/", pf, "--json"}, tf...)...)
	if s := summary(t, out); s.Files != 5 || s.Failed != 0 {
		t.Fatalf("prefetch %+v", s)
	}
	if a, b := sums(t, src), sums(t, pf); !reflect.DeepEqual(a, b) {
		t.Fatalf("prefetched tree differs")
	}

	// cat and cp to stdout.
	for _, args := range [][]string{{"cat", "s3://cmds/tree/big.bin"}, {"cp", "s3://cmds/tree/big.bin", "-"}} {
		out, _ = s3Run(t, 0, append(args, tf...)...)
		if !bytes.Equal([]byte(out), files["big.bin"]) {
			t.Fatalf("%v: %d bytes, differ", args, len(out))
		}
	}

	// Copies on the server: one object (multipart above the chunk size),
	// then a whole prefix.
	s3Run(t, 0, append([]string{"cp", "s3://cmds/tree/big.bin", "s3://cmds/copied/"}, tf...)...)
	if out, _ = s3Run(t, 0, "cat", "s3://cmds/copied/big.bin"); !bytes.Equal([]byte(out), files["big.bin"]) {
		t.Fatal("copied big.bin differs")
	}
	out, _ = s3Run(t, 0, append([]string{"cp", "-r", "s3://cmds/tree/", "s3://cmds/tree2", "--json"}, tf...)...)
	if s := summary(t, out); s.Files != 5 || s.Failed != 0 {
		t.Fatalf("cp -r s3 to s3: %+v", s)
	}
	t2 := t.TempDir()
	s3Run(t, 0, append([]string{"cp", "-r", "s3://cmds/tree2/", t2}, tf...)...)
	if a, b := sums(t, src), sums(t, t2); !reflect.DeepEqual(a, b) {
		t.Fatalf("tree copied on the server differs")
	}
	s3Run(t, 0, "rm", "-r", "s3://cmds/tree2/")
	s3Run(t, 0, "rm", "s3://cmds/copied/big.bin")

	// presign: anyone can GET it.
	out, _ = s3Run(t, 0, "presign", "s3://cmds/tree/sub/deep/c", "--expires-in", "5m")
	resp, err := http.Get(strings.TrimSpace(out))
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !bytes.Equal(got, files["sub/deep/c"]) {
		t.Fatalf("presigned GET: %d, %d bytes", resp.StatusCode, len(got))
	}

	// rm one, rm a prefix with a filter, rb refuses a non-empty bucket.
	s3Run(t, 0, "rm", "s3://cmds/tree/a.txt")
	_, errOut = s3Run(t, 1, "rm", "s3://cmds/tree/a.txt")
	if !strings.Contains(errOut, "s3://cmds/tree/a.txt") {
		t.Errorf("rm of a missing key: %q", errOut)
	}
	out, _ = s3Run(t, 0, "rm", "--recursive", "s3://cmds/tree/sub", "--exclude", "deep/*")
	if !strings.Contains(out, "deleted 0 of 0") {
		t.Errorf("rm --exclude: %q (sub/b.bin was deleted by sync, deep/c is excluded)", out)
	}
	_, errOut = s3Run(t, 1, "rb", "s3://cmds")
	if !strings.Contains(errOut, "BucketNotEmpty") {
		t.Errorf("rb of a full bucket: %q", errOut)
	}
	s3Run(t, 0, "rb", "--force", "s3://cmds")
	if out, _ = s3Run(t, 0, "ls"); strings.Contains(out, "cmds") {
		t.Errorf("bucket still listed: %q", out)
	}
}

// TestS3ExitCodes: usage mistakes exit 2, failures 1, and the message
// names what failed.
func TestS3ExitCodes(t *testing.T) {
	s3Env(t)
	s3Run(t, 0, "mb", "s3://codes")
	dir := t.TempDir()
	for _, args := range [][]string{
		{"nosuchcommand"},
		{},
		{"cp", "a"},
		{"cp", "a", "b"},
		{"cp", "s3://x/a/", "s3://y/b"}, // a prefix without --recursive
		{"cp", "--no-such-flag", "a", "s3://codes/a"},
		{"cp", dir, "s3://codes/d"}, // a directory without --recursive
		{"cp", "s3://codes/prefix/", dir},
		{"cp", "--parallel", "0", "s3://codes/a", dir},
		{"cp", "--chunk-size", "64MiB", "--parallel", "32", "--max-memory", "1GiB", "s3://codes/a", dir},
		{"sync", dir, t.TempDir()},
		{"mb", "s3://codes/key"},
		{"rm", "s3://codes/"},
		{"presign", "s3://codes/k", "--expires-in", "800h"},
		{"cp", "s3://codes/x", dir, "--profile", "nosuchprofile"},
	} {
		s3Run(t, 2, args...)
	}
	_, errOut := s3Run(t, 1, "cp", "s3://codes/missing", dir)
	if !strings.Contains(errOut, "s3://codes/missing") {
		t.Errorf("missing object: %q", errOut)
	}
	_, errOut = s3Run(t, 1, "cp", filepath.Join(dir, "nofile"), "s3://codes/x")
	if !strings.Contains(errOut, "nofile") {
		t.Errorf("missing local file: %q", errOut)
	}
	_, errOut = s3Run(t, 1, "ls", "s3://nobucket/")
	if !strings.Contains(errOut, "NoSuchBucket") {
		t.Errorf("missing bucket: %q", errOut)
	}
	// A batch where one file fails: exit 1, the others done, the failed
	// one named.
	src := t.TempDir()
	for i := range 3 {
		os.WriteFile(filepath.Join(src, fmt.Sprint(i)), []byte{byte(i)}, 0o644)
	}
	os.Symlink(filepath.Join(src, "gone"), filepath.Join(src, "dangling")) // skipped
	// A key over S3's 1,024 bytes: the server refuses that one file.
	long := src
	for range 5 {
		long = filepath.Join(long, strings.Repeat("d", 250))
	}
	os.MkdirAll(long, 0o755)
	os.WriteFile(filepath.Join(long, "toolong"), []byte("x"), 0o644)
	out, errOut := s3Run(t, 1, "cp", "-r", src, "s3://codes/b/", "--json")
	if s := summary(t, out); s.Files != 4 || s.Failed != 1 || !strings.Contains(errOut, "toolong") {
		t.Errorf("partial batch %+v\n%s", s, errOut)
	}
	if out, _ := s3Run(t, 0, "ls", "s3://codes/b/"); strings.Count(out, "\n") != 3 {
		t.Errorf("the other files: %q", out)
	}
	// Into a bucket that does not exist: exit 1, NoSuchBucket named, and
	// no "context canceled" line for each file the stop cut off (TestBatch
	// makes sure some are cut off; here they may all have had the 404).
	_, errOut = s3Run(t, 1, "cp", "-r", src, "s3://nosuchbucket/b/", "--parallel", "8")
	if !strings.Contains(errOut, "NoSuchBucket") || strings.Contains(errOut, "context canceled") {
		t.Errorf("cp -r into a missing bucket: %q", errOut)
	}
	// Wrong credentials: a clear error, exit 1.
	t.Setenv("AWS_SECRET_ACCESS_KEY", "wrong-secret-wrong-secret-wrong-secret0")
	_, errOut = s3Run(t, 1, "ls", "s3://codes/")
	if !strings.Contains(errOut, "SignatureDoesNotMatch") {
		t.Errorf("wrong secret: %q", errOut)
	}
	// An endpoint nobody listens on.
	_, errOut = s3Run(t, 1, "ls", "s3://codes/", "--endpoint-url", "http://127.0.0.1:1")
	if !strings.Contains(errOut, "connection refused") {
		t.Errorf("unreachable endpoint: %q", errOut)
	}
}

// TestS3Profiles: credentials, region and endpoint from the AWS shared
// files; an explicit --profile wins over the AWS_* variables, the default
// profile does not.
func TestS3Profiles(t *testing.T) {
	ep := s3Env(t)
	ak, sk := os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY")
	dir := t.TempDir()
	creds := filepath.Join(dir, "credentials")
	conf := filepath.Join(dir, "config")
	os.WriteFile(creds, []byte(fmt.Sprintf("# test\n[default]\naws_access_key_id = WRONGKEYWRONGKEY0001\naws_secret_access_key = nope\n\n[good]\naws_access_key_id = %s\naws_secret_access_key = %s\n", ak, sk)), 0o600)
	os.WriteFile(conf, []byte(fmt.Sprintf("[profile good]\nregion = us-east-1\ns3 =\n  addressing_style = path\nendpoint_url = %s\n", ep)), 0o600)
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", creds)
	t.Setenv("AWS_CONFIG_FILE", conf)
	s3Run(t, 0, "mb", "s3://prof") // env keys win over the default profile
	t.Setenv("AWS_ENDPOINT_URL", "")
	t.Setenv("AWS_ACCESS_KEY_ID", "ENVKEYWRONG000000001")
	out, _ := s3Run(t, 0, "ls", "--profile", "good")
	if !strings.Contains(out, "prof") {
		t.Errorf("ls with --profile good: %q", out)
	}
	t.Setenv("AWS_PROFILE", "good")
	t.Setenv("AWS_ACCESS_KEY_ID", "")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "")
	if out, _ = s3Run(t, 0, "ls"); !strings.Contains(out, "prof") {
		t.Errorf("ls with AWS_PROFILE=good: %q", out)
	}
	t.Setenv("AWS_PROFILE", "")
	_, errOut := s3Run(t, 1, "ls", "--endpoint-url", ep)
	if !strings.Contains(errOut, "InvalidAccessKeyId") {
		t.Errorf("default profile's wrong key: %q", errOut)
	}
}
