package cli

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"
	"slices"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	s3client "github.com/tristore/tristore/client/s3"
	"github.com/tristore/tristore/client/s3/tuner"
)

// `tristore s3 tune` and `--auto`: seed 001 §5's sampling and inference
// (client/s3/tuner) against the endpoint and network actually in use.
// The tune command is added to `tristore s3` by wrapping its factory, and
// --auto reaches the transfer commands through s3TransferFlagHooks and
// s3TransferHooks, so this file is the only one that knows the tuner.
func init() {
	for i, f := range commandFactories {
		f := f
		commandFactories[i] = func() *cobra.Command {
			c := f()
			if c.Name() == "s3" {
				c.AddCommand(s3TuneCommand())
			}
			return c
		}
	}
	s3TransferFlagHooks = append(s3TransferFlagHooks, func(fs *pflag.FlagSet) {
		fs.Bool("auto", false, "choose --chunk-size and --parallel by the tuner's profile for this endpoint and network (tunes first if there is none; see: tristore s3 tune)")
		addTuneFlags(fs)
	})
	s3TransferHooks = append(s3TransferHooks, autoTransferOptions)
}

// addTuneFlags are the tuner's own knobs (tune, and --auto's first tuning).
func addTuneFlags(fs *pflag.FlagSet) {
	fs.String("tune-dir", "", "where tuned profiles are kept (default: the user cache dir, tristore/s3-tune)")
	fs.Duration("tune-window", 2*time.Second, "how long each sampled point is measured (after its warm-up)")
	fs.Int("tune-samples", 5, "most points sampled (the grid has up to 49)")
}

func s3TuneCommand() *cobra.Command {
	c := &cobra.Command{
		Use:   "tune s3://bucket[/prefix]",
		Short: "Measure a few chunk size × parallelism points and infer the best (seed 001 §5); saves a profile --auto uses",
		Long: `Samples a handful of (chunk size, parallelism) combinations out of
16KiB…64MiB × 1…64 against the endpoint, over the network in use, by
writing probe objects under PREFIX.tristore-tune-*/ (removed afterwards),
fits a latency/bandwidth model to them and chooses:

  --goal bandwidth   the most bandwidth (points within 5 % of it count as
                     equal; the least memory, then the least parallelism,
                     wins among them)
  --max-latency D    the most bandwidth whose mean request latency is ≤ D

It reports the choice (predicted and measured bandwidth and latency), the
best parallelism for each request size (what a batch of files of that size
should use), whether small files are better bundled or sent in parallel by
the CPU time each cost (seed 001 §4.1.3), and what sampling cost.

The profile is saved per endpoint, network (the local address and interface
the endpoint is reached from) and direction. A later run measures the
chosen point once and keeps the profile unless its bandwidth drifted by more
than --drift; --resample samples anew regardless.`,
		Args: s3Args(1, 1),
	}
	f := c.Flags()
	f.String("direction", "up", "what to measure: up (PUTs) or down (ranged GETs of a probe object)")
	f.Duration("max-latency", 0, "latency goal: the most bandwidth with mean request latency under this (0: bandwidth goal)")
	f.Float64("drift", tuner.DefaultDrift, "relative bandwidth change at the chosen point that makes a saved profile stale")
	f.Bool("resample", false, "sample anew even if a saved profile still holds")
	addTuneFlags(f)
	c.RunE = runS3Tune
	return c
}

// tuneFor builds the tuning cycle for url in a direction from the flags.
func tuneFor(conn s3Conn, u s3URL, dir tuner.Direction) (tuner.Tune, *tuner.S3Measurer, error) {
	maxMem, err := cfgSize("max-memory", 1, 1<<50)
	if err != nil {
		return tuner.Tune{}, nil, usageErr(err)
	}
	window := cfg.GetDuration("tune-window")
	if window < 100*time.Millisecond || window > time.Minute {
		return tuner.Tune{}, nil, usageErr(fmt.Errorf("--tune-window %s: want 100ms..1m", window))
	}
	samples := cfg.GetInt("tune-samples")
	if samples < 1 || samples > 49 {
		return tuner.Tune{}, nil, usageErr(fmt.Errorf("--tune-samples %d: want 1..49", samples))
	}
	var tag [4]byte
	rand.Read(tag[:])
	m := &tuner.S3Measurer{
		Base: s3client.Config{Endpoint: conn.Endpoint, Region: conn.Region, AccessKey: conn.AccessKey,
			SecretKey: conn.SecretKey, Token: conn.Token, PathStyle: conn.PathStyle, RequestTimeout: cfg.GetDuration("request-timeout")},
		Bucket: u.Bucket, Prefix: dirPrefix(u.Key) + ".tristore-tune-" + hex.EncodeToString(tag[:]) + "/",
		Direction: dir, Window: window, WarmMax: window * 3 / 4,
	}
	g := tuner.DefaultGrid()
	g.MaxMemory = maxMem
	endpoint := conn.Endpoint
	if endpoint == "" {
		region := conn.Region
		if region == "" {
			region = s3client.DefaultRegion
		}
		endpoint = "https://s3." + region + ".amazonaws.com"
	}
	t := tuner.Tune{Dir: cfg.GetString("tune-dir"), Endpoint: endpoint, Direction: dir, Measurer: m,
		Options: tuner.Options{Grid: g, MaxSamples: samples}}
	if v := cfg.GetFloat64("drift"); v > 0 {
		t.Drift = v
	}
	return t, m, nil
}

