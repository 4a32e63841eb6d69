// Command benchtable is the one piece every benchmark script in
// scripts/bench shares: it writes the raw rounds of a run (JSON lines, with
// the machine description and the load average around every measurement)
// and turns a raw file into the markdown table BENCHMARKS.md shows
// (min / median / max per side, ratio of same-run medians), so no script
// computes its own summary and every published figure traces to a file.
//
//	benchtable machine -o RAW -bench NAME -command CMD [-commit C] [-ours SIDE] [-peer SIDE=VERSION]... [-note TEXT]...
//	benchtable record  -o RAW -round N -side SIDE -load-before "$(cat /proc/loadavg)" \
//	                   [-json FILE|-] [-f NAME=PATH]... [-v NAME=NUMBER]...
//	benchtable table   [-ours SIDE] RAW
//	benchtable render  [-check] FILE.md...   fill the <!-- benchtable: RAW --> blocks
//
// Run it as `go run ./internal/benchtable table docs/bench/raw/<file>.jsonl`.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
)

type multi []string

func (m *multi) String() string     { return strings.Join(*m, ",") }
func (m *multi) Set(s string) error { *m = append(*m, s); return nil }

func main() {
	if err := run(os.Args[1:], os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "benchtable:", err)
		os.Exit(1)
	}
}

func run(args []string, stdin io.Reader, stdout io.Writer) error {
	if len(args) == 0 {
		return errors.New("usage: benchtable machine|record|table ... (see the package doc)")
	}
	switch args[0] {
	case "machine":
		return cmdMachine(args[1:])
	case "record":
		return cmdRecord(args[1:], stdin)
	case "table":
		return cmdTable(args[1:], stdout)
	case "render":
		return cmdRender(args[1:], stdout)
	}
	return fmt.Errorf("unknown subcommand %q: want machine, record, table or render", args[0])
}

