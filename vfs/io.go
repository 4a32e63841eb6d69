package vfs

import (
	"errors"
	"io"
	"os"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Stability is how durable a write must be before Write returns.
type Stability int

const (
	Unstable Stability = iota // in the page cache; durable after Commit
	DataSync                  // data (and size) on disk: fdatasync
	FileSync                  // data and all metadata on disk: fsync
)

// openAs reopens the object for I/O as c. Like knfsd, the owner may read
// and write their file even when its mode says otherwise (a client that
// created a read-only file still holds it open for writing).
func (fs *FS) openAs(c Cred, o *obj, flags int) (int, error) {
	var fd int
	err := fs.as(c, func() error {
		var err error
		fd, err = unix.Open(o.procPath(), flags|unix.O_CLOEXEC, 0)
		return err
	})
	if errors.Is(err, unix.EACCES) && c.UID == o.st.Uid && fs.switchID {
		fd, err = unix.Open(o.procPath(), flags|unix.O_CLOEXEC, 0)
	}
	return fd, err
}

func (fs *FS) regular(h Handle) (*obj, error) {
	o, err := fs.resolve(h)
	if err != nil {
		return nil, err
	}
	switch o.st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		return o, nil
	case unix.S_IFDIR:
		o.close()
		return nil, unix.EISDIR
	}
	o.close()
	return nil, unix.EINVAL
}

// Read reads up to len(buf) bytes at off as c. eof reports that the read
// reached the end of the file. The returned attributes are after the read.
func (fs *FS) Read(c Cred, h Handle, off uint64, buf []byte) (n int, eof bool, a Attr, err error) {
	return fs.read(c, h, off, buf, 0)
}

// read is Read with preadv2 flags (RWF_NOWAIT for ReadCached).
func (fs *FS) read(c Cred, h Handle, off uint64, buf []byte, flags int) (n int, eof bool, a Attr, err error) {
	f, st, err := fs.openRead(c, h)
	if err != nil {
		if st.Ino != 0 {
			a = fs.attrOf(&st)
		}
		return 0, false, a, err
	}
	defer f.release()
	a = fs.attrOf(&st)
	fd := f.fd
	for n < len(buf) {
		var m int
		var err error
		if flags != 0 {
			m, err = unix.Preadv2(fd, [][]byte{buf[n:]}, int64(off)+int64(n), flags)
		} else {
			m, err = unix.Pread(fd, buf[n:], int64(off)+int64(n))
		}
		if err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			if flags&unix.RWF_NOWAIT != 0 && (errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EOPNOTSUPP) || errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS)) {
				// Not cached, or a file system or kernel without
				// RWF_NOWAIT: either way the caller reads it with Read.
				return 0, false, a, ErrNotCached
			}
			return n, false, a, err
		}
		if m == 0 {
			break
		}
		n += m
	}
	if unix.Fstat(fd, &st) == nil {
		a = fs.attrOf(&st)
	}
	eof = off+uint64(n) >= a.Size
	return n, eof, a, nil
}

// ErrNotCached is ReadCached's answer when part of the range is not in the
// page cache: reading it would wait for the disk.
var ErrNotCached = errors.New("vfs: data not in the page cache")

// ReadCached is Read that never waits for the disk: it reads with
// RWF_NOWAIT and returns ErrNotCached (and nothing else) when the range
// up to the end of the file is not all in the page cache, or when the file
// system or kernel cannot tell (no RWF_NOWAIT). A server can
// then answer cached reads at once on the goroutine that read the request
// and hand the others to one that may block.
func (fs *FS) ReadCached(c Cred, h Handle, off uint64, buf []byte) (n int, eof bool, a Attr, err error) {
	return fs.read(c, h, off, buf, unix.RWF_NOWAIT)
}

