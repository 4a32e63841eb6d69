package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/tristore/tristore/bench"
	"github.com/tristore/tristore/bench/lab"
	"github.com/tristore/tristore/bench/report"
)

// labData is a lab's runs by preset/name/kind.
type labData struct {
	res  *lab.Result
	runs map[string]*report.Run
}

func loadLab(dir string) (*labData, error) {
	res, err := lab.ReadResult(dir)
	if err != nil {
		return nil, err
	}
	d := &labData{res: res, runs: map[string]*report.Run{}}
	for _, ri := range res.Runs {
		r, err := report.LoadRun(filepath.Join(dir, ri.Dir))
		if err != nil {
			return nil, err
		}
		d.runs[ri.Preset+"/"+ri.Name+"/"+ri.Kind] = r
	}
	return d, nil
}

// row finds one group of a run; ok is false when the run or the group is
// missing, or the group had failed requests or moved nothing.
func (d *labData) row(preset, name, kind, phase, form string, unit int64, threads int) (report.Row, bool) {
	r := d.runs[preset+"/"+name+"/"+kind]
	if r == nil {
		return report.Row{}, false
	}
	for _, row := range r.Rows {
		if row.Phase == phase && (form == "" || row.Form == form) && row.Unit == unit && row.Threads == threads {
			return row, row.Errors == 0 && row.Ops > 0
		}
	}
	return report.Row{}, false
}

func (d *labData) mbps(preset, name, kind, phase string, unit int64, threads int) (float64, bool) {
	r, ok := d.row(preset, name, kind, phase, "", unit, threads)
	return r.MBps, ok && r.MBps > 0
}

// unitOf is the single size of a run's plan (batch-large's file size).
func (d *labData) unitOf(preset, name, kind string) int64 {
	if r := d.runs[preset+"/"+name+"/"+kind]; r != nil && len(r.Meta.Params.Sizes) > 0 {
		return r.Meta.Params.Sizes[0]
	}
	return 0
}

// finding is one row of the table.
type finding struct {
	seed, claim, measured string
	// agree: "yes", "no" or "not measured".
	agree string
	// note explains a "no" or qualifies a "yes".
	note string
}

func verdict(ok bool) string {
	if ok {
		return "yes"
	}
	return "no"
}

var protos = []string{"s3", "nfs", "iscsi"}

// Table computes the reproduction table from a lab directory and,
// optionally, a raid.sh postmark raw file.
func Table(labDir, raidRaw string) (string, error) {
	d, err := loadLab(labDir)
	if err != nil {
		return "", err
	}
	var fs []finding
	fs = append(fs, smallBatch(d), largeBatch(d), syncAmplification(d), efficiency(d), objects(d), clients(d),
		postmarkProtocols(d), raidPostmark(raidRaw))
	b, b2 := &strings.Builder{}, &strings.Builder{}
	state := "complete"
	if d.res.Partial {
		state = "PARTIAL: " + d.res.Error
	}
	fmt.Fprintf(b, "Data: `%s` (`tristore lab`, scale %g, presets %s, %s link, %s, %s UTC; %s).\n\n", labDir, d.res.Scale,
		strings.Join(d.res.Presets, ", "), d.res.Link, d.res.End.Sub(d.res.Start).Round(1e9), d.res.Start.Format("2006-01-02 15:04"), state)
	if txt, err := os.ReadFile(filepath.Join(labDir, "lab.txt")); err == nil {
		for _, l := range strings.Split(string(txt), "\n") {
			if strings.HasPrefix(l, "load ") {
				if f := strings.Fields(strings.TrimPrefix(strings.TrimPrefix(l, "load before:"), "load after:")); len(f) >= 3 {
					fmt.Fprintf(b2, "%s %s; ", strings.TrimPrefix(strings.SplitN(l, ":", 2)[0], "load "), strings.Join(f[:3], " / "))
				}
			}
		}
		if b2.Len() > 0 {
			fmt.Fprintf(b, "Load average (1 / 5 / 15 min, from lab.txt): %s.\n\n", strings.TrimSuffix(strings.TrimSpace(b2.String()), ";"))
		}
	}
	if raidRaw != "" {
		fmt.Fprintf(b, "RAID PostMark: `%s` (`scripts/bench/raid.sh postmark`).\n\n", raidRaw)
	}
	fmt.Fprintln(b, "| seed finding | what tristore measured here | direction agrees? | note |")
	fmt.Fprintln(b, "|---|---|---|---|")
	for _, f := range fs {
		fmt.Fprintf(b, "| %s: %s | %s | %s | %s |\n", f.seed, f.claim, f.measured, f.agree, f.note)
	}
	return b.String(), nil
}

