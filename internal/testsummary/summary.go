package main

import (
	"encoding/json"
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
	"time"
)

// event is one line of `go test -json` (cmd/test2json's TestEvent, plus the
// build events go test adds: build-output and build-fail, keyed by
// ImportPath).
type event struct {
	Time        time.Time
	Action      string
	Package     string
	ImportPath  string
	Test        string
	Elapsed     float64
	Output      string
	FailedBuild string
}

// lines keeps a bounded record of output: the first headMax lines and the
// last tailMax, so a test that logs megabytes cannot exhaust memory while
// the first error and the end both stay visible.
type lines struct {
	head    []string
	tail    []string
	dropped int
	partial string
}

const (
	headMax = 100
	tailMax = 200
)

func (l *lines) write(s string) {
	s = l.partial + s
	l.partial = ""
	for s != "" {
		i := strings.IndexByte(s, '\n')
		if i < 0 {
			l.partial = s
			return
		}
		l.add(s[:i])
		s = s[i+1:]
	}
}

func (l *lines) add(line string) {
	if len(l.head) < headMax {
		l.head = append(l.head, line)
		return
	}
	l.tail = append(l.tail, line)
	if len(l.tail) > tailMax {
		l.tail = l.tail[1:]
		l.dropped++
	}
}

// all returns the kept lines, with a marker where lines were dropped.
func (l *lines) all() []string {
	out := append([]string(nil), l.head...)
	if l.dropped > 0 {
		out = append(out, fmt.Sprintf("[... %d lines left out ...]", l.dropped))
	}
	out = append(out, l.tail...)
	if l.partial != "" {
		out = append(out, l.partial)
	}
	return out
}

// testResult is one test (or subtest) of a package.
type testResult struct {
	name     string
	state    string // run, pass, fail, skip
	elapsed  float64
	out      lines
	children bool // has subtests: counted through them
}

// message is the test's own output: go test's framing lines (=== RUN,
// --- PASS and so on) left out, each line trimmed.
func (r *testResult) message() []string {
	var msg []string
	for _, l := range r.out.all() {
		tl := strings.TrimSpace(l)
		if tl == "" || framing.MatchString(tl) {
			continue
		}
		msg = append(msg, tl)
	}
	return msg
}

var framing = regexp.MustCompile(`^(=== (RUN|PAUSE|CONT|NAME)|--- (PASS|FAIL|SKIP)):? `)

// pkgResult is one package of the run.
type pkgResult struct {
	name        string
	start       time.Time
	action      string // "" while running, then pass, fail or skip
	elapsed     float64
	out         lines // output not attributed to a test
	tests       map[string]*testResult
	order       []string
	failedBuild string
}

// outcome is one counted entry of a package: a leaf test, a parent test
// that failed on its own, or the package itself when it failed without a
// failed test (build failure, crash, timeout, TestMain exit).
type outcome struct {
	pkg, test string
	kind      string   // passed, failed, skipped
	why       string   // for failures that are not plain test failures
	msg       []string // the test's output
}

// counts are passed, failed and skipped totals.
type counts struct{ passed, failed, skipped int }

func (c *counts) add(kind string) {
	switch kind {
	case "passed":
		c.passed++
	case "failed":
		c.failed++
	case "skipped":
		c.skipped++
	}
}

// capability matches skip messages that say the machine lacks something:
// testutil's prefix, and the phrases a direct t.Skip for root, FUSE, TUN,
// tmpfs, xattrs or a tool would use. Under CI such a skip is a failure
// even if it bypassed testutil.
var capability = regexp.MustCompile(`(?i)missing capability|needs? root|not root|not installed|no such file|/dev/fuse|/dev/net/tun|\btun\b|tmpfs|xattr|cannot mount|permission denied|operation not permitted|not permitted|not available|not supported|executable file not found`)

// summary accumulates a go test -json stream.
type summary struct {
	strict bool   // CI: capability skips and reasonless skips fail
	trim   string // package path prefix left out when printing
	pkgs   map[string]*pkgResult
	order  []string
	build  map[string]*lines // build output by import path
	extra  []string          // output that is not JSON
	// runFail is set when the go test command failed with no failed
	// package or test to show for it.
	runFail string
}

func newSummary(strict bool, trim string) *summary {
	return &summary{strict: strict, trim: trim, pkgs: map[string]*pkgResult{}, build: map[string]*lines{}}
}

