package cli

import (
	"context"
	"crypto/md5"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/spf13/cobra"

	s3client "github.com/tristore/tristore/client/s3"
)

// sync (seed 001 §6.2): only what changed is copied, in parallel, in
// either direction; prefetch (seed 001 §6.1, informed prefetching): learn
// every size from one listing, then download in parallel, largest first, so
// the long transfers start early and the small ones fill the gaps.

func s3SyncCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "sync SRC DST",
		Short: "Copy only what changed between a directory and s3://bucket/prefix (either direction)",
		Long: `Make DST hold what SRC holds: one side is a local directory, the other
s3://bucket/prefix. A file is copied when it is missing on the other side,
when the sizes differ, or when the source is newer (local mtime after the
object's LastModified on upload; LastModified after the local mtime on
download, and downloaded files get the object's LastModified as mtime).
--checksum compares content instead of times: the local MD5 against the
ETag (single-part objects, and multipart objects whose part size is the
--chunk-size or one of the usual ones); an ETag that cannot be checked
counts as changed. --delete removes what DST has and SRC has not (within
the filters). Copies run --parallel files at a time.`,
		Args: s3Args(2, 2),
	}
	addTransferFlags(c)
	rules := addFilterFlags(c)
	addCopyFlags(c)
	c.Flags().Bool("delete", false, "delete files in DST that are not in SRC (within the --include/--exclude filters)")
	c.Flags().Bool("checksum", false, "compare content (MD5 against the ETag) instead of size and modification time")
	c.RunE = func(cmd *cobra.Command, args []string) error { return runS3Sync(cmd, args, *rules) }
	return c
}

func runS3Sync(cmd *cobra.Command, args []string, rules []filterRule) error {
	su, srcS3, err := parseS3URL(args[0])
	if err != nil {
		return err
	}
	du, dstS3, err := parseS3URL(args[1])
	if err != nil {
		return err
	}
	if srcS3 == dstS3 {
		return usageErr(errors.New("s3 sync: exactly one of SRC and DST must be s3://bucket/prefix, the other a local directory"))
	}
	up := dstS3
	local, remote := args[0], du
	if !up {
		local, remote = args[1], su
	}
	if fi, err := os.Stat(local); up && (err != nil || !fi.IsDir()) {
		return usageErr(fmt.Errorf("s3 sync: %s is not a directory", local))
	} else if !up && err == nil && !fi.IsDir() {
		return usageErr(fmt.Errorf("s3 sync: %s is not a directory", local))
	}
	bar := "download"
	if up {
		bar = "upload"
	}
	s, err := newS3Session(cmd, bar)
	if err != nil {
		return err
	}
	ctx, cancel := signalContext(cmd.Context())
	defer cancel()
	prefix := dirPrefix(remote.Key)
	objs, err := listObjects(ctx, s, remote.Bucket, prefix, rules)
	if err != nil {
		s.done()
		return err
	}
	var files []localFile
	if _, err := os.Stat(local); err == nil {
		if files, err = walkLocal(local, rules); err != nil {
			s.done()
			return failedErr(err)
		}
	}
	byRel := map[string]s3Object{}
	for _, o := range objs {
		byRel[o.rel] = o
	}
	localRel := map[string]localFile{}
	for _, f := range files {
		localRel[f.rel] = f
	}
	checksum := cfg.GetBool("checksum")
	var items []s3client.Item
	skipped := 0
	if up {
		for _, f := range files {
			o, ok := byRel[f.rel]
			if ok && !changed(f, o, true, checksum, s.opts.ChunkSize) {
				skipped++
				continue
			}
			items = append(items, s3client.Item{Upload: true, Bucket: remote.Bucket, Key: prefix + f.rel, Path: f.path, Size: f.size})
		}
	} else {
		for _, o := range objs {
			f, ok := localRel[o.rel]
			if ok && !changed(f, o, false, checksum, s.opts.ChunkSize) {
				skipped++
				continue
			}
			p, err := localPath(local, o.rel)
			if err != nil {
				s.done()
				return failedErr(err)
			}
			items = append(items, s3client.Item{Bucket: remote.Bucket, Key: o.key, Path: p, Size: o.size,
				FileOptions: s3client.FileOptions{IfMatch: o.ifMatch(), MTime: o.mtime, ListedSize: o.size, SizeListed: true}})
		}
	}
	// What to delete is decided from the same listings, before copying.
	var delKeys, delPaths []string
	if cfg.GetBool("delete") {
		if up {
			for _, o := range objs {
				if _, ok := localRel[o.rel]; !ok {
					delKeys = append(delKeys, o.key)
				}
			}
		} else {
			for _, f := range files {
				if _, ok := byRel[f.rel]; !ok {
					delPaths = append(delPaths, f.path)
				}
			}
		}
	}
	extra := map[string]int{"skipped": skipped, "deleted": len(delKeys) + len(delPaths)}
	if cfg.GetBool("dry-run") {
		for _, k := range delKeys {
			fmt.Fprintf(cmd.OutOrStdout(), "(dryrun) delete: s3://%s/%s\n", remote.Bucket, k)
		}
		for _, p := range delPaths {
			fmt.Fprintf(cmd.OutOrStdout(), "(dryrun) delete: %s\n", p)
		}
		return runBatch(cmd, ctx, s, "sync", items, extra)
	}
	var delErrs []string
	if len(delKeys) > 0 {
		delErrs = deleteKeys(ctx, s, remote.Bucket, delKeys)
	}
	for _, p := range delPaths {
		if err := os.Remove(p); err != nil {
			delErrs = append(delErrs, err.Error())
		}
	}
	extra["deleted"] -= len(delErrs)
	if !cfg.GetBool("quiet") && !cfg.GetBool("json") {
		for _, k := range delKeys {
			fmt.Fprintf(cmd.OutOrStdout(), "delete: s3://%s/%s\n", remote.Bucket, k)
		}
		for _, p := range delPaths {
			fmt.Fprintf(cmd.OutOrStdout(), "delete: %s\n", p)
		}
	}
	err = runBatch(cmd, ctx, s, "sync", items, extra)
	if len(delErrs) > 0 {
		for _, e := range delErrs {
			fmt.Fprintln(cmd.ErrOrStderr(), "failed: delete", e)
		}
		if err == nil {
			err = failedErr(fmt.Errorf("%d deletes failed", len(delErrs)))
		}
	}
	return err
}

