// Package crash_test kills `tristore serve` with SIGKILL while many S3 PUTs
// are in flight, restarts it on the same data directory and checks the
// store's durability promise (issue 2): every key holds one complete
// version, never older than the last acknowledged PUT; no temp files
// remain after the restart.
package crash_test

import (
	"bytes"
	"context"
	"crypto/md5"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/tristore/tristore/store/posix"

	"github.com/tristore/tristore/internal/testutil"
)

const (
	accessKey = "CRASHTESTACCESSKEY01"
	secretKey = "crash-test-secret-key-0001"
	bucket    = "crash"
	numKeys   = 24
	workers   = 12
	// rounds and PUTs (over all rounds) per run; TRISTORE_LONG=1 multiplies both.
	defaultRounds  = 3
	defaultMaxPuts = 200
)

// tristoreBin is the binary under test: $TRISTORE_CRASH_BIN when set (a
// prebuilt binary, not removed afterwards), else cmd/tristore built once per
// test binary run.
func tristoreBin(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("TRISTORE_CRASH_BIN"); p != "" {
		return p
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	return testutil.TristoreBin(ctx, t)
}

func TestMain(m *testing.M) { testutil.Main(m) }

// server is one running `tristore serve` (S3 only).
type server struct {
	*testutil.Served
	s3addr string
}

func startServer(t *testing.T, bin, data string) *server {
	t.Helper()
	sv := testutil.StartServe(t, testutil.ServeOptions{Bin: bin, Data: data, On: []string{"s3"},
		Env: []string{"TRISTORE_ACCESS_KEY=" + accessKey, "TRISTORE_SECRET_KEY=" + secretKey}})
	return &server{Served: sv, s3addr: sv.Addrs["s3"]}
}

// kill is a crash: SIGKILL, then wait until the process is gone.
func (s *server) kill() { s.Kill() }

// stop asks for a graceful shutdown (SIGTERM) and waits for it.
func (s *server) stop(t *testing.T) {
	if !s.Stop() {
		t.Error("tristore serve did not stop within 30s of SIGTERM")
	}
}

func client(addr string) *awss3.Client {
	cfg := aws.Config{Region: "us-east-1", Credentials: credentials.NewStaticCredentialsProvider(accessKey, secretKey, "")}
	return awss3.NewFromConfig(cfg, func(o *awss3.Options) {
		o.BaseEndpoint = aws.String("http://" + addr)
		o.UsePathStyle = true
		o.RetryMaxAttempts = 1 // a PUT is acknowledged once, by its own response
	})
}

// content returns version v of key: a header naming key, version and
// length, then pseudo-random bytes determined by them. Sizes range from
// 1 KiB to 3 MiB so that a kill lands in the middle of bodies.
func content(key string, v int) []byte {
	r := rand.New(rand.NewPCG(keySeed(key, v), 0x517e))
	size := 1024 + r.IntN(3<<20)
	if v%3 == 0 {
		size = 1024 + r.IntN(64<<10)
	}
	return contentSized(key, v, size)
}

func keySeed(key string, v int) uint64 {
	seed := uint64(v)*1_000_003 + uint64(len(key))
	for _, c := range key {
		seed = seed*31 + uint64(c)
	}
	return seed
}

// contentSized is version v of key with the given size.
func contentSized(key string, v, size int) []byte {
	r := rand.New(rand.NewPCG(keySeed(key, v), 0x5eed))
	hdr := fmt.Sprintf("key=%s version=%d size=%d\n", key, v, size)
	buf := make([]byte, size)
	copy(buf, hdr)
	for i := len(hdr); i < size; i += 8 {
		x := r.Uint64()
		for j := 0; j < 8 && i+j < size; j++ {
			buf[i+j] = byte(x >> (8 * j))
		}
	}
	return buf
}

var hdrRE = regexp.MustCompile(`^key=(\S+) version=(\d+) size=(\d+)\n`)

// parseVersion checks that data is exactly one whole version of key and
// returns its number.
func parseVersion(key string, data []byte) (int, error) {
	m := hdrRE.FindSubmatch(data)
	if m == nil {
		return -1, fmt.Errorf("no version header (%d bytes)", len(data))
	}
	if string(m[1]) != key {
		return -1, fmt.Errorf("holds content of key %s", m[1])
	}
	v, _ := strconv.Atoi(string(m[2]))
	size, _ := strconv.Atoi(string(m[3]))
	if size != len(data) || !bytes.Equal(data, contentSized(key, v, size)) {
		return v, fmt.Errorf("version %d is not complete or intact (%d bytes)", v, len(data))
	}
	return v, nil
}

// keyState tracks one key; one writer goroutine owns each key, so its
// versions are written strictly one after another.
type keyState struct {
	acked     int // last version whose PUT returned 200
	attempted int // last version a PUT was started for
}

func TestKillDuringPuts(t *testing.T) {
	bin := tristoreBin(t)
	data := t.TempDir()
	keys := make([]string, numKeys)
	states := make([]keyState, numKeys)
	for i := range keys {
		keys[i] = fmt.Sprintf("obj/%02d/data.bin", i)
	}
	srv := startServer(t, bin, data)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := client(srv.s3addr)
	if _, err := c.CreateBucket(ctx, &awss3.CreateBucketInput{Bucket: aws.String(bucket)}); err != nil {
		t.Fatalf("CreateBucket: %v\n%s", err, srv.Log())
	}
	for i, k := range keys {
		if _, err := c.PutObject(ctx, &awss3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(k), Body: bytes.NewReader(content(k, 0))}); err != nil {
			t.Fatalf("initial PUT %s: %v", k, err)
		}
		states[i] = keyState{}
	}
	rounds, maxPuts, timeBound := defaultRounds, defaultMaxPuts, 90*time.Second
	if os.Getenv("TRISTORE_LONG") == "1" {
		rounds, maxPuts, timeBound = 10*defaultRounds, 10*defaultMaxPuts, 15*time.Minute
	}
	puts := 0
	started := time.Now()
	for round := range rounds {
		budget := (maxPuts - puts) / (rounds - round)
		n, tmpSeen := crashRound(t, ctx, srv, data, keys, states, budget)
		puts += n
		t.Logf("round %d: %d PUTs started, server killed with %d temp files on disk", round+1, n, tmpSeen)
		srv = startServer(t, bin, data)
		verify(t, ctx, srv, data, keys, states)
		if time.Since(started) > timeBound {
			t.Logf("stopping after %d rounds (slow machine)", round+1)
			break
		}
	}
	srv.stop(t)
	if left := tempFiles(t, data); len(left) > 0 {
		t.Fatalf("temp files left after graceful shutdown: %v", left)
	}
}

