// Command putfloor measures, on the file system of -dir and without any
// HTTP, the wall time of the system-call sequences a durable small PUT can
// be made of (create, write, fsync, rename, directory fsync; syncfs instead;
// O_TMPFILE; no fsync at all, as versitygw) and the floor of an intent log
// (a 4 KiB append to a preallocated file with fdatasync or O_DSYNC|O_DIRECT).
// With -par N it compares N writers in N directories making per-file fsyncs
// against the same writes committed by two syncfs rounds per group. Results:
// docs/bench/profiles/s3-put-s10.txt.
//
//	go run ./scripts/bench/putfloor -dir /var/tmp/x -n 300
//	go run ./scripts/bench/putfloor -dir /var/tmp/x -par 16 -n 800
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

func must(err error) {
	if err != nil {
		panic(err)
	}
}

func med(d []time.Duration) string {
	sort.Slice(d, func(i, j int) bool { return d[i] < d[j] })
	return fmt.Sprintf("p10 %6.0fus med %6.0fus p90 %6.0fus", float64(d[len(d)/10].Microseconds()), float64(d[len(d)/2].Microseconds()), float64(d[len(d)*9/10].Microseconds()))
}

func main() {
	dir := flag.String("dir", "/var/tmp/h70-floor", "")
	n := flag.Int("n", 300, "")
	size := flag.Int("size", 4096, "")
	par := flag.Int("par", 0, "with > 0: only the concurrent comparison, this many writers, each in its own directory")
	flag.Parse()
	if *par > 0 {
		concurrent(*dir, *par, *n, *size)
		return
	}
	os.RemoveAll(*dir)
	must(os.MkdirAll(*dir, 0o755))
	buf := make([]byte, *size)
	d, _ := os.Open(*dir)
	run := func(name string, f func(i int)) {
		ts := make([]time.Duration, *n)
		for i := 0; i < *n; i++ {
			t := time.Now()
			f(i)
			ts[i] = time.Since(t)
		}
		fmt.Printf("%-40s %s\n", name, med(ts))
	}
	put := func(i int, fsyncFile, fsyncDir, datasync bool, pre string) {
		tmp := filepath.Join(*dir, fmt.Sprintf(".tmp%d", i))
		fd, err := unix.Open(tmp, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL, 0o644)
		must(err)
		_, err = unix.Write(fd, buf)
		must(err)
		if fsyncFile {
			if datasync {
				must(unix.Fdatasync(fd))
			} else {
				must(unix.Fsync(fd))
			}
		}
		must(unix.Rename(tmp, filepath.Join(*dir, fmt.Sprintf("%s%d", pre, i))))
		unix.Close(fd)
		if fsyncDir {
			must(d.Sync())
		}
	}
	flush := func() { must(unix.Fsync(int(d.Fd()))) }
	sfs := func() { must(unix.Syncfs(int(d.Fd()))) }
	run("B create+write+syncfs+rename+syncfs", func(i int) {
		tmp := filepath.Join(*dir, fmt.Sprintf(".tmpB%d", i))
		fd, err := unix.Open(tmp, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL, 0o644)
		must(err)
		_, err = unix.Write(fd, buf)
		must(err)
		sfs()
		must(unix.Rename(tmp, filepath.Join(*dir, fmt.Sprintf("B%d", i))))
		unix.Close(fd)
		sfs()
	})
	run("B2 same + flush after each syncfs", func(i int) {
		tmp := filepath.Join(*dir, fmt.Sprintf(".tmpB%d", i))
		fd, err := unix.Open(tmp, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL, 0o644)
		must(err)
		_, err = unix.Write(fd, buf)
		must(err)
		sfs()
		flush()
		must(unix.Rename(tmp, filepath.Join(*dir, fmt.Sprintf("B2%d", i))))
		unix.Close(fd)
		sfs()
		flush()
	})
	run("C O_TMPFILE+write+fsync+link+rename+fsyncdir", func(i int) {
		fd, err := unix.Open(*dir, unix.O_RDWR|unix.O_TMPFILE, 0o644)
		must(err)
		_, err = unix.Write(fd, buf)
		must(err)
		must(unix.Fsync(fd))
		tmp := filepath.Join(*dir, fmt.Sprintf(".tmpC%d", i))
		must(unix.Linkat(unix.AT_FDCWD, fmt.Sprintf("/proc/self/fd/%d", fd), unix.AT_FDCWD, tmp, unix.AT_SYMLINK_FOLLOW))
		must(unix.Rename(tmp, filepath.Join(*dir, fmt.Sprintf("C%d", i))))
		unix.Close(fd)
		flush()
	})
	run("create+write+rename (vgw-like, new)", func(i int) { put(i, false, false, false, "a") })
	run("same, overwrite", func(i int) { put(i, false, false, false, "a") })
	run("create+write+fsync+rename+fsyncdir new", func(i int) { put(i, true, true, false, "b") })
	run("same, overwrite", func(i int) { put(i, true, true, false, "b") })
	run("create+write+fdatasync+rename+fsyncdir", func(i int) { put(i, true, true, true, "c") })
	run("create+write+fsync+rename (no dir)", func(i int) { put(i, true, false, false, "e") })
	run("fsync dir alone (clean)", func(i int) { must(d.Sync()) })
	run("syncfs alone", func(i int) { must(unix.Syncfs(int(d.Fd()))) })
	run("create+write+rename+syncfs", func(i int) { put(i, false, false, false, "f"); must(unix.Syncfs(int(d.Fd()))) })
	// O_DSYNC append log
	lf, err := unix.Open(filepath.Join(*dir, "log"), unix.O_RDWR|unix.O_CREAT, 0o644)
	must(err)
	must(unix.Fallocate(lf, 0, 0, int64(*n)*int64(*size)*2))
	// write zeros so the extents are written (not unwritten)
	z := make([]byte, 1<<20)
	for off := 0; off < *n**size*2; off += len(z) {
		unix.Pwrite(lf, z, int64(off))
	}
	must(unix.Fsync(lf))
	run("pwrite+fdatasync prealloc log", func(i int) {
		_, err := unix.Pwrite(lf, buf, int64(i)*int64(*size))
		must(err)
		must(unix.Fdatasync(lf))
	})
	unix.Close(lf)
	lf, err = unix.Open(filepath.Join(*dir, "log"), unix.O_RDWR|unix.O_DSYNC|unix.O_DIRECT, 0o644)
	must(err)
	al := make([]byte, *size+4096)
	off := 4096 - int(uintptr(unsafePtr(al))&4095)
	ab := al[off : off+*size]
	run("pwrite O_DSYNC|O_DIRECT prealloc log", func(i int) {
		_, err := unix.Pwrite(lf, ab, int64(i)*int64(*size))
		must(err)
	})
}

