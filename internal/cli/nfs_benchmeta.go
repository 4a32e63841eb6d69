package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/spf13/cobra"

	"github.com/tristore/tristore/client/nfs"
)

// `tristore nfs bench-meta`: how metadata operations cost as a directory
// grows (issue 14's scaling page: LOOKUP, GETATTR and READDIRPLUS on a
// 100,000-entry directory, against any NFS v3 server).
func newNFSBenchMetaCmd() *cobra.Command {
	var dur time.Duration
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "bench-meta URL",
		Short: "Measure READDIRPLUS, LOOKUP and GETATTR on an existing (large) directory",
		Long: `bench-meta reads the directory at URL (which it does not change):
  readdirplus: the whole directory with READDIRPLUS, pages of the server's choosing (entries/s);
  lookup:      LOOKUP of names picked at random from the listing, one at a time, for --duration;
  getattr:     GETATTR of handles picked at random from the listing, one at a time, for --duration.
Each prints ops/s and the 50th and 99th percentile latency; JSON with --json.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if dur <= 0 {
				return errors.New("bench-meta: --duration must be positive")
			}
			return withNFS(cmd, args[0], func(ctx context.Context, s *nfsSession) error {
				res, err := runNFSBenchMeta(ctx, s, dur)
				if err != nil {
					return err
				}
				if asJSON {
					enc := json.NewEncoder(cmd.OutOrStdout())
					enc.SetIndent("", "  ")
					return enc.Encode(res)
				}
				out := cmd.OutOrStdout()
				fmt.Fprintf(out, "readdirplus %d entries: %.3f s, %.0f entries/s\n", res.Entries, res.ReaddirSeconds, res.ReaddirEntriesPerSec)
				for _, o := range []nfsMetaOp{res.Lookup, res.Getattr} {
					fmt.Fprintf(out, "%-11s %.0f ops/s, p50 %.3f ms, p99 %.3f ms\n", o.Op, o.OpsPerSec, o.P50Ms, o.P99Ms)
				}
				return nil
			})
		},
	}
	cmd.Flags().DurationVar(&dur, "duration", 5*time.Second, "how long LOOKUP and GETATTR each run")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print results as JSON")
	return cmd
}

// nfsMetaResult is what `tristore nfs bench-meta` measures.
type nfsMetaResult struct {
	Server               string    `json:"server"`
	Entries              int       `json:"entries"`
	ReaddirSeconds       float64   `json:"readdirplus_seconds"`
	ReaddirEntriesPerSec float64   `json:"readdirplus_entries_per_sec"`
	Lookup               nfsMetaOp `json:"lookup"`
	Getattr              nfsMetaOp `json:"getattr"`
}

type nfsMetaOp struct {
	Op        string  `json:"op"`
	Ops       int     `json:"ops"`
	OpsPerSec float64 `json:"ops_per_sec"`
	P50Ms     float64 `json:"p50_ms"`
	P99Ms     float64 `json:"p99_ms"`
}

// maxMetaOps bounds each timed loop besides its duration.
const maxMetaOps = 10_000_000

func runNFSBenchMeta(ctx context.Context, s *nfsSession, dur time.Duration) (*nfsMetaResult, error) {
	c := s.C
	dir, a, err := c.LookupPath(ctx, s.Rel)
	if err != nil {
		return nil, err
	}
	if a.Type != nfs.TypeDir {
		return nil, fmt.Errorf("bench-meta: %s is not a directory", s.Rel)
	}
	start := time.Now()
	ents, err := c.Readdirplus(ctx, dir)
	if err != nil {
		return nil, err
	}
	el := time.Since(start)
	var names []string
	var fhs []nfs.FH
	for _, e := range ents {
		if e.Name == "." || e.Name == ".." {
			continue
		}
		names = append(names, e.Name)
		if len(e.FH) > 0 {
			fhs = append(fhs, e.FH)
		}
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("bench-meta: %s is empty", s.Rel)
	}
	res := &nfsMetaResult{Server: s.Export, Entries: len(names), ReaddirSeconds: el.Seconds(),
		ReaddirEntriesPerSec: float64(len(names)) / el.Seconds()}
	rng := rand.New(rand.NewPCG(1, 2))
	res.Lookup, err = timeMetaOp(ctx, "lookup", dur, func() error {
		_, _, err := c.Lookup(ctx, dir, names[rng.IntN(len(names))])
		return err
	})
	if err != nil {
		return nil, err
	}
	if len(fhs) == 0 {
		return nil, errors.New("bench-meta: READDIRPLUS returned no file handles")
	}
	res.Getattr, err = timeMetaOp(ctx, "getattr", dur, func() error {
		_, err := c.Getattr(ctx, fhs[rng.IntN(len(fhs))])
		return err
	})
	return res, err
}

// timeMetaOp runs op one call at a time for d (or maxMetaOps calls).
func timeMetaOp(ctx context.Context, name string, d time.Duration, op func() error) (nfsMetaOp, error) {
	lat := make([]time.Duration, 0, 1<<16)
	start := time.Now()
	end := start.Add(d)
	for i := 0; i < maxMetaOps && time.Now().Before(end); i++ {
		if err := ctx.Err(); err != nil {
			return nfsMetaOp{}, err
		}
		t := time.Now()
		if err := op(); err != nil {
			return nfsMetaOp{}, fmt.Errorf("bench-meta %s: %w", name, err)
		}
		lat = append(lat, time.Since(t))
	}
	el := time.Since(start)
	slices.Sort(lat)
	pct := func(q float64) float64 {
		return float64(lat[min(len(lat)-1, int(q*float64(len(lat))))]) / 1e6
	}
	return nfsMetaOp{Op: name, Ops: len(lat), OpsPerSec: float64(len(lat)) / el.Seconds(), P50Ms: pct(0.50), P99Ms: pct(0.99)}, nil
}
