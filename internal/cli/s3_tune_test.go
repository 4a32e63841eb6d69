package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	s3client "github.com/tristore/tristore/client/s3"
	"github.com/tristore/tristore/client/s3/tuner"
)

// TestS3Tune runs `tristore s3 tune` against `tristore serve`: a first run
// samples (JSON report, probe objects removed), a second reuses the saved
// profile after one check; `cp --auto` then picks its options from that
// profile for a directory of small files, and --auto with --parallel is a
// usage error.
func TestS3Tune(t *testing.T) {
	const ak, sk = "TRISTORES3TUNECLI001", "tristore-s3tune-cli-secret-01"
	ep := serveS3(t, "", ak, sk)
	t.Setenv("AWS_ACCESS_KEY_ID", ak)
	t.Setenv("AWS_SECRET_ACCESS_KEY", sk)
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	eng, err := s3client.New(s3client.Config{Endpoint: ep, AccessKey: ak, SecretKey: sk, PathStyle: true})
	if err != nil {
		t.Fatal(err)
	}
	bucket := "tunebucket"
	if _, err := eng.API().CreateBucket(context.Background(), &awss3.CreateBucketInput{Bucket: &bucket}); err != nil {
		t.Fatal(err)
	}
	tuneDir := t.TempDir()
	tune := func() map[string]any {
		t.Helper()
		out, errOut, err := runCLI3(t, "s3", "tune", "s3://tunebucket/pre/", "--endpoint", ep, "--json",
			"--tune-window", "200ms", "--tune-samples", "4", "--tune-dir", tuneDir, "--drift", "10")
		if err != nil {
			t.Fatalf("tune: %v\n%s", err, errOut)
		}
		var v map[string]any
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Fatalf("tune --json %q: %v", out, err)
		}
		return v
	}
	v := tune()
	outcome := v["outcome"].(map[string]any)
	samples := outcome["profile"].(map[string]any)["report"].(map[string]any)["samples"].([]any)
	choice := v["choice"].(map[string]any)
	if outcome["reused"] != false || len(samples) < 3 || len(samples) > 4 || choice["chunk_size"].(float64) <= 0 || choice["predicted_Bps"].(float64) <= 0 {
		t.Fatalf("first tune: reused %v, %d samples, choice %v", outcome["reused"], len(samples), choice)
	}
	ls, err := eng.API().ListObjectsV2(context.Background(), &awss3.ListObjectsV2Input{Bucket: &bucket})
	if err != nil || len(ls.Contents) != 0 {
		t.Fatalf("probe objects left behind: %v %v", ls, err)
	}
	if ents, _ := os.ReadDir(tuneDir); len(ents) != 1 {
		t.Fatalf("profile dir holds %d files, want 1", len(ents))
	}
	v = tune()
	if o := v["outcome"].(map[string]any); o["reused"] != true || o["check"] == nil {
		t.Fatalf("second tune did not reuse the profile after a check: %v", o)
	}

	// cp --auto: 20 files of 60 kB use the parallelism the profile gives
	// their size's row.
	src := t.TempDir()
	for i := range 20 {
		os.WriteFile(filepath.Join(src, fmt.Sprintf("f%02d", i)), make([]byte, 60_000), 0o644)
	}
	out, errOut, err := runCLI3(t, "s3", "cp", "-r", src, "s3://tunebucket/auto/", "--endpoint", ep, "--auto", "--tune-dir", tuneDir)
	if err != nil {
		t.Fatalf("cp --auto: %v\n%s", err, errOut)
	}
	if !strings.Contains(errOut, "auto: --chunk-size") || !strings.Contains(errOut, "20 files, median 60000B") {
		t.Errorf("cp --auto did not say what it chose: %q", errOut)
	}
	if !strings.Contains(out, "20 files (0 failed") {
		t.Errorf("cp --auto summary %q", out)
	}
	// A large file's upload needs multipart chunks of at least 5 MiB,
	// whatever the profile's best point is.
	big := filepath.Join(t.TempDir(), "big.bin")
	os.WriteFile(big, make([]byte, 11<<20), 0o644)
	_, errOut, err = runCLI3(t, "s3", "cp", big, "s3://tunebucket/big", "--endpoint", ep, "--auto", "--tune-dir", tuneDir)
	if err != nil {
		t.Fatalf("cp --auto of 11 MiB: %v\n%s", err, errOut)
	}
	var mibs, par int
	i := strings.Index(errOut, "auto: ")
	if i < 0 {
		t.Fatalf("cp --auto of a large file did not say what it chose: %q", errOut)
	}
	if _, err := fmt.Sscanf(errOut[i:], "auto: --chunk-size %dMiB --parallel %d", &mibs, &par); err != nil || mibs < 5 || par < 1 {
		t.Errorf("cp --auto of a large file chose %d MiB × %d (%v): %q", mibs, par, err, errOut)
	}
	// One file: with a profile whose streams get 1 MB/s each and 14 MB/s
	// together, a 40 MiB file goes in 5 MiB parts, all 8 in flight (not
	// the grid's 16 MiB parts: 3 streams).
	fp, desc, err := tuner.Fingerprint(context.Background(), ep, tuner.Up, nil)
	if err != nil {
		t.Fatal(err)
	}
	slow := t.TempDir()
	rep := &tuner.Report{Grid: tuner.DefaultGrid(), Model: tuner.Model{A0: 0.03, Bs: 1e6, B: 14e6},
		Samples: []tuner.Sample{{Point: tuner.Point{ChunkSize: 16 << 20, Parallel: 16}, BandwidthBps: 13e6}}}
	rep.Choice = tuner.Choice{Point: tuner.Point{ChunkSize: 16 << 20, Parallel: 16}, MeasuredBps: 13e6, Sampled: true}
	if err := tuner.Save(slow, &tuner.Profile{Endpoint: ep, Network: desc, Fingerprint: fp, Direction: tuner.Up,
		Created: time.Now(), Verified: time.Now(), Report: rep}); err != nil {
		t.Fatal(err)
	}
	os.WriteFile(big, make([]byte, 40<<20), 0o644)
	_, errOut, err = runCLI3(t, "s3", "cp", big, "s3://tunebucket/big40", "--endpoint", ep, "--auto", "--tune-dir", slow)
	if err != nil || !strings.Contains(errOut, "auto: --chunk-size 5MiB --parallel 8 (one file of 40MiB") {
		t.Errorf("cp --auto of one 40 MiB file over a slow profile: %v %q", err, errOut)
	}
	// sync --auto chooses the same way: a directory holding that one file
	// is the one file (it got the grid's 16 MiB × 16 before).
	syncSrc := t.TempDir()
	os.WriteFile(filepath.Join(syncSrc, "big.bin"), make([]byte, 40<<20), 0o644)
	_, errOut, err = runCLI3(t, "s3", "sync", syncSrc, "s3://tunebucket/sync40/", "--endpoint", ep, "--auto", "--tune-dir", slow)
	if err != nil || !strings.Contains(errOut, "auto: --chunk-size 5MiB --parallel 8 (one file of 40MiB") {
		t.Errorf("sync --auto of a directory with one 40 MiB file over a slow profile: %v %q", err, errOut)
	}
	_, _, err = runCLI3(t, "s3", "cp", "-r", src, "s3://tunebucket/auto/", "--endpoint", ep, "--auto", "--parallel", "3")
	var ee *exitError
	if !errors.As(err, &ee) || ee.code != 2 {
		t.Errorf("--auto with --parallel: %v, want a usage error", err)
	}
}

