package posix

import (
	"os"
	"path/filepath"
	"sync"

	"github.com/tristore/tristore/store/inodepool"
	"golang.org/x/sys/unix"
)

// New object files come from an inode pool (store/inodepool): a PUT takes
// an unnamed file made in the background in .tristore/tmp and links it
// into the target directory under a temp name, instead of creating the
// temp file there. The inode allocation, which on ext4 without a journal
// walks past every recently deleted inode and was a quarter of the CPU of
// a serial 4 KiB PUT (docs/bench/profiles/s3-put4k-p1-*.txt), is then off
// the request path. Everything after the link (write, fsync, rename,
// directory fsync) is unchanged, so the durability argument of the PUT is
// the one it had: the file is fsynced with its name, link count and data
// before the rename, and the directory after it.

type tmpFiles struct {
	once sync.Once
	pool *inodepool.Pool // nil: no O_TMPFILE on this file system
}

func (b *Backend) inodePool() *inodepool.Pool {
	b.tmpFiles.once.Do(func() {
		dfd, err := openat2(b.tmpDir(), unix.O_PATH|unix.O_DIRECTORY, 0)
		if err != nil {
			return
		}
		p := inodepool.New(dfd, 0o644) // as createTemp's open(O_CREAT)
		if p == nil {
			unix.Close(dfd)
			return
		}
		b.tmpFiles.pool = p
		go func() {
			<-b.closed
			p.Close()
			unix.Close(dfd)
		}()
	})
	return b.tmpFiles.pool
}

// pooledTemp returns a pooled file linked as a new temp file in dir, or
// nil (the caller creates one): pool empty, dir missing or not reachable
// without symlinks, another file system, or a directory whose new files
// would get something a pooled file does not have (a default ACL, the
// directory's group through set-group-ID).
func (b *Backend) pooledTemp(dir string) *os.File {
	select {
	case <-b.closed:
		return nil
	default:
	}
	fd := b.inodePool().Take()
	if fd < 0 {
		return nil
	}
	dfd, err := openat2(dir, unix.O_PATH|unix.O_DIRECTORY, 0)
	if err != nil {
		unix.Close(fd)
		return nil
	}
	defer unix.Close(dfd)
	var st unix.Stat_t
	if unix.Fstat(dfd, &st) != nil || st.Mode&unix.S_ISGID != 0 || inodepool.HasDefaultACL(dfd) {
		unix.Close(fd)
		return nil
	}
	// The times open(O_CREAT) would have given it now (the mode it has).
	if unix.UtimesNanoAt(unix.AT_FDCWD, inodepool.FDPath(fd), nil, 0) != nil {
		unix.Close(fd)
		return nil
	}
	name := b.tempName()
	if inodepool.Link(fd, dfd, name) != nil {
		unix.Close(fd)
		return nil
	}
	return os.NewFile(uintptr(fd), filepath.Join(dir, name))
}
