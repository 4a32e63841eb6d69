// Command nfsreadprof is a profiling loop for the 64 MiB read row of
// scripts/bench/nfs.sh: it writes one file to each server the way
// `tristore nfs bench` does (parallel UNSTABLE WRITEs of wsize + COMMIT),
// then reads it back with client/nfs's ReadAt READS times per side,
// alternating sides, and prints each side's MB/s (min/median/max). With
// -cpuprofile it writes a Go CPU profile of this process (the client) per
// side; the servers' profiles are taken from outside (tristore serve
// --pprof, perf for ganesha). With -shape, it reports how the page cache
// holds the server's copy of the file (large folios or single pages, from
// /proc/kpageflags; root only), because on this kernel a file cached in
// 4 KiB pages reads about 2x slower than one in large folios
// (scripts/bench/foliocost).
//
//	nfsreadprof -side name=host:port,/export[,mountport][,/local/dir] ... [-size 64] [-reads 20]
//	nfsreadprof -shape FILE...    # only the page-cache shape of local files
//
// Run it where the servers are reachable (ip netns exec NS ...). A
// measurement tool, not a test: nothing here is asserted.
package main

import (
	"cmp"
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/tristore/tristore/client/nfs"
)

type side struct {
	name, addr, export, mountAddr, local string
	c                                    *nfs.Client
	fh                                   nfs.FH
	mbps                                 []float64
	prev                                 string    // the last -rewrite file, removed at the next
	pid                                  int       // server process, for its CPU time per read
	cliCPU, srvCPU                       []float64 // ms of CPU per read
}

type sides []*side

func (s *sides) String() string { return "" }
func (s *sides) Set(v string) error {
	name, rest, ok := strings.Cut(v, "=")
	f := strings.Split(rest, ",")
	if !ok || len(f) < 2 {
		return fmt.Errorf("want name=host:port,/export[,mountport][,/local/dir]")
	}
	sd := &side{name: name, addr: f[0], export: f[1]}
	if len(f) > 2 && f[2] != "" {
		host, _, _ := strings.Cut(f[0], ":")
		sd.mountAddr = host + ":" + f[2]
	}
	if len(f) > 3 {
		sd.local = f[3]
	}
	*s = append(*s, sd)
	return nil
}

