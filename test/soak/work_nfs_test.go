package soak

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/tristore/tristore/internal/testutil"
)

// Programs through the NFS FUSE mount: git, tar and sqlite3, each with a
// record of what was acknowledged (exit status 0) to check at the end.

// gitEnv is the environment of every git command: a fixed identity, and
// safe.directory=* because the tree is owned by whoever the server maps
// root to.
func gitEnv() []string {
	return append(os.Environ(), "GIT_AUTHOR_NAME=soak", "GIT_AUTHOR_EMAIL=soak@example.invalid",
		"GIT_COMMITTER_NAME=soak", "GIT_COMMITTER_EMAIL=soak@example.invalid",
		"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=safe.directory", "GIT_CONFIG_VALUE_0=*",
		"GIT_TERMINAL_PROMPT=0", "HOME=/nonexistent")
}

// gitWork commits in a loop; every commit git acknowledged must be in the
// history at the end, and git fsck must be clean.
type gitWork struct {
	dir     string
	acked   []string        // commit subjects git acknowledged
	unknown map[string]bool // subjects of commits that failed (may or may not be there)
}

const gitTimeout = 3 * time.Minute

func (g *gitWork) run(ctx context.Context, rec *recorder, rng *rand.Rand, maxIter int) {
	const w = "git"
	g.unknown = map[string]bool{}
	git := func(args ...string) error {
		_, err := run(ctx, gitTimeout, g.dir, gitEnv(), "git", args...)
		return err
	}
	var err error
	for try := 0; try < 5; try++ {
		if err = rec.do(w, viewNFS, "init", func() error {
			if err := os.MkdirAll(g.dir, 0o755); err != nil {
				return err
			}
			return git("init", "-q", "-b", "main")
		}); err == nil {
			break
		}
		time.Sleep(2 * time.Second)
	}
	if err != nil {
		rec.note("git: could not init the repository; workload skipped")
		return
	}
	for i := 0; i < maxIter && ctx.Err() == nil; i++ {
		name := fmt.Sprintf("f%02d.txt", i%16)
		body := strings.Repeat(fmt.Sprintf("soak git iteration %d %x\n", i, rng.Uint64()), 1+rng.IntN(400))
		if rec.do(w, viewNFS, "write", func() error { return os.WriteFile(filepath.Join(g.dir, name), []byte(body), 0o644) }) != nil {
			g.unlock()
			continue
		}
		if rec.do(w, viewNFS, "add", func() error { return git("add", "-A") }) != nil {
			g.unlock()
			continue
		}
		subj := "soak " + strconv.Itoa(i)
		if rec.do(w, viewNFS, "commit", func() error { return git("commit", "-q", "-m", subj) }) != nil {
			g.unknown[subj] = true
			g.unlock()
			continue
		}
		g.acked = append(g.acked, subj)
		if i%25 == 24 {
			if rec.do(w, viewNFS, "repack", func() error { return git("repack", "-adq") }) != nil {
				g.unlock()
			}
		}
	}
}

// unlock removes the lock files a git command killed by an error leaves,
// as a user would after reading git's message.
func (g *gitWork) unlock() {
	for _, l := range []string{"index.lock", "HEAD.lock", "refs/heads/main.lock", "packed-refs.lock"} {
		os.Remove(filepath.Join(g.dir, ".git", l))
	}
}

