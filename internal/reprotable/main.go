// Command reprotable draws the reproduction table of docs/reproduction.md
// from saved runs only: a `tristore lab` output directory (lab.json and the
// runs' records) and, for seed 003's RAID finding, a raw file of
// scripts/bench/raid.sh postmark. Every figure in the table is computed
// here from those files, and -check fails when the document differs from
// what the files give, so the table cannot drift from the data.
//
//	reprotable table LABDIR [RAID_POSTMARK.jsonl]
//	reprotable render [-check] FILE.md...   fill <!-- reprotable: LABDIR [RAW] --> blocks
//
// Run it from the repository root: go run ./internal/reprotable render docs/reproduction.md
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "reprotable:", err)
		os.Exit(1)
	}
}

func run(args []string, stdout io.Writer) error {
	if len(args) == 0 {
		return errors.New("usage: reprotable table LABDIR [RAW] | render [-check] FILE.md...")
	}
	switch args[0] {
	case "table":
		if len(args) < 2 || len(args) > 3 {
			return errors.New("table: give LABDIR and optionally a raid-postmark raw file")
		}
		raw := ""
		if len(args) == 3 {
			raw = args[2]
		}
		t, err := Table(args[1], raw)
		if err != nil {
			return err
		}
		_, err = io.WriteString(stdout, t)
		return err
	case "render":
		fs := flag.NewFlagSet("render", flag.ContinueOnError)
		check := fs.Bool("check", false, "do not write: fail if a block differs from what the data gives")
		if err := fs.Parse(args[1:]); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			return errors.New("render: give the markdown files")
		}
		for _, f := range fs.Args() {
			if err := renderFile(f, *check); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("unknown subcommand %q: want table or render", args[0])
}

var blockRE = regexp.MustCompile(`(?s)(<!-- reprotable: ([^>]*?) -->\n)(.*?)(<!-- /reprotable -->)`)

// Render replaces the content of every block of doc with the table of the
// data it names.
func Render(doc []byte) ([]byte, error) {
	var firstErr error
	out := blockRE.ReplaceAllFunc(doc, func(m []byte) []byte {
		sub := blockRE.FindSubmatch(m)
		f := strings.Fields(string(sub[2]))
		if len(f) == 0 || len(f) > 2 {
			if firstErr == nil {
				firstErr = fmt.Errorf("block %q: want LABDIR [RAW]", sub[2])
			}
			return m
		}
		raw := ""
		if len(f) == 2 {
			raw = f[1]
		}
		t, err := Table(f[0], raw)
		if err != nil {
			if firstErr == nil {
				firstErr = err
			}
			return m
		}
		return append(append(append([]byte{}, sub[1]...), t...), sub[4]...)
	})
	if firstErr != nil {
		return nil, firstErr
	}
	if !blockRE.Match(doc) {
		return nil, errors.New("no <!-- reprotable: LABDIR --> block")
	}
	return out, nil
}

func renderFile(path string, check bool) error {
	doc, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	out, err := Render(doc)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if bytes.Equal(out, doc) {
		return nil
	}
	if check {
		return fmt.Errorf("%s: the reproduction table differs from its saved runs (run: go run ./internal/reprotable render %s)", path, path)
	}
	return os.WriteFile(path, out, 0o644)
}
