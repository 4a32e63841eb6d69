package chunkstore

import (
	"errors"
	"os"
	"path/filepath"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tristore/tristore/store/inodepool"
)

// A write that makes a chunk dirty needs a new file for it (dirty/I.X)
// and, when the chunk is partial, a new record (partial/I.X). Making a
// file allocates an inode, and on an ext4 without a journal (this
// project's benchmark disk) that allocation walks past every inode freed
// in the last ~30 s, one inode-table read at a time (fs/ext4/ialloc.c,
// recently_deleted): the cache frees inodes all the time (evicted clean
// chunks, uploaded dirty ones, fetch temp files), so the first write
// into a chunk took about 1 ms in the mount under load against 0.05 ms
// for the next one (docs/bench/profiles/cloudfs-write-*.txt). The files
// come instead from a pool of unnamed files (O_TMPFILE,
// store/inodepool) made in the background in each directory; the write
// path only names one (linkat), which allocates nothing. A pooled file
// is named before the write returns, so a killed gateway's next Open
// finds it under the same name as before: recovery is unchanged. When a
// pool is empty (or the file system cannot make unnamed files) the file
// is made as before.

// refillQuiet: a pool makes its files once no file was taken for this
// long (or at once when it runs low), not during the write that took
// one: made meanwhile, in the same directory on the other core, they
// doubled that write's time (inodepool.NewQuiet).
const refillQuiet = 20 * time.Millisecond

// newFiles is one directory's pool.
type newFiles struct {
	dir  string
	fd   int // the directory, open while the pool lives
	pool *inodepool.Pool
}

// openNewFiles starts a pool in dir; nil when it cannot (the caller makes
// files the ordinary way).
func openNewFiles(dir string) *newFiles {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil
	}
	p := inodepool.NewQuiet(fd, 0o600, refillQuiet)
	if p == nil {
		unix.Close(fd)
		return nil
	}
	return &newFiles{dir: dir, fd: fd, pool: p}
}

// errNoPooled: no pooled file was ready (or there is no pool).
var errNoPooled = errors.New("no pooled file")

// create returns a new file named name in the pool's directory, holding
// data (written before it is named), opened read-write; errNoPooled when
// the pool is empty, fs.ErrExist when the name is taken.
func (n *newFiles) create(name string, data []byte) (*os.File, error) {
	f := n.take()
	if f == nil {
		return nil, errNoPooled
	}
	if len(data) > 0 {
		if _, err := f.WriteAt(data, 0); err != nil {
			f.Close()
			return nil, err
		}
	}
	if err := n.link(f, name); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// take returns an unnamed, empty file opened read-write, or nil when the
// pool is empty (or there is none). The caller names it (link) or closes
// it.
func (n *newFiles) take() *os.File {
	if n == nil {
		return nil
	}
	fd := n.pool.Take()
	if fd < 0 {
		return nil
	}
	return os.NewFile(uintptr(fd), filepath.Join(n.dir, "(unnamed)"))
}

// link names f, a file from take, name in the pool's directory;
// fs.ErrExist when the name is taken.
func (n *newFiles) link(f *os.File, name string) error {
	fd := int(f.Fd())
	// linkat(AT_EMPTY_PATH) needs CAP_DAC_READ_SEARCH (a root mount
	// has it) and costs less than the /proc link inodepool.Link follows
	// (13 against 32 us on this machine under load).
	err := unix.Linkat(fd, "", n.fd, name, unix.AT_EMPTY_PATH)
	if errors.Is(err, unix.EPERM) || errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EINVAL) {
		err = inodepool.Link(fd, n.fd, name)
	}
	if errors.Is(err, unix.EEXIST) {
		return os.ErrExist
	}
	return err
}

// close stops the pool (its unnamed files are freed by the kernel).
func (n *newFiles) close() {
	if n == nil {
		return
	}
	n.pool.Close()
	unix.Close(n.fd)
}
