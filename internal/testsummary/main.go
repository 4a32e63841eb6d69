// Command testsummary runs `go test -json` (or reads its saved output) and
// makes the result visible and strict: it prints each package as it
// finishes (with the output of every failed test), saves the raw JSON, and
// ends with a summary — per package passed/failed/skipped, every skipped
// test with its reason, every failure — and a last line of the form
// "N passed, N failed, N skipped", which CI reads. It exits 1 when
// anything failed, including a package that failed outside its tests
// (build failure, crash, timeout) or go test itself failing.
//
// Under CI (-strict, default when CI=true) a skip for a missing capability
// or tool (root, /dev/fuse, TUN, tmpfs, xattrs, a peer binary: testutil's
// "missing capability: " prefix or a message that reads like one) and a
// skip with no reason count as failures; other skips (a helper process, a
// store without an optional interface, a soak behind an environment
// variable) stay skips and are listed with their reasons.
//
// Usage (scripts/test.sh):
//
//	go run ./internal/testsummary -o results/test.json -- go test -json -count=1 ./...
//	go run ./internal/testsummary -in results/test.json   # summarise a saved run again
package main

import (
	"bufio"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"sort"
	"strings"
	"time"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("testsummary", flag.ContinueOnError)
	fs.SetOutput(stderr)
	out := fs.String("o", "", "save the raw go test -json output to this file")
	in := fs.String("in", "", "summarise this saved go test -json file instead of running a command")
	strict := fs.Bool("strict", os.Getenv("CI") == "true", "CI mode: skips for a missing capability, and skips without a reason, are failures")
	trim := fs.String("trim", modulePrefix(), "package path prefix to leave out when printing (default: ./go.mod's module path)")
	heartbeat := fs.Duration("heartbeat", time.Minute, "when no package finished for this long, print the packages still running")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if (*in == "") == (fs.NArg() == 0) {
		fmt.Fprintln(stderr, "testsummary: give either -in FILE or a command after --")
		return 2
	}
	s := newSummary(*strict, *trim)
	if *in != "" {
		f, err := os.Open(*in)
		if err != nil {
			fmt.Fprintln(stderr, "testsummary:", err)
			return 2
		}
		defer f.Close()
		if err := feed(f, nil, func(b []byte) { s.line(b) }); err != nil {
			fmt.Fprintln(stderr, "testsummary:", err)
			return 2
		}
		return exitCode(s.report(stdout))
	}
	var raw io.Writer
	if *out != "" {
		f, err := os.Create(*out)
		if err != nil {
			fmt.Fprintln(stderr, "testsummary:", err)
			return 2
		}
		defer f.Close()
		bw := bufio.NewWriter(f)
		defer bw.Flush()
		raw = bw
	}
	runErr := runCmd(fs.Args(), s, raw, stdout, stderr, *heartbeat)
	if runErr != nil && !s.anyFailure() {
		// go test failed but no package or test says so (a bad flag, a
		// pattern matching nothing, a killed go command): still a failure.
		s.runFail = "go test: " + runErr.Error()
	}
	if *out != "" {
		fmt.Fprintf(stdout, "\nraw results: %s\n", *out)
	}
	// The totals line stays the last line of the output.
	return exitCode(s.report(stdout))
}

func exitCode(c counts) int {
	if c.failed > 0 {
		return 1
	}
	return 0
}

// runCmd runs the go test command, feeding its standard output (the JSON
// stream) to s and raw, passing its standard error through, and printing
// each package as it finishes.
func runCmd(argv []string, s *summary, raw, stdout, stderr io.Writer, heartbeat time.Duration) error {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stderr = stderr
	pipe, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	// An interrupt reaches go test too (same process group); keep reading
	// until it exits so the summary still shows what ran.
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt)
	defer signal.Stop(sig)
	if err := cmd.Start(); err != nil {
		return err
	}
	lines := make(chan []byte, 64)
	readErr := make(chan error, 1)
	go func() { readErr <- feed(pipe, raw, func(b []byte) { lines <- b }); close(lines) }()
	tick := time.NewTicker(heartbeat)
	defer tick.Stop()
	last := time.Now()
	started := time.Now()
	for lines != nil {
		select {
		case b, ok := <-lines:
			if !ok {
				lines = nil
				break
			}
			if p := s.line(b); p != nil {
				s.progress(stdout, p)
				last = time.Now()
			}
		case <-tick.C:
			if time.Since(last) >= heartbeat {
				if r := s.running(); r != "" {
					fmt.Fprintf(stdout, "... %s elapsed; still running: %s\n", time.Since(started).Round(time.Second), r)
				}
			}
		case <-sig:
			fmt.Fprintln(stdout, "testsummary: interrupted; waiting for go test to exit")
		}
	}
	rerr := <-readErr
	werr := cmd.Wait()
	return errors.Join(werr, rerr)
}

// feed calls f with each line of r (without its newline), first copying it
// to raw when raw is not nil.
func feed(r io.Reader, raw io.Writer, f func([]byte)) error {
	br := bufio.NewReaderSize(r, 1<<16)
	for {
		b, err := br.ReadBytes('\n')
		if len(b) > 0 {
			if raw != nil {
				raw.Write(b)
			}
			f([]byte(strings.TrimRight(string(b), "\r\n")))
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// running lists the packages that started and have not finished, with how
// long they have run.
func (s *summary) running() string {
	var r []string
	for _, n := range s.order {
		p := s.pkgs[n]
		if p.action == "" {
			r = append(r, fmt.Sprintf("%s (%s)", s.short(n), time.Since(p.start).Round(time.Second)))
		}
	}
	sort.Strings(r)
	return strings.Join(r, ", ")
}

func (s *summary) anyFailure() bool {
	for _, n := range s.order {
		if hasFailure(s.outcomes(s.pkgs[n])) {
			return true
		}
	}
	return false
}

// modulePrefix is "<module path>/" from ./go.mod, left out of package names
// when printing; "" when there is no go.mod here.
func modulePrefix() string {
	b, err := os.ReadFile("go.mod")
	if err != nil {
		return ""
	}
	for _, l := range strings.Split(string(b), "\n") {
		if m, ok := strings.CutPrefix(strings.TrimSpace(l), "module "); ok {
			return strings.Trim(strings.TrimSpace(m), `"`) + "/"
		}
	}
	return ""
}
