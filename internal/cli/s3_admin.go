package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/spf13/cobra"
)

// ls, rm, mb, rb and presign: the bucket and object chores around the
// transfers. None of them moves object bytes, so none has --chunk-size.

// s3Target parses the one s3:// argument of a chore command.
func s3Target(arg string) (s3URL, error) {
	u, ok, err := parseS3URL(arg)
	if err != nil {
		return u, err
	}
	if !ok {
		return u, usageErr(fmt.Errorf("%q: want an s3://bucket[/key] URL", arg))
	}
	return u, nil
}

const lsTime = "2006-01-02 15:04:05"

func s3LsCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "ls [s3://bucket[/prefix]]",
		Short: "List buckets, or the objects and common prefixes under a prefix",
		Args:  s3Args(0, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := newS3Session(cmd, "")
			if err != nil {
				return err
			}
			ctx, cancel := signalContext(cmd.Context())
			defer cancel()
			out := cmd.OutOrStdout()
			js := cfg.GetBool("json")
			if len(args) == 0 || args[0] == "s3://" {
				res, err := call(ctx, s, s.eng.API().ListBuckets, &awss3.ListBucketsInput{})
				if err != nil {
					return failedErr(fmt.Errorf("list buckets: %w", err))
				}
				type bucket struct {
					Name    string    `json:"name"`
					Created time.Time `json:"created"`
				}
				bs := []bucket{}
				for _, b := range res.Buckets {
					bs = append(bs, bucket{aws.ToString(b.Name), aws.ToTime(b.CreationDate)})
				}
				if js {
					return json.NewEncoder(out).Encode(bs)
				}
				for _, b := range bs {
					fmt.Fprintf(out, "%s %s\n", b.Created.Local().Format(lsTime), b.Name)
				}
				return nil
			}
			u, err := s3Target(args[0])
			if err != nil {
				return err
			}
			return s3List(ctx, cmd, s, u, cfg.GetBool("recursive"), js)
		},
	}
	c.Flags().BoolP("recursive", "r", false, "every object under the prefix, not one level")
	return c
}

type lsEntry struct {
	Key          string    `json:"key"`
	Size         int64     `json:"size"`
	LastModified time.Time `json:"last_modified"`
	ETag         string    `json:"etag"`
}

type lsResult struct {
	Prefixes []string  `json:"prefixes"`
	Objects  []lsEntry `json:"objects"`
}

func s3List(ctx context.Context, cmd *cobra.Command, s *s3Session, u s3URL, recursive, js bool) error {
	in := &awss3.ListObjectsV2Input{Bucket: &u.Bucket, Prefix: &u.Key}
	if !recursive {
		in.Delimiter = aws.String("/")
	}
	out := cmd.OutOrStdout()
	res := lsResult{Prefixes: []string{}, Objects: []lsEntry{}}
	for range maxListPages {
		page, err := call(ctx, s, s.eng.API().ListObjectsV2, in)
		if err != nil {
			return failedErr(fmt.Errorf("list %s: %w", u, err))
		}
		for _, p := range page.CommonPrefixes {
			res.Prefixes = append(res.Prefixes, aws.ToString(p.Prefix))
			if !js {
				fmt.Fprintf(out, "%30s %s\n", "PRE", strings.TrimPrefix(aws.ToString(p.Prefix), dirPrefixOf(u.Key)))
			}
		}
		for _, o := range page.Contents {
			e := lsEntry{aws.ToString(o.Key), aws.ToInt64(o.Size), aws.ToTime(o.LastModified), aws.ToString(o.ETag)}
			res.Objects = append(res.Objects, e)
			if !js {
				name := e.Key
				if !recursive {
					name = strings.TrimPrefix(name, dirPrefixOf(u.Key))
				}
				fmt.Fprintf(out, "%s %10d %s\n", e.LastModified.Local().Format(lsTime), e.Size, name)
			}
		}
		if !aws.ToBool(page.IsTruncated) || page.NextContinuationToken == nil {
			break
		}
		in.ContinuationToken = page.NextContinuationToken
	}
	if js {
		if err := json.NewEncoder(out).Encode(res); err != nil {
			return err
		}
	}
	// As aws-cli and s5cmd: a prefix that matches nothing is exit 1, so
	// `ls s3://b/key` can test for an object; an empty bucket is not.
	if u.Key != "" && len(res.Objects) == 0 && len(res.Prefixes) == 0 {
		return failedErr(fmt.Errorf("ls %s: no objects under this prefix", u))
	}
	return nil
}

// dirPrefixOf is the part of a listing prefix up to its last /, which ls
// strips from names as aws-cli does.
func dirPrefixOf(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[:i+1]
	}
	return ""
}

