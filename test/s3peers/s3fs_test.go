package s3peers

import (
	"bytes"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/tristore/tristore/internal/testutil"
	"github.com/tristore/tristore/store/storetest"
)

// TestS3fsOddKeys: s3fs (FUSE) mounts a bucket that holds every odd key
// shape (stored with aws-sdk-go-v2) next to ordinary ones. Its listings
// work and show the ordinary names, the files whose keys are paths read
// back their bytes, and files written, renamed, made and removed through
// s3fs are the objects the SDK then sees; every odd key keeps its bytes
// through all of it.
func TestS3fsOddKeys(t *testing.T) {
	testutil.NeedRoot(t, "s3fs mounts with FUSE")
	testutil.NeedFUSE(t)
	s3fs := testutil.NeedCmd(t, "s3fs")
	srv := startServer(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := sdkClient(srv.endpoint, rootAK, rootSK)
	putOddKeys(t, ctx, c, "fsb")
	plain := map[string]string{
		"top.txt":          "top level",
		"dir/file.txt":     "in a directory",
		"dir/sub/deep.txt": "deeper",
		"sp ace+plus%.txt": "a name with a space, a plus and a percent",
		"é/ü.txt":          "utf-8 names",
	}
	for k, v := range plain {
		if _, err := c.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String("fsb"), Key: aws.String(k), Body: strings.NewReader(v)}); err != nil {
			t.Fatal(err)
		}
	}

	dir := t.TempDir()
	pass := filepath.Join(dir, "passwd")
	if err := os.WriteFile(pass, []byte(rootAK+":"+rootSK+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	mnt := filepath.Join(dir, "mnt")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(dir, "s3fs.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	// -f: in the foreground, so the test owns the process; no stat cache,
	// so each check sees the server's state.
	cmd := exec.Command(s3fs, "fsb", mnt, "-f", "-o", "url="+srv.endpoint+",use_path_request_style,passwd_file="+pass+
		",stat_cache_expire=1,enable_noobj_cache,max_stat_cache_size=0,dbglevel=warn")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	output := func() string { b, _ := os.ReadFile(logf.Name()); return string(b) }
	t.Cleanup(func() {
		if testutil.IsMounted(mnt) {
			syscall.Unmount(mnt, 0)
		}
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			cmd.Process.Kill()
			<-done
		}
		if testutil.IsMounted(mnt) {
			syscall.Unmount(mnt, syscall.MNT_DETACH)
		}
	})
	for deadline := time.Now().Add(30 * time.Second); !testutil.IsMounted(mnt); {
		select {
		case <-done:
			t.Fatalf("s3fs exited: %v\n%s", cmd.ProcessState, output())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("s3fs did not mount within 30 s\n%s", output())
		}
		time.Sleep(50 * time.Millisecond)
	}

	names := func(p string) []string {
		t.Helper()
		ents, err := os.ReadDir(filepath.Join(mnt, p))
		if err != nil {
			t.Fatalf("readdir %q through s3fs: %v\n%s", p, err, output())
		}
		var out []string
		for _, e := range ents {
			out = append(out, e.Name())
		}
		sort.Strings(out)
		return out
	}
	has := func(list []string, want ...string) {
		t.Helper()
		for _, w := range want {
			if i := sort.SearchStrings(list, w); i == len(list) || list[i] != w {
				t.Fatalf("listing %q lacks %q\n%s", list, w, output())
			}
		}
	}
	has(names(""), "top.txt", "dir", "sp ace+plus%.txt", "é", "q", "a", "a-", "a.", "a0")
	has(names("dir"), "file.txt", "sub")
	has(names("q"), "plain")
	for k, v := range plain {
		b, err := os.ReadFile(filepath.Join(mnt, k))
		if err != nil || string(b) != v {
			t.Fatalf("read %q through s3fs: %q %v", k, b, err)
		}
	}
	for _, k := range []string{"q/plain", "a-", "a0"} { // "a/b": s3fs shows the object "a" as a file
		i := indexOfKey(k)
		if b, err := os.ReadFile(filepath.Join(mnt, k)); err != nil || !bytes.Equal(b, oddBody(i)) {
			t.Fatalf("read %q through s3fs: %q %v", k, b, err)
		}
	}

	// Writes through s3fs become objects.
	if err := os.MkdirAll(filepath.Join(mnt, "fromfs", "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(mnt, "fromfs", "sub", "new.txt"), []byte("written through s3fs"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(mnt, "top.txt"), filepath.Join(mnt, "fromfs", "moved.txt")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(mnt, "dir", "file.txt")); err != nil {
		t.Fatal(err)
	}
	get := func(k string) (string, error) {
		g, err := c.GetObject(ctx, &awss3.GetObjectInput{Bucket: aws.String("fsb"), Key: aws.String(k)})
		if err != nil {
			return "", err
		}
		defer g.Body.Close()
		b, err := io.ReadAll(g.Body)
		return string(b), err
	}
	for k, want := range map[string]string{"fromfs/sub/new.txt": "written through s3fs", "fromfs/moved.txt": "top level"} {
		if got, err := get(k); err != nil || got != want {
			t.Fatalf("SDK GET %q after s3fs wrote it: %q %v", k, got, err)
		}
	}
	for _, k := range []string{"top.txt", "dir/file.txt"} {
		if _, err := get(k); errCode(err) != "NoSuchKey" {
			t.Fatalf("SDK GET %q after s3fs removed it: %v", k, err)
		}
	}
	if _, err := c.HeadObject(ctx, &awss3.HeadObjectInput{Bucket: aws.String("fsb"), Key: aws.String("fromfs/sub/")}); err != nil {
		t.Fatalf("the directory s3fs made is no object: %v", err)
	}
	for i, k := range storetest.OddKeys {
		if got, err := get(k); err != nil || got != string(oddBody(i)) {
			t.Fatalf("odd key %q after the s3fs session: %q %v", k, got, err)
		}
	}
	if err := syscall.Unmount(mnt, 0); err != nil {
		t.Fatalf("unmount: %v", err)
	}
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatalf("s3fs did not exit after the unmount\n%s", output())
	}
}
