// Command sendcost: what it costs to send a cached 4 MiB file over
// loopback TCP (SIZE_MIB=n for n MiB), by how the page cache was filled and how the bytes are
// sent (issue 14, S3 GET 4 MiB; behind 616071f's mapped GET, reverted in
// 99b05ec: the S3 rows did not show the gain this loop does).
//
//	go build -o /tmp/sendcost ./scripts/bench/sendcost
//	SEND=sf|mmap|mmapp|rw /tmp/sendcost willneed|readahead|populate|hugepopulate|pread|buffered
//	/tmp/sendcost stat FILE...   # folio sizes of cached files (root: /proc/kpageflags)
//
// It writes a 4 MiB file under /var/tmp with O_DIRECT (or buffered), reads
// it back into the page cache the chosen way (willneed = POSIX_FADV_WILLNEED,
// readahead(2), mmap + MADV_POPULATE_READ, the same with MADV_HUGEPAGE,
// buffered pread), prints the folio sizes in the cache (pages per folio:
// count), then 16 connections each send the file 40 times to 16 readers in
// the same process that read 8 KiB at a time (as s3load does): SEND=sf
// io.Copy from the *os.File (sendfile), mmap = write(2) from a mapping,
// mmapp = the same with MAP_POPULATE, rw = pread + write through a 1 MiB
// buffer. cpu is the process's user+system time (sender and receiver),
// the figure to compare on a shared machine; MiB/s depends on the load.
package main

import (
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// size: the file, SIZE_MIB MiB (default 4).
var size = 4 << 20

var sendMode string

func folios(path string) map[int]int {
	f, _ := os.Open(path)
	defer f.Close()
	m, err := unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		panic(err)
	}
	defer unix.Munmap(m)
	ps := os.Getpagesize()
	var s byte
	defer func() { _ = s }()
	vec := make([]byte, size/ps)
	unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m[0])), uintptr(size), uintptr(unsafe.Pointer(&vec[0])))
	for i := 0; i < size; i += ps {
		if vec[i/ps]&1 != 0 {
			s += *(*byte)(unsafe.Pointer(&m[i]))
		}
	}
	pm, _ := os.Open("/proc/self/pagemap")
	defer pm.Close()
	kf, _ := os.Open("/proc/kpageflags")
	defer kf.Close()
	hist := map[int]int{}
	run := 0
	base := uintptr(unsafe.Pointer(&m[0]))
	for i := 0; i < size/ps; i++ {
		var b [8]byte
		pm.ReadAt(b[:], int64((base/uintptr(ps)+uintptr(i))*8))
		e := binary.LittleEndian.Uint64(b[:])
		if e>>63 == 0 {
			hist[-1]++
			continue
		}
		pfn := e & (1<<55 - 1)
		kf.ReadAt(b[:], int64(pfn*8))
		fl := binary.LittleEndian.Uint64(b[:])
		head, tail := fl&(1<<15) != 0, fl&(1<<16) != 0
		if head || !tail {
			if run > 0 {
				hist[run]++
			}
			run = 1
			if !head {
				hist[1]++
				run = 0
			}
		} else {
			run++
		}
	}
	if run > 0 {
		hist[run]++
	}
	if s == 255 {
		fmt.Print("")
	}
	return hist
}