// concurrent compares, for par writers each in its own directory, the
// per-file path (create, write, fsync, rename, fsync dir; par goroutines)
// with a group commit by syncfs (the same files written by the same
// goroutines, one syncfs + flush before the renames and one after, shared by
// all par files of a round). Prints wall time per file.
func concurrent(root string, par, n, size int) {
	buf := make([]byte, size)
	dirs := make([]*os.File, par)
	for w := range par {
		p := filepath.Join(root, fmt.Sprintf("w%02d", w))
		must(os.MkdirAll(p, 0o755))
		d, err := os.Open(p)
		must(err)
		dirs[w] = d
	}
	rounds := n / par
	if rounds < 5 {
		rounds = 5
	}
	name := func(w, r int, pre string) string { return filepath.Join(dirs[w].Name(), fmt.Sprintf("%s%d", pre, r)) }
	write := func(p string) int {
		fd, err := unix.Open(p, unix.O_RDWR|unix.O_CREAT|unix.O_EXCL, 0o644)
		must(err)
		_, err = unix.Write(fd, buf)
		must(err)
		return fd
	}
	for rep := 0; rep < 2; rep++ {
		for _, pre := range []string{"a", "g"} {
			pre := fmt.Sprintf("%s%d-", pre, rep)
			t := time.Now()
			for r := range rounds {
				var wg sync.WaitGroup
				if pre[0] == 'a' {
					for w := range par {
						wg.Add(1)
						go func() {
							defer wg.Done()
							tmp := name(w, r, "."+pre)
							fd := write(tmp)
							must(unix.Fsync(fd))
							must(unix.Rename(tmp, name(w, r, pre)))
							unix.Close(fd)
							must(dirs[w].Sync())
						}()
					}
					wg.Wait()
					continue
				}
				fds := make([]int, par)
				for w := range par {
					wg.Add(1)
					go func() { defer wg.Done(); fds[w] = write(name(w, r, "."+pre)) }()
				}
				wg.Wait()
				must(unix.Syncfs(int(dirs[0].Fd())))
				must(unix.Fsync(int(dirs[0].Fd()))) // a flush after syncfs's last block-device writes
				for w := range par {
					must(unix.Rename(name(w, r, "."+pre), name(w, r, pre)))
					unix.Close(fds[w])
				}
				must(unix.Syncfs(int(dirs[0].Fd())))
				must(unix.Fsync(int(dirs[0].Fd())))
			}
			el := time.Since(t)
			kind := map[byte]string{'a': "per-file fsync+dir fsync", 'g': "group: syncfs+flush x2"}[pre[0]]
			fmt.Printf("par %2d %-28s %6.0f us per file, %5.0f files/s (%d rounds of %d)\n", par, kind, float64(el.Microseconds())/float64(rounds*par), float64(rounds*par)/el.Seconds(), rounds, par)
		}
	}
}