func (s *summary) pkg(name string, at time.Time) *pkgResult {
	p := s.pkgs[name]
	if p == nil {
		p = &pkgResult{name: name, start: at, tests: map[string]*testResult{}}
		s.pkgs[name] = p
		s.order = append(s.order, name)
	}
	return p
}

// line feeds one line of go test's output. It returns the package when
// this line finished it.
func (s *summary) line(b []byte) *pkgResult {
	var e event
	if len(b) == 0 || b[0] != '{' || json.Unmarshal(b, &e) != nil {
		s.extra = append(s.extra, string(b))
		if len(s.extra) > 200 {
			s.extra = s.extra[1:]
		}
		return nil
	}
	return s.add(e)
}

func (s *summary) add(e event) *pkgResult {
	switch e.Action {
	case "build-output":
		l := s.build[e.ImportPath]
		if l == nil {
			l = &lines{}
			s.build[e.ImportPath] = l
		}
		l.write(e.Output)
		return nil
	case "build-fail":
		return nil
	}
	if e.Package == "" {
		return nil
	}
	p := s.pkg(e.Package, e.Time)
	if e.Test == "" {
		switch e.Action {
		case "output":
			p.out.write(e.Output)
		case "pass", "fail", "skip":
			p.action, p.elapsed, p.failedBuild = e.Action, e.Elapsed, e.FailedBuild
			return p
		}
		return nil
	}
	r := p.tests[e.Test]
	if r == nil {
		r = &testResult{name: e.Test, state: "run"}
		p.tests[e.Test] = r
		p.order = append(p.order, e.Test)
		for n := e.Test; strings.Contains(n, "/"); {
			n = n[:strings.LastIndexByte(n, '/')]
			if parent := p.tests[n]; parent != nil {
				parent.children = true
			}
		}
	}
	switch e.Action {
	case "output":
		r.out.write(e.Output)
	case "pass", "fail", "skip":
		r.state, r.elapsed = e.Action, e.Elapsed
	}
	return nil
}

// outcomes counts a package: every leaf test, every parent test that failed
// with no failed subtest, unfinished tests as failures, and the package
// itself as a failure when it failed (or never finished) with no failed
// test to show for it.
func (s *summary) outcomes(p *pkgResult) []outcome {
	var out []outcome
	failedBelow := map[string]bool{}
	// Children come after their parent in p.order; walk backwards so a
	// parent sees its subtests' failures.
	for i := len(p.order) - 1; i >= 0; i-- {
		r := p.tests[p.order[i]]
		o := outcome{pkg: p.name, test: r.name, msg: r.message()}
		switch {
		case r.children && (r.state == "pass" || r.state == "skip" || failedBelow[r.name]):
			continue
		case r.state == "run":
			o.kind, o.why = "failed", "did not finish (the package timed out, crashed or exited)"
		case r.state == "pass":
			o.kind = "passed"
		case r.state == "fail":
			o.kind = "failed"
		case r.state == "skip":
			o.kind = "skipped"
			if s.strict {
				if why := strictSkip(o.msg); why != "" {
					o.kind, o.why = "failed", why
				}
			}
		}
		if o.kind == "failed" {
			for n := r.name; strings.Contains(n, "/"); {
				n = n[:strings.LastIndexByte(n, '/')]
				failedBelow[n] = true
			}
		}
		out = append(out, o)
	}
	// Back to the order the tests ran in.
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	pkgFailed := p.action == "fail" || p.action == ""
	if pkgFailed && !hasFailure(out) {
		o := outcome{pkg: p.name, kind: "failed"}
		switch {
		case p.failedBuild != "":
			o.why = "build failed (" + p.failedBuild + ")"
			if l := s.build[p.failedBuild]; l != nil {
				o.msg = l.all()
			}
		case p.action == "":
			o.why = "never finished (go test was killed or ended early)"
			o.msg = p.out.all()
		default:
			o.why = "package failed outside any test (TestMain, init, crash or timeout)"
			o.msg = p.out.all()
		}
		out = append(out, o)
	}
	return out
}

// strictSkip says why a skip fails under CI, or "" when it may stay a skip.
func strictSkip(msg []string) string {
	if len(msg) == 0 {
		return "skipped without a reason (CI requires every skip to say why)"
	}
	if capability.MatchString(strings.Join(msg, "\n")) {
		return "skipped for a missing capability or tool (a failure under CI=true)"
	}
	return ""
}

func hasFailure(os []outcome) bool {
	for _, o := range os {
		if o.kind == "failed" {
			return true
		}
	}
	return false
}

