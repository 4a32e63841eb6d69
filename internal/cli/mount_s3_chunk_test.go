package cli

import (
	"context"
	"strings"
	"testing"
	"time"

	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	s3client "github.com/tristore/tristore/client/s3"
	"github.com/tristore/tristore/client/s3/tuner"
)

func TestProfileChunkSize(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		name string
		m    tuner.Model
		want int64
	}{
		// 100 ms per request, one stream 0.7 MiB/s (a lossy, reordering WAN):
		// 72 KiB -> 64 KiB.
		{"realistic", tuner.Model{A0: 0.1, Bs: 0.7 * mib, B: 12 * mib}, 64 << 10},
		// 1 ms, 300 MiB/s: 300 KiB -> 256 KiB.
		{"lan", tuner.Model{A0: 0.001, Bs: 300 * mib, B: 1000 * mib}, 256 << 10},
		// 30 ms, 80 MiB/s: 2.4 MiB -> 2 MiB.
		{"cloud", tuner.Model{A0: 0.03, Bs: 80 * mib, B: 1000 * mib}, 2 * mib},
		// The aggregate below one stream's rate bounds it: 30 ms x 8 MiB/s.
		{"aggregate bound", tuner.Model{A0: 0.03, Bs: 80 * mib, B: 8 * mib}, 256 << 10},
		// A per-byte term slows the transfer: 0.1 / (1/8 MiB + 1/8 MiB) = 410 KiB.
		{"per-byte term", tuner.Model{A0: 0.1, A2: 1.0 / (8 * mib), Bs: 8 * mib, B: 8 * mib}, 512 << 10},
		{"clamped low", tuner.Model{A0: 0.0001, Bs: 10 * mib, B: 10 * mib}, 64 << 10},
		{"clamped high", tuner.Model{A0: 2, Bs: 100 * mib, B: 100 * mib}, 16 * mib},
		{"no fixed cost", tuner.Model{Bs: 10 * mib, B: 10 * mib}, 0},
		{"no rate", tuner.Model{A0: 0.1}, 0},
	} {
		if got := profileChunkSize(c.m); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
	}
}

// TestMountChunkFromProfile: a new store made without --s3-chunk-size
// (here a remote volume, which shares the mount's flags and chunkConfig)
// takes its chunk size from the saved download profile for the endpoint;
// without a profile it is 1 MiB, and --s3-chunk-size wins over a profile.
func TestMountChunkFromProfile(t *testing.T) {
	const ak, sk = "TRISTORECHUNKPROF001", "tristore-chunkprof-secret-001"
	ep := serveS3(t, "", ak, sk)
	t.Setenv("XDG_CACHE_HOME", t.TempDir()) // no profile from elsewhere
	eng, err := s3client.New(s3client.Config{Endpoint: ep, AccessKey: ak, SecretKey: sk, PathStyle: true})
	if err != nil {
		t.Fatal(err)
	}
	bucket := "chunkprof"
	if _, err := eng.API().CreateBucket(context.Background(), &awss3.CreateBucketInput{Bucket: &bucket}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	fp, desc, err := tuner.Fingerprint(ctx, ep, tuner.Down, nil)
	if err != nil {
		t.Fatal(err)
	}
	withProfile := t.TempDir()
	// 1 ms per request, 300 MiB/s on one stream: 256 KiB.
	p := &tuner.Profile{Endpoint: ep, Network: desc, Fingerprint: fp, Direction: tuner.Down, Created: time.Now(), Verified: time.Now(),
		Report: &tuner.Report{Direction: tuner.Down, Model: tuner.Model{A0: 0.001, Bs: 300 << 20, B: 1000 << 20}}}
	if err := tuner.Save(withProfile, p); err != nil {
		t.Fatal(err)
	}
	// An upload profile for the same endpoint is not a download profile.
	upFP, upDesc, err := tuner.Fingerprint(ctx, ep, tuner.Up, nil)
	if err != nil {
		t.Fatal(err)
	}
	upOnly := t.TempDir()
	up := &tuner.Profile{Endpoint: ep, Network: upDesc, Fingerprint: upFP, Direction: tuner.Up, Created: time.Now(), Verified: time.Now(),
		Report: &tuner.Report{Direction: tuner.Up, Model: tuner.Model{A0: 0.001, Bs: 300 << 20, B: 1000 << 20}}}
	if err := tuner.Save(upOnly, up); err != nil {
		t.Fatal(err)
	}
	backend := "s3://" + strings.TrimPrefix(ep, "http://") + "/" + bucket
	for _, c := range []struct {
		name, dir string
		extra     []string
		want      string
	}{
		{"v-profile", withProfile, nil, "as 262144-byte chunks"},
		{"v-none", t.TempDir(), nil, "as 1048576-byte chunks"},
		{"v-up-only", upOnly, nil, "as 1048576-byte chunks"},
		{"v-flag", withProfile, []string{"--s3-chunk-size", "4MiB"}, "as 4194304-byte chunks"},
	} {
		args := append([]string{"volume", "create", "--data", t.TempDir(), "--backend", backend, "--s3-access-key", ak, "--s3-secret-key", sk,
			"--s3-tune-dir", c.dir, c.name, "8Mi"}, c.extra...)
		out, errOut, err := runCLI3(t, args...)
		if err != nil {
			t.Fatalf("%s: %v\n%s%s", c.name, err, out, errOut)
		}
		if !strings.Contains(out, c.want) {
			t.Errorf("%s: %q, want %q", c.name, strings.TrimSpace(out), c.want)
		}
	}
}
