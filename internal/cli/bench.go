package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"golang.org/x/term"

	"github.com/tristore/tristore/bench"
	"github.com/tristore/tristore/internal/units"
	"github.com/tristore/tristore/netem"
)

func init() {
	addCommand(newBenchCmd)
	addCommand(newBenchClientCmd)
}

// newBenchClientCmd is the client process of the clients suite: `tristore
// bench clients` re-executes this binary once per client (hidden; it
// speaks bench.ClientMain's protocol on stdin and stdout).
func newBenchClientCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "bench-client",
		Short:  "One client process of `tristore bench clients` (internal)",
		Hidden: true,
		Args:   cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signalContext(cmd.Context())
			defer stop()
			return bench.ClientMain(ctx, cmd.InOrStdin(), cmd.OutOrStdout())
		},
	}
}

// benchClientCommand re-executes this binary as a clients-suite client.
func benchClientCommand(ctx context.Context) *exec.Cmd {
	exe, err := os.Executable()
	if err != nil {
		exe = os.Args[0]
	}
	return exec.CommandContext(ctx, exe, "bench-client")
}

func newBenchCmd() *cobra.Command {
	var list strings.Builder
	for _, s := range bench.Suites() {
		fmt.Fprintf(&list, "  %-13s %s (%s)\n", s.Name, s.Doc, s.Seed)
	}
	cmd := &cobra.Command{
		Use:   "bench SUITE TARGET",
		Short: "Run one of the seed papers' experiments against a directory, S3, NFS or iSCSI target",
		Long: `bench runs a suite against TARGET and saves every request as a record in a
results directory (run.json + ops.jsonl.gz; see docs/bench-workbench.md), from
which "tristore report" draws tables and plots. It prints a live progress line
on stderr and a table at the end (--json for JSON).

Suites:
` + list.String() + `
TARGET is one of
  DIR                                 a directory (local disk, a FUSE mount, a kernel NFS/iSCSI mount)
  s3://[AK:SK@]host:port/bucket       S3 (path style; s3+https:// for TLS); the bucket is made if missing
  nfs://host:port/export              NFS v3 with tristore's userspace client (?mountport=P)
  fuse+nfs://host:port/export         the export mounted here through FUSE and driven as a directory
                                      (POSIX access forms, its wire bytes counted on the link)
  iscsi://[user:secret@]host:port/IQN/LUN   a raw LUN: ITS DATA IS OVERWRITTEN
  ext4+iscsi://host:port/IQN/LUN      a new ext4 on the LUN (FUSE + loop + mkfs.ext4, mounted here;
                                      root): ITS DATA IS OVERWRITTEN

--scale (0 < s <= 1) shrinks the seed's parameters: counts by s, sizes and
thread counts by sqrt(s) (0.01 runs each suite in well under a minute here).
Access forms (POSIX: default, sync = O_SYNC, direct = O_DIRECT; NFS and
iSCSI: default, sync) apply to the units, amplification and iozone suites.
The clients suite runs each client as a separate process (this binary,
re-executed); --threads sets its client counts. postmark takes PostMark's
settings as flags (--number, --size-low, --size-high, --transactions,
--read-block, --write-block, --bias-read, --bias-create, --subdirectories,
--seed, --buffered) and --instances; iozone's data set is --file-size.

Failed requests are recorded and shown; a step stops after --max-errors
failures in a row. If the run cannot finish, the error names the target and
phase, the results saved so far are marked partial, and the exit code is 1.
Whatever the run created on the target is removed in every case.`,
		Args: cobra.ExactArgs(2),
		RunE: runBench,
	}
	fs := cmd.Flags()
	fs.Float64("scale", 1, "shrink the seed's sizes and counts (0 < scale <= 1)")
	fs.String("out", "", "results directory to create (default results/bench-SUITE-TIME)")
	fs.Bool("json", false, "print the run and its table as JSON on stdout")
	fs.Bool("progress", true, "show a live progress line on stderr (only drawn when stderr is a terminal; otherwise one line per step)")
	fs.String("forms", "", "access forms to measure, comma-separated (default: all the target has)")
	fs.String("sizes", "", "replace the suite's sizes (units, files or objects), comma-separated, e.g. 4KiB,1MiB")
	fs.String("threads", "", "replace the suite's thread counts, comma-separated, e.g. 1,8,64")
	fs.Int("count", 0, "replace the suite's file/object count per step")
	fs.String("file-size", "", "units: replace the file size; iozone: the data set (e.g. 128MiB; a multiple of every unit)")
	fs.String("instances", "", "postmark: instances at once, comma-separated, e.g. 1,2,4 (default 1,2,4,8 scaled)")
	for _, f := range postmarkFlags {
		if f.kind == "bool" {
			fs.Bool(f.flag, f.def == "true", "postmark: "+f.help)
		} else {
			fs.Int(f.flag, atoiOr(f.def), "postmark: "+f.help)
		}
	}
	fs.Int("max-errors", 10, "end a step after this many failed requests in a row")
	fs.String("network", "", "run across an emulated link with this preset: "+strings.Join(netem.PresetNames(), ", "))
	fs.String("link", "auto", "kind of link for --network: netns (root: two network namespaces, real loss, IP packet counters), proxy (no root: TCP proxy, rate/delay/jitter, no loss), auto (netns when possible)")
	fs.Duration("timeout", 30*time.Second, "connect timeout and longest silence of one request")
	fs.String("access-key", "", "S3 access key (else the URL's user info, AWS_ACCESS_KEY_ID or TRISTORE_ACCESS_KEY)")
	fs.String("secret-key", "", "S3 secret key (else the URL, AWS_SECRET_ACCESS_KEY or TRISTORE_SECRET_KEY)")
	fs.String("region", "us-east-1", "S3 region for request signing")
	fs.String("chap-user", "", "iSCSI CHAP user (else user:secret@ in the URL)")
	fs.String("chap-secret", "", "iSCSI CHAP secret (env TRISTORE_CHAP_SECRET)")
	return cmd
}

