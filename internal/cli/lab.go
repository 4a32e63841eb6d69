package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tristore/tristore/bench"
	"github.com/tristore/tristore/bench/lab"
	"github.com/tristore/tristore/netem"
)

func init() { addCommand(newLabCmd) }

func newLabCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "lab",
		Short: "Run the seeds' study on this machine: tristore's server behind each network preset, every suite, one report",
		Long: `lab starts tristore's own server (a child "tristore serve" on a temporary data
directory: S3, NFS and iSCSI with a volume) behind each network preset in turn
(--presets, default ideal,lan,realistic), runs a quick version of the bench
suites against all three protocols through the emulated link, and writes the
report into --out: index.html, summary.csv, summary.json, lab.json (what ran)
and runs/PRESET-RUN-PROTOCOL/ (each run's records, as "tristore bench" saves
them; redraw with "tristore report").

On every preset: seed 000's small-file (4 KiB) and large-file batches at 1 and
8 threads. On the first preset only: objects, clients, postmark, iozone,
units, single, metadata, datasize, mixed. amplification and efficiency run
once through a link that only counts bytes (labelled "counting"): on a
shaped link, queue drops make TCP resend, and the resent bytes would count
as protocol overhead.

The links are network namespaces (root and /dev/net/tun: the presets' rate,
delay, jitter and loss); without them lab falls back to a TCP proxy link
(rate, delay and jitter, no loss) and says so. ext4 on the LUN (amplification,
postmark over iSCSI) needs root and is skipped without it.

If a run fails or lab is interrupted, the error names the preset, suite,
target and phase, the report is drawn from the runs so far, lab.json and the
failed run are marked partial, and the exit code is 1. The server, its data
directory and every link are removed in every case.`,
		Args: cobra.NoArgs,
		RunE: runLab,
	}
	fs := cmd.Flags()
	fs.String("out", "", "directory for the report and the runs (default results/lab-TIME)")
	fs.Float64("scale", lab.DefaultScale, "shrink the seeds' sizes and counts (0 < scale <= 1); the default runs in a few minutes on 2 cores")
	fs.String("presets", strings.Join(lab.DefaultPresets, ","), "network presets to run behind, in order: "+strings.Join(netem.PresetNames(), ", "))
	fs.String("suites", "", "keep only these suites of the plan, comma-separated (default: all)")
	fs.String("link", "auto", "kind of link: netns (root), proxy (no root, no loss), auto (netns when possible)")
	fs.Duration("timeout", 5*time.Minute, "connect timeout and longest silence of one request (slow links queue a lot)")
	fs.Bool("progress", true, "show progress on stderr")
	return cmd
}

func runLab(cmd *cobra.Command, _ []string) error {
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("lab: cannot find this binary to run the server: %w", err)
	}
	out := cfg.GetString("out")
	if out == "" {
		out = filepath.Join("results", "lab-"+time.Now().UTC().Format("20060102-150405"))
	}
	stderr := cmd.ErrOrStderr()
	c := lab.Config{Bin: exe, Out: out, Scale: cfg.GetFloat64("scale"), Presets: splitList(cfg.GetString("presets")),
		Suites: splitList(cfg.GetString("suites")), Link: cfg.GetString("link"), Timeout: cfg.GetDuration("timeout"),
		ClientCommand: benchClientCommand,
		Log:           func(s string) { fmt.Fprintln(stderr, "lab:", s) }}
	if c.Scale <= 0 || c.Scale > 1 {
		return fmt.Errorf("--scale %v: want 0 < scale <= 1", c.Scale)
	}
	finish := func() {}
	if cfg.GetBool("progress") {
		update, fin := progressPrinter(stderr)
		finish = fin
		c.Progress = func(prefix string, p bench.Progress) {
			p.Phase = prefix + ": " + p.Phase
			update(p)
		}
	}
	ctx, stop := signalContext(cmd.Context())
	defer stop()
	res, runErr := lab.Run(ctx, c)
	finish()
	if res == nil {
		return runErr
	}
	w := cmd.OutOrStdout()
	state := "complete"
	if res.Partial {
		state = "PARTIAL"
	}
	fmt.Fprintf(w, "lab (%s): %d runs on %s, scale %g, %s link, %s\n", state, len(res.Runs), strings.Join(res.Presets, ", "),
		res.Scale, res.Link, res.End.Sub(res.Start).Round(time.Second))
	for _, r := range res.Runs {
		mark := ""
		if r.Partial {
			mark = "  PARTIAL"
		}
		fmt.Fprintf(w, "  %-10s %-14s %-11s %6.1f s  %s%s\n", r.Preset, r.Name, r.Kind, r.Seconds, r.Dir, mark)
	}
	for _, f := range res.Report {
		fmt.Fprintln(w, "wrote", filepath.Join(out, f))
	}
	if runErr != nil {
		return fmt.Errorf("%w (partial results in %s)", runErr, out)
	}
	return nil
}
