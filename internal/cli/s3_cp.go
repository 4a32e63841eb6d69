package cli

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/spf13/cobra"

	s3client "github.com/tristore/tristore/client/s3"
	"github.com/tristore/tristore/internal/progress"
)

// maxListPages bounds every listing loop (1,000 keys a page: 100 M keys).
const maxListPages = 100_000

func s3CpCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "cp SRC DST",
		Short: "Copy files to s3://bucket/key or back (--recursive for directories and prefixes)",
		Long: `Copy between the local file system and S3, or between two s3:// URLs (on
the server: CopyObject, or UploadPartCopy ranges above --chunk-size).
A key ending in / (or empty) takes the local file's name, and a local
destination that is a directory takes the key's last element. With
--recursive, SRC is a directory or a prefix and everything under it is
copied (filtered by --exclude/--include), --parallel files at a time.
DST "-" writes the object to stdout.

Downloads go to a temporary file renamed into place only when complete, so
no half file ever has the final name. An upload whose local file changes
meanwhile is aborted. A multipart upload cut off by a failure is left on the
server and the next cp of the same file continues it, sending only the parts
whose bytes are not there yet (--resume=false aborts instead).`,
		Args: s3Args(2, 2),
	}
	addTransferFlags(c)
	rules := addFilterFlags(c)
	addCopyFlags(c)
	c.RunE = func(cmd *cobra.Command, args []string) error { return runS3Cp(cmd, args, *rules) }
	return c
}

// addCopyFlags are the flags cp and sync share.
func addCopyFlags(c *cobra.Command) {
	f := c.Flags()
	f.Bool("dry-run", false, "print what would be copied or deleted, do nothing")
	f.Bool("resume", true, "leave a failed multipart upload on the server and continue it next time (false: abort it)")
	f.String("resume-dir", "", "where unfinished uploads are recorded (default: the user cache dir, tristore/s3-uploads)")
	if c.Name() == "cp" {
		f.BoolP("recursive", "r", false, "copy a directory or a whole prefix")
	}
}

func resumeDir() string {
	if d := cfg.GetString("resume-dir"); d != "" {
		return d
	}
	if d, err := os.UserCacheDir(); err == nil {
		return filepath.Join(d, "tristore", "s3-uploads")
	}
	return ""
}

func runS3Cp(cmd *cobra.Command, args []string, rules []filterRule) error {
	src, dst := args[0], args[1]
	su, srcS3, err := parseS3URL(src)
	if err != nil {
		return err
	}
	du, dstS3, err := parseS3URL(dst)
	if err != nil {
		return err
	}
	switch {
	case srcS3 && dstS3:
		return runS3Copy(cmd, su, du, rules)
	case !srcS3 && !dstS3:
		return usageErr(errors.New("s3 cp: one of SRC and DST must be an s3://bucket/key URL"))
	}
	recursive := cfg.GetBool("recursive")
	if srcS3 && dst == "-" {
		if recursive {
			return usageErr(errors.New("s3 cp: --recursive cannot write to stdout"))
		}
		return runS3Stream(cmd, su)
	}
	if src == "-" {
		return usageErr(errors.New("s3 cp: reading from stdin is not supported; give a file"))
	}
	bar := "download"
	if dstS3 {
		bar = "upload"
	}
	s, err := newS3Session(cmd, bar)
	if err != nil {
		return err
	}
	ctx, cancel := signalContext(cmd.Context())
	defer cancel()
	var items []s3client.Item
	if dstS3 {
		items, err = uploadItems(src, du, recursive, rules)
	} else {
		items, err = downloadItems(ctx, s, su, dst, recursive, rules)
	}
	if err != nil {
		s.done()
		return err
	}
	return runBatch(cmd, ctx, s, "cp", items, nil)
}

// runBatch runs items (or prints them with --dry-run), with per-file lines,
// the summary and the exit code; extra is added to the summary.
func runBatch(cmd *cobra.Command, ctx context.Context, s *s3Session, what string, items []s3client.Item, extra map[string]int) error {
	out := cmd.OutOrStdout()
	quiet, js := cfg.GetBool("quiet"), cfg.GetBool("json")
	if cfg.GetBool("dry-run") {
		s.done()
		for _, it := range items {
			fmt.Fprintln(out, "(dryrun) "+itemLine(it))
		}
		return nil
	}
	var total int64
	for _, it := range items {
		total += it.Size
	}
	s.bytes.SetTotal(total)
	filesBar := s.bars.Add("files", int64(len(items)), progress.Count)
	res := s.eng.Batch(ctx, items, s3client.BatchOptions{
		Resume: cfg.GetBool("resume"), StateDir: resumeDir(), Tally: s.tally,
		OnDone: func(r s3client.ItemResult) {
			filesBar.Add(1)
			if r.Err == nil && !quiet && !js && s.bars == nil {
				fmt.Fprintln(out, itemLine(r.Item))
			}
		},
	})
	s.done()
	if err := printSummary(out, what, res, extra); err != nil {
		return err
	}
	return batchErr(cmd, res)
}

