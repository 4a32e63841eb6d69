package cli

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tristore/tristore/bench"
)

// TestBenchCommandPostMark: `bench postmark DIR` with PostMark's flags and
// --instances prints transactions/s per instance count and saves the
// settings given; the flags are refused for other suites.
func TestBenchCommandPostMark(t *testing.T) {
	dir, out := t.TempDir(), filepath.Join(t.TempDir(), "res")
	stdout, stderr, err := runCLI3(t, "bench", "postmark", dir, "--number", "40", "--transactions", "80", "--size-high", "5000",
		"--seed", "7", "--buffered=false", "--instances", "1,2", "--out", out)
	if err != nil {
		t.Fatalf("%v\n%s\n%s", err, stdout, stderr)
	}
	for _, want := range []string{"transactions", "postmark: 1 instance(s): ", "postmark: 2 instance(s): ", "transactions/s (80 transactions each)"} {
		if !strings.Contains(stdout, want) {
			t.Fatalf("output lacks %q:\n%s", want, stdout)
		}
	}
	run, err := bench.ReadRunMeta(out)
	if err != nil || run.Partial {
		t.Fatalf("%+v %v", run, err)
	}
	x := run.Params.Extra
	if x["number"] != "40" || x["transactions"] != "80" || x["size_high"] != "5000" || x["size_low"] != "500" || x["seed"] != "7" ||
		x["buffered"] != "false" || len(run.Params.Threads) != 2 || bench.PostMarkRate(run, 2) <= 0 {
		t.Fatalf("params %+v", run.Params)
	}
	for _, bad := range [][]string{
		{"bench", "units", dir, "--number", "10"},
		{"bench", "batch", dir, "--instances", "2"},
		{"bench", "postmark", dir, "--bias-read", "11"},
		{"bench", "postmark", dir, "--size-low", "900", "--size-high", "800"},
	} {
		if _, _, err := runCLI3(t, append(bad, "--out", filepath.Join(t.TempDir(), "r"))...); err == nil {
			t.Fatalf("%v accepted", bad)
		}
	}
}

// TestBenchCommandIozone: `bench iozone DIR --file-size --json` carries
// the four tests and their average per request size.
func TestBenchCommandIozone(t *testing.T) {
	dir, out := t.TempDir(), filepath.Join(t.TempDir(), "res")
	stdout, stderr, err := runCLI3(t, "bench", "iozone", dir, "--file-size", "128KiB", "--sizes", "4KiB,64KiB", "--forms", "direct",
		"--out", out, "--json")
	if err != nil {
		t.Fatalf("%v\n%s\n%s", err, stdout, stderr)
	}
	var res struct {
		Iozone []bench.IozoneAverage `json:"iozone"`
	}
	if err := json.Unmarshal([]byte(stdout), &res); err != nil {
		t.Fatalf("%v\n%s", err, stdout)
	}
	if len(res.Iozone) != 2 || res.Iozone[0].Unit != 4<<10 || res.Iozone[1].Unit != 64<<10 {
		t.Fatalf("iozone %+v", res.Iozone)
	}
	for _, a := range res.Iozone {
		if a.Form != "direct" || a.Tests != 4 || a.Write <= 0 || a.Read <= 0 || a.RandWrite <= 0 || a.RandRead <= 0 ||
			a.Average != (a.Write+a.Read+a.RandWrite+a.RandRead)/4 {
			t.Fatalf("average %+v", a)
		}
	}
	stdout, stderr, err = runCLI3(t, "bench", "iozone", dir, "--file-size", "64KiB", "--sizes", "16KiB", "--forms", "default",
		"--out", filepath.Join(t.TempDir(), "r2"))
	if err != nil || !strings.Contains(stdout, "iozone MB/s") || !strings.Contains(stdout, "average") {
		t.Fatalf("%v\n%s\n%s", err, stdout, stderr)
	}
}