func runS3Tune(cmd *cobra.Command, args []string) error {
	u, ok, err := parseS3URL(args[0])
	if err != nil {
		return err
	}
	if !ok {
		return usageErr(fmt.Errorf("%q: want s3://bucket[/prefix]", args[0]))
	}
	dir := tuner.Direction(cfg.GetString("direction"))
	if dir != tuner.Up && dir != tuner.Down {
		return usageErr(fmt.Errorf("--direction %q: want up or down", dir))
	}
	conn, err := resolveS3Conn()
	if err != nil {
		return err
	}
	t, m, err := tuneFor(conn, u, dir)
	if err != nil {
		return err
	}
	t.Force = cfg.GetBool("resample")
	t.Options.Goal.MaxLatency = cfg.GetDuration("max-latency").Seconds()
	if !cfg.GetBool("json") && !cfg.GetBool("quiet") {
		t.Options.Log = func(format string, a ...any) { fmt.Fprintf(cmd.ErrOrStderr(), "tune: "+format+"\n", a...) }
	}
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	out, err := t.Run(ctx)
	cerr := m.Cleanup(context.WithoutCancel(ctx))
	if err != nil {
		return failedErr(fmt.Errorf("tune %s: %w", u, err))
	}
	if cerr != nil {
		fmt.Fprintln(cmd.ErrOrStderr(), "tristore: warning:", cerr)
	}
	r := out.Profile.Report
	// A reused profile answers the goal asked now, not the one it was
	// sampled for.
	goal := tuner.Goal{MaxLatency: cfg.GetDuration("max-latency").Seconds()}
	ch, ok := r.Choose(goal, tuner.Constraints{})
	if !ok {
		return failedErr(fmt.Errorf("tune %s: no combination is predicted to meet --max-latency %s", u, cfg.GetDuration("max-latency")))
	}
	if cfg.GetBool("json") {
		enc := json.NewEncoder(cmd.OutOrStdout())
		enc.SetIndent("", "  ")
		return enc.Encode(map[string]any{"outcome": out, "choice": ch})
	}
	return printTune(cmd.OutOrStdout(), out, ch)
}

func mib(b float64) string { return fmt.Sprintf("%.2f", b/(1<<20)) }

