package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"

	s3client "github.com/tristore/tristore/client/s3"
)

// `tristore s3` is the S3 client: for now `cp` between a local file and
// s3://bucket/key, on the client/s3 transfer engine. It speaks to any
// S3-compatible endpoint, not only tristore's.
func init() {
	addCommand(func() *cobra.Command {
		s3 := &cobra.Command{Use: "s3", Short: "S3 client: copy files to and from any S3-compatible endpoint"}
		fs := s3.PersistentFlags()
		fs.String("endpoint", "", "S3 endpoint URL, e.g. http://127.0.0.1:9000 (env TRISTORE_ENDPOINT or AWS_ENDPOINT_URL); default: AWS")
		fs.String("region", "", "region to sign for (env TRISTORE_REGION or AWS_REGION); default us-east-1")
		fs.String("access-key", "", "access key (env TRISTORE_ACCESS_KEY or AWS_ACCESS_KEY_ID); none: anonymous requests")
		fs.String("secret-key", "", "secret key (env TRISTORE_SECRET_KEY or AWS_SECRET_ACCESS_KEY)")
		fs.Bool("path-style", true, "bucket in the URL path (what non-AWS endpoints want) rather than the host name")
		sizeFlag(fs, "chunk-size", s3client.DefaultChunkSize, "bytes per part and per ranged GET (uploads above it use multipart; at least 5MiB then)")
		fs.Int("parallel", s3client.DefaultParallelism, "parts in flight")
		sizeFlag(fs, "max-memory", s3client.DefaultMaxMemory, "bound on chunk-size × parallel; a larger product is an error")
		fs.Int("retries", s3client.DefaultRetries, "retries per request on 5xx, throttling, timeouts and resets (never on other 4xx); 0: none")
		fs.Duration("request-timeout", 0, "bound on one attempt of one request, body included; an attempt over it is retried (0: none)")
		fs.Bool("json", false, "print the transfer summary as JSON on stdout")
		s3.AddCommand(&cobra.Command{
			Use:   "cp SRC DST",
			Short: "Copy a local file to s3://bucket/key or back",
			Long: `Copy one file between the local file system and S3. One side is
s3://bucket/key; a key ending in / (or empty) takes the local file's name,
and a local destination that is a directory takes the key's last element.
Downloads go to a temporary file renamed into place only when complete, and
a failed upload aborts its multipart upload, so nothing partial is left
looking finished. The exit code is non-zero on any failure.`,
			Args: cobra.ExactArgs(2),
			RunE: runS3Cp,
		})
		return s3
	})
}

// s3Engine builds the transfer engine from flags, env and config.
func s3Engine() (*s3client.Engine, error) {
	chunk, err := cfgSize("chunk-size", 1, 5<<30)
	if err != nil {
		return nil, err
	}
	maxMem, err := cfgSize("max-memory", 1, 1<<50)
	if err != nil {
		return nil, err
	}
	par := cfg.GetInt("parallel")
	if par < 1 || par > 1024 {
		return nil, fmt.Errorf("--parallel %d: want 1..1024", par)
	}
	retries := cfg.GetInt("retries")
	if retries < 0 {
		return nil, fmt.Errorf("--retries %d: want 0 or more", retries)
	}
	if retries == 0 {
		retries = s3client.NoRetries
	}
	firstOf := func(flag string, envs ...string) string {
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
	return s3client.New(s3client.Config{
		ChunkSize: chunk, Parallelism: par, MaxMemory: maxMem, Retries: retries,
		Endpoint:       firstOf("endpoint", "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"),
		Region:         firstOf("region", "AWS_REGION", "AWS_DEFAULT_REGION"),
		AccessKey:      firstOf("access-key", "AWS_ACCESS_KEY_ID"),
		SecretKey:      firstOf("secret-key", "AWS_SECRET_ACCESS_KEY"),
		Token:          os.Getenv("AWS_SESSION_TOKEN"),
		PathStyle:      cfg.GetBool("path-style"),
		RequestTimeout: cfg.GetDuration("request-timeout"),
	})
}

// parseS3URL splits s3://bucket/key; ok is false for a local path.
func parseS3URL(s string) (bucket, key string, ok bool, err error) {
	rest, ok := strings.CutPrefix(s, "s3://")
	if !ok {
		return "", "", false, nil
	}
	bucket, key, _ = strings.Cut(rest, "/")
	if bucket == "" {
		return "", "", true, fmt.Errorf("%q: no bucket (want s3://bucket/key)", s)
	}
	return bucket, key, true, nil
}

func runS3Cp(cmd *cobra.Command, args []string) error {
	src, dst := args[0], args[1]
	sb, sk, srcS3, err := parseS3URL(src)
	if err != nil {
		return err
	}
	db, dk, dstS3, err := parseS3URL(dst)
	if err != nil {
		return err
	}
	switch {
	case srcS3 && dstS3:
		return errors.New("s3 cp: copying between two s3:// URLs is not supported yet; one side must be a local path")
	case !srcS3 && !dstS3:
		return errors.New("s3 cp: one of SRC and DST must be an s3://bucket/key URL")
	}
	eng, err := s3Engine()
	if err != nil {
		return err
	}
	ctx, cancel := signalContext(cmd.Context())
	defer cancel()
	var res s3client.Result
	if dstS3 {
		f, err := os.Open(src)
		if err != nil {
			return err
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			return err
		}
		if !fi.Mode().IsRegular() {
			return fmt.Errorf("%s: not a regular file", src)
		}
		if dk == "" || strings.HasSuffix(dk, "/") {
			dk += filepath.Base(src)
		}
		if res, err = eng.Upload(ctx, db, dk, f, fi.Size()); err != nil {
			return err
		}
		// A file that changed while we read it was uploaded torn.
		if fi2, err := f.Stat(); err == nil && (fi2.Size() != fi.Size() || !fi2.ModTime().Equal(fi.ModTime())) {
			return fmt.Errorf("%s changed during the upload to s3://%s/%s; copy it again", src, db, dk)
		}
	} else {
		if sk == "" || strings.HasSuffix(sk, "/") {
			return fmt.Errorf("%s: name an object, not a prefix (recursive copies are not supported yet)", src)
		}
		if fi, err := os.Stat(dst); (err == nil && fi.IsDir()) || strings.HasSuffix(dst, string(filepath.Separator)) {
			dst = filepath.Join(dst, filepath.Base(sk))
		}
		tmp, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".tristore-*")
		if err != nil {
			return err
		}
		ok := false
		defer func() {
			if !ok {
				tmp.Close()
				os.Remove(tmp.Name())
			}
		}()
		if res, err = eng.Download(ctx, sb, sk, tmp); err != nil {
			return err
		}
		// WriteAt never shrinks the file; a fresh temp file is exact.
		if err := tmp.Close(); err != nil {
			return err
		}
		if err := os.Rename(tmp.Name(), dst); err != nil {
			return err
		}
		ok = true
	}
	if cfg.GetBool("json") {
		enc := json.NewEncoder(cmd.OutOrStdout())
		enc.SetIndent("", "  ")
		return enc.Encode(res)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "%s -> %s: %d bytes in %.3fs (%.1f MiB/s), %d requests, %d retries, latency p50/p90/p99 %.1f/%.1f/%.1f ms\n",
		src, dst, res.Bytes, res.Seconds, res.BandwidthBps/(1<<20),
		res.Requests, res.Retries, res.LatencyP50Ms, res.LatencyP90Ms, res.LatencyP99Ms)
	return nil
}