// TestLargeFileParts: one large file goes in the smallest parts the
// protocol allows, so the streams share it as they go, not in one part per
// stream (a 1 GiB file over a profile whose streams get 1 MB/s each and 14
// MB/s together was 16 parts of 64 MiB: the file waited for its slowest
// connection). The parallelism is the model's, capped at the parts.
func TestLargeFileParts(t *testing.T) {
	rep := &tuner.Report{Grid: tuner.DefaultGrid(), Model: tuner.Model{A0: 0.03, Bs: 1e6, B: 14e6}}
	for _, c := range []struct {
		size   int64
		maxMem int64
		chunk  int64
		par    int
	}{
		{40 << 20, 1 << 30, 5 << 20, 8},
		{128 << 20, 1 << 30, 5 << 20, 16},
		{1 << 30, 1 << 30, 5 << 20, 16},
		{100 << 30, 1 << 30, 11 << 20, 16}, // 10,000 parts at most
		{1 << 30, 40 << 20, 5 << 20, 8},    // --max-memory
	} {
		chunk, par := largeFileParts([]int64{c.size}, rep, s3client.MinPartSize, c.maxMem)
		if chunk != c.chunk || par != c.par {
			t.Errorf("%d bytes, max memory %d: %d × %d, want %d × %d", c.size, c.maxMem, chunk, par, c.chunk, c.par)
		}
	}
}

// TestAutoChoice: --auto's choice from the local files' sizes. Several
// large files share the parts' cap on the parallelism (two 20 MiB files are
// 8 parts of 5 MiB, like one 40 MiB file); small files get their median
// row's parallelism; no sizes (a download) leave the profile's point.
func TestAutoChoice(t *testing.T) {
	rep := &tuner.Report{Grid: tuner.DefaultGrid(), Model: tuner.Model{A0: 0.03, Bs: 1e6, B: 14e6}}
	big := tuner.Choice{Point: tuner.Point{ChunkSize: 16 << 20, Parallel: 16}}
	for _, c := range []struct {
		sizes []int64
		chunk int64
		par   int
		why   string
	}{
		{nil, 16 << 20, 16, "large files"},
		{[]int64{40 << 20}, 5 << 20, 8, "one file of 40MiB"},
		{[]int64{20 << 20, 20 << 20, 1}, 5 << 20, 8, "2 large files, 40MiB in all"},
		{[]int64{10 << 20}, 16 << 20, 16, "large files"}, // one PUT
	} {
		chunk, par, why := autoChoice(rep, big, c.sizes, s3client.MinPartSize, 1<<30)
		if chunk != c.chunk || par != c.par || !strings.HasPrefix(why, c.why) {
			t.Errorf("%v: %d × %d (%s), want %d × %d (%s...)", c.sizes, chunk, par, why, c.chunk, c.par, c.why)
		}
	}
	sizes := make([]int64, 20)
	for i := range sizes {
		sizes[i] = 60_000
	}
	if chunk, par, why := autoChoice(rep, big, sizes, s3client.MinPartSize, 1<<30); chunk != 16<<20 || par < 1 || !strings.HasPrefix(why, "20 files, median 60000B") {
		t.Errorf("20 small files: %d × %d (%s)", chunk, par, why)
	}
}
