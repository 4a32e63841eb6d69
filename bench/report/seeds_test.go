package report

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tristore/tristore/bench"
)

// TestReportPostMarkIozone draws stored postmark and iozone runs
// (testdata-seeds): postmark's transactions/s vs instances, a line per
// run, and a table per run whose figures are bench.PostMarkRate of its
// run.json; iozone's four-way average and each test vs request size, a
// line per access form, and the seed's table per form (a row per test and
// the average, a column per request size) holding IozoneAverages of the
// records.
func TestReportPostMarkIozone(t *testing.T) {
	dir := "testdata-seeds"
	page, runs, _ := writeReport(t, []string{"buffered=" + filepath.Join(dir, "postmark-posix"),
		"unbuffered=" + filepath.Join(dir, "postmark-posix-unbuffered"), filepath.Join(dir, "iozone-posix")}, Options{})
	if len(runs) != 3 {
		t.Fatalf("%d runs", len(runs))
	}
	pm := section(t, page, "postmark")
	if n := strings.Count(pm, "<svg "); n != 1 {
		t.Fatalf("postmark: %d figures, want 1", n)
	}
	for _, want := range []string{"transactions/s vs instances", ">buffered</text>", ">unbuffered</text>"} {
		if !strings.Contains(pm, want) {
			t.Fatalf("postmark section lacks %q", want)
		}
	}
	for _, r := range runsOf(runs, "postmark") {
		if !strings.Contains(pm, "<h3>postmark: "+r.Label+"</h3>") {
			t.Fatalf("no postmark table for %s", r.Label)
		}
		for _, n := range []int{1, 2, 4} {
			tps := bench.PostMarkRate(r.Meta, n)
			cell := fmt.Sprintf(`<td class="l">%d</td><td>%.1f</td>`, n, tps)
			if tps <= 0 || !strings.Contains(pm, cell) {
				t.Fatalf("%s: no row %s", r.Label, cell)
			}
		}
	}
	io := section(t, page, "iozone")
	if n := strings.Count(io, "<svg "); n != 5 {
		t.Fatalf("iozone: %d figures, want 5 (average + 4 tests)", n)
	}
	for _, want := range []string{"four-way average vs request size", "randread vs request size", ">default</text>", ">direct</text>"} {
		if !strings.Contains(io, want) {
			t.Fatalf("iozone section lacks %q", want)
		}
	}
	r := runsOf(runs, "iozone")[0]
	br := make([]bench.Row, len(r.Rows))
	for i, row := range r.Rows {
		br[i] = row.Row
	}
	avg := bench.IozoneAverages(br)
	if len(avg) != 10 {
		t.Fatalf("%d averages, want 2 forms x 5 sizes", len(avg))
	}
	for _, form := range []string{"default", "direct"} {
		title := fmt.Sprintf("<h3>iozone MB/s: %s, form %s</h3>", r.Label, form)
		i := strings.Index(io, title)
		if i < 0 {
			t.Fatalf("no table %s", title)
		}
		tab := io[i : i+strings.Index(io[i:], "</table>")]
		for _, test := range []string{"write", "read", "randwrite", "randread", "average"} {
			row := `<td class="l">` + test + `</td>`
			for _, a := range avg {
				if a.Form != form {
					continue
				}
				v := map[string]float64{"write": a.Write, "read": a.Read, "randwrite": a.RandWrite, "randread": a.RandRead, "average": a.Average}[test]
				row += fmt.Sprintf("<td>%.2f</td>", v)
			}
			if !strings.Contains(tab, row) {
				t.Fatalf("%s: no row %s in\n%s", title, row, tab)
			}
		}
	}
}