// crashRound runs PUTs from several workers and SIGKILLs the server while
// they are in flight. It returns the number of PUTs started and the temp
// files present right after the kill (evidence that PUTs were cut off).
func crashRound(t *testing.T, ctx context.Context, srv *server, data string, keys []string, states []keyState, budget int) (int, int) {
	c := client(srv.s3addr)
	var started, acked atomic.Int64
	killAt := int64(budget / 2)
	if killAt < 5 {
		killAt = 5
	}
	var mu sync.Mutex // guards states
	var wg sync.WaitGroup
	stopAll := make(chan struct{})
	deadline := time.Now().Add(30 * time.Second)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; time.Now().Before(deadline); i++ {
				ki := w + (i%((numKeys+workers-1)/workers))*workers
				if ki >= numKeys {
					continue
				}
				select {
				case <-stopAll:
					return
				default:
				}
				if started.Add(1) > int64(budget) {
					return
				}
				mu.Lock()
				v := states[ki].acked + 1
				states[ki].attempted = v
				mu.Unlock()
				pctx, pcancel := context.WithTimeout(ctx, 60*time.Second)
				_, err := c.PutObject(pctx, &awss3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(keys[ki]), Body: bytes.NewReader(content(keys[ki], v))})
				pcancel()
				if err != nil {
					return // the server is gone
				}
				mu.Lock()
				states[ki].acked = v
				mu.Unlock()
				acked.Add(1)
			}
		}()
	}
	// Kill once half the budget is acknowledged, with the other workers
	// mid-request.
	for i := 0; i < 6000 && acked.Load() < killAt && time.Now().Before(deadline); i++ {
		time.Sleep(5 * time.Millisecond)
	}
	// Prefer a moment when a PUT is visibly mid-body (its temp file exists).
	for i := 0; i < 400 && len(tempFiles(t, data)) == 0 && time.Now().Before(deadline); i++ {
		time.Sleep(5 * time.Millisecond)
	}
	srv.kill()
	tmp := len(tempFiles(t, data))
	close(stopAll)
	wg.Wait()
	n := started.Load()
	if n > int64(budget) {
		n = int64(budget)
	}
	return int(n), tmp
}

// tempFiles lists PUT temp files in the data tree (the iam directory
// belongs to another package and is not the store's concern).
func tempFiles(t *testing.T, data string) []string {
	var out []string
	filepath.WalkDir(data, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.IsDir() && d.Name() == "iam" && filepath.Base(filepath.Dir(p)) == ".tristore" {
			return filepath.SkipDir
		}
		if !d.IsDir() && strings.HasPrefix(d.Name(), ".tristore-tmp-") {
			out = append(out, p)
		}
		return nil
	})
	return out
}

// verify checks, after a restart, that every key holds one whole version
// no older than its last acknowledged PUT (and no newer than the last one
// attempted), that ETags match, and that start-up removed all temp files.
func verify(t *testing.T, ctx context.Context, srv *server, data string, keys []string, states []keyState) {
	t.Helper()
	// Start-up removes the temp files of the killed server in the
	// background; wait for the end of that walk (its log line).
	if !srv.WaitLog(posix.CleanupDoneLog, 60*time.Second) {
		t.Fatalf("no %q in the log 60 s after the restart:\n%s", posix.CleanupDoneLog, srv.LogTail(2000))
	}
	if left := tempFiles(t, data); len(left) > 0 {
		t.Fatalf("temp files left after restart: %v", left)
	}
	c := client(srv.s3addr)
	for i, k := range keys {
		out, err := c.GetObject(ctx, &awss3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(k)})
		if err != nil {
			t.Fatalf("GET %s after restart: %v", k, err)
		}
		body, err := io.ReadAll(out.Body)
		out.Body.Close()
		if err != nil {
			t.Fatalf("reading %s: %v", k, err)
		}
		v, err := parseVersion(k, body)
		if err != nil {
			t.Fatalf("key %s after crash: %v", k, err)
		}
		st := states[i]
		if v < st.acked || v > st.attempted {
			t.Fatalf("key %s holds version %d; last acknowledged %d, last attempted %d", k, v, st.acked, st.attempted)
		}
		sum := md5.Sum(body)
		if etag := strings.Trim(aws.ToString(out.ETag), `"`); etag != hex.EncodeToString(sum[:]) {
			t.Fatalf("key %s: ETag %s does not match its content", k, etag)
		}
		// The surviving version is now the acknowledged one.
		states[i] = keyState{acked: v, attempted: v}
	}
	res, err := c.ListObjectsV2(ctx, &awss3.ListObjectsV2Input{Bucket: aws.String(bucket)})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Contents) != len(keys) {
		t.Fatalf("listing after restart has %d objects, want %d", len(res.Contents), len(keys))
	}
}
