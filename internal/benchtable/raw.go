package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// Record is one line of a raw benchmark file (JSON lines). The first line
// of a file is a "machine" record (what ran where, and the exact command);
// every later line is one measurement of one side in one round, with the
// load average read just before and just after it, so a reader can see how
// busy the shared machine was while each figure was taken.
type Record struct {
	Type  string `json:"type"` // "machine" or "round"
	Bench string `json:"bench"`
	Time  string `json:"time"` // RFC 3339, UTC

	// machine records
	Command string            `json:"command,omitempty"`
	Commit  string            `json:"commit,omitempty"`
	Ours    string            `json:"ours,omitempty"`  // the side ratios are taken from
	Peers   map[string]string `json:"peers,omitempty"` // side -> version
	Notes   []string          `json:"notes,omitempty"`
	Machine *Machine          `json:"machine,omitempty"`

	// round records
	Round      int             `json:"round,omitempty"`
	Side       string          `json:"side,omitempty"`
	Values     []Value         `json:"values,omitempty"` // ordered: the table keeps this order
	LoadBefore []float64       `json:"load_before,omitempty"`
	LoadAfter  []float64       `json:"load_after,omitempty"`
	Raw        json.RawMessage `json:"raw,omitempty"` // the tool's own output, kept whole
}

// Value is one figure of a measurement; Name carries the unit
// ("GET 4 KiB, 16 parallel, op/s").
type Value struct {
	Name  string  `json:"name"`
	Value float64 `json:"value"`
}

// Machine describes the computer a raw file was measured on.
type Machine struct {
	NProc     int       `json:"nproc"`
	CPUModel  string    `json:"cpu_model"`
	MemBytes  int64     `json:"mem_bytes"`
	Kernel    string    `json:"kernel"`
	OS        string    `json:"os,omitempty"`
	GoVersion string    `json:"go_version"`
	Load      []float64 `json:"load_at_start"`
}

// describeMachine reads the machine description from /proc and /etc.
func describeMachine() (*Machine, error) {
	m := &Machine{NProc: runtime.NumCPU(), GoVersion: runtime.Version()}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return nil, err
	}
	for _, l := range strings.Split(string(b), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[0] == "MemTotal:" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				return nil, fmt.Errorf("meminfo: %q: %w", l, err)
			}
			m.MemBytes = kb << 10
		}
	}
	if b, err = os.ReadFile("/proc/sys/kernel/osrelease"); err != nil {
		return nil, err
	}
	m.Kernel = strings.TrimSpace(string(b))
	if b, err := os.ReadFile("/etc/os-release"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "PRETTY_NAME="); ok {
				m.OS = strings.Trim(v, `"`)
			}
		}
	}
	if m.Load, err = readLoad(); err != nil {
		return nil, err
	}
	return m, nil
}

// readLoad returns the 1, 5 and 15 minute load averages.
func readLoad() ([]float64, error) {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return nil, err
	}
	return parseLoad(string(b))
}

// parseLoad reads the first three fields of /proc/loadavg's format.
func parseLoad(s string) ([]float64, error) {
	f := strings.Fields(s)
	if len(f) < 3 {
		return nil, fmt.Errorf("load average %q: want at least 3 fields", s)
	}
	out := make([]float64, 3)
	for i := range out {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return nil, fmt.Errorf("load average %q: %w", s, err)
		}
		out[i] = v
	}
	return out, nil
}

// gitCommit names the commit the benchmark was built from, "+dirty" when
// the work tree had changes (other people edit the same tree).
func gitCommit() string {
	out, err := exec.Command("git", "rev-parse", "--short=12", "HEAD").Output()
	if err != nil {
		return "unknown"
	}
	c := strings.TrimSpace(string(out))
	if err := exec.Command("git", "diff", "--quiet", "HEAD").Run(); err != nil {
		c += "+dirty"
	}
	return c
}