// changed says whether f and o differ for sync (up: f is the source).
func changed(f localFile, o s3Object, up, checksum bool, chunk int64) bool {
	if f.size != o.size {
		return true
	}
	if checksum {
		ok, err := etagMatches(f.path, f.size, o.etag, chunk)
		return err != nil || !ok
	}
	// Listings give LastModified to the second (some servers, AWS
	// included), so both sides are compared in whole seconds: a file
	// written in the same second as its upload is not "newer".
	lm, rm := time.Unix(0, f.mtime).Truncate(time.Second), o.mtime.Truncate(time.Second)
	if up {
		return lm.After(rm)
	}
	return rm.After(lm)
}

// etagMatches compares a local file with an S3 ETag: the file's MD5 for a
// single-part object, or the MD5 of its parts' MD5s and "-N" for a
// multipart one, trying the part sizes that give N parts among chunk and
// the sizes common clients use.
func etagMatches(path string, size int64, etag string, chunk int64) (bool, error) {
	etag = strings.ToLower(strings.Trim(etag, `"`))
	sum, n := etag, 0
	if i := strings.LastIndexByte(etag, '-'); i >= 0 {
		var err error
		if n, err = strconv.Atoi(etag[i+1:]); err != nil || n < 1 {
			return false, nil
		}
		sum = etag[:i]
	}
	if len(sum) != 32 {
		return false, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	if n == 0 {
		h := md5.New()
		if _, err := io.Copy(h, f); err != nil {
			return false, err
		}
		return hex.EncodeToString(h.Sum(nil)) == sum, nil
	}
	const mib = 1 << 20
	tried := map[int64]bool{}
	for _, ps := range []int64{chunk, (size + int64(n) - 1) / int64(n), ((size+int64(n)-1)/int64(n) + mib - 1) / mib * mib, 8 * mib, 5 * mib, 16 * mib, 64 * mib} {
		if ps <= 0 || tried[ps] || (size+ps-1)/ps != int64(n) {
			continue
		}
		tried[ps] = true
		all := md5.New()
		for off := int64(0); off < size; off += ps {
			h := md5.New()
			if _, err := io.Copy(h, io.NewSectionReader(f, off, min(ps, size-off))); err != nil {
				return false, err
			}
			all.Write(h.Sum(nil))
		}
		if hex.EncodeToString(all.Sum(nil)) == sum {
			return true, nil
		}
	}
	return false, nil
}

// deleteKeys deletes keys 1,000 per request; it returns one message per
// key that was not deleted.
func deleteKeys(ctx context.Context, s *s3Session, bucket string, keys []string) []string {
	var errs []string
	for i := 0; i < len(keys); i += 1000 {
		batch := keys[i:min(i+1000, len(keys))]
		ids := make([]types.ObjectIdentifier, len(batch))
		for j := range batch {
			ids[j] = types.ObjectIdentifier{Key: &batch[j]}
		}
		out, err := call(ctx, s, s.eng.API().DeleteObjects, &awss3.DeleteObjectsInput{Bucket: &bucket, Delete: &types.Delete{Objects: ids, Quiet: boolPtr(true)}})
		if err != nil {
			for _, k := range batch {
				errs = append(errs, fmt.Sprintf("s3://%s/%s: %v", bucket, k, err))
			}
			continue
		}
		for _, e := range out.Errors {
			errs = append(errs, fmt.Sprintf("s3://%s/%s: %s %s", bucket, deref(e.Key), deref(e.Code), deref(e.Message)))
		}
	}
	return errs
}

func boolPtr(b bool) *bool { return &b }

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

func s3PrefetchCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "prefetch s3://bucket/prefix DIR",
		Short: "Download a whole prefix into DIR: one listing, then in parallel, largest first",
		Long: `Informed prefetching (seed 001 §6.1): one listing gives every object's size,
then the objects are downloaded --parallel at a time, largest first, so the
long transfers start at once and the small ones fill in around them. Files
DIR already holds with the object's size and LastModified are skipped; the
rest go through temporary files, each checked against its listed ETag.`,
		Args: s3Args(2, 2),
	}
	addTransferFlags(c)
	rules := addFilterFlags(c)
	c.Flags().Bool("dry-run", false, "print the download order, do nothing")
	c.RunE = func(cmd *cobra.Command, args []string) error {
		u, ok, err := parseS3URL(args[0])
		if err != nil {
			return err
		}
		if !ok {
			return usageErr(fmt.Errorf("%q: want s3://bucket/prefix", args[0]))
		}
		dir := args[1]
		if fi, err := os.Stat(dir); err == nil && !fi.IsDir() {
			return usageErr(fmt.Errorf("%s is not a directory", dir))
		}
		s, err := newS3Session(cmd, "prefetch")
		if err != nil {
			return err
		}
		ctx, cancel := signalContext(cmd.Context())
		defer cancel()
		prefix := dirPrefix(u.Key)
		objs, err := listObjects(ctx, s, u.Bucket, prefix, *rules)
		if err != nil {
			s.done()
			return err
		}
		sort.SliceStable(objs, func(i, j int) bool { return objs[i].size > objs[j].size })
		var items []s3client.Item
		skipped := 0
		for _, o := range objs {
			p, err := localPath(dir, o.rel)
			if err != nil {
				s.done()
				return failedErr(err)
			}
			if fi, err := os.Stat(p); err == nil && fi.Size() == o.size && fi.ModTime().Equal(o.mtime) {
				skipped++
				continue
			}
			items = append(items, s3client.Item{Bucket: u.Bucket, Key: o.key, Path: filepath.Clean(p), Size: o.size,
				FileOptions: s3client.FileOptions{IfMatch: o.ifMatch(), MTime: o.mtime, ListedSize: o.size, SizeListed: true}})
		}
		return runBatch(cmd, ctx, s, "prefetch", items, map[string]int{"skipped": skipped})
	}
	return c
}