func main() {
	var ss sides
	flag.Var(&ss, "side", "name=host:port,/export[,mountport][,/local/export/dir] (repeat)")
	mib := flag.Int("size", 64, "file size, MiB")
	reads := flag.Int("reads", 20, "reads per side")
	par := flag.Int("parallel", 0, "READs in flight (0: the client's default)")
	rsize := flag.Int("rsize", 0, "largest READ to ask for (0: the client's default; the server's rtmax caps it)")
	cpuprof := flag.String("cpuprofile", "", "write the client's CPU profile of each read to DIR/<side>-<n>.pprof (merge with go tool pprof DIR/<side>-*)")
	var pids []string
	flag.Func("pid", "name=PID: the server process of side name, whose CPU time per read is reported (repeat)", func(v string) error { pids = append(pids, v); return nil })
	freshBuf := flag.Bool("freshbuf", false, "read into a newly allocated buffer each time (as tristore nfs bench does: the page faults count)")
	freshPages := flag.Bool("freshpages", false, "read into newly mapped anonymous memory each time, never touched before (as tristore nfs bench does in a new process: the kernel faults its pages in during the READs)")
	freshConn := flag.Bool("freshconn", false, "read over a new connection each time (as tristore nfs bench does)")
	rewrite := flag.Bool("rewrite", false, "before each read, write the file anew (a new file, UNSTABLE WRITEs + COMMIT) as tristore nfs bench does: its read is the first after the write")
	existing := flag.String("file", "", "read this existing file (in each export's root, -size MiB long; its content is not checked) instead of writing one")
	shape := flag.Bool("shape", false, "report the page-cache shape of each side's file (needs the local dir; root)")
	flag.Parse()
	if *shape && len(ss) == 0 {
		// Just report the cache shape of the files named.
		for _, p := range flag.Args() {
			fmt.Printf("%s: %s\n", p, folioShape(p))
		}
		return
	}
	ctx := context.Background()
	mode := uint32(0o644)
	for _, v := range pids {
		name, p, _ := strings.Cut(v, "=")
		for _, s := range ss {
			if s.name == name {
				s.pid, _ = strconv.Atoi(p)
			}
		}
	}
	size := *mib << 20
	data := make([]byte, size)
	for i := 0; i < size; i += 4096 {
		data[i] = byte(i >> 12)
	}
	name := fmt.Sprintf("nfsreadprof-%d", os.Getpid())
	for _, s := range ss {
		c, err := nfs.Dial(ctx, s.addr, nfs.Options{MountAddr: s.mountAddr, Parallel: *par, Rsize: uint32(*rsize)})
		must(err)
		root, err := c.Mount(ctx, s.export)
		must(err)
		var fh nfs.FH
		if *existing != "" {
			fh, _, err = c.Lookup(ctx, root, *existing)
			must(err)
		} else {
			fh, _, err = c.Create(ctx, root, name, nfs.Guarded, nfs.SetAttr{Mode: &mode}, nfs.Verifier{})
			must(err)
			must(c.WriteFile(ctx, fh, data, nfs.Unstable))
			defer c.Remove(ctx, root, name)
		}
		s.c, s.fh = c, fh
		if *shape && s.local != "" {
			fmt.Printf("%s before reads: %s\n", s.name, folioShape(filepath.Join(s.local, cmp.Or(*existing, name))))
		}
	}
	back := make([]byte, size)
	for r := 0; r < *reads; r++ {
		for i := range ss {
			s := ss[(i+r)%len(ss)]
			c := s.c
			if *freshConn {
				var err error
				c, err = nfs.Dial(ctx, s.addr, nfs.Options{MountAddr: s.mountAddr, Parallel: *par, Rsize: uint32(*rsize)})
				must(err)
				_, err = c.Mount(ctx, s.export)
				must(err)
			}
			if *rewrite && *existing == "" {
				root, err := c.Mount(ctx, s.export)
				must(err)
				rn := fmt.Sprintf("%s-r%d", name, r)
				fh, _, err := c.Create(ctx, root, rn, nfs.Guarded, nfs.SetAttr{Mode: &mode}, nfs.Verifier{})
				must(err)
				must(c.WriteFile(ctx, fh, data, nfs.Unstable))
				if s.prev != "" {
					c.Remove(ctx, root, s.prev)
				}
				s.prev, s.fh = rn, fh
			}
			if *freshBuf {
				back = make([]byte, size)
			}
			if *freshPages {
				m, err := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_PRIVATE|unix.MAP_ANONYMOUS)
				must(err)
				back = m
			}
			var prof *os.File
			if *cpuprof != "" {
				var err error
				prof, err = os.Create(filepath.Join(*cpuprof, fmt.Sprintf("%s-%03d.pprof", s.name, r)))
				must(err)
				must(pprof.StartCPUProfile(prof))
			}
			c0, s0 := selfCPU(), procCPU(s.pid)
			t0 := time.Now()
			n, err := c.ReadAt(ctx, s.fh, back, 0)
			d := time.Since(t0)
			s.cliCPU = append(s.cliCPU, (selfCPU()-c0).Seconds()*1e3)
			if s.pid != 0 {
				s.srvCPU = append(s.srvCPU, (procCPU(s.pid)-s0).Seconds()*1e3)
			}
			if prof != nil {
				pprof.StopCPUProfile()
				prof.Close()
			}
			must(err)
			if *freshConn {
				c.Close()
			}
			if n != size || *existing == "" && string(back) != string(data) {
				must(fmt.Errorf("%s: read back differs", s.name))
			}
			s.mbps = append(s.mbps, float64(size)/1e6/d.Seconds())
			if *freshPages {
				unix.Munmap(back)
			}
		}
	}
	for _, s := range ss {
		if s.prev != "" {
			if root, err := s.c.Mount(ctx, s.export); err == nil {
				s.c.Remove(ctx, root, s.prev)
			}
		}
		if *shape && s.local != "" {
			fmt.Printf("%s after reads: %s\n", s.name, folioShape(filepath.Join(s.local, cmp.Or(*existing, name))))
		}
		fmt.Printf("%-16s rsize %d: %d reads of %d MiB: MB/s %s; client CPU ms/read %s", s.name, s.c.Rsize(), len(s.mbps), *mib, mmm(s.mbps), mmm(s.cliCPU))
		if s.pid != 0 {
			fmt.Printf("; server CPU ms/read %s", mmm(s.srvCPU))
		}
		fmt.Println()
	}
}