// lookup follows a dot path ("0.iops", "end.sum_received.bits_per_second")
// through decoded JSON and returns the number found there.
func lookup(doc any, path string) (float64, error) {
	cur := doc
	for _, p := range strings.Split(path, ".") {
		switch c := cur.(type) {
		case map[string]any:
			v, ok := c[p]
			if !ok {
				return 0, fmt.Errorf("%s: no key %q", path, p)
			}
			cur = v
		case []any:
			i, err := strconv.Atoi(p)
			if err != nil || i < 0 || i >= len(c) {
				return 0, fmt.Errorf("%s: %q is not an index of a %d-element array", path, p, len(c))
			}
			cur = c[i]
		default:
			return 0, fmt.Errorf("%s: %q is below a scalar", path, p)
		}
	}
	switch v := cur.(type) {
	case float64:
		return v, nil
	case json.Number:
		return v.Float64()
	}
	return 0, fmt.Errorf("%s: %v is not a number", path, cur)
}

// parseSpec splits "name=rest" (the name may contain anything but '=').
func parseSpec(s string) (string, string, error) {
	i := strings.LastIndex(s, "=")
	if i <= 0 || i == len(s)-1 {
		return "", "", fmt.Errorf("%q: want NAME=VALUE", s)
	}
	return strings.TrimSpace(s[:i]), strings.TrimSpace(s[i+1:]), nil
}

// buildValues turns -f NAME=PATH (from the JSON document raw) and -v
// NAME=NUMBER specs into values, in the order given.
func buildValues(raw []byte, specs []spec) ([]Value, error) {
	var doc any
	if len(raw) > 0 {
		if err := json.Unmarshal(raw, &doc); err != nil {
			return nil, fmt.Errorf("tool output is not JSON: %w", err)
		}
	}
	var vals []Value
	for _, s := range specs {
		name, arg, err := parseSpec(s.text)
		if err != nil {
			return nil, err
		}
		var v float64
		if s.fromJSON {
			if doc == nil {
				return nil, fmt.Errorf("-f %s: no -json document given", s.text)
			}
			if v, err = lookup(doc, arg); err != nil {
				return nil, err
			}
		} else if v, err = strconv.ParseFloat(arg, 64); err != nil {
			return nil, fmt.Errorf("-v %s: %w", s.text, err)
		}
		vals = append(vals, Value{Name: name, Value: v})
	}
	if len(vals) == 0 {
		return nil, errors.New("no values: give -f NAME=PATH or -v NAME=NUMBER")
	}
	return vals, nil
}

type spec struct {
	text     string
	fromJSON bool
}

// compactJSON keeps a tool's JSON output on one line of the raw file.
func compactJSON(b []byte) (json.RawMessage, error) {
	if len(bytes.TrimSpace(b)) == 0 {
		return nil, nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return nil, fmt.Errorf("tool output is not JSON: %w", err)
	}
	return buf.Bytes(), nil
}

// readRaw reads a raw file: a machine record first, then round records.
func readRaw(r io.Reader) (*Record, []Record, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	var machine *Record
	var rounds []Record
	for n := 1; sc.Scan(); n++ {
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		var rec Record
		if err := json.Unmarshal(line, &rec); err != nil {
			return nil, nil, fmt.Errorf("line %d: %w", n, err)
		}
		switch rec.Type {
		case "machine":
			if machine != nil {
				return nil, nil, fmt.Errorf("line %d: a second machine record (one run per raw file)", n)
			}
			machine = &rec
		case "round":
			if machine == nil {
				return nil, nil, fmt.Errorf("line %d: round before the machine record", n)
			}
			if rec.Side == "" || rec.Round < 1 || len(rec.Values) == 0 {
				return nil, nil, fmt.Errorf("line %d: round record needs side, round >= 1 and values", n)
			}
			rounds = append(rounds, rec)
		default:
			return nil, nil, fmt.Errorf("line %d: unknown record type %q", n, rec.Type)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, nil, err
	}
	if machine == nil {
		return nil, nil, errors.New("no machine record")
	}
	if len(rounds) == 0 {
		return nil, nil, errors.New("no round records")
	}
	return machine, rounds, nil
}

func now() string { return time.Now().UTC().Format(time.RFC3339) }
