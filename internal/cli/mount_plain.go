package cli

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/spf13/cobra"

	s3client "github.com/tristore/tristore/client/s3"
	"github.com/tristore/tristore/fusefs/cloudfs"
)

// runMountPlain mounts a bucket of ordinary objects (--plain): see
// fusefs/cloudfs/plain.go. Files being written are spooled under the
// cache directory.
func runMountPlain(cmd *cobra.Command, e *s3client.Engine, bucket, prefix, cache, dir string) error {
	sum := sha256.Sum256([]byte(e.Config().Endpoint + " " + bucket + "/" + prefix))
	p, err := cloudfs.NewPlain(e.API(), cloudfs.PlainOptions{
		Bucket: bucket, Prefix: prefix,
		Spool:       filepath.Join(cache, "plain-"+hex.EncodeToString(sum[:8])),
		ReadOnly:    cfg.GetBool("s3-read-only"),
		AttrTimeout: cfg.GetDuration("s3-attr-timeout"),
		Debug:       cfg.GetBool("s3-debug"),
	})
	if err != nil {
		return fmt.Errorf("mount: %w", err)
	}
	srv, err := p.Mount(dir)
	if err != nil {
		return fmt.Errorf("mount s3://%s/%s on %s: %w", bucket, prefix, dir, err)
	}
	slog.Info("mounted (plain objects)", "bucket", bucket, "prefix", prefix, "dir", dir)
	return waitUnmount(cmd.Context(), srv, dir)
}