func smallBatch(d *labData) finding {
	f := finding{seed: "000 §IV-D", claim: "iSCSI leads small-file (4 KiB) batch writes on `ideal`"}
	const unit = 4 << 10
	var parts, led, lost []string
	ok := true
	for _, t := range []int{1, 8} {
		v := map[string]float64{}
		var s []string
		for _, p := range protos {
			m, good := d.mbps("ideal", "batch-small", p, "write", unit, t)
			if !good {
				return notMeasured(f, "ideal batch-small write at %d threads missing or failed for %s", t, p)
			}
			v[p] = m
			s = append(s, fmt.Sprintf("%s %.2f", p, m))
		}
		parts = append(parts, fmt.Sprintf("%d thread(s): %s MB/s", t, strings.Join(s, ", ")))
		if v["iscsi"] > v["s3"] && v["iscsi"] > v["nfs"] {
			led = append(led, fmt.Sprint(t))
		} else {
			ok = false
			lost = append(lost, fmt.Sprint(t))
		}
	}
	f.measured = "`batch` 4 KiB writes, " + strings.Join(parts, "; ")
	f.agree = verdict(ok)
	if !ok {
		f.note = fmt.Sprintf("iSCSI led at %s thread(s) but not at %s: one run on a loaded 2-core VM, where a 4 KiB write costs about a millisecond on every protocol and the order at one thread is within the noise", orNone(led), strings.Join(lost, " and "))
	} else {
		f.note = "raw LUN: a file is a region, no file-system metadata per write"
	}
	return f
}

func largeBatch(d *labData) finding {
	f := finding{seed: "000 §IV-E", claim: "on `realistic`, object storage with ≥ 8 threads leads large-file transfers"}
	unit := d.unitOf("realistic", "batch-large", "s3")
	if unit == 0 {
		return notMeasured(f, "no realistic batch-large run")
	}
	var parts []string
	ok := true
	for _, ph := range []string{"write", "read"} {
		v := map[string]float64{}
		var s []string
		for _, p := range protos {
			m, good := d.mbps("realistic", "batch-large", p, ph, unit, 8)
			if !good {
				return notMeasured(f, "realistic batch-large %s at 8 threads missing or failed for %s", ph, p)
			}
			v[p] = m
			s = append(s, fmt.Sprintf("%s %.2f", p, m))
		}
		parts = append(parts, fmt.Sprintf("%s %s MB/s", ph, strings.Join(s, ", ")))
		ok = ok && v["s3"] > v["nfs"] && v["s3"] > v["iscsi"]
	}
	f.measured = fmt.Sprintf("`batch` %s files, 8 threads: %s", bench.FormatSize(unit), strings.Join(parts, "; "))
	f.agree = verdict(ok)
	if ok {
		f.note = fmt.Sprintf("%s files, not the seed's 16 MiB (lab scale); S3 uses a TCP connection per thread, NFS and iSCSI one shared connection", bench.FormatSize(unit))
	} else {
		f.note = "a single connection kept up with eight here: loss and reordering on the emulated link did not throttle it in this run"
	}
	return f
}

func syncAmplification(d *labData) finding {
	f := finding{seed: "000 §IV-F", claim: "iSCSI's O_SYNC write amplification on small files exceeds NFS's"}
	const unit = 4 << 10
	isc, ok1 := d.row("counting", "amplification", "ext4+iscsi", "write", "sync", unit, 1)
	nfs, ok2 := d.row("counting", "amplification", "nfs", "write", "sync", unit, 1)
	if !ok1 || !ok2 || isc.Amplification == 0 || nfs.Amplification == 0 {
		return notMeasured(f, "needs the ext4+iscsi (root) and nfs amplification runs")
	}
	raw, ok3 := d.row("counting", "amplification", "iscsi", "write", "sync", unit, 1)
	f.measured = fmt.Sprintf("`amplification` wire ÷ payload of 4 KiB O_SYNC writes, 1 thread: ext4 on the LUN %.2f, NFS (FILE_SYNC) %.2f", isc.Amplification, nfs.Amplification)
	if ok3 && raw.Amplification > 0 {
		f.measured += fmt.Sprintf(", raw LUN %.2f", raw.Amplification)
	}
	f.agree = verdict(isc.Amplification > nfs.Amplification)
	if f.agree == "yes" {
		f.note = "only with a file system on the LUN: ext4's journal and metadata blocks cross the wire"
	} else {
		f.note = "ext4's journal commit for these writes fell outside the step in this run"
	}
	return f
}