// OpenRead opens a regular file for reading as c (same permission rules as
// Read) and returns it with its current attributes, for servers that send
// file data to a socket with sendfile(2) instead of copying it through
// user space. The caller closes the file.
func (fs *FS) OpenRead(c Cred, h Handle) (*os.File, Attr, error) {
	f, st, err := fs.openRead(c, h)
	if err != nil {
		var a Attr
		if st.Ino != 0 {
			a = fs.attrOf(&st)
		}
		return nil, a, err
	}
	defer f.release()
	a := fs.attrOf(&st)
	fd, err := unix.FcntlInt(uintptr(f.fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return nil, a, err
	}
	return os.NewFile(uintptr(fd), f.path), a, nil
}

// Write writes data at off as c and makes it as durable as asked before
// returning. Writes past the end leave a hole (sparse). before/after are the
// file's attributes around the write.
func (fs *FS) Write(c Cred, h Handle, off uint64, data []byte, how Stability) (n int, before, after Attr, err error) {
	if err := fs.writable(); err != nil {
		return 0, Attr{}, Attr{}, err
	}
	f, st0, err := fs.openWrite(c, h)
	if err != nil {
		if st0.Ino != 0 {
			before = fs.attrOf(&st0)
			after = before
		}
		return 0, before, after, err
	}
	defer f.release()
	before = fs.attrOf(&st0)
	after = before
	if off+uint64(len(data)) < off || off+uint64(len(data)) > 1<<62 {
		return 0, before, after, unix.EFBIG
	}
	fd := f.fd
	for n < len(data) {
		m, err := unix.Pwrite(fd, data[n:], int64(off)+int64(n))
		if err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return n, before, after, err
		}
		if m == 0 {
			return n, before, after, io.ErrShortWrite
		}
		n += m
	}
	var st unix.Stat_t
	stOK := unix.Fstat(fd, &st) == nil
	if stOK {
		after = fs.attrOf(&st) // syncing below changes no attribute
	}
	if n > 0 && stOK && st.Mtim == st0.Mtim {
		// The write landed in the same clock tick as the previous change
		// (kernel timestamps are tick-coarse). Move mtime on by 1 ns so every
		// data change is visible in mtime and ctime: NFS clients validate
		// their caches with them, and the posix store recomputes an object's
		// ETag when size or mtime differ from what it hashed. Done as the
		// server (only the owner may set times), before any sync below.
		t := st0.Mtim
		t.Nsec++
		if t.Nsec >= 1e9 {
			t.Sec, t.Nsec = t.Sec+1, 0
		}
		unix.UtimesNanoAt(unix.AT_FDCWD, fdPath(fd), []unix.Timespec{{Nsec: unix.UTIME_OMIT}, t}, 0)
		if stOK = unix.Fstat(fd, &st) == nil; stOK {
			after = fs.attrOf(&st)
		}
	}
	if stOK {
		f.rebase(&st)
	}
	switch {
	case faultSkip("nfs-write"):
	case how == DataSync:
		err = unix.Fdatasync(fd)
	case how == FileSync:
		err = unix.Fsync(fd)
	}
	return n, before, after, err
}

// Commit makes all earlier writes to h durable (fsync). The range is
// advisory; the whole file is flushed.
func (fs *FS) Commit(h Handle) (before, after Attr, err error) {
	return fs.CommitAs(Cred{}, h)
}

// CommitAs is Commit for a caller c: a file c has open for writing in the
// READ/WRITE cache (filecache.go) is flushed through that descriptor
// (the flush itself needs no permission), without resolving h.
func (fs *FS) CommitAs(c Cred, h Handle) (before, after Attr, err error) {
	if f, st, _ := fs.files.cached(cacheKey(c, h, true)); f != nil {
		defer f.release()
		before = fs.attrOf(&st)
		after = before
		if !faultSkip("nfs-commit") {
			err = unix.Fsync(f.fd)
		}
		if unix.Fstat(f.fd, &st) == nil {
			after = fs.attrOf(&st)
		}
		return before, after, err
	}
	o, err := fs.regular(h)
	if err != nil {
		return Attr{}, Attr{}, err
	}
	defer o.close()
	before = fs.attrOf(&o.st)
	after = before
	// Opened as the server: flushing is harmless and the file may no
	// longer be readable by the writer.
	fd, err := unix.Open(o.procPath(), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return before, after, err
	}
	defer unix.Close(fd)
	if !faultSkip("nfs-commit") {
		err = unix.Fsync(fd)
	}
	var st unix.Stat_t
	if unix.Fstat(fd, &st) == nil {
		after = fs.attrOf(&st)
	}
	return before, after, err
}

