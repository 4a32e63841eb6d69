package bench_test

import (
	"fmt"
	"testing"

	"github.com/tristore/tristore/bench"
)

func TestSuiteMetadata(t *testing.T) {
	for proto, target := range targets(t) {
		t.Run(proto, func(t *testing.T) {
			run, ops := execute(t, bench.Config{Suite: "metadata", Target: target, Scale: 0.0006})
			if run.Params.Count != 30 || run.Params.Sizes[0] != 1100 {
				t.Fatalf("params at scale 0.0006: %+v", run.Params)
			}
			n := count(t, ops)
			if want := fmt.Sprint(map[string]int{"delete": 30, "get": 30, "list": 1, "put": 30}); fmt.Sprint(n) != want {
				t.Fatalf("records %v, want %v", n, want)
			}
			for _, o := range ops {
				if o.Phase == "list" && (o.Items != 30 || o.Size != 0) {
					t.Fatalf("list record %+v", o)
				}
			}
			checkClean(t, proto, target, run)
		})
	}
}

func TestSuiteDatasize(t *testing.T) {
	for proto, target := range targets(t) {
		t.Run(proto, func(t *testing.T) {
			run, ops := execute(t, bench.Config{Suite: "datasize", Target: target, Scale: 0.0001})
			if fmt.Sprint(run.Params.Sizes) != "[2097152]" {
				t.Fatalf("params at scale 0.0001: %+v", run.Params)
			}
			if n := count(t, ops); fmt.Sprint(n) != fmt.Sprint(map[string]int{"delete": 1, "get": 1, "put": 1}) {
				t.Fatalf("records %v", n)
			}
			checkClean(t, proto, target, run)
		})
	}
}

// TestSuiteEfficiency: on network targets every step has wire bytes (a
// counting link without --network), efficiency = payload / wire bytes is
// in (0, 1], and it rises from 1 KiB to 1 MiB files (seed 004 Figure 7).
func TestSuiteEfficiency(t *testing.T) {
	for proto, target := range targets(t) {
		t.Run(proto, func(t *testing.T) {
			run, ops := execute(t, bench.Config{Suite: "efficiency", Target: target, Scale: 0.004})
			if len(run.Params.Sizes) != 4 || run.Params.Bytes != 167773 {
				t.Fatalf("params at scale 0.004: %+v", run.Params)
			}
			n := count(t, ops)
			files := 163 + 40 + 2 + 1
			if want := fmt.Sprint(map[string]int{"delete": files, "get": files, "put": files}); fmt.Sprint(n) != want {
				t.Fatalf("records %v, want %v", n, want)
			}
			if proto == "posix" {
				if run.Params.Extra["wire"] == "" {
					t.Fatalf("posix run does not say the wire was not measured: %+v", run.Params)
				}
				checkClean(t, proto, target, run)
				return
			}
			eff := map[string]float64{}
			for _, ph := range run.Phases {
				if ph.Name == "delete" {
					continue
				}
				wire := ph.WireUp + ph.WireDn
				if wire < ph.Payload || ph.Payload == 0 {
					t.Fatalf("%s: payload %d, wire %d", ph.Name, ph.Payload, wire)
				}
				eff[fmt.Sprintf("%s-%d", ph.Name, ph.Unit)] = float64(ph.Payload) / float64(wire)
			}
			t.Logf("%s efficiency: %v", proto, eff)
			for _, ph := range []string{"put", "get"} {
				if eff[ph+"-1024"] >= eff[ph+"-1048576"] {
					t.Errorf("%s: efficiency of 1 KiB files %.3f not below 1 MiB files' %.3f", ph, eff[ph+"-1024"], eff[ph+"-1048576"])
				}
			}
			checkClean(t, proto, target, run)
		})
	}
}
