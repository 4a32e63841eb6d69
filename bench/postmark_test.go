package bench_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tristore/tristore/bench"
	"github.com/tristore/tristore/internal/testutil"
)

// pmWork is what a PostMark run did: its own report's counts and bytes.
type pmWork struct {
	Created, Read, Appended, Deleted int64
	BytesRead, BytesWritten          int64
}

// pmReal is one run of the real postmark program.
type pmReal struct {
	pmWork
	// OwnTPS is postmark's own transactions/s (whole seconds: v1.51 times
	// with time(2), so a phase under a second reads as one second);
	// Markers is the transaction phase as timed here from the progress
	// lines it flushes right before and right after the phase.
	OwnTPS  float64
	Markers time.Duration
}

// runRealPostMark runs `postmark` with pm in dir (report terse) and reads
// its report. The terse report gives rates over whole seconds; the counts
// are those rates times the seconds it printed.
func runRealPostMark(t testing.TB, bin, dir string, pm bench.PostMark) pmReal {
	t.Helper()
	cfg := fmt.Sprintf("set location %s\nset number %d\nset size %d %d\nset transactions %d\nset read %d\nset write %d\n"+
		"set bias read %d\nset bias create %d\nset seed %d\nset buffering %t\nset report terse\n",
		dir, pm.Number, pm.Low, pm.High, pm.Transactions, pm.ReadBlock, pm.WriteBlock, pm.BiasRead, pm.BiasCreate, pm.Seed, pm.Buffered)
	if pm.Subdirs > 0 {
		cfg += fmt.Sprintf("set subdirectories %d\n", pm.Subdirs)
	}
	cfg += "run\nquit\n"
	file := filepath.Join(t.TempDir(), "pm.cfg")
	if err := os.WriteFile(file, []byte(cfg), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, file)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// postmark fflushes "Performing transactions" right before it starts
	// the phase's clock and "Deleting files..." right after it stops it.
	var out strings.Builder
	var t0, t1 time.Time
	buf := make([]byte, 4096)
	for {
		n, err := stdout.Read(buf)
		now := time.Now()
		out.Write(buf[:n])
		if t0.IsZero() && strings.Contains(out.String(), "Performing transactions") {
			t0 = now
		}
		if t1.IsZero() && strings.Contains(out.String(), "Deleting files") {
			t1 = now
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("postmark: %v\n%s", err, out.String())
	}
	var line string
	for sc := bufio.NewScanner(strings.NewReader(out.String())); sc.Scan(); {
		if f := strings.Fields(sc.Text()); len(f) == 13 {
			line = sc.Text()
		}
	}
	if line == "" || t0.IsZero() || t1.IsZero() || strings.Contains(out.String(), "Error") || strings.Contains(out.String(), "out of files") {
		t.Fatalf("postmark output:\n%s", out.String())
	}
	var v [13]float64
	for i, f := range strings.Fields(line) {
		if v[i], err = strconv.ParseFloat(f, 64); err != nil {
			t.Fatalf("postmark report %q: %v", line, err)
		}
	}
	el, tel := v[0], v[1]
	r := func(x float64) int64 { return int64(math.Round(x)) }
	return pmReal{pmWork: pmWork{Created: r(v[3] * el), Read: r(v[6] * tel), Appended: r(v[7] * tel), Deleted: r(v[8] * el),
		BytesRead: r(v[11] * el), BytesWritten: r(v[12] * el)}, OwnTPS: v[2], Markers: t1.Sub(t0)}
}

// benchPostMark runs the postmark suite with pm and one instance on dir
// and returns what its records say it did and its transactions/s.
func benchPostMark(t testing.TB, dir string, pm bench.PostMark, instances int) (pmWork, float64, *bench.Run) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "res")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	run, err := bench.Execute(ctx, bench.Config{Suite: "postmark", Target: dir, Threads: []int{instances}, Settings: pm.Settings(), Out: out})
	if err != nil {
		t.Fatal(err)
	}
	_, ops, err := bench.ReadRun(out)
	if err != nil {
		t.Fatal(err)
	}
	var w pmWork
	for _, o := range ops {
		if o.Failed() {
			t.Fatalf("failed request %+v", o)
		}
		switch o.Op {
		case "create":
			w.Created++
			w.BytesWritten += o.Size
		case "append":
			w.Appended++
			w.BytesWritten += o.Size
		case "read":
			w.Read++
			w.BytesRead += o.Size
		case "delete":
			w.Deleted++
		default:
			t.Fatalf("record %+v", o)
		}
	}
	return w, bench.PostMarkRate(run, instances), run
}

// TestPostMarkSameWork runs the real postmark program and the postmark
// suite with the same configurations on the same file system: they must
// do exactly the same work (files created, read, appended, deleted, bytes
// read and written, from postmark's own report and from the records), for
// PostMark's defaults and for a configuration that changes every setting.
// The transactions/s comparison is TestPostMarkAgreesWithPostMark
// (TRISTORE_LONG=1).
func TestPostMarkSameWork(t *testing.T) {
	bin := testutil.NeedCmd(t, "postmark")
	other := bench.PostMark{Number: 120, Low: 100, High: 30000, Transactions: 700, ReadBlock: 4096, WriteBlock: 1000,
		BiasRead: 3, BiasCreate: 6, Subdirs: 4, Seed: 1234, Buffered: false}
	for _, pm := range []bench.PostMark{bench.DefaultPostMark(), other} {
		t.Run(fmt.Sprintf("seed%d", pm.Seed), func(t *testing.T) {
			dir := t.TempDir()
			real := runRealPostMark(t, bin, dir, pm)
			got, tps, _ := benchPostMark(t, dir, pm, 1)
			t.Logf("postmark %+v (its own %.0f tx/s; %.0f tx/s between its markers); bench %+v, %.0f tx/s",
				real.pmWork, real.OwnTPS, float64(pm.Transactions)/real.Markers.Seconds(), got, tps)
			if got != real.pmWork {
				t.Fatalf("bench did %+v, postmark %+v", got, real.pmWork)
			}
			if tps <= 0 {
				t.Fatalf("no transactions/s: %v", tps)
			}
			if ents, _ := os.ReadDir(dir); len(ents) != 0 {
				t.Fatalf("left in %s: %v", dir, ents)
			}
		})
	}
}
