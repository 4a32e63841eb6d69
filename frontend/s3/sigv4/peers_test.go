package sigv4

import (
	"bytes"
	"context"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tristore/tristore/internal/testutil"
)

// Keys that stress canonicalisation: spaces, reserved characters, '+',
// '%', unicode, '~', '=' and '&'.
var peerKeys = []string{"simple.txt", "dir/with space/file", "plus+and=eq&amp", "percent%20literal", "unicodé/日本語", "tilde~(paren)!*'", "semi;colon,comma@at$"}

// cliKeys is a smaller set for command-line peers, which pay a process
// start (seconds for Python on a loaded machine) per key.
var cliKeys = []string{"dir/with space/file", "plus+and=eq&amp%20", "unicodé/日本語~(!*')"}

func runPeer(t *testing.T, name string, env []string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	// AWS_CA_BUNDLE (set on some machines) breaks rclone's custom transport
	// and is irrelevant on 127.0.0.1 test servers.
	for _, e := range os.Environ() {
		if !strings.HasPrefix(e, "AWS_CA_BUNDLE=") {
			cmd.Env = append(cmd.Env, e)
		}
	}
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

func TestPeerBoto3(t *testing.T) {
	py := testutil.NeedPython(t, "boto3")
	for _, tls := range []bool{false, true} {
		rec := newRecorder(NewVerifier(testCreds, testRegion))
		var srv *httptest.Server
		if tls {
			srv = httptest.NewTLSServer(rec)
		} else {
			srv = httptest.NewServer(rec)
		}
		args := append([]string{"testdata/boto3_sigv4.py", srv.URL, testAK, testSecret, "0"}, peerKeys...)
		out := runPeer(t, py, nil, args...)
		srv.Close()
		if !strings.Contains(out, "ok") {
			t.Fatalf("boto3: %s", out)
		}
		modes := map[string]int{}
		for _, p := range rec.snapshot() {
			modes[p[:min(len(p), 20)]]++
		}
		t.Logf("boto3 tls=%v: payload modes %v", tls, modes)
	}
}

func TestPeerAWSCLI(t *testing.T) {
	aws := testutil.NeedCmd(t, "aws")
	rec := newRecorder(NewVerifier(testCreds, testRegion))
	srv := httptest.NewServer(rec)
	defer srv.Close()
	dir := t.TempDir()
	env := []string{"AWS_ACCESS_KEY_ID=" + testAK, "AWS_SECRET_ACCESS_KEY=" + testSecret, "AWS_DEFAULT_REGION=" + testRegion,
		"AWS_CONFIG_FILE=" + filepath.Join(dir, "none"), "AWS_SHARED_CREDENTIALS_FILE=" + filepath.Join(dir, "none")}
	src := filepath.Join(dir, "src")
	data := bytes.Repeat([]byte("aws cli data "), 20000)
	os.WriteFile(src, data, 0o644)
	// One key holding every awkward character: the aws CLI starts slowly.
	for _, k := range []string{"dir/with space/plus+eq=amp&pct%20unicodé日本~(!*');,@$"} {
		runPeer(t, aws, env, "--endpoint-url", srv.URL, "s3api", "put-object", "--bucket", "bucket", "--key", k, "--body", src)
		dst := filepath.Join(dir, "dst")
		runPeer(t, aws, env, "--endpoint-url", srv.URL, "s3api", "get-object", "--bucket", "bucket", "--key", k, dst)
		if got, _ := os.ReadFile(dst); !bytes.Equal(got, data) {
			t.Fatalf("aws cli %q: round trip differs", k)
		}
	}
	t.Logf("aws cli payload modes: %v", rec.snapshot()[:2])
}

func TestPeerS3cmd(t *testing.T) {
	s3cmd := testutil.NeedCmd(t, "s3cmd")
	rec := newRecorder(NewVerifier(testCreds, testRegion))
	srv := httptest.NewServer(rec)
	defer srv.Close()
	dir := t.TempDir()
	host := strings.TrimPrefix(srv.URL, "http://")
	conf := filepath.Join(dir, "s3cfg")
	os.WriteFile(conf, []byte("[default]\naccess_key = "+testAK+"\nsecret_key = "+testSecret+
		"\nhost_base = "+host+"\nhost_bucket = "+host+"\nuse_https = False\nsignature_v2 = False\nbucket_location = us-east-1\n"), 0o600)
	src := filepath.Join(dir, "src")
	data := bytes.Repeat([]byte("s3cmd data "), 3000)
	os.WriteFile(src, data, 0o644)
	for _, k := range cliKeys {
		runPeer(t, s3cmd, nil, "-c", conf, "--no-check-md5", "--disable-multipart", "put", src, "s3://bucket/"+k)
		if got := rec.body("/bucket/" + k); !bytes.Equal(got, data) {
			t.Fatalf("s3cmd %q: stored %d bytes (have %v)", k, len(got), rec.keys())
		}
	}
}

func TestPeerRclone(t *testing.T) {
	rclone := testutil.NeedCmd(t, "rclone")
	rec := newRecorder(NewVerifier(testCreds, testRegion))
	srv := httptest.NewServer(rec)
	defer srv.Close()
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	data := bytes.Repeat([]byte("rclone data "), 5000)
	os.WriteFile(src, data, 0o644)
	env := []string{"RCLONE_CONFIG=" + filepath.Join(dir, "rclone.conf"),
		"RCLONE_CONFIG_TS_TYPE=s3", "RCLONE_CONFIG_TS_PROVIDER=Other", "RCLONE_CONFIG_TS_ENV_AUTH=false",
		"RCLONE_CONFIG_TS_ACCESS_KEY_ID=" + testAK, "RCLONE_CONFIG_TS_SECRET_ACCESS_KEY=" + testSecret,
		"RCLONE_CONFIG_TS_ENDPOINT=" + srv.URL, "RCLONE_CONFIG_TS_REGION=" + testRegion, "RCLONE_CONFIG_TS_FORCE_PATH_STYLE=true"}
	remote := "ts:"
	for _, k := range cliKeys {
		runPeer(t, rclone, env, "copyto", "--s3-no-check-bucket", "--retries", "1", "--low-level-retries", "1", src, remote+"bucket/"+k)
		if got := rec.body("/bucket/" + k); !bytes.Equal(got, data) {
			t.Fatalf("rclone %q: stored %d bytes (have %v)", k, len(got), rec.keys())
		}
	}
}

func (rc *recorder) keys() []string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	var out []string
	for k := range rc.bodies {
		out = append(out, k)
	}
	return out
}

