//go:build linux

package tuner

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	s3client "github.com/tristore/tristore/client/s3"
	"github.com/tristore/tristore/internal/testutil"
	"github.com/tristore/tristore/netem"
)

// onLink serves tristore's S3 front end behind an emulated link (preset)
// and returns the base config and the client-side dialer. Everything is
// removed when the test ends (server first, then the link).
func onLink(t *testing.T, preset string) (s3client.Config, func(context.Context, string, string) (net.Conn, error)) {
	t.Helper()
	testutil.NeedRoot(t, "network namespaces and /dev/net/tun")
	testutil.NeedTUN(t)
	cfg, err := netem.PresetConfig(preset)
	if err != nil {
		t.Fatal(err)
	}
	n := fmt.Sprintf("ts-%d-%s", os.Getpid(), strings.ToLower(strings.NewReplacer("/", "", "_", "").Replace(t.Name())))
	cfg.Name = n[:min(40, len(n))]
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := netem.Start(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("closing the link: %v", err)
		}
	})
	ln, err := l.Listen(netem.ServerSide, "tcp", net.JoinHostPort(l.ServerAddr().String(), "9000"))
	if err != nil {
		t.Fatal(err)
	}
	return setup(t, ln, l.DialContext), l.DialContext
}

// TestTunerOnLinks is the criterion on real emulated links: the
// tuner's choice reaches 90 % of the best bandwidth found by measuring the
// full grid, spending at most 15 % of the full grid's measurement time.
//
// The default run is the tuner alone on `realistic` with 1 s windows
// (~15 s): its choice must reach 80 % of the link's 12.5 MiB/s. With
// TRISTORE_LONG=1 it measures the full grid too (16 KiB … 64 MiB × 1 … 64
// under a 256 MiB memory bound: 43 points, 2 s windows, ~3 min per link)
// on `realistic` and `lan`, and writes both to $TRISTORE_TUNER_OUT (a
// directory) if set.
func TestTunerOnLinks(t *testing.T) {
	presets := []string{"realistic"}
	if longRuns() {
		presets = append(presets, "lan")
	}
	for _, preset := range presets {
		t.Run(preset, func(t *testing.T) {
			base, dial := onLink(t, preset)
			window, warm := time.Second, time.Second
			if longRuns() {
				window, warm = 2*time.Second, 1500*time.Millisecond
			}
			m := &S3Measurer{Base: base, Dial: dial, Bucket: "tune", Prefix: ".tune/", Direction: Up, Window: window, WarmMax: warm}
			defer m.Cleanup(context.Background())
			g := DefaultGrid()
			g.MaxMemory = 256 << 20
			ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
			defer cancel()
			r, err := Run(ctx, m, Options{Grid: g, Log: t.Logf})
			if err != nil {
				t.Fatal(err)
			}
			ch := r.Choice
			t.Logf("%s: chose %s × %d: predicted %.2f MiB/s %.1f ms, measured %.2f MiB/s %.1f ms; cost %d samples %.1fs %d MiB; model %+v",
				preset, fmtSize(ch.ChunkSize), ch.Parallel, ch.PredictedBps/(1<<20), ch.PredictedLatencyS*1e3,
				ch.MeasuredBps/(1<<20), ch.MeasuredLatencyS*1e3, r.Cost.Samples, r.Cost.Seconds, r.Cost.Bytes>>20, r.Model)
			if !longRuns() {
				if link := netem.Rate12MiB / 8; ch.MeasuredBps < 0.8*link {
					t.Errorf("choice measured %.2f MiB/s, under 80%% of the link's %.2f MiB/s", ch.MeasuredBps/(1<<20), link/(1<<20))
				}
				return
			}
			var full []Sample
			var fullCost float64
			best := Sample{}
			for _, pt := range g.Points() {
				s, err := m.Measure(ctx, pt)
				if err != nil {
					t.Fatal(err)
				}
				full = append(full, s)
				fullCost += s.Seconds
				if s.BandwidthBps > best.BandwidthBps {
					best = s
				}
				t.Logf("grid %s × %d: %.2f MiB/s, %.1f ms, %.1fs", fmtSize(pt.ChunkSize), pt.Parallel, s.BandwidthBps/(1<<20), s.LatencyMeanS*1e3, s.Seconds)
			}
			var atChoice float64
			for _, s := range full {
				if s.Point == ch.Point {
					atChoice = s.BandwidthBps
				}
			}
			frac, cost := atChoice/best.BandwidthBps, r.Cost.Seconds/fullCost
			t.Logf("%s: full grid best %s × %d = %.2f MiB/s; the choice measured %.2f MiB/s there (%.1f%%) and %.2f MiB/s in the tuner's own run (%.1f%%); tuner %.1fs = %.1f%% of the grid's %.1fs",
				preset, fmtSize(best.ChunkSize), best.Parallel, best.BandwidthBps/(1<<20), atChoice/(1<<20), 100*frac,
				ch.MeasuredBps/(1<<20), 100*ch.MeasuredBps/best.BandwidthBps, r.Cost.Seconds, 100*cost, fullCost)
			if out := os.Getenv("TRISTORE_TUNER_OUT"); out != "" {
				b, _ := json.MarshalIndent(map[string]any{"preset": preset, "tuner": r, "grid": full, "grid_seconds": fullCost,
					"fraction_of_best": frac, "fraction_of_time": cost}, "", "  ")
				if err := os.WriteFile(filepath.Join(out, "tuner-"+preset+".json"), b, 0o644); err != nil {
					t.Error(err)
				}
			}
			// Compared where the grid measured the choice (the same
			// conditions as the grid's best), not the tuner's own sample.
			if frac < 0.9 {
				t.Errorf("%s: choice reaches %.1f%% of the grid's best", preset, 100*frac)
			}
			if cost > 0.15 {
				t.Errorf("%s: tuner spent %.1f%% of the full grid's time", preset, 100*cost)
			}
		})
	}
}
