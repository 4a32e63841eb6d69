package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestMedian(t *testing.T) {
	for _, c := range []struct {
		in   []float64
		want float64
	}{
		{[]float64{5}, 5},
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5},
		{[]float64{10, 10, 1, 1000, 11}, 10},
	} {
		if got := median(c.in); got != c.want {
			t.Errorf("median(%v) = %v, want %v", c.in, got, c.want)
		}
	}
	in := []float64{3, 1, 2}
	median(in)
	if in[0] != 3 || in[1] != 1 {
		t.Errorf("median sorted its input in place: %v", in)
	}
}

func TestNum(t *testing.T) {
	for in, want := range map[float64]string{
		36983.4: "36,983", 1262: "1,262", 456.2: "456", 52.64: "52.6", 0.523: "0.52", -1234: "-1,234",
	} {
		if got := num(in); got != want {
			t.Errorf("num(%v) = %q, want %q", in, got, want)
		}
	}
}

func TestLookup(t *testing.T) {
	raw := []byte(`[{"iops": 1234.5, "lat": {"p50": 20}}]`)
	vals, err := buildValues(raw, []spec{
		{text: "4 KiB random read, IOPS=0.iops", fromJSON: true},
		{text: "p50 µs=0.lat.p50", fromJSON: true},
		{text: "a=b, with = in the name=7"},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []Value{{"4 KiB random read, IOPS", 1234.5}, {"p50 µs", 20}, {"a=b, with = in the name", 7}}
	if len(vals) != len(want) {
		t.Fatalf("values %v, want %v", vals, want)
	}
	for i := range want {
		if vals[i] != want[i] {
			t.Errorf("value %d = %v, want %v", i, vals[i], want[i])
		}
	}
	for _, bad := range []string{"x=1.iops", "x=0.nope", "x=0.lat", "x=0.iops.deeper"} {
		if _, err := buildValues(raw, []spec{{text: bad, fromJSON: true}}); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
	if _, err := buildValues(nil, []spec{{text: "x=0.iops", fromJSON: true}}); err == nil {
		t.Error("-f without a JSON document: no error")
	}
	if _, err := buildValues(nil, []spec{{text: "x=fast"}}); err == nil {
		t.Error("-v with a non-number: no error")
	}
	if _, err := buildValues([]byte("iops 12"), []spec{{text: "x=0"}}); err == nil {
		t.Error("non-JSON tool output: no error")
	}
}

func TestParseLoad(t *testing.T) {
	l, err := parseLoad("5.10 7.25 3.00 4/812 12345\n")
	if err != nil || len(l) != 3 || l[0] != 5.1 || l[2] != 3 {
		t.Fatalf("parseLoad = %v, %v", l, err)
	}
	for _, bad := range []string{"", "1 2", "a b c"} {
		if _, err := parseLoad(bad); err == nil {
			t.Errorf("parseLoad(%q): no error", bad)
		}
	}
}

// TestRecordAndTable goes through the commands the scripts run: machine,
// record for two sides over three interleaved rounds, then table.
func TestRecordAndTable(t *testing.T) {
	raw := filepath.Join(t.TempDir(), "s3.jsonl")
	must := func(args ...string) {
		t.Helper()
		if err := run(args, strings.NewReader(""), new(bytes.Buffer)); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
	}
	must("machine", "-o", raw, "-bench", "s3", "-command", "scripts/bench/s3.sh", "-peer", "versitygw=v1.8.0",
		"-peer", "aws-sdk-go-v2=v1.45 (client)")
	if err := run([]string{"machine", "-o", raw, "-bench", "s3", "-command", "x"}, nil, new(bytes.Buffer)); err == nil {
		t.Error("a second machine record into the same file: no error")
	}
	put := map[string][]string{"tristore": {"100", "300", "200"}, "versitygw": {"50", "400", "100"}}
	for r := 1; r <= 3; r++ {
		for _, side := range []string{"tristore", "versitygw"} {
			json := `{"get": ` + put[side][r-1] + `}`
			args := []string{"record", "-o", raw, "-round", string(rune('0' + r)), "-side", side,
				"-load-before", "4.50 3 2 1/2 3", "-json", "-", "-f", "GET 4 KiB, op/s=get"}
			if side == "tristore" || r < 3 {
				args = append(args, "-v", "PUT 4 KiB, op/s=10")
			}
			if err := run(args, strings.NewReader(json), new(bytes.Buffer)); err != nil {
				t.Fatal(err)
			}
		}
	}
	var out bytes.Buffer
	if err := run([]string{"table", raw}, nil, &out); err != nil {
		t.Fatal(err)
	}
	s := out.String()
	for _, want := range []string{
		"3 interleaved round(s)",
		"Command: `scripts/bench/s3.sh`",
		// a tool that is not a side is still named
		"Versions: versitygw v1.8.0, aws-sdk-go-v2 v1.45 (client).",
		"| figure | tristore: min / **median** / max | versitygw: min / **median** / max | tristore / versitygw (medians) |",
		// medians 200 and 100: ratio of medians, not of means (216.7/183.3)
		"| GET 4 KiB, op/s | 100 / **200** / 300 | 50.0 / **100** / 400 | 2.00× |",
		// versitygw has no PUT in round 3: shown as n=2, not hidden
		"| PUT 4 KiB, op/s | 10.0 / **10.0** / 10.0 | 10.0 / **10.0** / 10.0 (n=2) | 1.00× |",
		"load average before/after each measurement: ",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("table lacks %q:\n%s", want, s)
		}
	}
	if strings.Index(s, "GET 4 KiB") > strings.Index(s, "PUT 4 KiB") {
		t.Errorf("rows not in first-seen order:\n%s", s)
	}

	// The ratio side must exist in the file.
	if err := run([]string{"table", "-ours", "minio", raw}, nil, new(bytes.Buffer)); err == nil {
		t.Error("table with an unknown -ours side: no error")
	}
}

func TestReadRawRejects(t *testing.T) {
	for name, body := range map[string]string{
		"empty":         "",
		"no machine":    `{"type":"round","side":"a","round":1,"values":[{"name":"x","value":1}]}`,
		"no rounds":     `{"type":"machine","bench":"x"}`,
		"round no side": `{"type":"machine"}` + "\n" + `{"type":"round","round":1,"values":[{"name":"x","value":1}]}`,
		"two machines":  `{"type":"machine"}` + "\n" + `{"type":"machine"}`,
		"bad type":      `{"type":"machine"}` + "\n" + `{"type":"rounds"}`,
		"not json":      "round 1 tristore 123\n",
	} {
		if _, _, err := readRaw(strings.NewReader(body)); err == nil {
			t.Errorf("%s: readRaw accepted it", name)
		}
	}
}

func TestRecordNeedsMachineFile(t *testing.T) {
	raw := filepath.Join(t.TempDir(), "x.jsonl")
	err := run([]string{"record", "-o", raw, "-round", "1", "-side", "a", "-load-before", "1 1 1", "-v", "x=1"}, nil, new(bytes.Buffer))
	if err == nil {
		t.Fatal("record into a file without a machine record: no error")
	}
	if _, err := os.Stat(raw); err == nil {
		t.Error("record created the raw file")
	}
}

func TestDescribeMachine(t *testing.T) {
	m, err := describeMachine()
	if err != nil {
		t.Fatal(err)
	}
	if m.NProc < 1 || m.MemBytes <= 0 || m.Kernel == "" || len(m.Load) != 3 {
		t.Errorf("machine description incomplete: %+v", m)
	}
}

// TestRender fills a markdown block from its raw file, and -check catches
// a figure edited by hand afterwards.
func TestRender(t *testing.T) {
	dir := t.TempDir()
	raw := filepath.Join(dir, "nfs.jsonl")
	for _, args := range [][]string{
		{"machine", "-o", raw, "-bench", "nfs", "-command", "sudo scripts/bench/nfs.sh 2 10", "-commit", "abc123"},
		{"record", "-o", raw, "-round", "1", "-side", "tristore", "-load-before", "1 1 1", "-v", "creates/s=400"},
		{"record", "-o", raw, "-round", "1", "-side", "ganesha", "-load-before", "1 1 1", "-v", "creates/s=500"},
	} {
		if err := run(args, nil, new(bytes.Buffer)); err != nil {
			t.Fatal(err)
		}
	}
	md := filepath.Join(dir, "B.md")
	text := "# B\n\nintro\n\n<!-- benchtable: " + raw + " -->\nold table\n<!-- /benchtable -->\n\noutro\n"
	if err := os.WriteFile(md, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := run([]string{"render", "-check", md}, nil, new(bytes.Buffer)); err == nil {
		t.Fatal("-check passed a block that is not what its raw file gives")
	}
	if err := run([]string{"render", md}, nil, new(bytes.Buffer)); err != nil {
		t.Fatal(err)
	}
	got, _ := os.ReadFile(md)
	for _, want := range []string{"intro\n\n<!-- benchtable: ", "| creates/s | 400 | 500 | 0.80× |", "commit abc123", "<!-- /benchtable -->\n\noutro\n"} {
		if !strings.Contains(string(got), want) {
			t.Errorf("rendered file lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(string(got), "old table") {
		t.Error("old block content kept")
	}
	if err := run([]string{"render", "-check", md}, nil, new(bytes.Buffer)); err != nil {
		t.Fatalf("-check after render: %v", err)
	}
	edited := strings.Replace(string(got), "| 400 |", "| 450 |", 1)
	os.WriteFile(md, []byte(edited), 0o644)
	err := run([]string{"render", "-check", md}, nil, new(bytes.Buffer))
	if err == nil || !strings.Contains(err.Error(), "450") {
		t.Errorf("-check of a hand-edited figure: %v", err)
	}
	// ours=SIDE: the same run with the ratios taken from the other side.
	os.WriteFile(md, []byte("<!-- benchtable: "+raw+" ours=ganesha -->\nold\n<!-- /benchtable -->\n"), 0o644)
	if err := run([]string{"render", md}, nil, new(bytes.Buffer)); err != nil {
		t.Fatal(err)
	}
	got, _ = os.ReadFile(md)
	if !strings.Contains(string(got), "| creates/s | 500 | 400 | 1.25× |") || !strings.Contains(string(got), " ours=ganesha -->\n") {
		t.Errorf("ours=ganesha block:\n%s", got)
	}
	if err := run([]string{"render", "-check", md}, nil, new(bytes.Buffer)); err != nil {
		t.Fatalf("-check of an ours= block: %v", err)
	}
	os.WriteFile(md, []byte("<!-- benchtable: "+filepath.Join(dir, "gone.jsonl")+" -->\nx\n<!-- /benchtable -->\n"), 0o644)
	if err := run([]string{"render", md}, nil, new(bytes.Buffer)); err == nil {
		t.Error("render with a missing raw file: no error")
	}
	os.WriteFile(md, []byte("no blocks\n"), 0o644)
	if err := run([]string{"render", md}, nil, new(bytes.Buffer)); err == nil {
		t.Error("render of a file without blocks: no error")
	}
}
