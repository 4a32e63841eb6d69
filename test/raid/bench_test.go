package raid

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tristore/tristore/bench"
	"github.com/tristore/tristore/blockdev"
	"github.com/tristore/tristore/client/iscsi"
	"github.com/tristore/tristore/internal/testutil"
	"github.com/tristore/tristore/internal/units"
	"github.com/tristore/tristore/netem"
	"github.com/tristore/tristore/raid"
)

// IozoneResult is what TestBenchIozone writes for scripts/bench/raid.sh:
// the iozone four-way averages of one layout, per request size and thread
// count, and their mean over the request sizes per thread count.
type IozoneResult struct {
	Layout   string                 `json:"layout"`
	Targets  int                    `json:"targets"`
	Rate     string                 `json:"rate"`
	DataSet  int64                  `json:"data_set"`
	Averages []bench.IozoneAverage  `json:"averages"`
	Mean     map[string]IozoneMeans `json:"mean"` // by threads
}

// IozoneMeans are the means over the request sizes of one thread count.
type IozoneMeans struct {
	Write, Read, RandWrite, RandRead, Average float64
}

// TestBenchIozone is seed 002's iozone benchmark of one layout, run by
// scripts/bench/raid.sh (it is skipped unless RAID_BENCH_OUT names the
// result file): RAID_BENCH_TARGETS `tristore serve` processes, each
// behind its own emulated link (netem's TCP proxy limited to
// RAID_BENCH_RATE in each direction, so target bandwidth is the
// bottleneck), a single LUN (RAID_BENCH_LAYOUT=single) or a RAID-0/5
// (raid0, raid5) over their LUNs through our initiator, and bench's iozone
// suite over the raw device (OpenBlock): sequential and random write and
// read of a RAID_BENCH_DATASET data set in 4 … 64 KiB requests, by each
// of RAID_BENCH_THREADS threads (comma-separated).
func TestBenchIozone(t *testing.T) {
	out := os.Getenv("RAID_BENCH_OUT")
	if out == "" {
		t.Skip("a benchmark: run by scripts/bench/raid.sh (set RAID_BENCH_OUT)")
	}
	layout := os.Getenv("RAID_BENCH_LAYOUT")
	n, err := strconv.Atoi(os.Getenv("RAID_BENCH_TARGETS"))
	if err != nil || n < 1 {
		t.Fatalf("RAID_BENCH_TARGETS=%q", os.Getenv("RAID_BENCH_TARGETS"))
	}
	rate, err := netem.ParseRate(os.Getenv("RAID_BENCH_RATE"))
	if err != nil {
		t.Fatal(err)
	}
	ds, err := units.ParseSize(os.Getenv("RAID_BENCH_DATASET"))
	if err != nil {
		t.Fatal(err)
	}
	var threads []int
	for _, s := range strings.Split(os.Getenv("RAID_BENCH_THREADS"), ",") {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			t.Fatalf("RAID_BENCH_THREADS=%q", os.Getenv("RAID_BENCH_THREADS"))
		}
		threads = append(threads, v)
	}
	level := map[string]int{"single": -1, "raid0": 0, "raid5": 5}
	lv, ok := level[layout]
	if !ok || (lv == -1 && n != 1) {
		t.Fatalf("RAID_BENCH_LAYOUT=%q with %d targets", layout, n)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	bin := testutil.TristoreBin(ctx, t)
	// Each member holds the whole data set plus the superblock and journal
	// (sparse files: only what is written takes space).
	vol := ds + 8<<20
	var devs []blockdev.Device
	for range n {
		data := t.TempDir()
		testutil.Run(t, 2*time.Minute, bin, "volume", "create", "--data", data, "vol/m", fmt.Sprint(vol))
		sv := testutil.StartServe(t, testutil.ServeOptions{Bin: bin, Data: data, On: []string{"iscsi"}})
		p, err := netem.NewProxy("127.0.0.1:0", sv.Addrs["iscsi"], netem.Symmetric(netem.Dir{Rate: rate}))
		if err != nil {
			t.Fatal(err)
		}
		go p.Serve(ctx)
		t.Cleanup(func() { p.Close() })
		s, err := iscsi.Open(ctx, iscsi.Config{Portal: p.Addr().String(), Target: "iqn.2026-11.io.tristore:vol:m"})
		if err != nil {
			t.Fatal(err)
		}
		devs = append(devs, s)
	}
	var dev blockdev.Device = devs[0]
	if lv >= 0 {
		a, err := raid.Create(ctx, lv, 0, devs)
		if err != nil {
			t.Fatal(err)
		}
		dev = a
	}
	target := fmt.Sprintf("%s://%dx%s", layout, n, netem.FormatRate(rate))
	d := bench.OpenBlock(dev, target, layout)
	dir := filepath.Join(t.TempDir(), "res")
	if _, err := bench.Execute(ctx, bench.Config{Suite: "iozone", Target: target, Driver: d, FileSize: ds,
		Threads: threads, Forms: []string{bench.FormDefault}, Out: dir}); err != nil {
		t.Fatal(err)
	}
	rows, err := bench.Summarize(dir)
	if err != nil {
		t.Fatal(err)
	}
	res := IozoneResult{Layout: layout, Targets: n, Rate: netem.FormatRate(rate), DataSet: ds,
		Averages: bench.IozoneAverages(rows), Mean: map[string]IozoneMeans{}}
	count := map[string]int{}
	for _, a := range res.Averages {
		k := strconv.Itoa(a.Threads)
		m := res.Mean[k]
		m.Write += a.Write
		m.Read += a.Read
		m.RandWrite += a.RandWrite
		m.RandRead += a.RandRead
		m.Average += a.Average
		res.Mean[k] = m
		count[k]++
	}
	for k, m := range res.Mean {
		c := float64(count[k])
		res.Mean[k] = IozoneMeans{m.Write / c, m.Read / c, m.RandWrite / c, m.RandRead / c, m.Average / c}
	}
	b, _ := json.MarshalIndent(res, "", "  ")
	if err := os.WriteFile(out, b, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s", b)
}
