package cli

import (
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	s3client "github.com/tristore/tristore/client/s3"
	"github.com/tristore/tristore/internal/testutil/faultproxy"
)

// TestS3Faults runs the commands through a proxy that injects 503s,
// resets and stalls: retries succeed, or the command exits 1 naming the
// object, and nothing partial is published (the multipart upload is left
// resumable or aborted, no half file under a final name).
func TestS3Faults(t *testing.T) {
	ep := s3Env(t)
	direct, err := s3client.New(s3client.Config{Endpoint: ep, AccessKey: os.Getenv("AWS_ACCESS_KEY_ID"),
		SecretKey: os.Getenv("AWS_SECRET_ACCESS_KEY"), PathStyle: true})
	if err != nil {
		t.Fatal(err)
	}
	px := faultproxy.Start(t, ep)
	t.Setenv("AWS_ENDPOINT_URL", px.URL)
	tf := []string{"--chunk-size", "5MiB", "--parallel", "1", "--retries", "2"}
	s3Run(t, 0, "mb", "s3://faults")
	uploads := func() int {
		out, err := direct.API().ListMultipartUploads(context.Background(), &awss3.ListMultipartUploadsInput{Bucket: aws.String("faults")})
		if err != nil {
			t.Fatal(err)
		}
		return len(out.Uploads)
	}
	src := t.TempDir()
	makeTree(t, src)
	os.Remove(filepath.Join(src, "sub", "skip.log"))

	t.Run("resets and 503s are retried", func(t *testing.T) {
		// Resets on uploads (a PUT is never re-sent by Go's transport, so
		// every one reaches the engine's count), 503s on downloads.
		px.SetRule(faultproxy.FirstN(4, faultproxy.Reset))
		defer px.SetRule(nil)
		out, _ := s3Run(t, 0, append(append([]string{"cp", "-r", src, "s3://faults/tree/", "--json"}, tf...), "--retries", "5")...)
		if s := summary(t, out); s.Files != 5 || s.Failed != 0 || s.Retries != 4 {
			t.Fatalf("summary %+v, want 4 retries", s)
		}
		down := t.TempDir()
		// On the objects' HEADs: the summary counts the transfers'
		// requests, not the listing's (which retries as well).
		px.SetRule(func(shape string, n int64, _ *http.Request) faultproxy.Fault {
			if shape == "HEAD" && n <= 3 {
				return faultproxy.SlowDown
			}
			return faultproxy.Pass
		})
		px.ResetCounts()
		out, _ = s3Run(t, 0, append(append([]string{"cp", "-r", "s3://faults/tree/", down, "--json"}, tf...), "--retries", "5")...)
		if s := summary(t, out); s.Failed != 0 || s.Retries != 3 {
			t.Fatalf("download summary %+v", s)
		}
		if a, b := sums(t, src), sums(t, down); !reflect.DeepEqual(a, b) {
			t.Fatal("downloaded tree differs")
		}
	})

	big := filepath.Join(src, "big.bin")
	data, _ := os.ReadFile(big)
	t.Run("upload cut off is resumed", func(t *testing.T) {
		px.ResetCounts() // After counts this subtest's parts only
		px.SetRule(faultproxy.After("PUT partNumber", 1, faultproxy.Reset))
		_, errOut := s3Run(t, 1, append([]string{"cp", big, "s3://faults/resumed"}, tf...)...)
		if !strings.Contains(errOut, big) || !strings.Contains(errOut, "s3://faults/resumed") || !strings.Contains(errOut, "left to resume") {
			t.Fatalf("error: %s", errOut)
		}
		if n := uploads(); n != 1 {
			t.Fatalf("%d multipart uploads after the failure, want the one left to resume", n)
		}
		px.SetRule(nil)
		out, _ := s3Run(t, 0, append([]string{"cp", big, "s3://faults/resumed", "--json"}, tf...)...)
		if s := summary(t, out); s.ResumedBytes != 5<<20 || s.Bytes != int64(len(data)) {
			t.Fatalf("resumed upload %+v, want 5 MiB resumed", s)
		}
		if n := uploads(); n != 0 {
			t.Errorf("%d uploads left after completion", n)
		}
		got, _ := s3Run(t, 0, "cat", "s3://faults/resumed")
		if !bytes.Equal([]byte(got), data) {
			t.Fatal("resumed object differs")
		}
	})

	t.Run("upload with --resume=false is aborted", func(t *testing.T) {
		px.ResetCounts()
		px.SetRule(faultproxy.After("PUT partNumber", 1, faultproxy.Internal))
		defer px.SetRule(nil)
		_, errOut := s3Run(t, 1, append([]string{"cp", big, "s3://faults/aborted", "--resume=false"}, tf...)...)
		if !strings.Contains(errOut, "InternalError") || !strings.Contains(errOut, big) {
			t.Fatalf("error: %s", errOut)
		}
		if n := uploads(); n != 0 {
			t.Errorf("%d uploads left", n)
		}
		if out, _ := s3Run(t, 1, "ls", "--recursive", "s3://faults/aborted"); out != "" {
			t.Errorf("aborted upload published: %q", out)
		}
	})

	t.Run("local file changed during the upload", func(t *testing.T) {
		moving := filepath.Join(t.TempDir(), "moving")
		os.WriteFile(moving, data, 0o644)
		px.ResetCounts()
		px.SetRule(func(shape string, n int64, _ *http.Request) faultproxy.Fault {
			if shape == "PUT partNumber" && n == 1 {
				// Someone appends to the file while its parts go up.
				f, err := os.OpenFile(moving, os.O_APPEND|os.O_WRONLY, 0)
				if err == nil {
					f.Write([]byte("appended"))
					f.Close()
				}
			}
			return faultproxy.Pass
		})
		defer px.SetRule(nil)
		_, errOut := s3Run(t, 1, append([]string{"cp", moving, "s3://faults/moving"}, tf...)...)
		if !strings.Contains(errOut, moving+" changed during the upload") {
			t.Fatalf("error: %s", errOut)
		}
		if n := uploads(); n != 0 || px.Count("POST uploadId") != 0 {
			t.Errorf("%d uploads left, %d completes sent", n, px.Count("POST uploadId"))
		}
		s3Run(t, 1, "ls", "s3://faults/moving")
	})

	t.Run("stalled downloads leave no file", func(t *testing.T) {
		dst := t.TempDir()
		// Object GETs stall (the listing, GET on the bucket, does not).
		px.SetRule(func(shape string, _ int64, r *http.Request) faultproxy.Fault {
			if shape == "GET" && strings.Count(strings.Trim(r.URL.Path, "/"), "/") > 0 {
				return faultproxy.Stall
			}
			return faultproxy.Pass
		})
		defer px.SetRule(nil)
		_, errOut := s3Run(t, 1, append([]string{"cp", "-r", "s3://faults/tree/sub/", dst, "--request-timeout", "300ms"}, tf...)...)
		if !strings.Contains(errOut, "s3://faults/tree/sub/b.bin") || !strings.Contains(errOut, "s3://faults/tree/sub/deep/c") {
			t.Fatalf("error: %s", errOut)
		}
		if left := sums(t, dst); len(left) != 1 && len(left) != 2 {
			t.Fatalf("left behind: %v", left)
		}
		filepath.WalkDir(dst, func(p string, d os.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				t.Errorf("file left behind: %s", p)
			}
			return nil
		})
	})

	t.Run("object replaced after the listing", func(t *testing.T) {
		dst := t.TempDir()
		px.SetRule(func(shape string, _ int64, r *http.Request) faultproxy.Fault {
			if shape == "GET" && strings.HasSuffix(r.URL.Path, "/a.txt") {
				// Another client overwrites the object between our
				// listing and our download.
				if _, err := direct.Upload(context.Background(), "faults", "tree/a.txt", strings.NewReader("replaced"), 8); err != nil {
					t.Error(err)
				}
			}
			return faultproxy.Pass
		})
		px.ResetCounts()
		defer px.SetRule(nil)
		_, errOut := s3Run(t, 1, append([]string{"cp", "-r", "s3://faults/tree/", dst, "--exclude", "*", "--include", "a.txt"}, tf...)...)
		if !strings.Contains(errOut, "s3://faults/tree/a.txt") || !strings.Contains(errOut, "changed") {
			t.Fatalf("error: %s", errOut)
		}
		if _, err := os.Stat(filepath.Join(dst, "a.txt")); !os.IsNotExist(err) {
			t.Errorf("a.txt written: %v", err)
		}
	})
}
