package cli

import (
	"fmt"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/tristore/tristore/bench/report"
)

func init() { addCommand(newReportCmd) }

func newReportCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "report RESULTS...",
		Short: "Draw the seed papers' tables and plots from saved bench results (HTML + CSV + JSON)",
		Long: `report reads results directories written by "tristore bench" (run.json +
ops.jsonl.gz) and writes, into --out:

  index.html    one self-contained page (inline SVG and CSS, no network needed):
                per suite the seeds' figures - throughput vs access unit per form
                (units), vs file size (single), vs threads (batch), latency CDFs
                (single, objects), bandwidth heat maps of size x parallelism and
                peak bandwidth (objects), efficiency / amplification bars (runs
                through a link) - and a table per run and phase
  summary.csv   the tables, one row per run, phase, form, unit and threads
  summary.json  the same with each run's full run.json

RESULTS is a results directory, a directory of results directories (all are
read), or LABEL=DIR to name the run in legends. Several runs of a suite are
drawn as separate series of the same plots, labelled by protocol, target and
network (or LABEL). Runs that did not finish are marked PARTIAL.

--compare A B sets two runs side by side: per group, both runs' MB/s and
median latency and the ratios B / A (also compare.csv and compare.json).`,
		Args: cobra.MinimumNArgs(1),
		RunE: runReport,
	}
	fs := cmd.Flags()
	fs.String("out", "", "directory to write the report into (default results/report-TIME)")
	fs.Bool("compare", false, "set exactly two runs side by side with ratios B / A")
	return cmd
}

func runReport(cmd *cobra.Command, args []string) error {
	runs, err := report.Load(args)
	if err != nil {
		return err
	}
	compare := cfg.GetBool("compare")
	if compare && len(runs) != 2 {
		return fmt.Errorf("report --compare: want two runs, %d found in %v", len(runs), args)
	}
	out := cfg.GetString("out")
	if out == "" {
		out = filepath.Join("results", "report-"+time.Now().UTC().Format("20060102-150405"))
	}
	files, err := report.Write(out, runs, report.Options{Compare: compare})
	if err != nil {
		return err
	}
	w := cmd.OutOrStdout()
	for _, r := range runs {
		state := "complete"
		if r.Partial() {
			state = "PARTIAL: " + r.Meta.Error
		}
		fmt.Fprintf(w, "%-10s %s (%s): %d requests, %d failed, %s\n", r.Meta.Suite, r.Label, r.Dir, r.Meta.Ops, r.Meta.Errors, state)
		if r.ReadError != "" {
			fmt.Fprintf(w, "           records not all readable: %s\n", r.ReadError)
		}
	}
	if compare {
		c := report.Compare(runs[0], runs[1])
		fmt.Fprintf(w, "\nA = %s\nB = %s\n", c.A.Label, c.B.Label)
		if err := report.WriteCompareTable(w, c); err != nil {
			return err
		}
	}
	fmt.Fprintln(w)
	for _, f := range files {
		fmt.Fprintln(w, "wrote", f)
	}
	return nil
}
