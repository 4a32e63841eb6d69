package report

import (
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tristore/tristore/bench"
)

// testdata holds real results of `tristore bench` at tiny sizes: units,
// single, batch and objects on a directory; batch and objects on tristore's
// S3; efficiency on S3 and NFS through the counting link.
const testdata = "testdata"

// section returns the part of the page for one suite.
func section(t *testing.T, page, suite string) string {
	t.Helper()
	start := strings.Index(page, `<section class="suite" id="suite-`+suite+`">`)
	if start < 0 {
		t.Fatalf("no section for %s", suite)
	}
	end := strings.Index(page[start:], "</section>")
	return page[start : start+end]
}

func writeReport(t *testing.T, args []string, opt Options) (string, []*Run, string) {
	t.Helper()
	runs, err := Load(args)
	if err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	if _, err := Write(out, runs, opt); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(out, HTMLFile))
	if err != nil {
		t.Fatal(err)
	}
	return string(b), runs, out
}

// TestReportSamples draws the stored sample results: every suite gets the
// seed's figures as inline SVG, each run's series is named, every summary
// row is a table row, and nothing on the page is fetched from elsewhere.
func TestReportSamples(t *testing.T) {
	page, runs, _ := writeReport(t, []string{testdata}, Options{})
	if len(runs) != 8 {
		t.Fatalf("loaded %d runs, want the 8 sample runs", len(runs))
	}
	// figures per suite: units write+read; single 2 throughput + 2 CDF;
	// batch 2 sizes x write/read; objects 2 CDF + 2 runs x 2 heat maps +
	// 2 peak; efficiency 1 bar chart.
	want := map[string]int{"units": 2, "single": 4, "batch": 4, "objects": 8, "efficiency": 1}
	total := 0
	for suite, n := range want {
		sec := section(t, page, suite)
		if got := strings.Count(sec, "<svg "); got != n {
			t.Errorf("%s: %d <svg> elements, want %d", suite, got, n)
		}
		if got := strings.Count(sec, "</svg>"); got != n {
			t.Errorf("%s: %d </svg>, want %d", suite, got, n)
		}
		total += n
	}
	if got := strings.Count(page, "<svg "); got != total {
		t.Errorf("page has %d <svg>, want %d", got, total)
	}
	// Series names, drawn as SVG text.
	for suite, names := range map[string][]string{
		"units":      {">default</text>", ">sync</text>", ">direct</text>"},
		"batch":      {">posix posix</text>", ">s3 127.0.0.1:19400/batchb</text>"},
		"objects":    {">s3 127.0.0.1:19400/objb 256KiB</text>", ">posix posix 1KiB</text>", "get bandwidth (MB/s): s3 127.0.0.1:19400/objb"},
		"efficiency": {">s3 127.0.0.1:19400/effb put</text>", ">nfs 127.0.0.1:19401 get</text>", ">1MiB</text>"},
	} {
		sec := section(t, page, suite)
		for _, n := range names {
			if !strings.Contains(sec, n) {
				t.Errorf("%s: no series %q", suite, n)
			}
		}
	}
	// Tables: one row per summary row of each run, within its suite.
	for _, r := range runs {
		sec := section(t, page, r.Meta.Suite)
		for _, row := range r.Rows {
			cell := fmt.Sprintf(`<td class="l">%s</td><td class="l">%s</td><td>%s</td><td>%d</td><td>%d</td><td>%d</td><td>%.2f</td>`,
				row.Phase, orDash(row.Form), bench.FormatSize(row.Unit), row.Threads, row.Ops, row.Errors, row.MBps)
			if !strings.Contains(sec, cell) {
				t.Fatalf("%s: no table row %s", r.Label, cell)
			}
		}
	}
	if r := runs[0]; len(r.Rows) == 0 {
		t.Fatal("no rows")
	}
	units := runsOf(runs, "units")[0]
	if len(units.Rows) != 36 { // 3 forms x 4 units x write/sync/read
		t.Fatalf("units: %d rows, want 36", len(units.Rows))
	}
	// Self-contained: no scripts, no remote resources.
	for _, bad := range []string{"<script", "http://", "https://", "<link", "@import", "<img"} {
		for _, hit := range strings.SplitAfter(page, bad)[1:] {
			if bad == "http://" && (strings.HasPrefix(hit, "www.w3.org/") || strings.HasPrefix(hit, "127.0.0.1")) {
				continue // SVG namespace; a target URL in a table
			}
			t.Fatalf("page refers outside itself: %s%.40s", bad, hit)
		}
	}
	if strings.Contains(page, "PARTIAL") {
		t.Fatal("complete runs marked partial")
	}
}

