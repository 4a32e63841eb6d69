package bench_test

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tristore/tristore/bench"
)

// TestSuiteMixed: every workload alone and every pair of seed 001 §4.4
// together at each parallelism; the two sides of a pair really overlap in
// time, both did their quota, and neither ran on alone once the other was
// done (no more than one request per worker after); the report redraws
// bandwidth and latency per pair, alone vs mixed.
func TestSuiteMixed(t *testing.T) {
	if got := fmt.Sprint(mustSuite(t, "mixed").Defaults(1).Sizes, mustSuite(t, "mixed").Defaults(0.01).Sizes); got != "[4096 4194304] [4096 262144]" {
		t.Fatalf("default sizes at scale 1 and 0.01: %s", got)
	}
	for proto, target := range targets(t) {
		t.Run(proto, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "results")
			run, ops := execute(t, bench.Config{Suite: "mixed", Target: target, Out: out,
				Sizes: []int64{4 << 10, 64 << 10}, Threads: []int{1, 2}, Count: 8})
			type span struct {
				n          int
				start, end time.Duration
			}
			groups := map[string]*span{}
			for _, o := range ops {
				if o.Size != o.Unit {
					t.Fatalf("record moved %d bytes, unit %d: %+v", o.Size, o.Unit, o)
				}
				k := fmt.Sprintf("%s x%d", o.Phase, o.Threads)
				g := groups[k]
				if g == nil {
					g = &span{start: o.Start, end: o.End}
					groups[k] = g
				}
				g.n++
				g.start, g.end = min(g.start, o.Start), max(g.end, o.End)
			}
			ws := []string{"put 4KiB", "get 4KiB", "put 64KiB", "get 64KiB"}
			pairs := [][2]string{{"put 4KiB", "get 4KiB"}, {"put 64KiB", "get 64KiB"}, {"put 4KiB", "put 64KiB"}, {"get 4KiB", "get 64KiB"}}
			if len(groups) != 2*(len(ws)+2*len(pairs)) {
				t.Fatalf("%d groups, want %d: %v", len(groups), 2*(len(ws)+2*len(pairs)), keys(groups))
			}
			for _, p := range []int{1, 2} {
				for _, w := range ws {
					if g := groups[fmt.Sprintf("%s alone x%d", w, p)]; g == nil || g.n != 8 {
						t.Fatalf("%s alone x%d: %+v", w, p, g)
					}
				}
				for _, pr := range pairs {
					a := groups[fmt.Sprintf("%s with %s x%d", pr[0], pr[1], p)]
					b := groups[fmt.Sprintf("%s with %s x%d", pr[1], pr[0], p)]
					if a == nil || b == nil {
						t.Fatalf("pair %v x%d missing", pr, p)
					}
					if a.start >= b.end || b.start >= a.end {
						t.Fatalf("pair %v x%d did not overlap: %+v %+v", pr, p, a, b)
					}
					// Both did their quota of 8: the faster one went on
					// while the slower one did its quota.
					if min(a.n, b.n) < 8 {
						t.Fatalf("pair %v x%d: %d and %d requests", pr, p, a.n, b.n)
					}
					// Once a side is done, its co-runner starts at most one
					// more request per worker (one that raced the end): the
					// faster side does not run on alone.
					for _, x := range [][2]string{{pr[0], pr[1]}, {pr[1], pr[0]}} {
						self := fmt.Sprintf("%s with %s", x[0], x[1])
						other := groups[fmt.Sprintf("%s with %s x%d", x[1], x[0], p)]
						late := 0
						for _, o := range ops {
							if o.Phase == self && o.Threads == p && o.Start > other.end {
								late++
							}
						}
						if late > p {
							t.Fatalf("%s x%d: %d requests started after its co-runner finished", self, p, late)
						}
					}
				}
			}
			page := redraw(t, out)
			if got := strings.Count(page, "<svg "); got != 8 {
				t.Fatalf("report: %d plots, want bandwidth and latency of 4 pairs", got)
			}
			for _, s := range []string{"mixed: bandwidth of put 4KiB + get 4KiB", "mixed: latency of get 4KiB + get 64KiB", "put 64KiB alone</text>", "put 64KiB mixed</text>"} {
				if !strings.Contains(page, s) {
					t.Fatalf("report lacks %q", s)
				}
			}
			checkClean(t, proto, target, run)
		})
	}
}

func mustSuite(t *testing.T, name string) *bench.Suite {
	t.Helper()
	s, ok := bench.LookupSuite(name)
	if !ok {
		t.Fatalf("no suite %s", name)
	}
	return s
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}