// ErrNoMap is MapCached's answer when the file cannot be mapped (a file
// system without mmap): read it with ReadCached instead.
var ErrNoMap = errors.New("vfs: file cannot be mapped")

// MapCached is ReadCached for a server that writes the data to a socket
// straight from the page cache: instead of copying up to n bytes at off
// into a buffer it maps them (read-only), so the data is copied once, by
// the socket write, not twice. Like ReadCached it never waits for the
// disk: ErrNotCached when part of the range is not in the page cache
// (mincore; a page evicted between that check and the socket write is
// read back by the kernel during the write). data is the range (empty at or past the end of the file);
// unmap releases the mapping and must be called once data is no longer in
// use, by the system call it was handed to.
//
// data must only be handed to system calls (writev), never read by Go
// code: if the file is truncated meanwhile, the kernel's copy from the
// vanished pages fails with EFAULT, where a read by Go code is a fatal
// SIGBUS.
func (fs *FS) MapCached(c Cred, h Handle, off uint64, n int) (data []byte, unmap func(), eof bool, a Attr, err error) {
	f, st, err := fs.openRead(c, h)
	if err != nil {
		if st.Ino != 0 {
			a = fs.attrOf(&st)
		}
		return nil, nil, false, a, err
	}
	a = fs.attrOf(&st)
	if off >= a.Size || n <= 0 {
		f.release()
		return nil, func() {}, off >= a.Size, a, nil
	}
	count := int(min(uint64(n), a.Size-off))
	base := off &^ (pageSize - 1)
	var m []byte // the pages that hold the range
	done := f.release
	if whole := f.mapping(int64(a.Size)); off+uint64(count) <= uint64(len(whole)) {
		m = whole[base : off+uint64(count)]
	} else {
		// Larger than when the file was first mapped (or not mapped
		// whole): this range alone.
		m, err = unix.Mmap(f.fd, int64(base), int(off-base)+count, unix.PROT_READ, unix.MAP_SHARED)
		if err != nil {
			f.release()
			return nil, nil, false, a, ErrNoMap
		}
		done = func() { unix.Munmap(m); f.release() }
	}
	if !inPageCache(f.fd, base, m) {
		done()
		return nil, nil, false, a, ErrNotCached
	}
	return m[off-base:], done, off+uint64(count) >= a.Size, a, nil
}

// noCachestat is set once cachestat(2) (Linux 6.5) turned out missing.
var noCachestat atomic.Bool

// inPageCache reports whether all of the file's pages from off (page
// aligned) that m maps are in the page cache. cachestat(2) counts them
// per folio (one step per 1 MiB folio); mincore(2), the fallback, looks
// each 4 KiB page up in the page cache when m's pages are not yet mapped
// in this process, which was 4-5 % of the server's CPU at 1 MiB READs
// (docs/bench/profiles/nfs-read-cache.txt).
func inPageCache(fd int, off uint64, m []byte) bool {
	pages := (uint64(len(m)) + pageSize - 1) / pageSize
	if !noCachestat.Load() {
		var cs unix.Cachestat_t
		err := unix.Cachestat(uint(fd), &unix.CachestatRange{Off: off, Len: uint64(len(m))}, &cs, 0)
		if err == nil {
			return cs.Cache >= pages
		}
		if !errors.Is(err, unix.ENOSYS) {
			return false
		}
		noCachestat.Store(true)
	}
	vec := make([]byte, pages)
	_, _, e := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(unsafe.SliceData(m))), uintptr(len(m)), uintptr(unsafe.Pointer(unsafe.SliceData(vec))))
	cached := e == 0
	for _, v := range vec {
		cached = cached && v&1 != 0
	}
	return cached
}
