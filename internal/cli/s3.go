package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"regexp"
	"strings"

	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	s3client "github.com/tristore/tristore/client/s3"
	"github.com/tristore/tristore/internal/progress"
)

// `tristore s3` is the S3 client on the client/s3 transfer engine, with the
// habits of aws-cli and s5cmd: s3://bucket/prefix URLs, --recursive,
// --include/--exclude, --dry-run, AWS environment variables and profiles,
// and exit codes scripts can trust:
//
//	0  everything done
//	1  something failed (a file, a request, the endpoint); stderr names it
//	2  the command line itself was wrong (usage)
//
// It speaks to any S3-compatible endpoint, not only tristore's. The
// subcommands live in s3_cp.go (cp, cat), s3_sync.go (sync, prefetch) and
// s3_admin.go (ls, rm, mb, rb, presign); profiles in s3_profile.go.
func init() {
	addCommand(func() *cobra.Command {
		s3 := &cobra.Command{
			Use:   "s3",
			Short: "S3 client: ls, cp, sync, rm, mb, rb, cat, presign, prefetch against any S3-compatible endpoint",
			Long: `An S3 client with the habits of aws-cli and s5cmd. Paths are s3://bucket/key
(or s3://bucket/prefix/) on one side and local paths on the other.

Credentials and endpoint, first found wins: flags; TRISTORE_<FLAG>
variables; AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN,
AWS_REGION, AWS_ENDPOINT_URL(_S3); the profile (--profile, AWS_PROFILE or
"default") in ~/.aws/credentials and ~/.aws/config (AWS_SHARED_CREDENTIALS_FILE,
AWS_CONFIG_FILE). An explicit --profile wins over the AWS_* variables.

Exit codes: 0 all done, 1 something failed (stderr names every failed
object), 2 usage error.`,
		}
		s3.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageErr(err) })
		// A bare or misspelt subcommand is a usage error (exit 2), not help
		// with exit 0 that a script would take for success.
		s3.Args = func(cmd *cobra.Command, args []string) error {
			if len(args) > 0 {
				return usageErr(fmt.Errorf("unknown command %q for %q (see --help)", args[0], cmd.CommandPath()))
			}
			return nil
		}
		s3.RunE = func(cmd *cobra.Command, _ []string) error {
			cmd.SetOut(cmd.ErrOrStderr())
			cmd.Help()
			return usageErr(errors.New("tristore s3: name a subcommand"))
		}
		fs := s3.PersistentFlags()
		fs.String("endpoint-url", "", "S3 endpoint URL, e.g. http://127.0.0.1:9000 (also AWS_ENDPOINT_URL, profile endpoint_url); default: AWS")
		fs.String("endpoint", "", "same as --endpoint-url (env TRISTORE_ENDPOINT)")
		fs.String("profile", "", "profile in ~/.aws/credentials and ~/.aws/config (default: AWS_PROFILE or \"default\")")
		fs.String("region", "", "region to sign for (env AWS_REGION, profile region); default us-east-1")
		fs.String("access-key", "", "access key (env AWS_ACCESS_KEY_ID, profile); none anywhere: anonymous requests")
		fs.String("secret-key", "", "secret key (env AWS_SECRET_ACCESS_KEY, profile)")
		fs.Bool("path-style", true, "bucket in the URL path (what non-AWS endpoints want) rather than the host name")
		sizeFlag(fs, "max-memory", s3client.DefaultMaxMemory, "bound on chunk-size × parallel; a larger product is an error")
		fs.Int("retries", s3client.DefaultRetries, "retries per request on 5xx, throttling, timeouts and resets (never on other 4xx); 0: none")
		fs.Duration("request-timeout", 0, "bound on one attempt of one request, body included; an attempt over it is retried (0: none)")
		fs.Bool("json", false, "print the summary (or listing) as JSON on stdout")
		fs.BoolP("quiet", "q", false, "no per-file lines and no progress bars")
		for _, c := range []*cobra.Command{s3CpCommand(), s3CatCommand(), s3SyncCommand(), s3PrefetchCommand(),
			s3LsCommand(), s3RmCommand(), s3MbCommand(), s3RbCommand(), s3PresignCommand()} {
			s3.AddCommand(c)
		}
		return s3
	})
}