func itemLine(it s3client.Item) string {
	if it.SrcKey != "" {
		return fmt.Sprintf("copy: s3://%s/%s to s3://%s/%s", it.SrcBucket, it.SrcKey, it.Bucket, it.Key)
	}
	if it.Upload {
		return fmt.Sprintf("upload: %s to s3://%s/%s", it.Path, it.Bucket, it.Key)
	}
	return fmt.Sprintf("download: s3://%s/%s to %s", it.Bucket, it.Key, it.Path)
}

// runS3Copy copies between two s3:// URLs on the server (CopyObject, or
// UploadPartCopy ranges for objects over --chunk-size): one object, or
// with --recursive every object under the source prefix.
func runS3Copy(cmd *cobra.Command, su, du s3URL, rules []filterRule) error {
	recursive := cfg.GetBool("recursive")
	if !recursive && (su.Key == "" || strings.HasSuffix(su.Key, "/")) {
		return usageErr(fmt.Errorf("%s names a prefix, not an object: use --recursive", su))
	}
	s, err := newS3Session(cmd, "copy")
	if err != nil {
		return err
	}
	ctx, cancel := signalContext(cmd.Context())
	defer cancel()
	var items []s3client.Item
	if !recursive {
		key := du.Key
		if key == "" || strings.HasSuffix(key, "/") {
			key += path.Base(su.Key)
		}
		items = []s3client.Item{{SrcBucket: su.Bucket, SrcKey: su.Key, Bucket: du.Bucket, Key: key}}
	} else {
		objs, err := listObjects(ctx, s, su.Bucket, dirPrefix(su.Key), rules)
		if err != nil {
			s.done()
			return err
		}
		prefix := dirPrefix(du.Key)
		for _, o := range objs {
			items = append(items, s3client.Item{SrcBucket: su.Bucket, SrcKey: o.key, Bucket: du.Bucket, Key: prefix + o.rel,
				Size: o.size, FileOptions: s3client.FileOptions{IfMatch: o.ifMatch()}})
		}
	}
	return runBatch(cmd, ctx, s, "cp", items, nil)
}

// uploadItems lists what `cp SRC s3://...` uploads.
func uploadItems(src string, du s3URL, recursive bool, rules []filterRule) ([]s3client.Item, error) {
	fi, err := os.Stat(src)
	if err != nil {
		return nil, failedErr(err)
	}
	if !fi.IsDir() {
		key := du.Key
		if key == "" || strings.HasSuffix(key, "/") {
			key += filepath.Base(src)
		}
		return []s3client.Item{{Upload: true, Bucket: du.Bucket, Key: key, Path: src, Size: fi.Size()}}, nil
	}
	if !recursive {
		return nil, usageErr(fmt.Errorf("%s is a directory: use --recursive", src))
	}
	files, err := walkLocal(src, rules)
	if err != nil {
		return nil, failedErr(err)
	}
	prefix := dirPrefix(du.Key)
	items := make([]s3client.Item, 0, len(files))
	for _, f := range files {
		items = append(items, s3client.Item{Upload: true, Bucket: du.Bucket, Key: prefix + f.rel, Path: f.path, Size: f.size})
	}
	return items, nil
}

// localFile is one regular file under a directory being copied or synced.
type localFile struct {
	rel   string // slash-separated path under the root
	path  string
	size  int64
	mtime int64 // unix ns
}

// walkLocal lists the regular files under root that pass the filters.
// Symbolic links to files are followed, links to directories are not (a
// loop would never end); our own temporary download files are skipped.
func walkLocal(root string, rules []filterRule) ([]localFile, error) {
	var out []localFile
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			return nil
		}
		if strings.HasPrefix(d.Name(), ".") && strings.Contains(d.Name(), ".tristore-") {
			return nil
		}
		fi, err := os.Stat(p)
		if err != nil || !fi.Mode().IsRegular() {
			return nil // dangling link, socket, link to a directory
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if !selected(rules, rel) {
			return nil
		}
		out = append(out, localFile{rel: rel, path: p, size: fi.Size(), mtime: fi.ModTime().UnixNano()})
		return nil
	})
	return out, err
}

