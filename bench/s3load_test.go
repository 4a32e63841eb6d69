package bench_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/tristore/tristore/bench"
	"github.com/tristore/tristore/bench/drivertest"
)

// BenchmarkObjectsAgreesWithS3load validates the objects suite against the
// repository's S3 load generator (scripts/bench/s3load, issue 9's check for
// objects): 64 KiB objects at parallelism 4 against one loopback tristore,
// s3load for 2 s per phase, then `bench objects` with as many objects as
// s3load PUT, five rounds taking turns; the median bench/s3load throughput
// ratio of PUT and of GET must be within 10 %. A benchmark for the same
// reason as BenchmarkUnitsAgreesWithFio:
//
//	go test -run '^$' -bench ObjectsAgreesWithS3load -benchtime 1x ./bench/
func BenchmarkObjectsAgreesWithS3load(b *testing.B) {
	const size, par = 64 << 10, 4
	s := drivertest.Serve(b)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	load := filepath.Join(b.TempDir(), "s3load")
	if out, err := exec.CommandContext(ctx, "go", "build", "-o", load, "github.com/tristore/tristore/scripts/bench/s3load").CombinedOutput(); err != nil {
		b.Fatalf("building s3load: %v\n%s", err, out)
	}
	var put, get []float64
	var log []string
	for i := range 5 {
		var lput, lget, lops float64
		runLoad := func() {
			out, err := exec.CommandContext(ctx, load, "-endpoint", "http://"+s.S3Addr, "-access", drivertest.AccessKey,
				"-secret", drivertest.SecretKey, "-bucket", fmt.Sprintf("s3load%d", i), "-sizes", "64KiB",
				"-par", fmt.Sprint(par), "-duration", "2s", "-json").Output()
			if err != nil {
				b.Fatalf("s3load: %v\n%s", err, out)
			}
			var res []struct {
				Op        string  `json:"op"`
				Ops       int     `json:"ops"`
				MiBPerSec float64 `json:"mib_per_s"`
			}
			if err := json.Unmarshal(out, &res); err != nil || len(res) != 2 {
				b.Fatalf("s3load output %v: %s", err, out)
			}
			for _, r := range res {
				if r.Op == "PUT" {
					lput, lops = r.MiBPerSec*(1<<20)/1e6, float64(r.Ops)
				} else {
					lget = r.MiBPerSec * (1 << 20) / 1e6
				}
			}
		}
		var bput, bget float64
		runBench := func(n int) {
			out := filepath.Join(b.TempDir(), "res")
			if _, err := bench.Execute(ctx, bench.Config{Suite: "objects", Target: s.S3, Sizes: []int64{size}, Threads: []int{par},
				Count: n, Out: out, Options: bench.Options{AccessKey: drivertest.AccessKey, SecretKey: drivertest.SecretKey}}); err != nil {
				b.Fatal(err)
			}
			rows, err := bench.Summarize(out)
			if err != nil {
				b.Fatal(err)
			}
			for _, r := range rows {
				switch r.Phase {
				case "put":
					bput = r.MBps
				case "get":
					bget = r.MBps
				}
			}
		}
		if i%2 == 0 {
			runLoad()
			runBench(int(lops))
		} else {
			runBench(max(int(lops), 2000))
			runLoad()
		}
		put, get = append(put, bput/lput), append(get, bget/lget)
		log = append(log, fmt.Sprintf("PUT bench %.1f s3load %.1f, GET bench %.1f s3load %.1f MB/s", bput, lput, bget, lget))
	}
	agrees(b, "s3load", "put", put, log)
	agrees(b, "s3load", "get", get, log)
}
