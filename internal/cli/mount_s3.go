package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	s3client "github.com/tristore/tristore/client/s3"
	"github.com/tristore/tristore/client/s3/chunkstore"
	"github.com/tristore/tristore/fusefs/blockfile"
	"github.com/tristore/tristore/fusefs/cloudfs"
)

// `tristore mount s3://bucket[/prefix] DIR`: a POSIX tree kept in any S3
// bucket as a manifest plus chunks (client/s3/chunkstore, fusefs/cloudfs;
// docs/cloudfs.md), or with --plain a bucket of ordinary objects.

func init() {
	registerMount(mountSpec{
		Scheme: "s3",
		Help:   "s3://bucket[/prefix]  a file tree kept in any S3 bucket as chunks, cached locally (--cache, --cache-size); --plain: a bucket of ordinary objects",
		Flags: func(fs *pflag.FlagSet) {
			fs.String("cache", "", "s3: local cache directory (default: the user cache directory, .../tristore/cloudfs)")
			sizeFlag(fs, "cache-size", 1<<30, "s3: bytes the cache may hold (clean chunks are evicted LRU; dirty ones are written back early when they alone fill it)")
			cloudFlags(fs)
			fs.Bool("plain", false, "s3: mount a bucket of ordinary objects (keys as paths) read-mostly instead of a chunk store")
			fs.Bool("s3-read-only", false, "s3: mount read-only (no lease taken)")
			fs.Bool("s3-create", true, "s3: create an empty file tree when the prefix holds no store (a prefix holding a volume, see volume create --backend, mounts as the file DIR/<--iscsi-file>)")
			fs.Bool("s3-flush-on-close", true, "s3: close(2) uploads the file's dirty chunks (the manifest follows at the next write-back check; fsync publishes at once)")
			fs.Duration("s3-attr-timeout", time.Second, "s3: how long the kernel caches attributes and names")
			fs.Int("s3-read-ahead", cloudfs.DefaultReadAhead, "s3: the kernel's read-ahead window for the mount's files, in bytes (0: off; pages past a read stay locked, writes to them included, until their READ is answered, which for a chunk not cached means its fetch)")
			fs.Bool("s3-debug", false, "s3: log every FUSE request")
			fs.String("s3-pprof", "", "s3: serve Go profiles (net/http/pprof, block profile on) at this address, e.g. 127.0.0.1:6061 (for benchmarks; off by default)")
			fs.String("s3-stats-file", "", "s3: at unmount, write the store's counters (cache hits and misses, prefetches, transfers) as JSON to this file")
		},
		Run: runMountS3,
	})
}

// cloudFlags are the endpoint and chunk-store flags shared by mount s3://
// and volume create --backend.
func cloudFlags(fs *pflag.FlagSet) {
	fs.String("s3-endpoint", "", "s3: endpoint URL, e.g. http://127.0.0.1:8333 (env AWS_ENDPOINT_URL); default AWS")
	fs.String("s3-region", "", "s3: region to sign for (env AWS_REGION); default us-east-1")
	fs.String("s3-access-key", "", "s3: access key (env AWS_ACCESS_KEY_ID)")
	fs.String("s3-secret-key", "", "s3: secret key (env AWS_SECRET_ACCESS_KEY)")
	fs.Bool("s3-path-style", true, "s3: bucket in the URL path (what non-AWS endpoints want)")
	fs.Int("s3-retries", s3client.DefaultRetries, "s3: retries per request on 5xx, throttling, timeouts and resets")
	sizeFlag(fs, "s3-chunk-size", chunkstore.DefaultChunkSize, "s3: chunk size of a new store (an existing one keeps its own); 4KiB..64MiB; not given: from the saved download profile (tristore s3 tune --direction down) for this endpoint and network if there is one, else 1MiB")
	fs.String("s3-tune-dir", "", "s3: where tuned profiles are kept (default: the user cache dir, tristore/s3-tune)")
	fs.Int("s3-parallel", 8, "s3: chunk transfers in flight")
	sizeFlag(fs, "s3-max-memory", 256<<20, "s3: bound on chunk size × s3-parallel")
	fs.Duration("s3-write-back-age", 30*time.Second, "s3: dirty chunks older than this are uploaded")
	fs.Duration("s3-write-back-every", 5*time.Second, "s3: how often dirty chunks are checked")
	fs.Int("s3-prefetch", 0, "s3: prefetch window cap in chunks (0: by chunk size; -1: off)")
	fs.Int("s3-fetch-parts", chunkstore.DefaultFetchParts, "s3: a chunk download as up to this many ranged GETs in parallel (parts of at least 64KiB); each is a billed request where GETs are billed (AWS): up to this many times the GETs per cache miss; 1: one GET per chunk")
	fs.Duration("s3-lease-ttl", 60*time.Second, "s3: lease lifetime; another gateway may take over this long after a crash")
	fs.Duration("s3-request-timeout", 2*time.Minute, "s3: bound on one attempt of one request, body included; an attempt over it is retried")
}

func firstSet(flag string, envs ...string) string {
	if v := cfg.GetString(flag); v != "" {
		return v
	}
	for _, e := range envs {
		if v := os.Getenv(e); v != "" {
			return v
		}
	}
	return ""
}