// downloadItems lists what `cp s3://... DST` downloads.
func downloadItems(ctx context.Context, s *s3Session, su s3URL, dst string, recursive bool, rules []filterRule) ([]s3client.Item, error) {
	if !recursive {
		if su.Key == "" || strings.HasSuffix(su.Key, "/") {
			return nil, usageErr(fmt.Errorf("%s names a prefix, not an object: use --recursive", su))
		}
		if fi, err := os.Stat(dst); (err == nil && fi.IsDir()) || strings.HasSuffix(dst, string(filepath.Separator)) {
			dst = filepath.Join(dst, path.Base(su.Key))
		}
		return []s3client.Item{{Bucket: su.Bucket, Key: su.Key, Path: dst}}, nil
	}
	objs, err := listObjects(ctx, s, su.Bucket, dirPrefix(su.Key), rules)
	if err != nil {
		return nil, err
	}
	items := make([]s3client.Item, 0, len(objs))
	for _, o := range objs {
		p, err := localPath(dst, o.rel)
		if err != nil {
			return nil, failedErr(err)
		}
		items = append(items, s3client.Item{Bucket: su.Bucket, Key: o.key, Path: p, Size: o.size,
			FileOptions: s3client.FileOptions{IfMatch: o.ifMatch(), MTime: o.mtime, ListedSize: o.size, SizeListed: true}})
	}
	return items, nil
}

// localPath joins a key's relative part under dir, refusing keys that
// would land outside it ("../x", absolute).
func localPath(dir, rel string) (string, error) {
	clean := path.Clean("/" + rel)
	if clean == "/" || clean != "/"+rel {
		return "", fmt.Errorf("key part %q does not name a file under %s", rel, dir)
	}
	return filepath.Join(dir, filepath.FromSlash(rel)), nil
}

// runS3Stream writes one object to stdout (`cp s3://b/k -`, `cat`).
func runS3Stream(cmd *cobra.Command, u s3URL) error {
	if u.Key == "" {
		return usageErr(fmt.Errorf("%s names a bucket, not an object", u))
	}
	s, err := newS3Session(cmd, "")
	if err != nil {
		return err
	}
	ctx, cancel := signalContext(cmd.Context())
	defer cancel()
	res, err := s.eng.Stream(ctx, u.Bucket, u.Key, cmd.OutOrStdout())
	if err != nil {
		return failedErr(err)
	}
	if cfg.GetBool("json") {
		return printSummary(cmd.ErrOrStderr(), "cat", s3client.BatchResult{Result: res, Files: 1}, nil)
	}
	return nil
}

func s3CatCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "cat s3://bucket/key",
		Short: "Write an object to stdout (parallel ranged GETs, written in order)",
		Args:  s3Args(1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			u, ok, err := parseS3URL(args[0])
			if err != nil {
				return err
			}
			if !ok {
				return usageErr(fmt.Errorf("%q: want s3://bucket/key", args[0]))
			}
			return runS3Stream(cmd, u)
		},
	}
	addTransferFlags(c)
	return c
}

// s3Object is one listed object.
type s3Object struct {
	key, rel, etag string
	size           int64
	mtime          time.Time
}

// ifMatch is the listed ETag to download under If-Match, so an object
// replaced after the listing is an error rather than a surprise. A "-0"
// suffix is no S3 ETag (a multipart ETag counts at least one part):
// tristore lists one for a large file changed through another view until it
// is rehashed, so it cannot be matched and is left out.
func (o s3Object) ifMatch() string {
	if strings.HasSuffix(strings.Trim(o.etag, `"`), "-0") {
		return ""
	}
	return o.etag
}

// listObjects lists every object under prefix that passes the filters
// (directory markers, keys ending in /, are left out).
func listObjects(ctx context.Context, s *s3Session, bucket, prefix string, rules []filterRule) ([]s3Object, error) {
	var out []s3Object
	var token *string
	for range maxListPages {
		page, err := call(ctx, s, s.eng.API().ListObjectsV2, &awss3.ListObjectsV2Input{Bucket: &bucket, Prefix: &prefix, ContinuationToken: token})
		if err != nil {
			return nil, failedErr(fmt.Errorf("list s3://%s/%s: %w", bucket, prefix, err))
		}
		for _, o := range page.Contents {
			key := aws.ToString(o.Key)
			if strings.HasSuffix(key, "/") {
				continue
			}
			rel := relKey(prefix, key)
			if !selected(rules, rel) {
				continue
			}
			out = append(out, s3Object{key: key, rel: rel, etag: aws.ToString(o.ETag), size: aws.ToInt64(o.Size), mtime: aws.ToTime(o.LastModified)})
		}
		if !aws.ToBool(page.IsTruncated) || page.NextContinuationToken == nil {
			return out, nil
		}
		token = page.NextContinuationToken
	}
	return nil, failedErr(fmt.Errorf("list s3://%s/%s: more than %d pages", bucket, prefix, maxListPages))
}