// printTune prints the report as tables.
func printTune(w io.Writer, out *tuner.Outcome, ch tuner.Choice) error {
	p := out.Profile
	r := p.Report
	state := "sampled now"
	switch {
	case out.Reused && out.Check != nil:
		state = fmt.Sprintf("saved profile of %s reused: the choice measures %s MiB/s now", p.Created.Format(time.RFC3339), mib(out.Check.BandwidthBps))
	case out.Reused:
		state = fmt.Sprintf("saved profile of %s reused (verified %s)", p.Created.Format(time.RFC3339), p.Verified.Format(time.RFC3339))
	case out.Drifted:
		state = fmt.Sprintf("re-sampled: the saved choice measured %s MiB/s, more than the drift threshold away", mib(out.Check.BandwidthBps))
	}
	fmt.Fprintf(w, "endpoint %s, %s, direction %s (%s)\n\n", p.Endpoint, p.Network, p.Direction, state)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "chunk\tparallel\tMiB/s\tpredicted\tlatency ms\tpredicted\trequests\tCPU s\tseconds\t")
	for _, s := range r.Samples {
		fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%.1f\t%.1f\t%d\t%.2f\t%.2f\t\n", tuner.FmtSize(s.ChunkSize), s.Parallel, mib(s.BandwidthBps),
			mib(r.Model.Bandwidth(s.Point)), s.LatencyMeanS*1e3, r.Model.Latency(s.Point)*1e3, s.Requests, s.CPUSeconds, s.Seconds)
	}
	tw.Flush()
	fmt.Fprintf(w, "\nmodel: latency = %.1f ms + %.2f ms × (parallel−1) + chunk / min(%s MiB/s, %s MiB/s / parallel)   (fit error %.3f)\n",
		r.Model.A0*1e3, r.Model.A1*1e3, mib(r.Model.Bs), mib(r.Model.B), r.Model.Loss)
	meas := "not sampled"
	if ch.Sampled {
		meas = fmt.Sprintf("measured %s MiB/s, %.1f ms", mib(ch.MeasuredBps), ch.MeasuredLatencyS*1e3)
	}
	fmt.Fprintf(w, "choice: --chunk-size %s --parallel %d: predicted %s MiB/s, %.1f ms; %s\n",
		tuner.FmtSize(ch.ChunkSize), ch.Parallel, mib(ch.PredictedBps), ch.PredictedLatencyS*1e3, meas)
	fmt.Fprintf(w, "sampling cost: %d points, %.1f s, %.1f MiB\n\n", r.Cost.Samples, r.Cost.Seconds, float64(r.Cost.Bytes)/(1<<20))
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "files of\tbest parallel\tMiB/s\tCPU s/GiB\tadvice\t")
	adv := map[int64]tuner.SmallFileChoice{}
	for _, s := range r.SmallFiles.Sizes {
		adv[s.Size] = s
	}
	for _, row := range r.Rows {
		a, ok := adv[row.ChunkSize]
		advice := "-"
		if ok && a.Bundle {
			advice = fmt.Sprintf("bundle into %s (%s MiB/s, %.1f CPU s/GiB)", tuner.FmtSize(r.SmallFiles.BundleChunk), mib(a.BundleBps), a.BundleCPUGiB)
		} else if ok {
			advice = "parallel"
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%.1f\t%s\t\n", tuner.FmtSize(row.ChunkSize), row.Parallel, mib(row.PredictedBps), r.CPU.PerGiB(row.ChunkSize), advice)
	}
	return tw.Flush()
}

// autoTransferOptions is --auto: the profile for this endpoint, network and
// direction (tuned now if missing, re-verified once a day), chosen for the
// workload. An upload's large files need chunks of at least 5 MiB
// (multipart); a directory of small files is sent with the parallelism
// best for their median size (their requests are the files, seed 001
// §5.3), its large files with the largest chunk that still fits
// --max-memory at that parallelism.
func autoTransferOptions(cmd *cobra.Command, conn s3Conn, o *s3TransferOptions) error {
	if !cfg.GetBool("auto") {
		return nil
	}
	if cmd.Flags().Changed("chunk-size") || cmd.Flags().Changed("parallel") {
		return usageErr(errors.New("--auto chooses --chunk-size and --parallel; give either, not both"))
	}
	args := cmd.Flags().Args()
	var remote s3URL
	dir, local := tuner.Down, ""
	for i, a := range args {
		u, ok, err := parseS3URL(a)
		if err != nil {
			return err
		}
		if ok && remote.Bucket == "" {
			remote = u
			if i == 1 && len(args) == 2 {
				dir, local = tuner.Up, args[0]
			}
		}
	}
	if remote.Bucket == "" {
		return usageErr(errors.New("--auto needs an s3:// URL to tune against"))
	}
	t, m, err := tuneFor(conn, remote, dir)
	if err != nil {
		return err
	}
	t.MaxAge = 24 * time.Hour
	quiet := cfg.GetBool("quiet") || cfg.GetBool("json")
	t.Options.Log = func(format string, a ...any) {
		if !quiet {
			fmt.Fprintf(cmd.ErrOrStderr(), "tune: "+format+"\n", a...)
		}
	}
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	out, err := t.Run(ctx)
	if cerr := m.Cleanup(context.WithoutCancel(ctx)); cerr != nil && err == nil {
		fmt.Fprintln(cmd.ErrOrStderr(), "tristore: warning:", cerr)
	}
	if err != nil {
		return failedErr(fmt.Errorf("--auto: tuning against %s: %w", remote, err))
	}
	r := out.Profile.Report
	maxMem, _ := cfgSize("max-memory", 1, 1<<50)
	k := tuner.Constraints{MaxMemory: maxMem}
	if dir == tuner.Up {
		k.MinChunk = s3client.MinPartSize
	}
	big, ok := r.Choose(tuner.Goal{}, k)
	if !ok {
		return failedErr(fmt.Errorf("--auto: no tuned combination fits --max-memory %d", maxMem))
	}
	var sizes []int64
	if local != "" {
		sizes = localFileSizes(local, 100_000)
	}
	var why string
	o.ChunkSize, o.Parallel, why = autoChoice(r, big, sizes, k.MinChunk, maxMem)
	if !quiet {
		fmt.Fprintf(cmd.ErrOrStderr(), "auto: --chunk-size %s --parallel %d (%s; profile %s, predicted %s MiB/s)\n",
			tuner.FmtSize(o.ChunkSize), o.Parallel, why, out.Profile.Fingerprint, mib(big.PredictedBps))
	}
	return nil
}