// cloudEngine builds the S3 client from the s3-* flags and AWS_* env.
func cloudEngine() (*s3client.Engine, error) {
	retries := cfg.GetInt("s3-retries")
	switch {
	case retries < 0:
		return nil, fmt.Errorf("--s3-retries %d: want 0 or more", retries)
	case retries == 0:
		retries = s3client.NoRetries
	}
	// The pool keeps a connection for every GET the chunk store may have
	// in flight (transfers × parts, and the lease and manifest): on a
	// long link a new connection costs a handshake and a slow start.
	conns := max(1, cfg.GetInt("s3-parallel"))*max(1, cfg.GetInt("s3-fetch-parts")) + 4
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = conns, conns
	return s3client.New(s3client.Config{
		HTTPClient: &http.Client{Transport: tr},
		Retries:    retries,
		Endpoint:   firstSet("s3-endpoint", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"),
		Region:     firstSet("s3-region", "AWS_REGION", "AWS_DEFAULT_REGION"),
		AccessKey:  firstSet("s3-access-key", "AWS_ACCESS_KEY_ID"),
		SecretKey:  firstSet("s3-secret-key", "AWS_SECRET_ACCESS_KEY"),
		Token:      os.Getenv("AWS_SESSION_TOKEN"),
		PathStyle:  cfg.GetBool("s3-path-style"),
		// Chunk-sized requests only; the engine's own buffers stay unused.
		ChunkSize: 1, Parallelism: 1,
	})
}

// chunkConfig fills a chunkstore.Config from the flags.
func chunkConfig(e *s3client.Engine, bucket, prefix, cache string) (chunkstore.Config, error) {
	c := chunkstore.Config{Engine: e, Bucket: bucket, Prefix: prefix, CacheDir: cache}
	var err error
	c.CacheSize = 1 << 30
	if cfg.GetString("cache-size") != "" { // volume create has no cache to size
		if c.CacheSize, err = cfgSize("cache-size", 1<<20, 1<<50); err != nil {
			return c, err
		}
	}
	if c.ChunkSize, err = cfgSize("s3-chunk-size", chunkstore.MinChunkSize, chunkstore.MaxChunkSize); err != nil {
		return c, err
	}
	if !cfg.IsSet("s3-chunk-size") {
		var why string
		c.ChunkSize, why = mountChunkDefault(context.Background(), firstSet("s3-endpoint", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"),
			firstSet("s3-region", "AWS_REGION", "AWS_DEFAULT_REGION"), cfg.GetString("s3-tune-dir"))
		slog.Info("chunk size for a new store (an existing one keeps its own)", "chunk_size", c.ChunkSize, "from", why)
	}
	if c.MaxMemory, err = cfgSize("s3-max-memory", 1<<20, 1<<40); err != nil {
		return c, err
	}
	c.Parallelism = cfg.GetInt("s3-parallel")
	c.WriteBackAge = cfg.GetDuration("s3-write-back-age")
	c.WriteBackEvery = cfg.GetDuration("s3-write-back-every")
	c.PrefetchMax = cfg.GetInt("s3-prefetch")
	c.FetchParts = cfg.GetInt("s3-fetch-parts")
	c.LeaseTTL = cfg.GetDuration("s3-lease-ttl")
	c.RequestTimeout = cfg.GetDuration("s3-request-timeout")
	if c.WriteBackEvery <= 0 || c.WriteBackAge < 0 {
		return c, fmt.Errorf("--s3-write-back-every must be positive and --s3-write-back-age not negative")
	}
	return c, nil
}

func defaultCacheDir() (string, error) {
	if v := cfg.GetString("cache"); v != "" {
		return v, nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("mount: no --cache given and no user cache directory: %w", err)
	}
	return filepath.Join(d, "tristore", "cloudfs"), nil
}

func runMountS3(cmd *cobra.Command, u *url.URL, dir string) error {
	bucket, prefix := u.Host, strings.Trim(u.Path, "/")
	if bucket == "" {
		return fmt.Errorf("mount: %s names no bucket (want s3://bucket[/prefix])", u)
	}
	e, err := cloudEngine()
	if err != nil {
		return err
	}
	cache, err := defaultCacheDir()
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	if cfg.GetBool("plain") {
		return runMountPlain(cmd, e, bucket, prefix, cache, dir)
	}
	c, err := chunkConfig(e, bucket, prefix, cache)
	if err != nil {
		return err
	}
	if a := cfg.GetString("s3-pprof"); a != "" {
		if err := servePprof(ctx, a); err != nil {
			return err
		}
	}
	c.ReadOnly = cfg.GetBool("s3-read-only")
	// Whatever the prefix holds (a tree or a volume); a new tree if empty.
	octx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	st, err := chunkstore.Open(octx, c)
	if errors.Is(err, chunkstore.ErrNoStore) && cfg.GetBool("s3-create") && !c.ReadOnly {
		c.Create, c.Kind = true, chunkstore.KindFS
		st, err = chunkstore.Open(octx, c)
	}
	cancel()
	if err != nil {
		return fmt.Errorf("mount: %w", err)
	}
	if st.Kind() == chunkstore.KindVolume {
		return mountCloudVolume(cmd, st, u, dir)
	}
	closeStore := func() error {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
		defer cancel()
		err := st.Close(cctx)
		if p := cfg.GetString("s3-stats-file"); p != "" {
			b, _ := json.Marshal(st.Stats())
			if werr := os.WriteFile(p, b, 0o644); werr != nil {
				slog.Warn("mount: stats file", "err", werr)
			}
		}
		if errors.Is(err, chunkstore.ErrBaseLost) {
			return fmt.Errorf("mount: everything else of %s was uploaded and published, but partly written chunks whose base object is lost stay in %s (not uploaded: see docs/cloudfs.md): %w",
				u, st.CacheDir(), err)
		}
		if err != nil {
			return fmt.Errorf("mount: final write-back of %s failed; the dirty data stays in %s and is uploaded at the next mount: %w",
				u, st.CacheDir(), err)
		}
		return nil
	}
	f, err := cloudfs.New(st, cloudfs.Options{
		FlushOnClose: cfg.GetBool("s3-flush-on-close"),
		AttrTimeout:  cfg.GetDuration("s3-attr-timeout"),
		ReadAhead:    readAhead(cfg.GetInt("s3-read-ahead")),
		FsName:       "s3://" + bucket + "/" + prefix,
		Debug:        cfg.GetBool("s3-debug"),
	})
	if err != nil {
		return errors.Join(err, closeStore())
	}
	srv, err := f.Mount(dir)
	if err != nil {
		return errors.Join(fmt.Errorf("mount %s on %s: %w", u, dir, err), closeStore())
	}
	s := st.Stats()
	slog.Info("mounted", "url", u.String(), "dir", dir, "chunk_size", st.ChunkSize(), "generation", st.Generation(),
		"cache", st.CacheDir(), "recovered_chunks", s.Recovered)
	if err := waitUnmount(ctx, srv, dir); err != nil {
		return errors.Join(err, closeStore())
	}
	return closeStore()
}

// servePprof serves Go's profiles at addr until ctx ends, with the block
// profile on (every blocking event: where writers wait), for benchmarks.
func servePprof(ctx context.Context, addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("mount: --s3-pprof: %w", err)
	}
	runtime.SetBlockProfileRate(1)
	runtime.SetMutexProfileFraction(1)
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	hs := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(ln)
	go func() {
		<-ctx.Done()
		hs.Close()
	}()
	return nil
}

// waitUnmount blocks until dir is unmounted from outside or ctx ends (then
// it unmounts, retrying while busy and detaching lazily after 10 s).
func waitUnmount(ctx context.Context, srv *fuse.Server, dir string) error {
	done := make(chan struct{})
	go func() { srv.Wait(); close(done) }()
	select {
	case <-done:
		slog.Info("unmounted", "dir", dir)
		return nil
	case <-ctx.Done():
	}
	err := srv.Unmount()
	for i := 0; i < 20 && err != nil; i++ {
		time.Sleep(500 * time.Millisecond)
		err = srv.Unmount()
	}
	if err != nil {
		if derr := syscall.Unmount(dir, syscall.MNT_DETACH); derr != nil {
			return fmt.Errorf("unmount %s: %w (lazy unmount: %v)", dir, err, derr)
		}
		slog.Warn("mount was busy; detached lazily", "dir", dir)
	}
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		return fmt.Errorf("unmount %s: FUSE server did not stop", dir)
	}
	slog.Info("unmounted", "dir", dir)
	return nil
}