func efficiency(d *labData) finding {
	f := finding{seed: "004 §3.2", claim: "transmission efficiency (payload ÷ wire bytes) rises with file size"}
	sizes := []int64{1 << 10, 4 << 10, 64 << 10, 1 << 20}
	var parts []string
	ok := true
	for _, p := range protos {
		var s []string
		prev := 0.0
		for i, size := range sizes {
			r, good := d.row("counting", "efficiency", p, "put", "", size, 1)
			if !good || r.Efficiency == 0 {
				return notMeasured(f, "efficiency put %s missing for %s", bench.FormatSize(size), p)
			}
			s = append(s, fmt.Sprintf("%.2f", r.Efficiency))
			if i > 0 && r.Efficiency < prev {
				ok = false
			}
			prev = r.Efficiency
		}
		parts = append(parts, p+" "+strings.Join(s, " → "))
	}
	f.measured = "`efficiency` uploads, 1 KiB → 4 KiB → 64 KiB → 1 MiB: " + strings.Join(parts, "; ")
	f.agree = verdict(ok)
	f.note = "through a link that only counts (no shaping), IP bytes with headers on a netns link; the raw LUN carries no file-system metadata"
	if !ok {
		f.note = "not monotonic in this run: " + f.note
	}
	return f
}

func objects(d *labData) finding {
	f := finding{seed: "001 §4", claim: "object bandwidth rises with request size and with parallelism"}
	r := d.runs["ideal/objects/s3"]
	if r == nil {
		return notMeasured(f, "no objects run")
	}
	sizes := r.Meta.Params.Sizes
	threads := r.Meta.Params.Threads
	var parts []string
	ok := true
	for _, ph := range []string{"put", "get"} {
		var s []string
		for _, t := range threads {
			prev := 0.0
			var cells []string
			for _, size := range sizes {
				m, good := d.mbps("ideal", "objects", "s3", ph, size, t)
				if !good {
					return notMeasured(f, "objects %s %s x%d failed", ph, bench.FormatSize(size), t)
				}
				cells = append(cells, fmt.Sprintf("%.2f", m))
				if m < prev*0.9 {
					ok = false
				}
				prev = m
			}
			s = append(s, fmt.Sprintf("×%d %s", t, strings.Join(cells, " → ")))
		}
		small1, _ := d.mbps("ideal", "objects", "s3", ph, sizes[0], threads[0])
		smallN, _ := d.mbps("ideal", "objects", "s3", ph, sizes[0], threads[len(threads)-1])
		ok = ok && smallN > small1
		parts = append(parts, ph+" "+strings.Join(s, ", "))
	}
	var names []string
	for _, s := range sizes {
		names = append(names, bench.FormatSize(s))
	}
	f.measured = fmt.Sprintf("`objects` on `ideal`, MB/s at %s per parallelism: %s", strings.Join(names, " → "), strings.Join(parts, "; "))
	f.agree = verdict(ok)
	f.note = "the ideal link caps every cell at 13.1 MB/s, so large objects are link-bound at any parallelism; parallelism pays for small ones"
	if !ok {
		f.note = "a cell fell with size, or parallelism did not help small objects, in this run; " + f.note
	}
	return f
}

func clients(d *labData) finding {
	f := finding{seed: "004 §4.1", claim: "with more clients, HTTP server throughput rises, NFS's falls (large-file downloads)"}
	var parts []string
	v := map[string][2]float64{}
	for _, p := range protos {
		r := d.runs["ideal/clients/"+p]
		if r == nil {
			return notMeasured(f, "no clients run for %s", p)
		}
		large := r.Meta.Params.Sizes[len(r.Meta.Params.Sizes)-1]
		th := r.Meta.Params.Threads
		var s []string
		for _, t := range th {
			m, good := d.mbps("ideal", "clients", p, "get", large, t)
			if !good {
				return notMeasured(f, "clients get at %d for %s failed", t, p)
			}
			s = append(s, fmt.Sprintf("%.2f", m))
		}
		first, _ := d.mbps("ideal", "clients", p, "get", large, th[0])
		last, _ := d.mbps("ideal", "clients", p, "get", large, th[len(th)-1])
		v[p] = [2]float64{first, last}
		parts = append(parts, fmt.Sprintf("%s %s", p, strings.Join(s, " → ")))
	}
	f.measured = "`clients` on `ideal`, server MB/s of large-file downloads at 1 → 2 → 4 clients: " + strings.Join(parts, "; ")
	ok := v["s3"][1] > v["s3"][0] && v["nfs"][1] < v["nfs"][0]
	f.agree = verdict(ok)
	if ok {
		f.note = "through the one emulated link"
	} else {
		f.note = "every client shares the one 12.5 MiB/s emulated link, which one client already fills, so the server's own scaling cannot show (the seed's clients had their own 100 Mbit/s ports); `bench clients` without `--network` shows it"
	}
	return f
}