func runBench(cmd *cobra.Command, args []string) error {
	suite, target := args[0], args[1]
	if _, ok := bench.LookupSuite(suite); !ok {
		var names []string
		for _, s := range bench.Suites() {
			names = append(names, s.Name)
		}
		return fmt.Errorf("bench: no suite %q (have %s)", suite, strings.Join(names, ", "))
	}
	c := bench.Config{
		Suite: suite, Target: target, Scale: cfg.GetFloat64("scale"), Count: cfg.GetInt("count"),
		Network: cfg.GetString("network"), Link: cfg.GetString("link"), MaxConsecutiveErrors: cfg.GetInt("max-errors"),
		Options: bench.Options{AccessKey: cfg.GetString("access-key"), SecretKey: cfg.GetString("secret-key"),
			Region: cfg.GetString("region"), CHAPUser: cfg.GetString("chap-user"), CHAPSecret: cfg.GetString("chap-secret"),
			Timeout: cfg.GetDuration("timeout")},
	}
	if c.Scale <= 0 || c.Scale > 1 {
		return fmt.Errorf("--scale %v: want 0 < scale <= 1", c.Scale)
	}
	if c.MaxConsecutiveErrors < 1 {
		return fmt.Errorf("--max-errors %d: want at least 1", c.MaxConsecutiveErrors)
	}
	if v := cfg.GetString("forms"); v != "" {
		c.Forms = strings.Split(v, ",")
	}
	for _, s := range splitList(cfg.GetString("sizes")) {
		n, err := units.ParseSize(s)
		if err != nil || n <= 0 {
			return fmt.Errorf("--sizes %q: %v", s, errOr(err, "want a positive size"))
		}
		c.Sizes = append(c.Sizes, n)
	}
	for _, s := range splitList(cfg.GetString("threads")) {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > 4096 {
			return fmt.Errorf("--threads %q: want a count 1..4096", s)
		}
		c.Threads = append(c.Threads, n)
	}
	if v := cfg.GetString("file-size"); v != "" {
		n, err := units.ParseSize(v)
		if err != nil || n <= 0 {
			return fmt.Errorf("--file-size %q: %v", v, errOr(err, "want a positive size"))
		}
		c.FileSize = n
	}
	if err := postmarkSettings(&c); err != nil {
		return err
	}
	c.ClientCommand = benchClientCommand
	c.Out = cfg.GetString("out")
	if c.Out == "" {
		c.Out = filepath.Join("results", "bench-"+suite+"-"+time.Now().UTC().Format("20060102-150405"))
	}
	stderr := cmd.ErrOrStderr()
	finish := func() {}
	if cfg.GetBool("progress") {
		c.Progress, finish = progressPrinter(stderr)
	}
	ctx, stop := signalContext(cmd.Context())
	defer stop()
	run, runErr := bench.Execute(ctx, c)
	finish()
	if run == nil { // nothing was saved (bad arguments, results directory)
		return runErr
	}
	rows, sumErr := bench.Summarize(c.Out)
	if cfg.GetBool("json") {
		out := struct {
			Dir      string                `json:"dir"`
			Run      *bench.Run            `json:"run"`
			Rows     []bench.Row           `json:"rows"`
			PostMark []postmarkRate        `json:"postmark,omitempty"`
			Iozone   []bench.IozoneAverage `json:"iozone,omitempty"`
		}{Dir: c.Out, Run: run, Rows: rows}
		switch run.Suite {
		case "postmark":
			out.PostMark = postmarkRates(run)
		case "iozone":
			out.Iozone = bench.IozoneAverages(rows)
		}
		enc := json.NewEncoder(cmd.OutOrStdout())
		enc.SetIndent("", "  ")
		if err := enc.Encode(out); err != nil {
			return err
		}
	} else {
		w := cmd.OutOrStdout()
		fmt.Fprintf(w, "%s on %s (%s), scale %g", run.Suite, run.Target, run.Protocol, run.Scale)
		if run.Network != "" {
			fmt.Fprintf(w, ", network %s (%s link)", run.Network, run.Params.Extra["link"])
		}
		fmt.Fprintf(w, ": %d requests, %d failed, %s\n", run.Ops, run.Errors, run.End.Sub(run.Start).Round(time.Millisecond))
		if err := bench.WriteTable(w, rows); err != nil {
			return err
		}
		writeSuiteFigures(w, run, rows)
		state := "complete"
		if run.Partial {
			state = "PARTIAL"
		}
		fmt.Fprintf(w, "results (%s): %s\n", state, c.Out)
		if run.CleanupError != "" {
			fmt.Fprintf(w, "cleanup FAILED, %s may be left on the target: %s\n", run.Workdir, run.CleanupError)
		}
	}
	if runErr != nil {
		return fmt.Errorf("%w (partial results in %s)", runErr, c.Out)
	}
	if sumErr != nil {
		return sumErr
	}
	if run.CleanupError != "" {
		return errors.New("bench: cleanup failed: " + run.CleanupError)
	}
	return nil
}