func (s *summary) short(pkg string) string {
	if s.trim != "" && strings.HasPrefix(pkg, s.trim) {
		return strings.TrimPrefix(pkg, s.trim)
	}
	return pkg
}

// progress prints one finished package, and the output of each of its
// failures, as it finishes.
func (s *summary) progress(w io.Writer, p *pkgResult) {
	if p.action == "skip" && len(p.tests) == 0 {
		return // no test files
	}
	var c counts
	os := s.outcomes(p)
	for _, o := range os {
		c.add(o.kind)
	}
	status := "ok  "
	if p.action != "pass" || c.failed > 0 {
		status = "FAIL"
	}
	fmt.Fprintf(w, "%s %-40s %7.1fs  %d passed, %d failed, %d skipped\n", status, s.short(p.name), p.elapsed, c.passed, c.failed, c.skipped)
	for _, o := range os {
		if o.kind != "failed" {
			continue
		}
		fmt.Fprintf(w, "    --- FAIL %s\n", o.label(s))
		for _, l := range limit(o.msg, 60) {
			fmt.Fprintf(w, "        %s\n", l)
		}
	}
}

func (o outcome) label(s *summary) string {
	name := s.short(o.pkg)
	if o.test != "" {
		name += " " + o.test
	}
	if o.why != "" {
		name += ": " + o.why
	}
	return name
}

// limit keeps the first n lines of msg, saying how many it left out.
func limit(msg []string, n int) []string {
	if len(msg) <= n {
		return msg
	}
	return append(msg[:n:n], fmt.Sprintf("[... %d more lines in the JSON results ...]", len(msg)-n))
}

// report prints the summary: a table per package, every skip with its
// reason, every failure, and last the totals line CI reads. It returns the
// totals.
func (s *summary) report(w io.Writer) counts {
	var total counts
	var skips, fails []outcome
	noTests := 0
	names := append([]string(nil), s.order...)
	sort.Strings(names)
	fmt.Fprintf(w, "\n=== Summary per package\n%-44s %7s %7s %7s %9s\n", "package", "passed", "failed", "skipped", "time")
	for _, n := range names {
		p := s.pkgs[n]
		if p.action == "skip" && len(p.tests) == 0 {
			noTests++
			continue
		}
		var c counts
		for _, o := range s.outcomes(p) {
			c.add(o.kind)
			total.add(o.kind)
			switch o.kind {
			case "skipped":
				skips = append(skips, o)
			case "failed":
				fails = append(fails, o)
			}
		}
		fmt.Fprintf(w, "%-44s %7d %7d %7d %8.1fs\n", s.short(n), c.passed, c.failed, c.skipped, p.elapsed)
	}
	if noTests > 0 {
		fmt.Fprintf(w, "(%d packages have no test files)\n", noTests)
	}
	fmt.Fprintf(w, "\n=== Skipped tests (%d)\n", len(skips))
	for _, o := range skips {
		reason := strings.Join(o.msg, " / ")
		if reason == "" {
			reason = "(no reason given)"
		}
		fmt.Fprintf(w, "SKIP %s %s: %s\n", s.short(o.pkg), o.test, reason)
	}
	if s.runFail != "" {
		fails = append(fails, outcome{pkg: "(go test)", kind: "failed", why: s.runFail})
		total.failed++
	}
	fmt.Fprintf(w, "\n=== Failed (%d)\n", len(fails))
	for _, o := range fails {
		fmt.Fprintf(w, "FAIL %s\n", o.label(s))
		for _, l := range limit(firstError(o.msg), 5) {
			fmt.Fprintf(w, "        %s\n", l)
		}
	}
	if len(s.extra) > 0 && total.failed > 0 {
		fmt.Fprintf(w, "\n=== Output that was not JSON (last %d lines)\n", len(s.extra))
		for _, l := range s.extra {
			fmt.Fprintln(w, l)
		}
	}
	fmt.Fprintf(w, "\n%d passed, %d failed, %d skipped\n", total.passed, total.failed, total.skipped)
	return total
}

// firstError returns the failure's output from its first file:line report
// (t.Error and friends print "name_test.go:12: ..."), or all of it.
func firstError(msg []string) []string {
	for i, l := range msg {
		if fileLine.MatchString(l) || strings.HasPrefix(l, "panic:") {
			return msg[i:]
		}
	}
	return msg
}

var fileLine = regexp.MustCompile(`^[\w.-]+\.go:\d+: `)
