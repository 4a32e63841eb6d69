// Command foliocost measures what the shape of a file's page cache costs a
// 4 KiB random buffered write on this kernel and file system: the CPU an
// iSCSI target spends on a LUN's random writes (ext4_block_write_begin was
// 49 % of tristore's CPU at QD 32, docs/bench/profiles/iscsi-randwrite-
// wr32-after.perf.txt; tgt, on the same file, pays the same) depends on
// whether the cache holds the file in large folios (made by sequential
// writes into an empty cache and by readahead) or in single pages (made by
// 4 KiB writes and by reads with readahead off). It prints random
// writes/s after each way of filling the cache, and what the ways that
// keep pages small cost sequential 1 MiB reads and writes.
//
//	go run ./scripts/bench/foliocost [-dir /var/tmp] [-size 256] [-rounds 2]
//
// A measurement tool, not a test: nothing here is asserted.
package main

import (
	"flag"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"
)

var size int64

func randw(f *os.File) float64 {
	w := make([]byte, 4096)
	r := rand.New(rand.NewSource(1))
	n := 0
	t0 := time.Now()
	for time.Since(t0) < 2*time.Second && n < 10_000_000 {
		f.WriteAt(w, int64(r.Int63n(size/4096))*4096)
		n++
	}
	f.Sync()
	return float64(n) / time.Since(t0).Seconds()
}

func seq(f *os.File, write bool, piece int) time.Duration {
	buf := make([]byte, 1<<20)
	t0 := time.Now()
	for off := int64(0); off < size; off += 1 << 20 {
		for o := 0; o < 1<<20; o += piece {
			if write {
				f.WriteAt(buf[o:o+piece], off+int64(o))
			} else {
				f.ReadAt(buf[o:o+piece], off+int64(o))
			}
		}
	}
	return time.Since(t0)
}

func load() string {
	b, _ := os.ReadFile("/proc/loadavg")
	if len(b) > 14 {
		b = b[:14]
	}
	return string(b)
}

func main() {
	dir := flag.String("dir", "/var/tmp", "directory for the test file (the file system under test)")
	mib := flag.Int64("size", 256, "file size, MiB")
	rounds := flag.Int("rounds", 2, "rounds")
	flag.Parse()
	size = *mib << 20
	p := filepath.Join(*dir, fmt.Sprintf("foliocost-%d.dat", os.Getpid()))
	defer os.Remove(p)
	var u unix.Utsname
	unix.Uname(&u)
	fmt.Printf("# kernel %s, file %s (%d MiB), %s\n", unix.ByteSliceToString(u.Release[:]), p, *mib, time.Now().UTC().Format(time.RFC3339))
	for r := 1; r <= *rounds; r++ {
		os.Remove(p)
		f, err := os.OpenFile(p, os.O_CREATE|os.O_RDWR, 0o644)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		fd := int(f.Fd())
		drop := func(advice int) {
			f.Sync()
			unix.Fadvise(fd, 0, 0, unix.FADV_DONTNEED)
			unix.Fadvise(fd, 0, 0, advice)
		}
		fmt.Printf("round %d, load %s\n", r, load())
		d := seq(f, true, 1<<20)
		fmt.Printf("  %-58s %9.0f writes/s  (fill %v)\n", "1 MiB writes into an empty cache (large folios)", randw(f), d.Round(time.Millisecond))
		drop(unix.FADV_NORMAL)
		cold, warm := seq(f, false, 1<<20), seq(f, false, 1<<20)
		fmt.Printf("  %-58s %9.0f writes/s  (1 MiB reads cold %v, warm %v)\n", "1 MiB reads, readahead on (large folios)", randw(f), cold.Round(time.Millisecond), warm.Round(time.Millisecond))
		drop(unix.FADV_RANDOM)
		cold, warm = seq(f, false, 1<<20), seq(f, false, 1<<20)
		fmt.Printf("  %-58s %9.0f writes/s  (1 MiB reads cold %v, warm %v)\n", "1 MiB reads, readahead off (FADV_RANDOM: pages)", randw(f), cold.Round(time.Millisecond), warm.Round(time.Millisecond))
		d = seq(f, true, 1<<20)
		fmt.Printf("  %-58s %9.0f writes/s  (1 MiB writes warm %v)\n", "then 1 MiB writes over those pages (pages stay)", randw(f), d.Round(time.Millisecond))
		drop(unix.FADV_NORMAL)
		cold, warm = seq(f, true, 4096), seq(f, true, 4096)
		fmt.Printf("  %-58s %9.0f writes/s  (as 4 KiB writes cold %v, warm %v)\n", "1 MiB written as 4 KiB writes into an empty cache", randw(f), cold.Round(time.Millisecond), warm.Round(time.Millisecond))
		f.Close()
	}
}