// postmarkFlags are PostMark's `set` commands as flags of `tristore bench
// postmark`, with PostMark's defaults; only those given (flag, env or
// config file) replace the suite's (scaled) values.
var postmarkFlags = []struct{ flag, key, kind, def, help string }{
	{"number", "number", "int", "500", "files in the pool (set number; scaled by --scale)"},
	{"size-low", "size_low", "int", "500", "smallest file in bytes (set size)"},
	{"size-high", "size_high", "int", "10000", "largest file in bytes (set size)"},
	{"transactions", "transactions", "int", "500", "transactions per instance (set transactions; scaled by --scale)"},
	{"read-block", "read_block", "int", "512", "bytes per read (set read)"},
	{"write-block", "write_block", "int", "512", "bytes per write (set write)"},
	{"bias-read", "bias_read", "int", "5", "chances in 10 of a read rather than an append, -1 for neither (set bias read)"},
	{"bias-create", "bias_create", "int", "5", "chances in 10 of a create rather than a delete, -1 for neither (set bias create)"},
	{"subdirectories", "subdirectories", "int", "0", "subdirectories per instance, used when above 1 (set subdirectories)"},
	{"seed", "seed", "int", "42", "random seed, the same for every instance (set seed)"},
	{"buffered", "buffered", "bool", "true", "stdio-buffered I/O, 4 KiB buffer (set buffering)"},
}

func atoiOr(s string) int { n, _ := strconv.Atoi(s); return n }

