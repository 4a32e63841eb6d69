package cli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tristore/tristore/blockdev"
	"github.com/tristore/tristore/blockdev/filelun"
	s3client "github.com/tristore/tristore/client/s3"
	"github.com/tristore/tristore/client/s3/chunkstore"
	iscsitgt "github.com/tristore/tristore/frontend/iscsi"
	"github.com/tristore/tristore/internal/units"
)

// Volumes on a remote S3 cluster (SeaweedFS, Ceph, MinIO, AWS): `tristore
// volume create --backend s3://HOST:PORT/BUCKET[/PREFIX] NAME SIZE` makes a
// block volume kept as chunk objects under PREFIX/volumes/NAME/ of that
// bucket (client/s3/chunkstore) and registers it in the data directory,
// so `tristore serve` offers it as LUN 0 of iqn.2026-11.io.tristore:-cloud:NAME
// and `tristore mount s3://BUCKET/PREFIX/volumes/NAME DIR` opens it as a
// file. The volume's lease object keeps two gateways from writing it.

// cloudBucket is the IQN's bucket part for remote volumes: a bucket name
// cannot start with '-', so it never clashes with a local bucket's volume.
const cloudBucket = "-cloud"

// cloudVolume is one registration: data/.tristore-cloud/volumes/NAME.json
// (mode 0600: it may hold the backend's keys).
type cloudVolume struct {
	Name      string `json:"name"`
	Endpoint  string `json:"endpoint"`
	Bucket    string `json:"bucket"`
	Prefix    string `json:"prefix"`
	Region    string `json:"region,omitempty"`
	AccessKey string `json:"access_key,omitempty"`
	SecretKey string `json:"secret_key,omitempty"`
	PathStyle bool   `json:"path_style"`
	Size      int64  `json:"size"`
	ChunkSize int64  `json:"chunk_size"`
}

func cloudDir(data string) string { return filepath.Join(data, ".tristore-cloud") }

// parseBackend reads s3://HOST[:PORT]/BUCKET[/PREFIX] (http; s3s:// or
// https:// for TLS; http:// also accepted).
func parseBackend(s string) (endpoint, bucket, prefix string, err error) {
	u, err := url.Parse(s)
	if err != nil {
		return "", "", "", fmt.Errorf("--backend %q: %w", s, err)
	}
	scheme := map[string]string{"s3": "http", "http": "http", "s3s": "https", "https": "https"}[u.Scheme]
	bucket, prefix, _ = strings.Cut(strings.Trim(u.Path, "/"), "/")
	if scheme == "" || u.Host == "" || bucket == "" {
		return "", "", "", fmt.Errorf("--backend %q: want s3://HOST[:PORT]/BUCKET[/PREFIX] (s3s:// for TLS)", s)
	}
	if prefix != "" {
		prefix += "/"
	}
	return scheme + "://" + u.Host, bucket, prefix, nil
}

// addCloudBackend gives `volume create` its --backend form.
func addCloudBackend(create *cobra.Command) {
	fs := create.Flags()
	fs.String("backend", "", "make the volume in a remote S3 bucket as chunk objects instead: s3://HOST[:PORT]/BUCKET[/PREFIX] (s3s:// for TLS); args are then NAME SIZE (see docs/cloudfs.md)")
	cloudFlags(fs)
	local := create.RunE
	create.RunE = func(cmd *cobra.Command, args []string) error {
		if cfg.GetString("backend") == "" {
			return local(cmd, args)
		}
		return runCloudVolumeCreate(cmd, args)
	}
}