// verify checks the repository at dir (the mount, or the server's tree).
func (g *gitWork) verify(ctx context.Context, rec *recorder, dir, where string) string {
	if len(g.acked) == 0 && len(g.unknown) == 0 {
		return "git: no commits made"
	}
	out, err := run(ctx, 5*time.Minute, dir, gitEnv(), "git", "fsck", "--full", "--strict", "--no-progress")
	if err != nil {
		rec.bad("git fsck %s: %v", where, err)
	}
	log, err := run(ctx, 2*time.Minute, dir, gitEnv(), "git", "log", "--format=%s")
	if err != nil {
		rec.bad("git log %s: %v", where, err)
		return "git: log failed " + where
	}
	have := map[string]bool{}
	for _, s := range strings.Split(strings.TrimSpace(log), "\n") {
		have[s] = true
	}
	missing := 0
	for _, s := range g.acked {
		if !have[s] {
			missing++
			if missing <= 5 {
				rec.bad("git %s: acknowledged commit %q is not in the history", where, s)
			}
		}
	}
	extra := 0
	for s := range have {
		if s != "" && !g.unknown[s] && !contains(g.acked, s) {
			extra++
			rec.bad("git %s: commit %q in the history was never made", where, s)
		}
	}
	return fmt.Sprintf("git %s: fsck %s; %d acknowledged commits, %d missing; %d failed commits of which %d present; %d unexpected",
		where, okOr(out, err), len(g.acked), missing, len(g.unknown), countPresent(g.unknown, have), extra)
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

func countPresent(m map[string]bool, have map[string]bool) int {
	n := 0
	for s := range m {
		if have[s] {
			n++
		}
	}
	return n
}

func okOr(_ string, err error) string {
	if err != nil {
		return "FAILED"
	}
	return "clean"
}

// tarWork untars a real source tree again and again, checks each copy
// against the source and keeps the last few for the final check.
type tarWork struct {
	dir     string
	tarball string
	want    map[string]string
	kept    []string // directories whose untar tar acknowledged and that matched
}

func (tw *tarWork) run(ctx context.Context, rec *recorder, maxIter int) {
	const w = "tar"
	if err := rec.do(w, viewNFS, "mkdir", func() error { return os.MkdirAll(tw.dir, 0o755) }); err != nil {
		return
	}
	for i := 0; i < maxIter && ctx.Err() == nil; i++ {
		d := filepath.Join(tw.dir, strconv.Itoa(i))
		if rec.do(w, viewNFS, "untar", func() error {
			if err := os.Mkdir(d, 0o755); err != nil {
				return err
			}
			_, err := run(ctx, 10*time.Minute, "", nil, "tar", "-C", d, "-xf", tw.tarball)
			return err
		}) != nil {
			rec.do(w, viewNFS, "rm", func() error { _, err := run(ctx, 5*time.Minute, "", nil, "rm", "-rf", d); return err })
			continue
		}
		var got map[string]string
		if rec.do(w, viewNFS, "checksum", func() error {
			var err error
			got, err = treeSums(filepath.Join(d, "net"))
			return err
		}) != nil {
			continue // could not read it back (an op error): no verdict on its content
		}
		if diff := diffSums(tw.want, got); diff != "" {
			rec.bad("tar: untar %d acknowledged but the tree read back differs: %s", i, diff)
		}
		tw.kept = append(tw.kept, d)
		for len(tw.kept) > 3 && ctx.Err() == nil {
			// Not kept from here on: an rm cut off half way leaves part of it.
			old := tw.kept[0]
			tw.kept = tw.kept[1:]
			rec.do(w, viewNFS, "rm", func() error { _, err := run(ctx, 5*time.Minute, "", nil, "rm", "-rf", old); return err })
		}
	}
}

// verify checks the kept trees below root (the mount or the server's
// tree; mnt is the prefix of the recorded paths).
func (tw *tarWork) verify(rec *recorder, mnt, root, where string) string {
	bad := 0
	for _, d := range tw.kept {
		p := filepath.Join(root, strings.TrimPrefix(d, mnt))
		got, err := treeSums(filepath.Join(p, "net"))
		if err != nil {
			rec.bad("tar %s: reading %s: %v", where, p, err)
			bad++
			continue
		}
		if diff := diffSums(tw.want, got); diff != "" {
			rec.bad("tar %s: %s differs from the source: %s", where, p, diff)
			bad++
		}
	}
	return fmt.Sprintf("tar %s: %d kept trees of %d entries, %d differ", where, len(tw.kept), len(tw.want), bad)
}

// treeSums is testutil.TreeSums (one line per entry: type, mode, content
// hash or link target).
func treeSums(root string) (map[string]string, error) { return testutil.TreeSums(root) }

func diffSums(want, got map[string]string) string {
	var bad []string
	for k, v := range want {
		if got[k] != v {
			bad = append(bad, fmt.Sprintf("%s: want %q got %q", k, v, got[k]))
		}
	}
	for k, v := range got {
		if _, ok := want[k]; !ok {
			bad = append(bad, fmt.Sprintf("%s: unexpected %q", k, v))
		}
	}
	if len(bad) == 0 {
		return ""
	}
	sort.Strings(bad)
	n := len(bad)
	if n > 5 {
		bad = bad[:5]
	}
	return fmt.Sprintf("%d differences: %s", n, strings.Join(bad, "; "))
}

// sqliteWork inserts batches of rows, one transaction per sqlite3
// process; every batch sqlite3 acknowledged must be there in full at the
// end, and every batch that is there must be whole (atomic commits).
type sqliteWork struct {
	db      string
	acked   map[int]int // batch -> rows
	unknown map[int]int
}

const sqliteTimeout = 3 * time.Minute

func (s *sqliteWork) sql(ctx context.Context, db, q string) (string, error) {
	return run(ctx, sqliteTimeout, "", nil, "sqlite3", "-bail", "-cmd", ".timeout 10000", db, q)
}

func (s *sqliteWork) run(ctx context.Context, rec *recorder, rng *rand.Rand, maxIter int) {
	const w = "sqlite"
	s.acked, s.unknown = map[int]int{}, map[int]int{}
	var err error
	for try := 0; try < 5; try++ {
		if err = rec.do(w, viewNFS, "create", func() error {
			if err := os.MkdirAll(filepath.Dir(s.db), 0o755); err != nil {
				return err
			}
			_, err := s.sql(ctx, s.db, "PRAGMA journal_mode=DELETE; CREATE TABLE IF NOT EXISTS t(batch INTEGER, i INTEGER, v TEXT);")
			return err
		}); err == nil {
			break
		}
		time.Sleep(2 * time.Second)
	}
	if err != nil {
		rec.note("sqlite: could not create the database; workload skipped")
		return
	}
	for b := 1; b <= maxIter && ctx.Err() == nil; b++ {
		n := 1 + rng.IntN(30)
		var q strings.Builder
		q.WriteString("PRAGMA synchronous=FULL; BEGIN;")
		for i := 0; i < n; i++ {
			fmt.Fprintf(&q, " INSERT INTO t VALUES(%d,%d,'%s');", b, i, strings.Repeat(strconv.Itoa(b%10), 1+rng.IntN(2000)))
		}
		q.WriteString(" COMMIT;")
		if rec.do(w, viewNFS, "commit", func() error { _, err := s.sql(ctx, s.db, q.String()); return err }) != nil {
			s.unknown[b] = n
			continue
		}
		s.acked[b] = n
		if b%20 == 0 {
			var out string
			if rec.do(w, viewNFS, "integrity_check", func() error {
				var err error
				out, err = s.sql(ctx, s.db, "PRAGMA integrity_check;")
				return err
			}) == nil && strings.TrimSpace(out) != "ok" {
				rec.bad("sqlite: integrity_check after batch %d: %s", b, clip(out, 300))
			}
		}
	}
}

func (s *sqliteWork) verify(ctx context.Context, rec *recorder, db, where string) string {
	if len(s.acked)+len(s.unknown) == 0 {
		return "sqlite: no transactions made"
	}
	ic, err := s.sql(ctx, db, "PRAGMA integrity_check;")
	if err != nil || strings.TrimSpace(ic) != "ok" {
		rec.bad("sqlite %s: integrity_check: %v %s", where, err, clip(ic, 300))
	}
	out, err := s.sql(ctx, db, "SELECT batch, count(*), count(DISTINCT i) FROM t GROUP BY batch;")
	if err != nil {
		rec.bad("sqlite %s: select: %v", where, err)
		return "sqlite " + where + ": select failed"
	}
	have := map[int]int{}
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		f := strings.Split(l, "|")
		if len(f) != 3 {
			continue
		}
		b, _ := strconv.Atoi(f[0])
		n, _ := strconv.Atoi(f[1])
		d, _ := strconv.Atoi(f[2])
		if n != d {
			rec.bad("sqlite %s: batch %d has %d rows but %d distinct", where, b, n, d)
		}
		have[b] = n
	}
	lost, partial, extra, unknownIn := 0, 0, 0, 0
	for b, n := range s.acked {
		switch {
		case have[b] == 0:
			lost++
			if lost <= 5 {
				rec.bad("sqlite %s: acknowledged batch %d (%d rows) is missing", where, b, n)
			}
		case have[b] != n:
			partial++
			rec.bad("sqlite %s: acknowledged batch %d has %d of %d rows", where, b, have[b], n)
		}
	}
	for b, n := range have {
		if _, ok := s.acked[b]; ok {
			continue
		}
		if want, ok := s.unknown[b]; ok {
			unknownIn++
			if n != want {
				partial++
				rec.bad("sqlite %s: failed batch %d is half there: %d of %d rows (not atomic)", where, b, n, want)
			}
			continue
		}
		extra++
		rec.bad("sqlite %s: batch %d was never inserted", where, b)
	}
	return fmt.Sprintf("sqlite %s: integrity_check %s; %d acknowledged transactions, %d lost, %d partial; %d failed of which %d present; %d unexpected",
		where, strings.TrimSpace(clip(ic, 40)), len(s.acked), lost, partial, len(s.unknown), unknownIn, extra)
}