// postmarkSettings moves --instances and the PostMark flags that were set
// into c, refusing them for other suites.
func postmarkSettings(c *bench.Config) error {
	if v := cfg.GetString("instances"); v != "" {
		if c.Suite != "postmark" {
			return fmt.Errorf("--instances applies to the postmark suite only (--threads for %s)", c.Suite)
		}
		if len(c.Threads) > 0 {
			return errors.New("postmark: give --instances or --threads, not both")
		}
		for _, s := range splitList(v) {
			n, err := strconv.Atoi(s)
			if err != nil || n < 1 || n > 1024 {
				return fmt.Errorf("--instances %q: want a count 1..1024", s)
			}
			c.Threads = append(c.Threads, n)
		}
	}
	for _, f := range postmarkFlags {
		if !cfg.IsSet(f.flag) {
			continue
		}
		if c.Suite != "postmark" {
			return fmt.Errorf("--%s applies to the postmark suite only", f.flag)
		}
		if c.Settings == nil {
			c.Settings = map[string]string{}
		}
		c.Settings[f.key] = cfg.GetString(f.flag)
	}
	if c.Suite == "postmark" {
		p := bench.DefaultPostMark().Settings()
		for k, v := range c.Settings {
			p[k] = v
		}
		if _, err := bench.ParsePostMark(p); err != nil {
			return err
		}
	}
	return nil
}

// postmarkRate is the postmark figure of one step.
type postmarkRate struct {
	Instances    int     `json:"instances"`
	Transactions float64 `json:"transactions_per_s"`
}

func postmarkRates(run *bench.Run) []postmarkRate {
	var out []postmarkRate
	for _, n := range run.Params.Threads {
		if r := bench.PostMarkRate(run, n); r > 0 {
			out = append(out, postmarkRate{n, r})
		}
	}
	return out
}

// writeSuiteFigures prints the figure a suite's seed reports, below the
// table: postmark's transactions/s per instance count, iozone's four tests
// and their average per request size.
func writeSuiteFigures(w io.Writer, run *bench.Run, rows []bench.Row) {
	switch run.Suite {
	case "postmark":
		for _, r := range postmarkRates(run) {
			fmt.Fprintf(w, "postmark: %d instance(s): %.1f transactions/s (%s transactions each)\n", r.Instances, r.Transactions,
				run.Params.Extra["transactions"])
		}
	case "iozone":
		avg := bench.IozoneAverages(rows)
		if len(avg) == 0 {
			return
		}
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintf(tw, "iozone MB/s\tform\trequest\tthreads\twrite\tread\trandwrite\trandread\taverage\t\n")
		for _, a := range avg {
			fmt.Fprintf(tw, "\t%s\t%s\t%d\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t\n", a.Form, bench.FormatSize(a.Unit), a.Threads,
				a.Write, a.Read, a.RandWrite, a.RandRead, a.Average)
		}
		tw.Flush()
	}
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func errOr(err error, msg string) string {
	if err != nil {
		return err.Error()
	}
	return msg
}

// progressPrinter draws a one-line bar on a terminal (redrawn in place)
// and, elsewhere (logs, CI), prints one line per finished step. finish ends
// the bar's line.
func progressPrinter(w io.Writer) (update func(bench.Progress), finish func()) {
	f, isFile := w.(*os.File)
	tty := isFile && term.IsTerminal(int(f.Fd()))
	var mu sync.Mutex
	drawn := false
	update = func(p bench.Progress) {
		mu.Lock()
		defer mu.Unlock()
		if !tty {
			if p.StepEnded {
				st := p.Step
				mbps := 0.0
				if d := st.End - st.Start; d > 0 {
					mbps = float64(st.Payload) / d.Seconds() / 1e6
				}
				fmt.Fprintf(w, "bench: %s: %d requests, %d failed, %.2f MB/s, %s\n", p.Phase, st.Ops, st.Errors, mbps,
					(st.End - st.Start).Round(time.Microsecond))
			}
			return
		}
		const width = 24
		frac := 0.0
		if p.StepPlanned > 0 {
			frac = min(1, float64(p.StepDone)/float64(p.StepPlanned))
		}
		fill := int(frac * width)
		mbps := 0.0
		if p.Elapsed > 0 {
			mbps = float64(p.Bytes) / p.Elapsed.Seconds() / 1e6
		}
		fmt.Fprintf(w, "\r\033[K%-26.26s [%s%s] %d/%d  total %d req, %d err, %.1f MB/s, %s",
			p.Phase, strings.Repeat("#", fill), strings.Repeat(".", width-fill), p.StepDone, p.StepPlanned,
			p.Ops, p.Errors, mbps, p.Elapsed.Round(time.Second))
		drawn = true
	}
	finish = func() {
		mu.Lock()
		defer mu.Unlock()
		if drawn {
			fmt.Fprintln(w)
		}
	}
	return update, finish
}