// mountCloudVolume mounts a volume kept in a bucket as the one file
// DIR/<--iscsi-file> (fusefs/blockfile), as for an iSCSI LUN: losetup it
// and put a file system on it.
func mountCloudVolume(cmd *cobra.Command, st *chunkstore.Store, u *url.URL, dir string) error {
	vol, err := chunkstore.VolumeOf(st)
	if err != nil {
		return err
	}
	name := cfg.GetString("iscsi-file")
	srv, err := blockfile.Mount(dir, vol, blockfile.Options{Name: name, ReadOnly: cfg.GetBool("s3-read-only"), FsName: u.String()})
	if err != nil {
		return errors.Join(err, vol.Close())
	}
	slog.Info("mounted volume", "url", u.String(), "file", filepath.Join(dir, name), "size", vol.Size(), "chunk_size", st.ChunkSize())
	done := make(chan struct{})
	go func() { srv.Wait(); close(done) }()
	select {
	case <-done:
	case <-cmd.Context().Done():
		err = unmountRetry(dir, srv, done)
	}
	if cerr := vol.Close(); cerr != nil {
		return errors.Join(err, fmt.Errorf("mount: final write-back of %s failed; the dirty data stays in %s and is uploaded at the next open: %w",
			u, st.CacheDir(), cerr))
	}
	return err
}

// readAhead maps --s3-read-ahead (0: off) to cloudfs.Options.ReadAhead
// (0: the default, negative: off).
func readAhead(v int) int {
	if v <= 0 {
		return -1
	}
	return v
}