func main() {
	method := os.Args[1]
	if v, err := strconv.Atoi(os.Getenv("SIZE_MIB")); err == nil && v > 0 {
		size = v << 20
	}
	sendMode = os.Getenv("SEND")
	if method == "stat" {
		for _, p := range os.Args[2:] {
			fmt.Println(p, folios(p))
		}
		return
	}
	path := fmt.Sprintf("/var/tmp/h59-shape-%d", os.Getpid())
	defer os.Remove(path)
	buf, _ := unix.Mmap(-1, 0, size, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_ANON|unix.MAP_PRIVATE)
	for i := range buf {
		buf[i] = byte(i * 7)
	}
	fl := os.O_CREATE | os.O_RDWR | os.O_TRUNC
	if method != "buffered" {
		fl |= unix.O_DIRECT
	}
	f, err := os.OpenFile(path, fl, 0644)
	if err != nil {
		panic(err)
	}
	for off := 0; off < size; off += 1 << 20 {
		if _, err := f.Write(buf[off : off+1<<20]); err != nil {
			panic(err)
		}
	}
	f.Sync()
	f.Close()
	f, _ = os.Open(path)
	fd := int(f.Fd())
	t0 := time.Now()
	switch method {
	case "willneed":
		unix.Fadvise(fd, 0, int64(size), unix.FADV_WILLNEED)
	case "readahead":
		unix.Syscall(unix.SYS_READAHEAD, uintptr(fd), 0, uintptr(size))
	case "populate", "hugepopulate":
		m, err := unix.Mmap(fd, 0, size, unix.PROT_READ, unix.MAP_SHARED)
		if err != nil {
			panic(err)
		}
		if method == "hugepopulate" {
			if err := unix.Madvise(m, unix.MADV_HUGEPAGE); err != nil {
				fmt.Println("hugepage:", err)
			}
		}
		if err := unix.Madvise(m, 22 /*MADV_POPULATE_READ*/); err != nil {
			fmt.Println("populate:", err)
		}
		unix.Munmap(m)
	case "pread":
		b := make([]byte, 1<<20)
		for off := int64(0); off < int64(size); off += 1 << 20 {
			f.ReadAt(b, off)
		}
	}
	tra := time.Since(t0)
	// wait for async reads
	time.Sleep(200 * time.Millisecond)
	h := folios(path)
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	const reps = 40
	const par = 16
	done := make(chan bool, par)
	for i := 0; i < par; i++ {
		go func() {
			c, _ := ln.Accept()
			b := make([]byte, 8192)
			io.CopyBuffer(io.Discard, struct{ io.Reader }{c}, b)
			done <- true
		}()
	}
	var ru0, ru1 unix.Rusage
	unix.Getrusage(unix.RUSAGE_SELF, &ru0)
	t1 := time.Now()
	for i := 0; i < par; i++ {
		go func() {
			c, _ := net.Dial("tcp", ln.Addr().String())
			g, _ := os.Open(path)
			for i := 0; i < reps; i++ {
				switch sendMode {
				case "mmap", "mmapp":
					fl := unix.MAP_SHARED
					if sendMode == "mmapp" {
						fl |= unix.MAP_POPULATE
					}
					m, err := unix.Mmap(int(g.Fd()), 0, size, unix.PROT_READ, fl)
					if err != nil {
						panic(err)
					}
					if _, err := c.Write(m); err != nil {
						panic(err)
					}
					unix.Munmap(m)
				case "rw":
					b := make([]byte, 1<<20)
					for off := int64(0); off < int64(size); off += 1 << 20 {
						g.ReadAt(b, off)
						c.Write(b)
					}
				default:
					if _, err := io.Copy(c, &io.LimitedReader{R: g, N: int64(size)}); err != nil {
						panic(err)
					}
					g.Seek(0, 0)
				}
			}
			g.Close()
			c.Close()
		}()
	}
	for i := 0; i < par; i++ {
		<-done
	}
	d := time.Since(t1)
	unix.Getrusage(unix.RUSAGE_SELF, &ru1)
	cpu := time.Duration(ru1.Utime.Nano() + ru1.Stime.Nano() - ru0.Utime.Nano() - ru0.Stime.Nano())
	h2 := folios(path)
	fmt.Printf("%-5s %-12s readback %8v  folios(pages:count) %v  sent %d x %d MiB: %v = %.0f MiB/s, cpu %v (%v per MiB) after %v\n", sendMode, method, tra.Round(time.Microsecond), h, reps*par, size>>20, d.Round(time.Millisecond), float64(reps*par*(size>>20))/d.Seconds(), cpu.Round(time.Millisecond), (cpu / time.Duration(reps*par*(size>>20))).Round(time.Microsecond), h2)
}