// s3TransferOptions are the knobs of every transfer command (cp, sync,
// cat, prefetch), read from --chunk-size and --parallel. The tuner
// (`--auto`) fills them in through s3TransferHooks before the engine is
// built; keep the shape stable, other code builds on it.
type s3TransferOptions struct {
	ChunkSize int64 // bytes per part and per ranged GET
	Parallel  int   // requests in flight: parts of one file, or files of a batch
}

// s3TransferFlagHooks add flags to every transfer command (e.g. --auto);
// s3TransferHooks run after the flags are read and before the engine is
// built, and may change the options (e.g. from a tuned profile). Both are
// appended to from init() in other files of this package.
var (
	s3TransferFlagHooks []func(fs *pflag.FlagSet)
	s3TransferHooks     []func(cmd *cobra.Command, conn s3Conn, o *s3TransferOptions) error
)

// addTransferFlags gives a transfer command --chunk-size and --parallel
// (and whatever the hooks add).
func addTransferFlags(cmd *cobra.Command) {
	fs := cmd.Flags()
	sizeFlag(fs, "chunk-size", s3client.DefaultChunkSize, "bytes per part and per ranged GET (uploads above it use multipart; at least 5MiB then)")
	fs.Int("parallel", s3client.DefaultParallelism, "requests in flight: parts of a large file, files of a batch")
	fs.Bool("tail-split", true, "downloads: once every range has started, an idle stream fetches the second half of the largest range left (false: each range on its one connection to the end)")
	for _, h := range s3TransferFlagHooks {
		h(fs)
	}
}

// transferOptions reads the transfer flags and runs the hooks.
func transferOptions(cmd *cobra.Command, conn s3Conn) (s3TransferOptions, error) {
	chunk, err := cfgSize("chunk-size", 1, 5<<30)
	if err != nil {
		return s3TransferOptions{}, usageErr(err)
	}
	par := cfg.GetInt("parallel")
	if par < 1 || par > 1024 {
		return s3TransferOptions{}, usageErr(fmt.Errorf("--parallel %d: want 1..1024", par))
	}
	o := s3TransferOptions{ChunkSize: chunk, Parallel: par}
	for _, h := range s3TransferHooks {
		if err := h(cmd, conn, &o); err != nil {
			return o, err
		}
	}
	return o, nil
}

// s3Session is what a subcommand runs with: the connection, the engine,
// and the progress bars (nil when off).
type s3Session struct {
	conn s3Conn
	opts s3TransferOptions
	eng  *s3client.Engine
	bars *progress.Progress
	// bytes is the bytes bar the engine advances (nil: none).
	bytes *progress.Bar
	// tally counts every request of the command (listings, deletes and
	// the batch) for the summary.
	tally *s3client.Tally
}

// newS3Session resolves the connection, reads the transfer options when
// the command has them, and builds the engine. withBar asks for a bytes
// progress bar named so.
func newS3Session(cmd *cobra.Command, withBar string) (*s3Session, error) {
	conn, err := resolveS3Conn()
	if err != nil {
		return nil, err
	}
	s := &s3Session{conn: conn, tally: s3client.NewTally(), opts: s3TransferOptions{ChunkSize: s3client.DefaultChunkSize, Parallel: s3client.DefaultParallelism}}
	if cmd.Flags().Lookup("chunk-size") != nil {
		if s.opts, err = transferOptions(cmd, conn); err != nil {
			return nil, err
		}
	}
	maxMem, err := cfgSize("max-memory", 1, 1<<50)
	if err != nil {
		return nil, usageErr(err)
	}
	retries := cfg.GetInt("retries")
	if retries < 0 {
		return nil, usageErr(fmt.Errorf("--retries %d: want 0 or more", retries))
	}
	if retries == 0 {
		retries = s3client.NoRetries
	}
	if withBar != "" && !cfg.GetBool("json") {
		s.bars = progress.New(progress.Options{Quiet: cfg.GetBool("quiet")})
		s.bytes = s.bars.Add(withBar, 0, progress.Bytes)
	}
	c := s3client.Config{
		ChunkSize: s.opts.ChunkSize, Parallelism: s.opts.Parallel, MaxMemory: maxMem, Retries: retries,
		Endpoint: conn.Endpoint, Region: conn.Region, AccessKey: conn.AccessKey, SecretKey: conn.SecretKey,
		Token: conn.Token, PathStyle: conn.PathStyle, RequestTimeout: cfg.GetDuration("request-timeout"),
	}
	if cmd.Flags().Lookup("tail-split") != nil {
		c.NoTailSplit = !cfg.GetBool("tail-split")
	}
	if s.bytes != nil {
		c.Progress = s.bytes.Add
	}
	if s.eng, err = s3client.New(c); err != nil {
		if errors.Is(err, s3client.ErrMemoryBound) {
			err = usageErr(err)
		}
		return nil, err
	}
	return s, nil
}