// autoChoice is --auto's choice for the local files of a transfer (their
// sizes; none for a download, whose sizes are not known yet), made the same
// way for cp and sync, for a file and a directory: big is the profile's
// best point under the constraints. One file larger than big's chunk, or a
// directory whose median file is, goes in the smallest parts with the
// model's parallelism (largeFileParts); a directory of smaller files gets
// the parallelism of their median size's grid row (their requests are the
// files, seed 001 §5.3), and big's chunk, halved while chunk × parallel is
// over maxMem, for any large file among them. why says which, for the log.
func autoChoice(r *tuner.Report, big tuner.Choice, sizes []int64, minChunk, maxMem int64) (chunk int64, parallel int, why string) {
	chunk, parallel, why = big.ChunkSize, big.Parallel, "large files"
	n := len(sizes)
	if n == 0 {
		return
	}
	sorted := slices.Sorted(slices.Values(sizes))
	med := max(sorted[n/2], 1)
	if n == 1 || med >= big.ChunkSize {
		var large []int64
		var total int64
		for _, s := range sorted {
			if s > big.ChunkSize {
				large = append(large, s)
				total += s
			}
		}
		if len(large) == 0 {
			return
		}
		chunk, parallel = largeFileParts(large, r, minChunk, maxMem)
		why = fmt.Sprintf("one file of %s in the smallest parts, streams by the model", tuner.FmtSize(total))
		if len(large) > 1 {
			why = fmt.Sprintf("%d large files, %s in all, in the smallest parts, streams by the model", len(large), tuner.FmtSize(total))
		}
		return
	}
	row := snapRow(r.Grid.ChunkSizes, med)
	small, ok := r.Choose(tuner.Goal{}, tuner.Constraints{MinChunk: row, MaxChunk: row, MaxMemory: maxMem})
	if !ok {
		return
	}
	parallel = small.Parallel
	why = fmt.Sprintf("%d files, median %s: parallelism of the %s row", n, tuner.FmtSize(med), tuner.FmtSize(row))
	for chunk*int64(parallel) > maxMem && chunk/2 >= minChunk {
		chunk /= 2
	}
	if chunk*int64(parallel) > maxMem {
		parallel = int(maxMem / chunk)
	}
	return
}

// largeFileParts chooses the part size and parallelism for large files
// of the given sizes (one, usually). Parts are the smallest allowed
// (minChunk, rounded up to a MiB, more only when the largest file would
// need over 10,000 parts), and the parallelism is the least that the model
// rates within 5 % of the best, capped at the number of parts of all the
// files. Small parts let the streams share the
// file as they go: a stream that runs faster takes more of them, and the
// last part to finish is short. Parts of size/p (one wave, one part per
// stream) made the file wait for its slowest connection: over `realistic`
// 16 connections of one link moved 3.2-7.7 Mbit/s each (iperf3), so one
// of 16 parts of a 1 GiB file would take twice the link's time.
func largeFileParts(sizes []int64, r *tuner.Report, minChunk, maxMem int64) (chunk int64, parallel int) {
	const maxParts = 10000
	c := max(minChunk, (slices.Max(sizes)+maxParts-1)/maxParts)
	c = (c + 1<<20 - 1) &^ (1<<20 - 1)
	var nparts int64
	for _, s := range sizes {
		nparts += (s + c - 1) / c
	}
	chunk, parallel = c, 1
	best := 0.0
	for _, p := range r.Grid.Parallel {
		p := int(min(int64(p), nparts))
		if c*int64(p) > maxMem {
			continue
		}
		if bw := r.Model.Bandwidth(tuner.Point{ChunkSize: c, Parallel: p}); bw > best*1.05 {
			best, parallel = bw, p
		}
	}
	return chunk, parallel
}

// snapRow is the grid chunk size nearest n (log scale).
func snapRow(sizes []int64, n int64) int64 {
	s := slices.Clone(sizes)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	best := s[0]
	for _, c := range s {
		if c <= n || float64(c)/float64(n) < float64(n)/float64(best) {
			best = c
		}
		if c > n {
			break
		}
	}
	return best
}

// localFileSizes walks p (a file or a directory, at most limit entries)
// and returns the sizes of its regular files.
func localFileSizes(p string, limit int) []int64 {
	var sizes []int64
	filepath.WalkDir(p, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || len(sizes) >= limit {
			return filepath.SkipAll
		}
		if d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				sizes = append(sizes, fi.Size())
			}
		}
		return nil
	})
	return sizes
}