// mmm is "min / median / max" of v.
func mmm(v []float64) string {
	m := slices.Clone(v)
	slices.Sort(m)
	return fmt.Sprintf("%.0f / %.0f / %.0f", m[0], m[len(m)/2], m[len(m)-1])
}

// selfCPU is this process's user+system time.
func selfCPU() time.Duration {
	var ru unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// procCPU is the time process pid's threads have run (the sum of
// /proc/PID/task/*/schedstat, ns; 0 for pid 0). Threads that ended between
// two readings are missed, which only lowers the figure.
func procCPU(pid int) time.Duration {
	if pid == 0 {
		return 0
	}
	ts, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/schedstat", pid))
	var sum int64
	for _, t := range ts {
		b, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		f := strings.Fields(string(b))
		if len(f) > 0 {
			n, _ := strconv.ParseInt(f[0], 10, 64)
			sum += n
		}
	}
	return time.Duration(sum)
}

// folioShape maps the file, finds the physical page of each cached page
// (/proc/self/pagemap) and counts heads of large folios, their tail pages
// and single pages (/proc/kpageflags bits 15 and 16).
func folioShape(p string) string {
	f, err := os.Open(p)
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	st, _ := f.Stat()
	n := int(st.Size()+4095) / 4096
	if n == 0 {
		return "empty"
	}
	m, err := unix.Mmap(int(f.Fd()), 0, n*4096, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return err.Error()
	}
	defer unix.Munmap(m)
	vec := make([]byte, n)
	if _, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(len(m)), uintptr(unsafe.Pointer(&vec[0]))); e != 0 {
		return e.Error()
	}
	pm, err := os.Open("/proc/self/pagemap")
	if err != nil {
		return err.Error()
	}
	defer pm.Close()
	kf, err := os.Open("/proc/kpageflags")
	if err != nil {
		return err.Error()
	}
	defer kf.Close()
	var cached, heads, tails, single int
	base := uintptr(unsafe.Pointer(&m[0]))
	b := make([]byte, 8)
	for i := 0; i < n; i++ {
		if vec[i]&1 == 0 {
			continue // not cached: touching it would read it in
		}
		cached++
		Sink ^= m[i*4096] // map the cached page (no I/O)
		if _, err := pm.ReadAt(b, int64((base/4096+uintptr(i))*8)); err != nil {
			return err.Error()
		}
		e := binary.LittleEndian.Uint64(b)
		if e&(1<<63) == 0 {
			continue
		}
		pfn := e & (1<<55 - 1)
		if _, err := kf.ReadAt(b, int64(pfn*8)); err != nil {
			return err.Error()
		}
		fl := binary.LittleEndian.Uint64(b)
		switch {
		case fl&(1<<15) != 0:
			heads++
		case fl&(1<<16) != 0:
			tails++
		default:
			single++
		}
	}
	avg := 0.0
	if heads > 0 {
		avg = float64(heads+tails) / float64(heads) * 4
	}
	return fmt.Sprintf("%d of %d pages cached: %d large folios (avg %.0f KiB) holding %d pages, %d single 4 KiB pages", cached, n, heads, avg, heads+tails, single)
}

// Sink keeps the page touches from being optimised away.
var Sink byte

func must(err error) {
	if err != nil {
		fmt.Fprintln(os.Stderr, "nfsreadprof:", err)
		os.Exit(1)
	}
}