// call makes one request with the engine's retries and request timeout
// (listings, deletes, bucket chores), so a 503 or a stall there is handled
// as in a transfer.
func call[I, O any](ctx context.Context, s *s3Session, op func(context.Context, I, ...func(*awss3.Options)) (O, error), in I) (O, error) {
	var out O
	err := s.eng.DoTally(ctx, s.tally, func(ctx context.Context) error {
		var err error
		out, err = op(ctx, in)
		return err
	})
	return out, err
}

// done ends the bars before the summary is printed.
func (s *s3Session) done() { s.bars.Wait() }

// s3URL is a parsed s3://bucket/key.
type s3URL struct {
	Bucket, Key string
}

func (u s3URL) String() string { return "s3://" + u.Bucket + "/" + u.Key }

// parseS3URL splits s3://bucket/key; ok is false for a local path.
func parseS3URL(s string) (u s3URL, ok bool, err error) {
	rest, ok := strings.CutPrefix(s, "s3://")
	if !ok {
		return u, false, nil
	}
	u.Bucket, u.Key, _ = strings.Cut(rest, "/")
	if u.Bucket == "" {
		return u, true, usageErr(fmt.Errorf("%q: no bucket (want s3://bucket/key)", s))
	}
	return u, true, nil
}

// dirPrefix is a key prefix that names a "directory": "" or ending in /.
func dirPrefix(key string) string {
	if key == "" || strings.HasSuffix(key, "/") {
		return key
	}
	return key + "/"
}

// usageErr marks a command-line mistake: exit code 2.
func usageErr(err error) error { return &exitError{code: 2, err: err} }

// failedErr marks work that was attempted and (partly) failed: exit code 1.
func failedErr(err error) error { return &exitError{code: 1, err: err} }

// s3Args is cobra.ExactArgs/RangeArgs with a usage exit code.
func s3Args(lo, hi int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) < lo || len(args) > hi {
			if lo == hi {
				return usageErr(fmt.Errorf("%s takes %d argument(s), got %d (see --help)", cmd.CommandPath(), lo, len(args)))
			}
			return usageErr(fmt.Errorf("%s takes %d to %d arguments, got %d (see --help)", cmd.CommandPath(), lo, hi, len(args)))
		}
		return nil
	}
}

// Filters: --include and --exclude in the order given on the command line,
// as aws-cli applies them: everything is included, then each filter in turn
// includes or excludes what its glob matches, the last match winning. A
// glob matches the path relative to the source directory or prefix, with
// / separators; * and ? also match /, [...] is a class.

type filterRule struct {
	include bool
	glob    string
	re      *regexp.Regexp
}

// s3Filters is both --include's and --exclude's pflag.Value, so the two
// share one list in command-line order.
type s3Filters struct {
	rules *[]filterRule
	incl  bool
}

func (f s3Filters) String() string { return "" }
func (f s3Filters) Type() string   { return "glob" }
func (f s3Filters) Set(v string) error {
	re, err := globRegexp(v)
	if err != nil {
		return err
	}
	*f.rules = append(*f.rules, filterRule{include: f.incl, glob: v, re: re})
	return nil
}