func runCloudVolumeCreate(cmd *cobra.Command, args []string) error {
	ep, bucket, prefix, err := parseBackend(cfg.GetString("backend"))
	if err != nil {
		return err
	}
	name := args[0]
	if !filelun.ValidName(name) {
		return fmt.Errorf("volume create: name %q: use a-z, 0-9 and '-' (at most 64)", name)
	}
	size, err := units.ParseSize(args[1])
	if err != nil {
		return fmt.Errorf("volume create: size %q: %w", args[1], err)
	}
	data := cfg.GetString("data")
	reg := filepath.Join(cloudDir(data), "volumes", name+".json")
	if _, err := os.Stat(reg); err == nil {
		return fmt.Errorf("volume create: a remote volume %s is already registered (%s)", name, reg)
	}
	cfg.Set("s3-endpoint", ep)
	e, err := cloudEngine()
	if err != nil {
		return err
	}
	ec := e.Config()
	cv := cloudVolume{Name: name, Endpoint: ep, Bucket: bucket, Prefix: prefix + "volumes/" + name, Region: ec.Region,
		AccessKey: ec.AccessKey, SecretKey: ec.SecretKey, PathStyle: ec.PathStyle, Size: size}
	c, err := chunkConfig(e, cv.Bucket, cv.Prefix, filepath.Join(cloudDir(data), "cache"))
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), 5*time.Minute)
	defer cancel()
	vol, err := chunkstore.CreateVolume(ctx, c, size)
	if err != nil {
		return fmt.Errorf("volume create: %w", err)
	}
	cv.ChunkSize = vol.Store().ChunkSize()
	if err := vol.Close(); err != nil {
		return fmt.Errorf("volume create: %w", err)
	}
	b, _ := json.MarshalIndent(cv, "", "  ")
	if err := os.MkdirAll(filepath.Dir(reg), 0o700); err != nil {
		return err
	}
	if err := os.WriteFile(reg, b, 0o600); err != nil {
		return fmt.Errorf("volume create: register %s: %w", reg, err)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "created %s: %d bytes as %d-byte chunks in s3://%s/%s at %s, iSCSI target %s LUN 0\n",
		name, size, cv.ChunkSize, cv.Bucket, cv.Prefix, ep, iscsitgt.TargetName(cloudBucket, name))
	return nil
}

// cloudVolumes serves the registered remote volumes through the iSCSI
// target (frontend/iscsi ExtraVolumes).
type cloudVolumes struct {
	data string
	log  *slog.Logger
}

func (c *cloudVolumes) read(name string) (*cloudVolume, error) {
	b, err := os.ReadFile(filepath.Join(cloudDir(c.data), "volumes", name+".json"))
	if err != nil {
		return nil, err
	}
	var cv cloudVolume
	if err := json.Unmarshal(b, &cv); err != nil {
		return nil, fmt.Errorf("remote volume %s: registration: %w", name, err)
	}
	return &cv, nil
}

// Targets lists the registered remote volumes.
func (c *cloudVolumes) Targets(ctx context.Context) ([]string, error) {
	ents, err := os.ReadDir(filepath.Join(cloudDir(c.data), "volumes"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	var out []string
	for _, e := range ents {
		if name, ok := strings.CutSuffix(e.Name(), ".json"); ok && filelun.ValidName(name) {
			out = append(out, iscsitgt.TargetName(cloudBucket, name))
		}
	}
	sort.Strings(out)
	return out, err
}

// Open opens a remote volume for a login: its lease refuses a second
// gateway (the login then fails with the reason logged).
func (c *cloudVolumes) Open(ctx context.Context, iqn string) (blockdev.Device, string, bool, error) {
	b, name, ok := iscsitgt.ParseTargetName(iqn)
	if !ok || b != cloudBucket {
		return nil, "", false, nil
	}
	cv, err := c.read(name)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, "", false, fmt.Errorf("%w: no remote volume %s", filelun.ErrNotVolume, name)
	}
	if err != nil {
		return nil, "", false, err
	}
	// A pool for the chunk store's default 8 transfers × 16 parts.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConns, tr.MaxIdleConnsPerHost = 8*chunkstore.DefaultFetchParts+4, 8*chunkstore.DefaultFetchParts+4
	e, err := s3client.New(s3client.Config{Endpoint: cv.Endpoint, Region: cv.Region, AccessKey: firstNonEmpty(cv.AccessKey, os.Getenv("AWS_ACCESS_KEY_ID")),
		SecretKey: firstNonEmpty(cv.SecretKey, os.Getenv("AWS_SECRET_ACCESS_KEY")), PathStyle: cv.PathStyle, ChunkSize: 1, Parallelism: 1,
		HTTPClient: &http.Client{Transport: tr}})
	if err != nil {
		return nil, "", false, err
	}
	vol, err := chunkstore.OpenVolume(ctx, chunkstore.Config{Engine: e, Bucket: cv.Bucket, Prefix: cv.Prefix,
		CacheDir: filepath.Join(cloudDir(c.data), "cache"), CacheSize: 1 << 30, Log: c.log})
	if err != nil {
		c.log.Error("iscsi: remote volume", "volume", name, "err", err)
		return nil, "", false, fmt.Errorf("remote volume %s: %w", name, err)
	}
	sum := sha256.Sum256([]byte(cv.Endpoint + "/" + cv.Bucket + "/" + cv.Prefix))
	return vol, hex.EncodeToString(sum[:8]), true, nil
}

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}

var _ iscsitgt.ExtraVolumes = (*cloudVolumes)(nil)
