package soak

import (
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tristore/tristore/internal/testutil"
)

// The soak passes only if its checkers can fail: these tests break the
// data behind each checker's back (no server needed) and expect a data
// failure, and pin how op errors are classified.

func quietRecorder(t *testing.T) *recorder { return newRecorder(func(string, ...any) {}) }

func TestFsxCatchesCorruption(t *testing.T) {
	for _, direct := range []bool{false, true} {
		rec := quietRecorder(t)
		x := &fsx{name: "t", path: filepath.Join(t.TempDir(), "f"), maxSize: 1 << 20, direct: direct}
		if err := x.open(); err != nil {
			if direct {
				testutil.Missing(t, "O_DIRECT on the temp dir: %v", err)
			}
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(1, 2))
		for i := 0; i < 400; i++ {
			if _, err := x.step(rec, rng); err != nil {
				t.Fatalf("direct=%v op %d: %v", direct, i, err)
			}
		}
		if len(rec.data) != 0 || x.checkAll(rec, "clean") != nil || len(rec.data) != 0 {
			t.Fatalf("direct=%v: clean run reported %v", direct, rec.data)
		}
		if len(x.model) == 0 {
			t.Fatal("the model is empty after 400 ops")
		}
		// One byte changes behind the checker's back.
		f, err := os.OpenFile(x.path, os.O_RDWR, 0)
		if err != nil {
			t.Fatal(err)
		}
		off := int64(len(x.model) / 2)
		f.WriteAt([]byte{x.model[off] ^ 0xff}, off)
		f.Close()
		if err := x.checkAll(rec, "corrupt"); err != nil || len(rec.data) != 1 {
			t.Fatalf("direct=%v: corruption at %d not reported once: %v %v", direct, off, err, rec.data)
		}
		want := x.model[off]
		if s := x.verifyReopen(rec, x.path, "reopen"); !strings.Contains(s, "equal the model") || want != x.model[off] {
			t.Fatalf("after resync the file is the model: %s", s)
		}
	}
}

func TestS3ModelCatchesLostWrite(t *testing.T) {
	rec := quietRecorder(t)
	w := &s3Work{state: map[string][]string{"k": {"aaaaaaaaaaaa"}}}
	w.observe(rec, "k", "", "GET") // acknowledged PUT, then the key is absent
	if len(rec.data) != 1 {
		t.Fatalf("lost object not reported: %v", rec.data)
	}
	w.state["k"] = []string{"", "bbbbbbbbbbbb"} // a failed PUT: either is fine
	w.observe(rec, "k", "bbbbbbbbbbbb", "GET")
	w.state["j"] = []string{""}
	w.observeList(rec, map[string]string{"k": "bbbbbbbbbbbb", "j": "cccccccccccc", "x": "dddddddddddd"}, "LIST")
	if len(rec.data) != 3 {
		t.Fatalf("want 3 reports (lost, never-written j content, unknown key x), got %v", rec.data)
	}
}

func TestSqliteCheckCatchesLostCommit(t *testing.T) {
	testutil.NeedCmd(t, "sqlite3")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rec := quietRecorder(t)
	s := &sqliteWork{db: filepath.Join(t.TempDir(), "db")}
	s.run(ctx, rec, rand.New(rand.NewPCG(3, 4)), 5)
	if len(s.acked) != 5 || len(rec.errs) != 0 {
		t.Fatalf("acked %v errs %v", s.acked, rec.errs)
	}
	if msg := s.verify(ctx, rec, s.db, "t"); len(rec.data) != 0 || !strings.Contains(msg, "5 acknowledged transactions, 0 lost, 0 partial") {
		t.Fatalf("clean: %s %v", msg, rec.data)
	}
	if _, err := s.sql(ctx, s.db, "DELETE FROM t WHERE batch=2; DELETE FROM t WHERE batch=3 AND i=0;"); err != nil {
		t.Fatal(err)
	}
	s.verify(ctx, rec, s.db, "t")
	if len(rec.data) != 2 {
		t.Fatalf("want the lost and the partial batch reported, got %v", rec.data)
	}
}

func TestGitCheckCatchesLostCommit(t *testing.T) {
	testutil.NeedCmd(t, "git")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rec := quietRecorder(t)
	g := &gitWork{dir: filepath.Join(t.TempDir(), "repo")}
	g.run(ctx, rec, rand.New(rand.NewPCG(5, 6)), 4)
	if len(g.acked) != 4 || len(rec.errs) != 0 {
		t.Fatalf("acked %v errs %v", g.acked, rec.errs)
	}
	if msg := g.verify(ctx, rec, g.dir, "t"); len(rec.data) != 0 {
		t.Fatalf("clean: %s %v", msg, rec.data)
	}
	g.acked = append(g.acked, "soak 99") // acknowledged but never there
	if _, err := run(ctx, time.Minute, g.dir, gitEnv(), "git", "reset", "-q", "--hard", "HEAD~1"); err != nil {
		t.Fatal(err)
	}
	g.verify(ctx, rec, g.dir, "t")
	if len(rec.data) != 2 {
		t.Fatalf("want two missing commits reported, got %v", rec.data)
	}
}

func TestClassify(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	outs := []outage{
		{Kind: "kill9", Start: at(10), End: at(12)},  // short
		{Kind: "stop", Start: at(100), End: at(108)}, // longer than the NFS soft budget
		{Kind: "stop", Start: at(200), End: at(240)}, // longer than the iSCSI budget
	}
	errs := []opErr{
		{View: viewNFS, Begin: at(50), End: at(51), Err: "EIO"},                  // no outage
		{View: viewNFS, Begin: at(11), End: at(13), Err: "EIO"},                  // short outage
		{View: viewNFS, Begin: at(13), End: at(14), Err: "EIO"},                  // just after: still the outage
		{View: viewNFS, Begin: at(104), End: at(106), Err: "connection refused"}, // long
		{View: viewNFS, Begin: at(50), End: at(51), Err: "stale file handle"},
		{View: viewS3, Begin: at(11), End: at(11), Err: "unexpected EOF"},
		{View: viewBlock, Begin: at(11), End: at(12), Err: "EIO"},
		{View: viewBlock, Begin: at(210), End: at(400), Err: "x: hang (timed out after 3m0s)"},
		{View: viewBlock, Begin: at(50), End: at(90), Err: "x: hang (timed out after 3m0s)"},
		{View: viewNFS, Begin: at(5), End: at(250), Err: "EIO"}, // over all three
	}
	classify(errs, outs)
	want := []string{classNew, classNew, classNew, classKnown + " 15.5", classKnown + " 15.4", classTolerated, classNew, classKnownHang, classHang, classKnown + " 15.5"}
	for i, e := range errs {
		if !strings.HasPrefix(e.Class, want[i]) {
			t.Errorf("error %d (%s, %v..%v): class %q, want %q", i, e.Err, e.Begin.Sub(t0), e.End.Sub(t0), e.Class, want[i])
		}
	}
	// The last one overlaps every outage; the longest is named.
	if !strings.Contains(errs[9].Outage, "40.0s") {
		t.Errorf("outage named for an op over all three: %q", errs[9].Outage)
	}
}