// addFilterFlags gives cmd --include/--exclude and returns their rules.
func addFilterFlags(cmd *cobra.Command) *[]filterRule {
	rules := new([]filterRule)
	cmd.Flags().Var(s3Filters{rules, false}, "exclude", "skip paths matching this glob (repeatable; with --include, the last match wins)")
	cmd.Flags().Var(s3Filters{rules, true}, "include", "do not skip paths matching this glob (repeatable; after an --exclude)")
	return rules
}

// selected says whether rel passes the filters.
func selected(rules []filterRule, rel string) bool {
	ok := true
	for _, r := range rules {
		if r.re.MatchString(rel) {
			ok = r.include
		}
	}
	return ok
}

// globRegexp turns an aws-cli style glob into an anchored regexp.
func globRegexp(g string) (*regexp.Regexp, error) {
	var b strings.Builder
	b.WriteString("^")
	for i := 0; i < len(g); i++ {
		switch c := g[i]; c {
		case '*':
			b.WriteString(".*")
		case '?':
			b.WriteString(".")
		case '[':
			j := strings.IndexByte(g[i+1:], ']')
			if j < 0 {
				return nil, fmt.Errorf("glob %q: unclosed [", g)
			}
			class := g[i+1 : i+1+j]
			if strings.HasPrefix(class, "!") {
				class = "^" + class[1:]
			}
			b.WriteString("[" + class + "]")
			i += j + 1
		default:
			b.WriteString(regexp.QuoteMeta(string(c)))
		}
	}
	b.WriteString("$")
	return regexp.Compile(b.String())
}

// relKey is key relative to prefix (a key equal to a non-directory prefix
// is its own last element).
func relKey(prefix, key string) string {
	if rel, ok := strings.CutPrefix(key, prefix); ok && rel != "" {
		return rel
	}
	return path.Base(key)
}

// printSummary prints a batch's summary: JSON with --json, else one line.
func printSummary(w io.Writer, what string, r s3client.BatchResult, extra map[string]int) error {
	if cfg.GetBool("json") {
		out := map[string]any{}
		b, _ := json.Marshal(r)
		json.Unmarshal(b, &out)
		for k, v := range extra {
			out[k] = v
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(out)
	}
	if cfg.GetBool("quiet") {
		return nil
	}
	var more strings.Builder
	for _, k := range []string{"skipped", "deleted"} {
		if v, ok := extra[k]; ok {
			fmt.Fprintf(&more, ", %d %s", v, k)
		}
	}
	if r.ResumedBytes > 0 {
		fmt.Fprintf(&more, ", %d bytes resumed", r.ResumedBytes)
	}
	_, err := fmt.Fprintf(w, "%s: %d files (%d failed%s), %d bytes in %.3fs (%.1f MiB/s), %d requests, %d retries, latency p50/p90/p99 %.1f/%.1f/%.1f ms\n",
		what, r.Files, r.Failed, more.String(), r.Bytes, r.Seconds, r.BandwidthBps/(1<<20),
		r.Requests, r.Retries, r.LatencyP50Ms, r.LatencyP90Ms, r.LatencyP99Ms)
	return err
}

// batchErr reports a batch's failures on stderr and turns them into exit 1.
func batchErr(cmd *cobra.Command, r s3client.BatchResult) error {
	if r.Failed == 0 {
		return nil
	}
	if r.Files == 1 {
		return failedErr(errors.New(r.Errors[0]))
	}
	for _, e := range r.Errors {
		fmt.Fprintln(cmd.ErrOrStderr(), "failed:", e)
	}
	return failedErr(fmt.Errorf("%d of %d files failed (listed above; files a stop cut off are counted in one line); first: %s", r.Failed, r.Files, r.Errors[0]))
}

// localExists reports whether p exists (any error but "not there" counts
// as existing, so the caller's own operation reports it).
func localExists(p string) bool {
	_, err := os.Stat(p)
	return !errors.Is(err, os.ErrNotExist)
}
