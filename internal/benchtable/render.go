package main

import (
	"bytes"
	"fmt"
	"os"
	"regexp"
	"strings"
)

// A block in a markdown file that render fills from a raw file:
//
//	<!-- benchtable: docs/bench/raw/s3-20261123T201500Z.jsonl -->
//	(the generated caption and table)
//	<!-- /benchtable -->
//
// The raw path is relative to the directory render runs in (the repository
// root). With -check nothing is written; a block that differs from what its
// raw file gives is an error, so a figure edited by hand is caught.
//
// `<!-- benchtable: RAW ours=SIDE -->` takes the ratios from SIDE instead
// of the raw file's own side: one run can then be shown twice, e.g. the
// NFS run once as tristore's default export against every other side and
// once as its async export (ganesha's durability) against ganesha.
var blockRE = regexp.MustCompile(`(?s)<!-- benchtable: (\S+)( ours=\S+)? -->\n(.*?)<!-- /benchtable -->`)

// render returns the markdown with every block regenerated, and the raw
// files it read.
func render(md []byte, ours string) ([]byte, []string, error) {
	var files []string
	var firstErr error
	out := blockRE.ReplaceAllFunc(md, func(m []byte) []byte {
		sub := blockRE.FindSubmatch(m)
		raw := string(sub[1])
		opt := string(sub[2])
		blockOurs := ours
		if v, ok := strings.CutPrefix(opt, " ours="); ok {
			blockOurs = v
		}
		files = append(files, raw)
		f, err := os.Open(raw)
		if err != nil {
			firstErr = cmpErr(firstErr, err)
			return m
		}
		defer f.Close()
		machine, rounds, err := readRaw(f)
		if err == nil {
			var t *Table
			if t, err = build(machine, rounds, blockOurs); err == nil {
				var b bytes.Buffer
				t.Markdown(&b, raw)
				return []byte(fmt.Sprintf("<!-- benchtable: %s%s -->\n%s<!-- /benchtable -->", raw, opt, b.String()))
			}
		}
		firstErr = cmpErr(firstErr, fmt.Errorf("%s: %w", raw, err))
		return m
	})
	if firstErr != nil {
		return nil, nil, firstErr
	}
	if len(files) == 0 {
		return nil, nil, fmt.Errorf("no <!-- benchtable: RAW --> blocks")
	}
	return out, files, nil
}

func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// firstDiff names the first line where two renderings differ.
func firstDiff(a, b []byte) string {
	al, bl := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	for i := 0; i < len(al) || i < len(bl); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			return fmt.Sprintf("line %d:\n  file: %s\n  raw:  %s", i+1, x, y)
		}
	}
	return ""
}