func orDash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}

// TestReportExports: summary.csv and summary.json parse back to the rows,
// and the link columns are run.json's phases (efficiency = payload ÷ wire,
// computed here from run.json itself).
func TestReportExports(t *testing.T) {
	_, runs, out := writeReport(t, []string{testdata}, Options{})
	f, err := os.Open(filepath.Join(out, CSVFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(recs[0], ",") != strings.Join(CSVHeader, ",") {
		t.Fatalf("header %v", recs[0])
	}
	n := 0
	for _, r := range runs {
		n += len(r.Rows)
	}
	if len(recs)-1 != n {
		t.Fatalf("csv has %d rows, want %d", len(recs)-1, n)
	}
	col := map[string]int{}
	for i, h := range recs[0] {
		col[h] = i
	}
	// The efficiency of s3's 1MiB put, from the raw run.json.
	raw, err := os.ReadFile(filepath.Join(testdata, "efficiency-s3", bench.RunFile))
	if err != nil {
		t.Fatal(err)
	}
	var meta struct {
		Phases []struct {
			Name    string `json:"name"`
			Unit    int64  `json:"unit"`
			Payload int64  `json:"payload_bytes"`
			Up      int64  `json:"wire_up_bytes"`
			Down    int64  `json:"wire_down_bytes"`
		} `json:"phases"`
	}
	if err := json.Unmarshal(raw, &meta); err != nil {
		t.Fatal(err)
	}
	var wantEff float64
	for _, p := range meta.Phases {
		if p.Name == "put" && p.Unit == 1<<20 {
			wantEff = float64(p.Payload) / float64(p.Up+p.Down)
		}
	}
	if wantEff <= 0 || wantEff >= 1.5 {
		t.Fatalf("sample efficiency %v", wantEff)
	}
	found := false
	for _, rec := range recs[1:] {
		if rec[col["suite"]] == "efficiency" && rec[col["protocol"]] == "s3" && rec[col["phase"]] == "put" && rec[col["unit"]] == "1048576" {
			got, err := strconv.ParseFloat(rec[col["efficiency"]], 64)
			if err != nil || math.Abs(got-wantEff) > 1e-9 {
				t.Fatalf("csv efficiency %q, want %v", rec[col["efficiency"]], wantEff)
			}
			found = true
		}
	}
	if !found {
		t.Fatal("no efficiency row for s3 put 1MiB")
	}

	b, err := os.ReadFile(filepath.Join(out, JSONFile))
	if err != nil {
		t.Fatal(err)
	}
	var js struct {
		Runs []struct {
			Label string    `json:"label"`
			Run   bench.Run `json:"run"`
			Rows  []Row     `json:"rows"`
		} `json:"runs"`
	}
	if err := json.Unmarshal(b, &js); err != nil {
		t.Fatal(err)
	}
	if len(js.Runs) != len(runs) {
		t.Fatalf("json: %d runs", len(js.Runs))
	}
	for i, r := range runs {
		jr := js.Runs[i]
		if jr.Label != r.Label || jr.Run.Suite != r.Meta.Suite || len(jr.Rows) != len(r.Rows) {
			t.Fatalf("json run %d: %s %s %d rows", i, jr.Label, jr.Run.Suite, len(jr.Rows))
		}
		for k := range jr.Rows {
			if jr.Rows[k] != r.Rows[k] {
				t.Fatalf("json row %d of %s: %+v, want %+v", k, r.Label, jr.Rows[k], r.Rows[k])
			}
		}
	}
}

// synth writes a results directory with the given requests of 4 KiB
// writes (latencies back to back from t=0) and closes it with runErr.
func synth(t *testing.T, dir, target string, lat []time.Duration, extra []bench.Operation, runErr error) {
	t.Helper()
	w, err := bench.Create(dir, bench.Run{Suite: "single", Target: target, Protocol: "s3", Forms: []string{"default"}, Scale: 0.01})
	if err != nil {
		t.Fatal(err)
	}
	var at time.Duration
	for i, l := range lat {
		w.Add(bench.Operation{Phase: "write", Op: "put", Size: 4096, Unit: 4096, Threads: 1, Start: at, End: at + l, Worker: 0})
		at += l
		_ = i
	}
	for _, o := range extra {
		w.Add(o)
	}
	w.AddPhase(bench.Phase{Name: "write", Unit: 4096, Threads: 1, Ops: int64(len(lat)), End: at, Payload: int64(4096 * len(lat))})
	if err := w.Close(runErr); err != nil && runErr == nil {
		t.Fatal(err)
	}
}

// TestCompare: ratios are B ÷ A of MB/s and of median latency; a group
// only one run has is shown without a ratio.
func TestCompare(t *testing.T) {
	base := t.TempDir()
	a, b := filepath.Join(base, "a"), filepath.Join(base, "b")
	ms := time.Millisecond
	synth(t, a, "s3://127.0.0.1:1/a", []time.Duration{1 * ms, 3 * ms, 2 * ms}, nil, nil)
	// B: each request twice as long (median 4 ms vs 2 ms, half the MB/s),
	// and a read group A lacks.
	synth(t, b, "s3://127.0.0.1:2/b", []time.Duration{2 * ms, 6 * ms, 4 * ms},
		[]bench.Operation{{Phase: "read", Op: "get", Size: 4096, Unit: 4096, Threads: 1, Start: 20 * ms, End: 21 * ms}}, nil)
	page, runs, out := writeReport(t, []string{"peer=" + a, "tristore=" + b}, Options{Compare: true})
	if runs[0].Label != "peer" || runs[1].Label != "tristore" {
		t.Fatalf("labels %q %q", runs[0].Label, runs[1].Label)
	}
	c := Compare(runs[0], runs[1])
	if len(c.Rows) != 2 {
		t.Fatalf("%d compare rows", len(c.Rows))
	}
	w := c.Rows[0]
	if w.Phase != "write" || math.Abs(w.P50Ratio-2) > 1e-9 || math.Abs(w.MBpsRatio-0.5) > 1e-9 {
		t.Fatalf("write: p50 ratio %v, MB/s ratio %v; want 2, 0.5", w.P50Ratio, w.MBpsRatio)
	}
	if r := c.Rows[1]; r.Phase != "read" || r.InA || !r.InB || r.MBpsRatio != 0 || r.P50Ratio != 0 {
		t.Fatalf("read (only in B): %+v", r)
	}
	if !strings.Contains(page, `<td>0.50×</td><td>2.00 ms</td><td>4.00 ms</td><td>2.00×</td>`) {
		t.Fatal("page lacks the write comparison row")
	}
	f, err := os.Open(filepath.Join(out, CompareCSVFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil || len(recs) != 3 {
		t.Fatalf("compare.csv: %d records, %v", len(recs), err)
	}
	if recs[1][10] != "0.5" || recs[1][13] != "2" || recs[1][11] != "2" || recs[1][12] != "4" {
		t.Fatalf("compare.csv row %v", recs[1])
	}
	var js struct {
		A, B string
		Rows []struct {
			Phase     string  `json:"phase"`
			MBpsRatio float64 `json:"mb_per_s_ratio"`
			P50Ratio  float64 `json:"p50_ratio"`
			P50A      int64   `json:"p50_a_ns"`
		} `json:"rows"`
	}
	jb, err := os.ReadFile(filepath.Join(out, CompareJSONFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(jb, &js); err != nil || js.A != "peer" || js.B != "tristore" || len(js.Rows) != 2 ||
		js.Rows[0].P50Ratio != 2 || js.Rows[0].MBpsRatio != 0.5 || js.Rows[0].P50A != int64(2*ms) {
		t.Fatalf("compare.json: %+v %v", js, err)
	}
	// Both runs are series of the same plots.
	sec := section(t, page, "single")
	if !strings.Contains(sec, ">peer</text>") || !strings.Contains(sec, ">tristore</text>") {
		t.Fatal("compared runs are not both plotted")
	}
	if _, err := Build(runs[:1], Options{Compare: true}); err == nil {
		t.Fatal("--compare of one run accepted")
	}
}

// TestPartialRunMarked: a run that stopped (and one whose records file
// was cut short) is drawn from what was saved and marked on the page, in
// the runs table, in its table heading and in the legends.
func TestPartialRunMarked(t *testing.T) {
	base := t.TempDir()
	dir := filepath.Join(base, "stopped")
	ms := time.Millisecond
	synth(t, dir, "s3://127.0.0.1:1/x", []time.Duration{1 * ms, 2 * ms, 3 * ms}, []bench.Operation{
		{Phase: "read", Op: "get", Size: 4096, Unit: 4096, Threads: 1, Start: 10 * ms, End: 11 * ms, Err: "connection reset by peer"}},
		errors.New("phase read 4KiB x1 on s3://127.0.0.1:1/x: target went away"))
	// A second run killed mid-write: its ops file ends inside the stream.
	cut := filepath.Join(base, "cut")
	synth(t, cut, "s3://127.0.0.1:2/y", []time.Duration{ms, ms, ms, ms}, nil, nil)
	ops := filepath.Join(cut, bench.OpsFile)
	b, err := os.ReadFile(ops)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(ops, b[:len(b)-12], 0o644); err != nil {
		t.Fatal(err)
	}
	page, runs, _ := writeReport(t, []string{dir, cut}, Options{})
	if !runs[0].Partial() || runs[1].Partial() || runs[1].ReadError == "" {
		t.Fatalf("partial %v / %v, read error %q", runs[0].Partial(), runs[1].Partial(), runs[1].ReadError)
	}
	for _, want := range []string{
		`<span class="partial">PARTIAL</span> <b>s3 127.0.0.1:1/x</b>`,
		"target went away",
		`<h3>s3 127.0.0.1:1/x <span class="partial">PARTIAL</span></h3>`,
		">s3 127.0.0.1:1/x (partial)</text>",
		"could not all be read",
		"1 of 1 failed, e.g. connection reset by peer",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
}

// TestLoadErrors: a directory without results is refused with its name.
func TestLoadErrors(t *testing.T) {
	empty := t.TempDir()
	if _, err := Load([]string{empty}); err == nil || !strings.Contains(err.Error(), empty) {
		t.Fatalf("empty dir: %v", err)
	}
	if _, err := Load([]string{filepath.Join(empty, "nope")}); err == nil {
		t.Fatal("missing dir accepted")
	}
}

func TestPickEven(t *testing.T) {
	v := []int{1, 2, 3, 4, 5, 6, 7, 8}
	if got := fmt.Sprint(pickEven(v, 4)); got != "[1 3 5 8]" {
		t.Fatalf("pickEven 4 of 8: %s", got)
	}
	if got := fmt.Sprint(pickEven(v, 8)); got != fmt.Sprint(v) {
		t.Fatalf("pickEven all: %s", got)
	}
}
