package bench

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/tristore/tristore/client/nfs"
)

// FileIO says how a program does its I/O on a file: the bytes it asks for
// per read and per write, and whether they go through a C stdio buffer
// (StdioBuffer bytes, as glibc's for a file on a 4 KiB-block file system),
// so that the system calls are those of the program being reproduced.
type FileIO struct {
	ReadBlock, WriteBlock int
	Buffered              bool
}

// StdioBuffer is the stdio buffer size FileIO.Buffered stands for.
const StdioBuffer = 4096

// The stdio-like buffers are reused (as malloc reuses fclose's): a fresh
// 4 KiB per file operation made the garbage collector run ~60 times a
// second at PostMark's pace on tmpfs.
var (
	stdioWriters = sync.Pool{New: func() any { return bufio.NewWriterSize(nil, StdioBuffer) }}
	stdioReaders = sync.Pool{New: func() any { return bufio.NewReaderSize(nil, StdioBuffer) }}
)

// FileOps is what a file benchmark (postmark) does to a file, done as an
// application does it on each protocol rather than as the whole-file Put
// and Get (which make a write durable on return). Drivers without it get
// the whole-file fallback (see fileOpsOf).
type FileOps interface {
	// CreateFile creates or truncates name and writes data.
	CreateFile(ctx context.Context, name string, data []byte, fio FileIO) error
	// AppendFile appends data to name, whose size is size.
	AppendFile(ctx context.Context, name string, size int64, data []byte, fio FileIO) error
	// ReadFile reads name from its start into buf (sized to the file).
	ReadFile(ctx context.Context, name string, buf []byte, fio FileIO) (int, error)
}

// fileOps is the FileOps a suite uses on a driver, with a line for
// run.json saying what a file operation is on it.
type fileOps struct {
	FileOps
	desc string
}

func (f fileOps) describe() string { return f.desc }

func fileOpsOf(d Driver) fileOps {
	if fo, ok := d.(FileOps); ok {
		desc := "the driver's own file operations"
		if dd, ok := d.(interface{ fileOpsDesc() string }); ok {
			desc = dd.fileOpsDesc()
		}
		return fileOps{fo, d.Protocol() + ": " + desc}
	}
	return fileOps{wholeFileOps{d}, d.Protocol() + ": create = Put, read = Get, append = Get + Put of the longer file (no append in the protocol: the client rewrites the whole file or object)"}
}

// fileOpsDesc says what FileOps do on a directory, also for the drivers
// that embed POSIX (fuse+nfs://, ext4+iscsi://).
func (d *POSIX) fileOpsDesc() string {
	return "open, write(2)/read(2) of write_block/read_block bytes (through a 4 KiB stdio-like buffer when buffered), close; never fsync (as PostMark)"
}

func (d *NFS) fileOpsDesc() string {
	return "create = CREATE + WRITEs + COMMIT, append = WRITEs at the end + COMMIT (a kernel client's close-to-open flush; one FILE_SYNC WRITE when it fits), read = READs; no client cache"
}

// wholeFileOps does file operations with whole-file Put and Get.
type wholeFileOps struct{ d Driver }

func (w wholeFileOps) CreateFile(ctx context.Context, name string, data []byte, _ FileIO) error {
	return w.d.Put(ctx, name, data)
}

func (w wholeFileOps) ReadFile(ctx context.Context, name string, buf []byte, _ FileIO) (int, error) {
	n, _, err := w.d.Get(ctx, name, buf)
	return n, err
}

func (w wholeFileOps) AppendFile(ctx context.Context, name string, size int64, data []byte, _ FileIO) error {
	buf := make([]byte, size+int64(len(data)))
	n, _, err := w.d.Get(ctx, name, buf[:size])
	if err != nil {
		return fmt.Errorf("append to %s: reading it: %w", name, err)
	}
	if int64(n) != size {
		return fmt.Errorf("append to %s: it holds %d bytes, not %d", name, n, size)
	}
	copy(buf[size:], data)
	return w.d.Put(ctx, name, buf)
}

// fdWriter and fdReader are a file descriptor as io.Writer/io.Reader with
// plain system calls (os.File would also try to register each regular file
// with the poller: one more system call per open than the C program).
type fdWriter int

func (fd fdWriter) Write(p []byte) (int, error) {
	done := 0
	for done < len(p) {
		n, err := unix.Write(int(fd), p[done:])
		if err != nil {
			return done, err
		}
		done += n
	}
	if len(p) == 0 { // as write(fd, p, 0): C programs do it too
		if _, err := unix.Write(int(fd), p); err != nil {
			return 0, err
		}
	}
	return done, nil
}

type fdReader int

func (fd fdReader) Read(p []byte) (int, error) { return unix.Read(int(fd), p) }

