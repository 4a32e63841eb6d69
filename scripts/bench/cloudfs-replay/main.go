// Command cloudfs-replay is the file-access trace behind
// scripts/bench/cloudfs.sh (seed 001 §6.3): it makes a set of files whose
// sizes follow a long-tailed distribution (-setup), then replays a
// generated sequence of reads and writes against them and reports the
// average read and write latency as the application sees it (each
// pread/pwrite timed; the kernel's page cache is part of the client, as
// it is for every file system compared). Every file is opened before the
// first access and closed after the last; closing them all is timed on
// its own (close_seconds), since that is where some file systems upload
// what was written.
//
// The trace: files picked with a Zipf law (a few hot files), each access a
// 64 KiB read or write, continuing sequentially from that file's last
// access with probability -seq, else at a random offset; -write of the
// accesses are writes (in place, the size never changes). The same -seed
// gives the same files and the same trace on every file system.
//
// The seed paper replays a converted NFS trace (4.8 GB, mean file 12.9 MB)
// against a 200 MB cache; this trace keeps the shape (long-tailed sizes,
// skewed popularity, sequential runs, a cache far smaller than the data)
// at a size a loaded 2-core machine and the emulated link can run in
// minutes: see -files, -max-size and the script's cache size.
package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"syscall"
	"time"
)

func main() {
	dir := flag.String("dir", "", "directory to use (a mount)")
	setup := flag.Bool("setup", false, "create the files instead of replaying")
	files := flag.Int("files", 40, "number of files")
	minSize := flag.Int64("min-size", 16<<10, "smallest file")
	maxSize := flag.Int64("max-size", 8<<20, "largest file (sizes are log-uniform between)")
	requests := flag.Int("requests", 600, "accesses to replay")
	writes := flag.Float64("write", 0.25, "fraction of accesses that write")
	seq := flag.Float64("seq", 0.7, "probability an access continues where the last one on that file ended")
	seed := flag.Uint64("seed", 1, "trace seed")
	progress := flag.Duration("progress", 10*time.Second, "print progress to stderr this often (0: never)")
	trace := flag.String("trace", "", "write one line per access to this file: op, file, offset, bytes, ms")
	budget := flag.Float64("max-seconds", 0, "stop replaying after this many seconds (0: never); the output says how many accesses were done")
	flag.Parse()
	if *dir == "" {
		fmt.Fprintln(os.Stderr, "cloudfs-replay: -dir is required")
		os.Exit(2)
	}
	r := rand.New(rand.NewPCG(*seed, 42))
	sizes := make([]int64, *files)
	for i := range sizes {
		lo, hi := math.Log(float64(*minSize)), math.Log(float64(*maxSize))
		sizes[i] = int64(math.Exp(lo + r.Float64()*(hi-lo)))
	}
	name := func(i int) string { return filepath.Join(*dir, fmt.Sprintf("f%03d", i)) }
	if *setup {
		buf := make([]byte, 1<<20)
		start, last := time.Now(), time.Now()
		for i, sz := range sizes {
			if *progress > 0 && time.Since(last) >= *progress {
				last = time.Now()
				fmt.Fprintf(os.Stderr, "setup: %d/%d files, %.0f s\n", i, len(sizes), time.Since(start).Seconds())
			}
			f, err := os.Create(name(i))
			if err != nil {
				fail(err)
			}
			for off := int64(0); off < sz; off += int64(len(buf)) {
				for j := range buf {
					buf[j] = byte(r.Uint32())
				}
				if _, err := f.WriteAt(buf[:min(int64(len(buf)), sz-off)], off); err != nil {
					fail(err)
				}
			}
			// A signal (Go's runtime preempts with SIGURG) during close(2)
			// interrupts the FUSE flush, and tristore's mount answers EINTR
			// (its close-time upload is cancelled; the chunks stay dirty
			// and are uploaded by the write-back or at unmount, which the
			// benchmark waits for). The fd is closed either way.
			if err := f.Close(); err != nil && !errors.Is(err, syscall.EINTR) {
				fail(err)
			} else if err != nil {
				fmt.Fprintln(os.Stderr, "setup: close:", err, "(the data stays dirty in the cache until unmount)")
			}
		}
		return
	}
	fds := make([]*os.File, *files)
	for i := range fds {
		f, err := os.OpenFile(name(i), os.O_RDWR, 0)
		if err != nil {
			fail(err)
		}
		fds[i] = f
	}
	var tr *os.File
	if *trace != "" {
		var err error
		if tr, err = os.Create(*trace); err != nil {
			fail(err)
		}
		defer tr.Close()
	}
	zipf := rand.NewZipf(r, 1.2, 1, uint64(*files-1))
	cursor := make([]int64, *files)
	buf := make([]byte, 64<<10)
	var rsum, wsum time.Duration
	var rn, wn int
	start := time.Now()
	last := start
	done := 0
	for k := 0; k < *requests; k++ {
		if *budget > 0 && time.Since(start).Seconds() >= *budget {
			fmt.Fprintf(os.Stderr, "replay: time budget of %.0f s used up after %d of %d accesses\n", *budget, k, *requests)
			break
		}
		done = k + 1
		if *progress > 0 && time.Since(last) >= *progress {
			last = time.Now()
			fmt.Fprintf(os.Stderr, "replay: %d/%d accesses, %.0f s\n", k, *requests, time.Since(start).Seconds())
		}
		i := int(zipf.Uint64())
		sz := sizes[i]
		off := cursor[i]
		if r.Float64() >= *seq || off >= sz {
			off = r.Int64N(max(sz-int64(len(buf)), 1)) / 4096 * 4096
		}
		n := min(int64(len(buf)), sz-off)
		if r.Float64() < *writes {
			for j := range buf[:n] {
				buf[j] = byte(r.Uint32())
			}
			t := time.Now()
			if _, err := fds[i].WriteAt(buf[:n], off); err != nil {
				fail(err)
			}
			d := time.Since(t)
			wsum += d
			wn++
			if tr != nil {
				fmt.Fprintf(tr, "w %d %d %d %.3f\n", i, off, n, float64(d.Microseconds())/1000)
			}
		} else {
			t := time.Now()
			if _, err := fds[i].ReadAt(buf[:n], off); err != nil {
				fail(err)
			}
			d := time.Since(t)
			rsum += d
			rn++
			if tr != nil {
				fmt.Fprintf(tr, "r %d %d %d %.3f\n", i, off, n, float64(d.Microseconds())/1000)
			}
		}
		cursor[i] = off + n
	}
	secs := time.Since(start).Seconds()
	// Closing every file, timed apart from the accesses: where s3fs
	// uploads what was written (and tristore with --s3-flush-on-close
	// its dirty chunks); rclone returns and uploads after.
	t := time.Now()
	for _, f := range fds {
		if err := f.Close(); err != nil && !errors.Is(err, syscall.EINTR) {
			fail(err)
		}
	}
	closeSecs := time.Since(t).Seconds()
	var total int64
	for _, s := range sizes {
		total += s
	}
	out := map[string]any{"reads": rn, "writes": wn, "files": *files, "bytes": total, "complete": done == *requests,
		"read_avg_ms": ms(rsum, rn), "write_avg_ms": ms(wsum, wn), "seconds": secs, "close_seconds": closeSecs}
	json.NewEncoder(os.Stdout).Encode(out)
}

func ms(d time.Duration, n int) float64 {
	if n == 0 {
		return 0
	}
	return float64(d) / float64(n) / 1e6
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "cloudfs-replay:", err)
	os.Exit(1)
}