// TestPeerCurl: curl's built-in --aws-sigv4 signer (PUT and GET).
func TestPeerCurl(t *testing.T) {
	curl := testutil.NeedCmd(t, "curl")
	help, err := exec.Command(curl, "--help", "all").Output()
	if err != nil {
		testutil.Missing(t, "%s --help all: %v (curl 7.75 or later is needed for --aws-sigv4)", curl, err)
	}
	if !strings.Contains(string(help), "--aws-sigv4") {
		testutil.Missing(t, "%s has no --aws-sigv4 (curl 7.75 or later is needed)", curl)
	}
	rec := newRecorder(NewVerifier(testCreds, testRegion))
	srv := httptest.NewServer(rec)
	defer srv.Close()
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	os.WriteFile(src, []byte("curl body"), 0o644)
	u := srv.URL + "/bucket/curl%20key+x"
	sig := []string{"--aws-sigv4", "aws:amz:" + testRegion + ":s3", "--user", testAK + ":" + testSecret, "-s", "-f", "-H", "x-amz-content-sha256: " + sha([]byte("curl body"))}
	runPeer(t, curl, nil, append(sig, "-T", src, u)...)
	if got := rec.body("/bucket/curl key+x"); string(got) != "curl body" {
		t.Fatalf("stored %q (have %v)", got, rec.keys())
	}
	out := runPeer(t, curl, nil, "--aws-sigv4", "aws:amz:"+testRegion+":s3", "--user", testAK+":"+testSecret, "-s", "-f", "-H", "x-amz-content-sha256: "+emptySHA256, u)
	if out != "curl body" {
		t.Fatalf("GET: %q", out)
	}
}
