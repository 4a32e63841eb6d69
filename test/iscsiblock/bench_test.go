package iscsiblock

import (
	"context"
	"testing"
	"time"

	"github.com/tristore/tristore/client/iscsi"
	iscsitgt "github.com/tristore/tristore/frontend/iscsi"
)

// BenchmarkOurs4KRandReadQD32 measures the initiator + our target in one
// process (go test -bench Ours -cpuprofile to see where time goes).
// The cross-target comparison with tgt is scripts/bench/iscsi-initiator.sh.
func BenchmarkOurs4KRandReadQD32(b *testing.B) { benchOurs(b, "randread", 4096, 32) }

// BenchmarkOurs4KRandWriteQD32 is the write counterpart.
func BenchmarkOurs4KRandWriteQD32(b *testing.B) { benchOurs(b, "randwrite", 4096, 32) }

// BenchmarkOurs1MSeqWriteQD4 measures large sequential writes (R2T path).
func BenchmarkOurs1MSeqWriteQD4(b *testing.B) { benchOurs(b, "write", 1<<20, 4) }

func benchOurs(b *testing.B, pattern string, bs, qd int) {
	tg := startOurs(b, 256<<20, iscsitgt.CHAPConfig{})
	ctx := context.Background()
	s, err := iscsi.Open(ctx, iscsi.Config{Portal: tg.Portal, Target: tg.IQN, QueueDepth: qd})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	b.SetBytes(int64(bs))
	b.ResetTimer()
	r, err := iscsi.Bench(ctx, s, iscsi.BenchConfig{Pattern: pattern, BlockSize: bs, QueueDepth: qd, MaxOps: int64(b.N), Duration: 10 * time.Minute}, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(r.IOPS, "IOPS")
	b.ReportMetric(r.P99us, "p99-µs")
}

// BenchmarkOurs1MSeqReadQD4 measures large sequential reads (Data-In path).
func BenchmarkOurs1MSeqReadQD4(b *testing.B) { benchOurs(b, "read", 1<<20, 4) }
