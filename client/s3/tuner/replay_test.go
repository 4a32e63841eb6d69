package tuner

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// recordedRun is one TestTunerOnLinks TRISTORE_LONG=1 run as saved under
// docs/bench/raw/tuner-links-*.json: the tuner's report and the full
// grid measured on the same link right after.
type recordedRun struct {
	Preset      string   `json:"preset"`
	Grid        []Sample `json:"grid"`
	GridSeconds float64  `json:"grid_seconds"`
	Tuner       Report   `json:"tuner"`
}

// replay answers every point with the grid's recorded sample of it.
type replay map[Point]Sample

func (r replay) Measure(_ context.Context, pt Point) (Sample, error) {
	s, ok := r[pt]
	if !ok {
		return Sample{}, fmt.Errorf("point %v not in the recorded grid", pt)
	}
	return s, nil
}

func loadRecorded(t *testing.T) []recordedRun {
	t.Helper()
	files, _ := filepath.Glob("../../../docs/bench/raw/tuner-links-*.json")
	var runs []recordedRun
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		var r recordedRun
		if err := json.Unmarshal(b, &r); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		runs = append(runs, r)
	}
	if len(runs) == 0 {
		t.Fatal("no docs/bench/raw/tuner-links-*.json")
	}
	return runs
}

// TestReplayRecordedLinks runs today's tuner against the full grids
// measured on `realistic` and `lan` (each point answered by its recorded
// sample): the criterion, choice ≥ 90 % of the grid's best for ≤ 15 %
// of the grid's time, checked on real measurements without a link (the
// live check is TestTunerOnLinks with TRISTORE_LONG=1). Each small-file
// row's parallelism (what --auto gives a directory of files that size)
// must reach 80 % of that row's best recorded bandwidth.
func TestReplayRecordedLinks(t *testing.T) {
	for _, run := range loadRecorded(t) {
		t.Run(run.Preset, func(t *testing.T) {
			rp := replay{}
			best := Sample{}
			rowBest := map[int64]float64{}
			for _, s := range run.Grid {
				rp[s.Point] = s
				if s.BandwidthBps > best.BandwidthBps {
					best = s
				}
				rowBest[s.ChunkSize] = max(rowBest[s.ChunkSize], s.BandwidthBps)
			}
			r, err := Run(context.Background(), rp, Options{Grid: run.Tuner.Grid})
			if err != nil {
				t.Fatal(err)
			}
			frac := rp[r.Choice.Point].BandwidthBps / best.BandwidthBps
			cost := r.Cost.Seconds / run.GridSeconds
			t.Logf("%s: chose %v, %.1f%% of the best (%v), %.1f%% of the grid's time; model %+v", run.Preset, r.Choice.Point, 100*frac, best.Point, 100*cost, r.Model)
			if frac < 0.9 || cost > 0.15 {
				t.Errorf("%s: %.1f%% of the best for %.1f%% of the time", run.Preset, 100*frac, 100*cost)
			}
			for _, row := range r.Rows {
				if row.ChunkSize > 256<<10 {
					continue
				}
				got := rp[row.Point].BandwidthBps / rowBest[row.ChunkSize]
				t.Logf("%s: row %s: parallel %d, %.1f%% of the row's best", run.Preset, fmtSize(row.ChunkSize), row.Parallel, 100*got)
				if got < 0.8 {
					t.Errorf("%s: row %s: parallel %d reaches %.1f%% of the row's best", run.Preset, fmtSize(row.ChunkSize), row.Parallel, 100*got)
				}
			}
		})
	}
}

// TestFitSmallRowsIdeal: the four samples the tuner took on `ideal` in the
// s3client benchmark of 2026-11-27 (one 64 KiB stream, 4 MiB × 1, 4, 16:
// requests in flight only where the link was full). The fit put a 5 ms
// queueing cost on each request in flight (A1) that no sample needed, so
// every small-file row chose one request at a time: 1,000 files of 60 KB
// then went at 3.5 MiB/s where rclone with 32 transfers made 10.4. Without
// A1 the samples fit within their noise, and the 64 KiB row wants many in
// flight.
func TestFitSmallRowsIdeal(t *testing.T) {
	samples := []Sample{
		{Point: Point{65536, 1}, BandwidthBps: 7043425.108419795, LatencyMeanS: 0.009381696331753555, Requests: 211},
		{Point: Point{4194304, 1}, BandwidthBps: 11392809.573770165, LatencyMeanS: 0.37298178525000003, Requests: 4},
		{Point: Point{4194304, 16}, BandwidthBps: 12576662.252216352},
		{Point: Point{4194304, 4}, BandwidthBps: 12232582.13850816, LatencyMeanS: 1.002445176, Requests: 1},
	}
	r := &Report{Grid: DefaultGrid(), Samples: samples}
	r.finish(nil)
	for _, row := range r.Rows {
		if row.ChunkSize == 64<<10 && row.Parallel < 8 {
			t.Errorf("64 KiB row: %d in flight (predicted %.2f MiB/s); model %+v", row.Parallel, row.PredictedBps/(1<<20), r.Model)
		}
	}
	if r.Model.A1 != 0 {
		t.Errorf("A1 = %g s, fitted to noise", r.Model.A1)
	}
}