func s3RmCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "rm s3://bucket/key",
		Short: "Delete an object, or with --recursive everything under a prefix",
		Args:  s3Args(1, 1),
	}
	rules := addFilterFlags(c)
	c.Flags().BoolP("recursive", "r", false, "delete every object under the prefix (within the filters)")
	c.Flags().Bool("dry-run", false, "print what would be deleted, do nothing")
	c.RunE = func(cmd *cobra.Command, args []string) error {
		u, err := s3Target(args[0])
		if err != nil {
			return err
		}
		recursive := cfg.GetBool("recursive")
		if !recursive && (u.Key == "" || strings.HasSuffix(u.Key, "/")) {
			return usageErr(fmt.Errorf("%s names a prefix: use --recursive", u))
		}
		s, err := newS3Session(cmd, "")
		if err != nil {
			return err
		}
		ctx, cancel := signalContext(cmd.Context())
		defer cancel()
		keys := []string{u.Key}
		if recursive {
			objs, err := listObjects(ctx, s, u.Bucket, dirPrefix(u.Key), *rules)
			if err != nil {
				return err
			}
			keys = keys[:0]
			for _, o := range objs {
				keys = append(keys, o.key)
			}
		} else if _, err := call(ctx, s, s.eng.API().HeadObject, &awss3.HeadObjectInput{Bucket: &u.Bucket, Key: &u.Key}); err != nil {
			// DeleteObject succeeds on a missing key; a script deleting
			// the wrong name should hear about it.
			return failedErr(fmt.Errorf("rm %s: %w", u, err))
		}
		out := cmd.OutOrStdout()
		if cfg.GetBool("dry-run") {
			for _, k := range keys {
				fmt.Fprintf(out, "(dryrun) delete: s3://%s/%s\n", u.Bucket, k)
			}
			return nil
		}
		var errs []string
		if recursive {
			errs = deleteKeys(ctx, s, u.Bucket, keys)
		} else if _, err := call(ctx, s, s.eng.API().DeleteObject, &awss3.DeleteObjectInput{Bucket: &u.Bucket, Key: &u.Key}); err != nil {
			errs = append(errs, fmt.Sprintf("%s: %v", u, err))
		}
		if !cfg.GetBool("quiet") {
			fmt.Fprintf(out, "deleted %d of %d objects\n", len(keys)-len(errs), len(keys))
		}
		if len(errs) > 0 {
			for _, e := range errs {
				fmt.Fprintln(cmd.ErrOrStderr(), "failed: delete", e)
			}
			return failedErr(fmt.Errorf("%d of %d deletes failed", len(errs), len(keys)))
		}
		return nil
	}
	return c
}

func s3MbCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "mb s3://bucket",
		Short: "Make a bucket",
		Args:  s3Args(1, 1),
		RunE: func(cmd *cobra.Command, args []string) error {
			u, err := s3Target(args[0])
			if err != nil {
				return err
			}
			if u.Key != "" {
				return usageErr(fmt.Errorf("%s: mb takes a bucket, not a key", args[0]))
			}
			s, err := newS3Session(cmd, "")
			if err != nil {
				return err
			}
			ctx, cancel := signalContext(cmd.Context())
			defer cancel()
			if _, err := call(ctx, s, s.eng.API().CreateBucket, &awss3.CreateBucketInput{Bucket: &u.Bucket}); err != nil {
				return failedErr(fmt.Errorf("mb s3://%s: %w", u.Bucket, err))
			}
			if !cfg.GetBool("quiet") {
				fmt.Fprintf(cmd.OutOrStdout(), "make_bucket: %s\n", u.Bucket)
			}
			return nil
		},
	}
}

