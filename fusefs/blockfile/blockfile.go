// Package blockfile exposes one blockdev.Device as one regular file in a
// FUSE mount, so a kernel that has no iSCSI client can still put a real
// file system on a LUN: losetup the file, mkfs.ext4 the loop device, mount.
//
// The mapping is deliberately thin: read/write/fsync on the file become
// Device ReadAt/WriteAt/Flush. Opens with O_DIRECT get FUSE direct_io, so
// the kernel page cache is bypassed for that open exactly as it would be on
// a local disk; other opens go through the page cache. Writes that are not
// aligned to the device block size (possible with buffered I/O from any
// program) are done as read-modify-write of the edge blocks, serialised
// against other writes so they never lose a concurrent aligned write.
package blockfile

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/tristore/tristore/blockdev"
)

// Options tune a mount. The zero value is usable.
type Options struct {
	// Name is the file's name inside the mount directory (default "lun").
	Name string
	// ReadOnly makes the file mode 0444 and refuses writes with EROFS.
	ReadOnly bool
	// MaxWrite is the largest READ/WRITE request the kernel sends
	// (default 1 MiB, the kernel's maximum).
	MaxWrite int
	// FsName shows up in /proc/mounts (default "tristore-blockfile").
	FsName string
	// Debug logs every FUSE request (go-fuse's debug output).
	Debug bool
}

// Server is a mounted block file.
type Server struct {
	srv  *fuse.Server
	dir  string
	once sync.Once
	err  error
}

// Mount mounts dir with a single file Options.Name backed by dev and
// returns once the kernel has the mount. As root it calls mount(2)
// directly; otherwise it falls back to fusermount3.
func Mount(dir string, dev blockdev.Device, o Options) (*Server, error) {
	if o.Name == "" {
		o.Name = "lun"
	}
	if o.MaxWrite <= 0 {
		o.MaxWrite = 1 << 20
	}
	if o.FsName == "" {
		o.FsName = "tristore-blockfile"
	}
	node := NewNode(dev, o.ReadOnly)
	root := &fs.Inode{}
	sec := time.Second
	opts := &fs.Options{
		AttrTimeout:  &sec,
		EntryTimeout: &sec,
		OnAdd: func(ctx context.Context) {
			ch := root.NewPersistentInode(ctx, node, fs.StableAttr{Mode: syscall.S_IFREG, Ino: 2})
			root.AddChild(o.Name, ch, false)
		},
		MountOptions: fuse.MountOptions{
			FsName:        o.FsName,
			Name:          "tristore",
			MaxWrite:      o.MaxWrite,
			MaxReadAhead:  o.MaxWrite,
			DirectMount:   os.Geteuid() == 0,
			DisableXAttrs: true,
			Debug:         o.Debug,
		},
	}
	srv, err := fs.Mount(dir, root, opts)
	if err != nil {
		return nil, fmt.Errorf("blockfile: mount %s: %w", dir, err)
	}
	return &Server{srv: srv, dir: dir}, nil
}

// Wait blocks until the file system is unmounted (by Unmount, umount(8)
// or fusermount3 -u).
func (s *Server) Wait() { s.srv.Wait() }

// Unmount unmounts the directory; it is safe to call more than once.
// It fails with EBUSY while the file is in use (e.g. by a loop device).
func (s *Server) Unmount() error {
	err := s.srv.Unmount()
	if err != nil {
		return fmt.Errorf("blockfile: unmount %s: %w", s.dir, err)
	}
	return nil
}

// Node is the FUSE inode of the block file. It is exported so tests and
// other adapters can drive Read/Write directly without a mount.
type Node struct {
	fs.Inode
	dev      blockdev.Device
	readOnly bool
	bs       int64
	mtime    time.Time
	// wmu: aligned writes hold it shared, read-modify-write holds it
	// exclusively, so an RMW of an edge block never overwrites a
	// concurrent aligned write to that block with stale data.
	wmu sync.RWMutex
}

// NewNode returns the file node for dev.
func NewNode(dev blockdev.Device, readOnly bool) *Node {
	bs := int64(dev.BlockSize())
	if bs <= 0 {
		bs = 512
	}
	return &Node{dev: dev, readOnly: readOnly, bs: bs, mtime: time.Now()}
}

// Open hands out direct_io for O_DIRECT opens (no page cache for that
// open, like a local disk) and keeps the page cache otherwise.
func (n *Node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if n.readOnly && flags&(syscall.O_WRONLY|syscall.O_RDWR) != 0 {
		return nil, 0, syscall.EROFS
	}
	if flags&syscall.O_DIRECT != 0 {
		return nil, fuse.FOPEN_DIRECT_IO, 0
	}
	return nil, fuse.FOPEN_KEEP_CACHE, 0
}

// Getattr reports a regular file as large as the device.
func (n *Node) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	n.fill(&out.Attr)
	return 0
}

