package netem

import (
	"context"
	"io"
	"net"
	"os"
	"testing"
	"time"

	"github.com/tristore/tristore/internal/testutil"
)

// BenchmarkLinkTCP pushes one TCP stream through an unlimited link (or
// NETEM_BENCH_RATE, e.g. 1gbit; plus NETEM_BENCH_DELAY one-way, e.g. 1ms; or NETEM_BENCH_PRESET) and reports the rate reached and
// the process CPU per Gbit/s (the forwarder is almost all of it; the
// sender and receiver here are the kernel's work plus a copy). Profile
// with -cpuprofile. Root only.
//
//	go test -run '^$' -bench LinkTCP -benchtime 2000x ./netem
func BenchmarkLinkTCP(b *testing.B) {
	testutil.NeedRoot(b, "network namespaces")
	var delay time.Duration
	if s := os.Getenv("NETEM_BENCH_DELAY"); s != "" {
		var err error
		if delay, err = time.ParseDuration(s); err != nil {
			b.Fatal(err)
		}
	}
	var rate int64
	if s := os.Getenv("NETEM_BENCH_RATE"); s != "" {
		var err error
		if rate, err = ParseRate(s); err != nil {
			b.Fatal(err)
		}
	}
	cfg := Symmetric(Dir{Delay: delay, Rate: rate})
	if p := os.Getenv("NETEM_BENCH_PRESET"); p != "" {
		var err error
		if cfg, err = PresetConfig(p); err != nil {
			b.Fatal(err)
		}
	}
	l, err := Start(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	ln, err := l.Listen(ServerSide, "tcp", net.JoinHostPort(l.ServerAddr().String(), "0"))
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	done := make(chan int64, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			done <- 0
			return
		}
		n, _ := io.Copy(io.Discard, c)
		c.Close()
		done <- n
	}()
	c, err := l.DialContext(context.Background(), "tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	buf := make([]byte, 64<<10)
	b.SetBytes(int64(len(buf)))
	var ru0 cpuTime
	ru0.read()
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		if _, err := c.Write(buf); err != nil {
			b.Fatal(err)
		}
	}
	c.Close()
	<-done
	el := time.Since(start)
	b.StopTimer()
	var ru1 cpuTime
	ru1.read()
	gbps := float64(b.N) * float64(len(buf)) * 8 / el.Seconds() / 1e9
	cpu := (ru1.total() - ru0.total()).Seconds() / el.Seconds()
	b.ReportMetric(gbps, "Gbit/s")
	b.ReportMetric(cpu/gbps, "cores/Gbit/s")
}