func (d *POSIX) writeBlocks(name string, flags int, data []byte, fio FileIO) (err error) {
	fd, err := unix.Open(d.path(name), flags|unix.O_CLOEXEC, 0o644)
	if err != nil {
		return fmt.Errorf("open %s: %w", name, err)
	}
	defer func() {
		if cerr := unix.Close(fd); err == nil && cerr != nil {
			err = fmt.Errorf("close %s: %w", name, cerr)
		}
	}()
	bs := max(fio.WriteBlock, 1)
	if fio.Buffered {
		// fwrite of bs-byte pieces through a stdio buffer, then fclose.
		w := stdioWriters.Get().(*bufio.Writer)
		defer stdioWriters.Put(w)
		w.Reset(fdWriter(fd))
		for off := 0; off < len(data); off += bs {
			if _, err := w.Write(data[off:min(len(data), off+bs)]); err != nil {
				return fmt.Errorf("write %s: %w", name, err)
			}
		}
		if err := w.Flush(); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
		return nil
	}
	// write(2) of each whole block, then of the remainder (even if empty,
	// as PostMark's write_blocks does).
	off := 0
	for ; len(data)-off >= bs; off += bs {
		if _, err := fdWriter(fd).Write(data[off : off+bs]); err != nil {
			return fmt.Errorf("write %s: %w", name, err)
		}
	}
	if _, err := fdWriter(fd).Write(data[off:]); err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	return nil
}

// CreateFile is fopen(name, "w") (or open O_CREAT without buffering),
// writes of fio.WriteBlock bytes, close. No fsync: the data stays in the
// page cache, as PostMark leaves it.
func (d *POSIX) CreateFile(ctx context.Context, name string, data []byte, fio FileIO) error {
	return d.writeBlocks(name, unix.O_WRONLY|unix.O_CREAT|unix.O_TRUNC, data, fio)
}

// AppendFile is fopen(name, "a"): writes at the end, whatever size says.
func (d *POSIX) AppendFile(ctx context.Context, name string, size int64, data []byte, fio FileIO) error {
	return d.writeBlocks(name, unix.O_WRONLY|unix.O_APPEND|unix.O_CREAT, data, fio)
}

// ReadFile is fopen(name, "r") (or open), reads of fio.ReadBlock bytes,
// close.
func (d *POSIX) ReadFile(ctx context.Context, name string, buf []byte, fio FileIO) (n int, err error) {
	fd, err := unix.Open(d.path(name), unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return 0, fmt.Errorf("open %s: %w", name, err)
	}
	defer func() {
		if cerr := unix.Close(fd); err == nil && cerr != nil {
			err = fmt.Errorf("close %s: %w", name, cerr)
		}
	}()
	bs := max(fio.ReadBlock, 1)
	var r io.Reader = fdReader(fd)
	if fio.Buffered {
		br := stdioReaders.Get().(*bufio.Reader)
		defer stdioReaders.Put(br)
		br.Reset(fdReader(fd))
		r = br
	}
	// Whole blocks, then the remainder, each read until it is full or the
	// file ends (fread's loop; read(2) of a local file is not short
	// before the end).
	for n < len(buf) {
		want := min(bs, len(buf)-n)
		m, err := r.Read(buf[n : n+want])
		n += m
		if err == io.EOF {
			break
		}
		if err != nil {
			return n, fmt.Errorf("read %s: %w", name, err)
		}
		if m == 0 {
			break // end of file
		}
	}
	return n, nil
}

var _ FileOps = (*POSIX)(nil)

// CreateFile is Put: CREATE (truncating), then WRITEs and a COMMIT, as a
// kernel client flushes a file at close.
func (d *NFS) CreateFile(ctx context.Context, name string, data []byte, _ FileIO) error {
	return d.Put(ctx, name, data)
}

// ReadFile is Get (LOOKUP and READs).
func (d *NFS) ReadFile(ctx context.Context, name string, buf []byte, _ FileIO) (int, error) {
	n, _, err := d.Get(ctx, name, buf)
	return n, err
}

// AppendFile writes data at offset size and makes it stable: one FILE_SYNC
// WRITE when it fits in one (as the Linux client's FLUSH_COND_STABLE),
// else UNSTABLE WRITEs and a COMMIT.
func (d *NFS) AppendFile(ctx context.Context, name string, size int64, data []byte, _ FileIO) error {
	dir, base, err := d.split(ctx, name)
	if err != nil {
		return err
	}
	fh, _, err := d.c.Lookup(ctx, dir, base)
	if err != nil {
		return err
	}
	if len(data) > int(d.c.Wsize()) {
		u := nfs.NewUnstable(d.c, fh)
		if err := u.WriteAt(ctx, data, uint64(size), false); err != nil {
			return err
		}
		return u.Commit(ctx)
	}
	for done := 0; done < len(data); {
		wr, err := d.c.Write(ctx, fh, uint64(size)+uint64(done), data[done:], nfs.FileSync)
		if err != nil {
			return err
		}
		if wr.Count == 0 {
			return fmt.Errorf("nfs WRITE: no progress at offset %d", size+int64(done))
		}
		done += int(wr.Count)
	}
	return nil
}

var _ FileOps = (*NFS)(nil)
