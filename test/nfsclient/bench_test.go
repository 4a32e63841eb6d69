package nfsclient

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tristore/tristore/fusefs/nfstree"
)

// BenchmarkFUSE measures the FUSE mount (kernel -> nfstree -> client ->
// server) against tristore's server and ganesha, same disk, same run:
//
//	sudo go test -run '^$' -bench FUSE -benchtime 3x ./test/nfsclient/
//
// creates: 1000 files of 4 KiB, each create+write+close (durable at close);
// seqwrite: one 64 MiB file in 1 MiB write(2)s + close; seqread: the same
// file through a fresh mount (cold page cache) in 1 MiB read(2)s.
// The raw protocol figures (no FUSE) come from scripts/bench/nfs.sh.
func BenchmarkFUSE(b *testing.B) {
	dir := os.Getenv("BENCH_DIR")
	if dir == "" {
		dir = "/var/tmp"
	}
	base, err := os.MkdirTemp(dir, "nfsclient-bench-")
	if err != nil {
		b.Fatal(err)
	}
	defer os.RemoveAll(base)
	ours := filepath.Join(base, "tristore")
	os.Mkdir(ours, 0o755)
	targets := []*target{startOursProcess(b, ours)}
	g := startGanesha(b, base)
	targets = append(targets, &target{Name: "ganesha", Addr: g.NFSAddr, MountAddr: g.MntAddr, Export: g.Export, Dir: g.Export, Dial: g.Dialer(), ns: g.NS})
	for _, tg := range targets {
		b.Run(tg.Name, func(b *testing.B) {
			var creates, wr, rd float64
			for i := 0; i < b.N; i++ {
				c, w, r := fuseRound(b, tg, i)
				creates += c
				wr += w
				rd += r
			}
			n := float64(b.N)
			b.ReportMetric(creates/n, "creates/s")
			b.ReportMetric(wr/n, "write-MB/s")
			b.ReportMetric(rd/n, "read-MB/s")
		})
	}
}

func fuseRound(b *testing.B, tg *target, round int) (creates, writeMBps, readMBps float64) {
	mnt, unmount, _ := mountFUSETree(b, tg, nfstree.Options{})
	work := filepath.Join(mnt, fmt.Sprintf("bench-%d-%d", round, time.Now().UnixNano()))
	if err := os.Mkdir(work, 0o755); err != nil {
		b.Fatal(err)
	}
	small := make([]byte, 4096)
	const files = 1000
	start := time.Now()
	for i := 0; i < files; i++ {
		if err := os.WriteFile(filepath.Join(work, fmt.Sprintf("f%04d", i)), small, 0o644); err != nil {
			b.Fatal(err)
		}
	}
	creates = files / time.Since(start).Seconds()

	block := make([]byte, 1<<20)
	for i := range block {
		block[i] = byte(i * 31)
	}
	start = time.Now()
	f, err := os.Create(filepath.Join(work, "seq"))
	if err != nil {
		b.Fatal(err)
	}
	for i := 0; i < 64; i++ {
		if _, err := f.Write(block); err != nil {
			b.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	writeMBps = 64 * 1.048576 / time.Since(start).Seconds()
	unmount()

	mnt2, unmount2, _ := mountFUSETree(b, tg, nfstree.Options{})
	start = time.Now()
	f, err = os.Open(filepath.Join(mnt2, filepath.Base(work), "seq"))
	if err != nil {
		b.Fatal(err)
	}
	n, err := io.CopyBuffer(io.Discard, f, block)
	f.Close()
	if err != nil || n != 64<<20 {
		b.Fatalf("read %d bytes: %v", n, err)
	}
	readMBps = 64 * 1.048576 / time.Since(start).Seconds()
	os.RemoveAll(filepath.Join(mnt2, filepath.Base(work)))
	unmount2()
	return
}