func postmarkProtocols(d *labData) finding {
	f := finding{seed: "003", claim: "PostMark runs faster on iSCSI than on NFS"}
	isc := d.runs["ideal/postmark/ext4+iscsi"]
	nfs := d.runs["ideal/postmark/nfs"]
	if isc == nil || nfs == nil {
		return notMeasured(f, "needs the ext4+iscsi (root) and nfs postmark runs")
	}
	var s []string
	ok := true
	for _, n := range isc.Meta.Params.Threads {
		a, b := bench.PostMarkRate(isc.Meta, n), bench.PostMarkRate(nfs.Meta, n)
		if a == 0 || b == 0 {
			return notMeasured(f, "postmark at %d instances missing", n)
		}
		s = append(s, fmt.Sprintf("%d instance(s): ext4 on the LUN %.0f, NFS %.0f", n, a, b))
		ok = ok && a > b
	}
	f.measured = "`postmark` transactions/s, " + strings.Join(s, "; ")
	f.agree = verdict(ok)
	f.note = "direction only: ext4 keeps PostMark's small files in its page cache (PostMark never fsyncs), while the userspace NFS client has no cache and makes every create and append a round trip"
	return f
}

// raidPostmark reads a raid.sh postmark raw file: the median over rounds
// of each side's transactions/s at the highest instance count.
func raidPostmark(raw string) finding {
	f := finding{seed: "003", claim: "independent disks beat RAID-0 and RAID-5 under concurrent PostMark workloads"}
	if raw == "" {
		return notMeasured(f, "no saved `scripts/bench/raid.sh postmark` run")
	}
	b, err := os.ReadFile(raw)
	if err != nil {
		return notMeasured(f, "%v", err)
	}
	type value struct {
		Name  string  `json:"name"`
		Value float64 `json:"value"`
	}
	type rec struct {
		Type   string  `json:"type"`
		Side   string  `json:"side"`
		Values []value `json:"values"`
	}
	vals := map[string]map[string][]float64{} // side -> name -> rounds
	var names []string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var r rec
		if json.Unmarshal([]byte(line), &r) != nil || r.Type != "round" {
			continue
		}
		if vals[r.Side] == nil {
			vals[r.Side] = map[string][]float64{}
		}
		for _, v := range r.Values {
			if _, seen := vals[r.Side][v.Name]; !seen && r.Side == "independent" {
				names = append(names, v.Name)
			}
			vals[r.Side][v.Name] = append(vals[r.Side][v.Name], v.Value)
		}
	}
	if len(names) == 0 || vals["raid0"] == nil || vals["raid5"] == nil {
		return notMeasured(f, "the raw file has no independent, raid0 and raid5 rounds")
	}
	top := names[len(names)-1]
	med := map[string]float64{}
	rounds := 0
	for _, side := range []string{"independent", "raid0", "raid5"} {
		med[side] = median(vals[side][top])
		rounds = max(rounds, len(vals[side][top]))
	}
	f.measured = fmt.Sprintf("%s (median of %d rounds): independent %.0f, RAID-0 %.0f, RAID-5 %.0f", strings.TrimSuffix(top, ": transactions/s")+" transactions/s", rounds,
		med["independent"], med["raid0"], med["raid5"])
	ok := med["independent"] > med["raid0"] && med["independent"] > med["raid5"]
	f.agree = verdict(ok)
	f.note = "five member files on one local disk, not five disks"
	if !ok {
		f.note = "the five \"disks\" are files on one shared disk, so independent volumes do not add spindles as the seed's did; " + f.note
	}
	return f
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := append([]float64(nil), v...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func orNone(s []string) string {
	if len(s) == 0 {
		return "no"
	}
	return strings.Join(s, " and ")
}

func notMeasured(f finding, format string, args ...any) finding {
	f.measured = "—"
	f.agree = "not measured"
	f.note = fmt.Sprintf(format, args...)
	return f
}