func (n *Node) fill(a *fuse.Attr) {
	a.Mode = syscall.S_IFREG | 0o644
	if n.readOnly {
		a.Mode = syscall.S_IFREG | 0o444
	}
	a.Size = uint64(n.dev.Size())
	a.Blocks = (a.Size + 511) / 512
	a.Blksize = uint32(n.bs)
	a.Nlink = 1
	a.SetTimes(nil, &n.mtime, &n.mtime)
}

// Setattr accepts mode/owner/time changes as no-ops and a truncate only to
// the device's own size: a LUN cannot grow or shrink through the file.
func (n *Node) Setattr(ctx context.Context, fh fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	if sz, ok := in.GetSize(); ok && int64(sz) != n.dev.Size() {
		return syscall.EINVAL
	}
	n.fill(&out.Attr)
	return 0
}

// Read serves [off, off+len(dest)) clamped to the device size.
func (n *Node) Read(ctx context.Context, fh fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	size := n.dev.Size()
	if off >= size || len(dest) == 0 {
		return fuse.ReadResultData(nil), 0
	}
	want := min(int64(len(dest)), size-off)
	start := off - off%n.bs
	end := roundUp(off+want, n.bs)
	if start == off && end == off+want {
		if _, err := n.dev.ReadAt(ctx, dest[:want], off); err != nil {
			return nil, toErrno(err)
		}
		return fuse.ReadResultData(dest[:want]), 0
	}
	buf := make([]byte, end-start)
	if _, err := n.dev.ReadAt(ctx, buf, start); err != nil {
		return nil, toErrno(err)
	}
	copy(dest, buf[off-start:off-start+want])
	return fuse.ReadResultData(dest[:want]), 0
}

// Write stores data; writes beyond the device end fail with EFBIG.
func (n *Node) Write(ctx context.Context, fh fs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	if n.readOnly {
		return 0, syscall.EROFS
	}
	if len(data) == 0 {
		return 0, 0
	}
	size := n.dev.Size()
	if off < 0 || off+int64(len(data)) > size {
		return 0, syscall.EFBIG
	}
	end := off + int64(len(data))
	if off%n.bs == 0 && end%n.bs == 0 {
		n.wmu.RLock()
		_, err := n.dev.WriteAt(ctx, data, off)
		n.wmu.RUnlock()
		if err != nil {
			return 0, toErrno(err)
		}
		return uint32(len(data)), 0
	}
	if err := n.rmw(ctx, data, off); err != nil {
		return 0, toErrno(err)
	}
	return uint32(len(data)), 0
}

// rmw writes an unaligned range by reading its first and last block.
func (n *Node) rmw(ctx context.Context, data []byte, off int64) error {
	n.wmu.Lock()
	defer n.wmu.Unlock()
	end := off + int64(len(data))
	start := off - off%n.bs
	aend := roundUp(end, n.bs)
	buf := make([]byte, aend-start)
	if off != start {
		if _, err := n.dev.ReadAt(ctx, buf[:n.bs], start); err != nil {
			return err
		}
	}
	if end != aend && (aend-n.bs != start || off == start) {
		if _, err := n.dev.ReadAt(ctx, buf[len(buf)-int(n.bs):], aend-n.bs); err != nil {
			return err
		}
	}
	copy(buf[off-start:], data)
	_, err := n.dev.WriteAt(ctx, buf, start)
	return err
}

// Fsync makes every completed write durable (SYNCHRONIZE CACHE on iSCSI).
func (n *Node) Fsync(ctx context.Context, fh fs.FileHandle, flags uint32) syscall.Errno {
	return toErrno(n.dev.Flush(ctx))
}

// Flush (close(2) on a descriptor) needs no device work: durability is
// fsync's job, as on a local disk.
func (n *Node) Flush(ctx context.Context, fh fs.FileHandle) syscall.Errno { return 0 }

func roundUp(x, b int64) int64 { return (x + b - 1) / b * b }

// toErrno is the one place device errors become errno values.
func toErrno(err error) syscall.Errno {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return syscall.EINTR
	case errors.Is(err, blockdev.ErrOutOfRange):
		return syscall.EFBIG
	case errors.Is(err, blockdev.ErrMisaligned):
		return syscall.EINVAL
	case errors.Is(err, blockdev.ErrClosed):
		return syscall.ENXIO
	}
	return syscall.EIO
}

var (
	_ fs.NodeOpener    = (*Node)(nil)
	_ fs.NodeGetattrer = (*Node)(nil)
	_ fs.NodeSetattrer = (*Node)(nil)
	_ fs.NodeReader    = (*Node)(nil)
	_ fs.NodeWriter    = (*Node)(nil)
	_ fs.NodeFsyncer   = (*Node)(nil)
	_ fs.NodeFlusher   = (*Node)(nil)
)