func cmdMachine(args []string) error {
	fs := flag.NewFlagSet("machine", flag.ContinueOnError)
	out := fs.String("o", "", "raw file to create (must not exist: one run per file)")
	bench := fs.String("bench", "", "benchmark name")
	command := fs.String("command", "", "the exact command that produced this run")
	ours := fs.String("ours", "tristore", "the side ratios are taken from")
	commit := fs.String("commit", "", "the commit that was built (default: git's HEAD, +dirty if the tree has changes)")
	var peers, notes multi
	fs.Var(&peers, "peer", "SIDE=VERSION of a side (repeatable)")
	fs.Var(&notes, "note", "a line of context printed under the table caption (repeatable)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" || *bench == "" || *command == "" {
		return errors.New("machine: -o, -bench and -command are required")
	}
	m, err := describeMachine()
	if err != nil {
		return fmt.Errorf("machine: %w", err)
	}
	if *commit == "" {
		*commit = gitCommit()
	}
	rec := Record{Type: "machine", Bench: *bench, Time: now(), Command: *command, Commit: *commit,
		Ours: *ours, Notes: notes, Machine: m, Peers: map[string]string{}}
	for _, p := range peers {
		k, v, err := parseSpec(p)
		if err != nil {
			return fmt.Errorf("-peer %w", err)
		}
		rec.Peers[k] = v
	}
	f, err := os.OpenFile(*out, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return fmt.Errorf("machine: %w", err)
	}
	return writeRecord(f, rec)
}

func cmdRecord(args []string, stdin io.Reader) error {
	fs := flag.NewFlagSet("record", flag.ContinueOnError)
	out := fs.String("o", "", "raw file to append to (created by `benchtable machine`)")
	round := fs.Int("round", 0, "round number (1, 2, ...)")
	side := fs.String("side", "", "which server or tool was measured")
	loadBefore := fs.String("load-before", "", "the content of /proc/loadavg read just before the measurement")
	jsonPath := fs.String("json", "", "the tool's JSON output (file, or - for stdin), kept in the record")
	var specs []spec
	fs.Func("f", "NAME=PATH: a value read from the JSON output at a dot path (repeatable)", func(s string) error {
		specs = append(specs, spec{text: s, fromJSON: true})
		return nil
	})
	fs.Func("v", "NAME=NUMBER: a value measured by the script (repeatable)", func(s string) error {
		specs = append(specs, spec{text: s})
		return nil
	})
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" || *side == "" || *round < 1 || *loadBefore == "" {
		return errors.New("record: -o, -side, -round >= 1 and -load-before are required")
	}
	after, err := readLoad()
	if err != nil {
		return err
	}
	before, err := parseLoad(*loadBefore)
	if err != nil {
		return err
	}
	var raw []byte
	switch *jsonPath {
	case "":
	case "-":
		raw, err = io.ReadAll(stdin)
	default:
		raw, err = os.ReadFile(*jsonPath)
	}
	if err != nil {
		return err
	}
	vals, err := buildValues(raw, specs)
	if err != nil {
		return fmt.Errorf("record %s round %d: %w", *side, *round, err)
	}
	compact, err := compactJSON(raw)
	if err != nil {
		return err
	}
	f, err := os.Open(*out)
	if err != nil {
		return fmt.Errorf("record: %w (create it with `benchtable machine`)", err)
	}
	machine, err := readRawHeader(f)
	f.Close()
	if err != nil {
		return fmt.Errorf("record: %s: %w", *out, err)
	}
	rec := Record{Type: "round", Bench: machine.Bench, Time: now(), Round: *round, Side: *side, Values: vals,
		LoadBefore: before, LoadAfter: after, Raw: compact}
	f, err = os.OpenFile(*out, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	return writeRecord(f, rec)
}

// readRawHeader reads only the machine record (a file with no rounds yet
// is fine when appending the first one).
func readRawHeader(r io.Reader) (*Record, error) {
	var rec Record
	if err := json.NewDecoder(r).Decode(&rec); err != nil {
		return nil, err
	}
	if rec.Type != "machine" {
		return nil, fmt.Errorf("first record is %q, want machine", rec.Type)
	}
	return &rec, nil
}

func writeRecord(f *os.File, rec Record) error {
	b, err := json.Marshal(rec)
	if err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

func cmdTable(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("table", flag.ContinueOnError)
	ours := fs.String("ours", "", "the side ratios are taken from (default: the raw file's)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 1 {
		return errors.New("table: give one raw file")
	}
	f, err := os.Open(fs.Arg(0))
	if err != nil {
		return err
	}
	defer f.Close()
	machine, rounds, err := readRaw(f)
	if err != nil {
		return fmt.Errorf("%s: %w", fs.Arg(0), err)
	}
	t, err := build(machine, rounds, *ours)
	if err != nil {
		return fmt.Errorf("%s: %w", fs.Arg(0), err)
	}
	t.Markdown(stdout, fs.Arg(0))
	return nil
}

func cmdRender(args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("render", flag.ContinueOnError)
	check := fs.Bool("check", false, "write nothing; fail if a block differs from its raw file")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() == 0 {
		return errors.New("render: give one or more markdown files")
	}
	for _, name := range fs.Args() {
		md, err := os.ReadFile(name)
		if err != nil {
			return err
		}
		out, raws, err := render(md, "")
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if *check {
			if !bytes.Equal(md, out) {
				return fmt.Errorf("%s: a table differs from its raw file at %s", name, firstDiff(md, out))
			}
			fmt.Fprintf(stdout, "%s: %d table(s) match their raw files\n", name, len(raws))
			continue
		}
		if !bytes.Equal(md, out) {
			if err := os.WriteFile(name, out, 0o644); err != nil {
				return err
			}
		}
		fmt.Fprintf(stdout, "%s: %d table(s) from %s\n", name, len(raws), strings.Join(raws, ", "))
	}
	return nil
}