func s3RbCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "rb s3://bucket",
		Short: "Remove a bucket (--force: its objects and unfinished uploads first)",
		Args:  s3Args(1, 1),
	}
	c.Flags().Bool("force", false, "delete every object and abort every multipart upload first")
	c.RunE = func(cmd *cobra.Command, args []string) error {
		u, err := s3Target(args[0])
		if err != nil {
			return err
		}
		if u.Key != "" {
			return usageErr(fmt.Errorf("%s: rb takes a bucket, not a key", args[0]))
		}
		s, err := newS3Session(cmd, "")
		if err != nil {
			return err
		}
		ctx, cancel := signalContext(cmd.Context())
		defer cancel()
		if cfg.GetBool("force") {
			objs, err := listObjects(ctx, s, u.Bucket, "", nil)
			if err != nil {
				return err
			}
			keys := make([]string, len(objs))
			for i, o := range objs {
				keys[i] = o.key
			}
			// Directory markers ("a/") are not in listObjects' result.
			if errs := deleteKeys(ctx, s, u.Bucket, append(keys, markers(ctx, s, u.Bucket)...)); len(errs) > 0 {
				return failedErr(fmt.Errorf("rb s3://%s: %d objects could not be deleted, first: %s", u.Bucket, len(errs), errs[0]))
			}
			if err := abortUploads(ctx, s, u.Bucket); err != nil {
				return failedErr(fmt.Errorf("rb s3://%s: %w", u.Bucket, err))
			}
		}
		if _, err := call(ctx, s, s.eng.API().DeleteBucket, &awss3.DeleteBucketInput{Bucket: &u.Bucket}); err != nil {
			return failedErr(fmt.Errorf("rb s3://%s: %w", u.Bucket, err))
		}
		if !cfg.GetBool("quiet") {
			fmt.Fprintf(cmd.OutOrStdout(), "remove_bucket: %s\n", u.Bucket)
		}
		return nil
	}
	return c
}

// markers lists the keys ending in / (directory markers) of a bucket.
func markers(ctx context.Context, s *s3Session, bucket string) []string {
	var out []string
	in := &awss3.ListObjectsV2Input{Bucket: &bucket}
	for range maxListPages {
		page, err := call(ctx, s, s.eng.API().ListObjectsV2, in)
		if err != nil {
			return out
		}
		for _, o := range page.Contents {
			if k := aws.ToString(o.Key); strings.HasSuffix(k, "/") {
				out = append(out, k)
			}
		}
		if !aws.ToBool(page.IsTruncated) || page.NextContinuationToken == nil {
			return out
		}
		in.ContinuationToken = page.NextContinuationToken
	}
	return out
}

// abortUploads aborts every multipart upload of a bucket.
func abortUploads(ctx context.Context, s *s3Session, bucket string) error {
	for range maxListPages {
		out, err := call(ctx, s, s.eng.API().ListMultipartUploads, &awss3.ListMultipartUploadsInput{Bucket: &bucket})
		if err != nil {
			return err
		}
		if len(out.Uploads) == 0 {
			return nil
		}
		for _, up := range out.Uploads {
			if _, err := call(ctx, s, s.eng.API().AbortMultipartUpload, &awss3.AbortMultipartUploadInput{Bucket: &bucket, Key: up.Key, UploadId: up.UploadId}); err != nil {
				return fmt.Errorf("abort upload %s of %s: %w", aws.ToString(up.UploadId), aws.ToString(up.Key), err)
			}
		}
	}
	return errors.New("too many multipart uploads")
}

func s3PresignCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "presign s3://bucket/key",
		Short: "Print a pre-signed URL that lets anyone GET (or PUT) one object until it expires",
		Args:  s3Args(1, 1),
	}
	c.Flags().Duration("expires-in", time.Hour, "how long the URL stays valid (at most 7 days)")
	c.Flags().String("method", "GET", "GET or PUT")
	c.RunE = func(cmd *cobra.Command, args []string) error {
		u, err := s3Target(args[0])
		if err != nil {
			return err
		}
		if u.Key == "" {
			return usageErr(fmt.Errorf("%s: presign takes an object, not a bucket", args[0]))
		}
		exp := cfg.GetDuration("expires-in")
		if exp <= 0 || exp > 7*24*time.Hour {
			return usageErr(fmt.Errorf("--expires-in %v: want more than 0 and at most 7 days", exp))
		}
		s, err := newS3Session(cmd, "")
		if err != nil {
			return err
		}
		if s.conn.AccessKey == "" {
			return usageErr(errors.New("presign needs credentials: an anonymous URL would carry no signature"))
		}
		pc := awss3.NewPresignClient(s.eng.API(), awss3.WithPresignExpires(exp))
		ctx := cmd.Context()
		var url string
		switch strings.ToUpper(cfg.GetString("method")) {
		case "GET":
			r, err := pc.PresignGetObject(ctx, &awss3.GetObjectInput{Bucket: &u.Bucket, Key: &u.Key})
			if err != nil {
				return failedErr(err)
			}
			url = r.URL
		case "PUT":
			r, err := pc.PresignPutObject(ctx, &awss3.PutObjectInput{Bucket: &u.Bucket, Key: &u.Key})
			if err != nil {
				return failedErr(err)
			}
			url = r.URL
		default:
			return usageErr(fmt.Errorf("--method %q: want GET or PUT", cfg.GetString("method")))
		}
		fmt.Fprintln(cmd.OutOrStdout(), url)
		return nil
	}
	return c
}
