// Command memsoak runs issue 14's memory soak (package bench/memsoak) once:
// `tristore serve` under a mixed S3 + NFS + iSCSI load of -clients clients
// for -duration, sampling its RSS, descriptors and goroutines every
// -sample; then it prints the summary table and the checks, writes the raw
// samples (-raw) and a plot (-plot), and exits 1 if a check failed.
// scripts/bench/memsoak.sh builds it and tristore from a commit and runs it.
package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/tristore/tristore/bench/memsoak"
)

func main() {
	var cfg memsoak.Config
	flag.StringVar(&cfg.Bin, "tristore", "tristore", "tristore binary")
	flag.StringVar(&cfg.Work, "work", "", "scratch directory (default: a new one under $TMPDIR, removed at the end)")
	flag.IntVar(&cfg.Clients, "clients", 64, "clients: a third S3, a third NFS (v3 and v4.1), the rest iSCSI")
	flag.DurationVar(&cfg.Duration, "duration", 30*time.Minute, "duration of the load")
	flag.DurationVar(&cfg.Sample, "sample", 10*time.Second, "interval between samples")
	flag.DurationVar(&cfg.Think, "think", 100*time.Millisecond, "mean pause of a client between operations")
	flag.IntVar(&cfg.ChurnMinOps, "churn-min", 5, "a reconnecting client reconnects every churn-min..churn-max operations")
	flag.IntVar(&cfg.ChurnMaxOps, "churn-max", 60, "see -churn-min")
	flag.IntVar(&cfg.AbruptEvery, "abrupt-every", 4, "one reconnect in this many drops the connection without a goodbye")
	flag.IntVar(&cfg.TolGoroutines, "tol-goroutines", 2, "goroutines the idle server may keep above the baseline")
	flag.IntVar(&cfg.TolFDs, "tol-fds", 2, "descriptors the idle server may keep above the baseline")
	flag.Float64Var(&cfg.RSSGrowth, "rss-growth", 0.10, "RSS growth allowed over the second half of the load")
	flag.DurationVar(&cfg.IdleMax, "idle-max", 2*time.Minute, "how long the idle server has to come back to the baseline")
	flag.Uint64Var(&cfg.Seed, "seed", 0, "seed of the clients' random choices (default: the clock)")
	flag.StringVar(&cfg.Raw, "raw", "", "write the samples and the result here (JSON lines)")
	flag.StringVar(&cfg.HeapProfile, "heap", "", "write the idle server's heap profile at the end here (after a forced GC)")
	plotPath := flag.String("plot", "", "write an SVG plot of RSS, goroutines and descriptors here")
	flag.StringVar(&cfg.Commit, "commit", "", "commit of the tristore binary (recorded)")
	flag.StringVar(&cfg.Command, "command", "", "command line to record (default: this one)")
	report := flag.String("report", "", "print the table (and with -plot draw the plot) of this raw file again, run nothing")
	flag.Parse()
	if *report != "" {
		res, err := memsoak.ReadRaw(*report)
		if err != nil {
			fail(err)
		}
		fmt.Print(res.Summary())
		if *plotPath != "" {
			if err := res.Plot(*plotPath, flag.Arg(0)); err != nil {
				fail(err)
			}
		}
		return
	}
	if cfg.Command == "" {
		cfg.Command = strings.Join(os.Args, " ")
	}
	cfg.Log = os.Stderr
	// The iSCSI initiator warns at every dropped connection, and the soak
	// drops them on purpose; failed operations are counted and printed.
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelError})))
	if cfg.Work == "" {
		w, err := os.MkdirTemp("", "memsoak-")
		if err != nil {
			fail(err)
		}
		defer os.RemoveAll(w)
		cfg.Work = w
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	cfg.Defaults()
	res, err := memsoak.Run(ctx, cfg)
	if err != nil {
		fail(err)
	}
	fmt.Printf("\n%d clients, %v of load, a sample every %v, seed %d\n\n", cfg.Clients, cfg.Duration, cfg.Sample, cfg.Seed)
	fmt.Print(res.Summary())
	for _, e := range res.FirstErrors {
		fmt.Println("  error:", e)
	}
	if *plotPath != "" {
		title := fmt.Sprintf("tristore serve under %d mixed S3 + NFS + iSCSI clients for %v", cfg.Clients, cfg.Duration)
		if err := res.Plot(*plotPath, title); err != nil {
			fail(err)
		}
		fmt.Println("plot:", *plotPath)
	}
	if cfg.Raw != "" {
		fmt.Println("raw samples:", cfg.Raw)
	}
	if !res.Pass {
		if res.GoroutineDump != "" || res.FDDump != "" {
			p := cfg.Raw + ".leak.txt"
			if cfg.Raw == "" {
				p = "memsoak-leak.txt"
			}
			os.WriteFile(p, []byte("# goroutines (pprof debug=1)\n"+res.GoroutineDump+"\n# descriptors\n"+res.FDDump+"\n"), 0o644)
			fmt.Println("goroutine dump and descriptor list of the idle server:", p)
		}
		fmt.Println("memsoak: FAILED")
		os.Exit(1)
	}
	fmt.Println("memsoak: passed")
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "memsoak:", err)
	os.Exit(2)
}
