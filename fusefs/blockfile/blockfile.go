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
//
// Discard reaches the device: fallocate(PUNCH_HOLE|KEEP_SIZE) on the file
// becomes blockdev.Unmapper.Unmap (UNMAP / WRITE SAME with UNMAP on iSCSI)
// and ZERO_RANGE becomes blockdev.Zeroer.WriteZeroes. statfs reports a
// block size, which the loop driver takes as its discard granularity: with
// both, a loop device on the file advertises discard, so fstrim and
// mount -o discard free space on a thin LUN.
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
	root := &rootNode{file: node}
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

// rootNode is the mount's directory; it answers statfs like the file.
type rootNode struct {
	fs.Inode
	file *Node
}

// Statfs: see Node.Statfs.
func (r *rootNode) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	return r.file.Statfs(ctx, out)
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

// Statfs describes the mount as one full file system of the device's
// size. The block size matters: the loop driver uses it as its discard
// granularity, and with 0 (go-fuse's default) it advertises no discard.
func (n *Node) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	bs := uint32(max(n.bs, 4096))
	*out = fuse.StatfsOut{Bsize: bs, Frsize: bs, Blocks: uint64(n.dev.Size()) / uint64(bs),
		Files: 1, NameLen: 255}
	return 0
}

// Linux fallocate(2) modes.
const (
	fallocKeepSize  = 0x01
	fallocPunchHole = 0x02
	fallocZeroRange = 0x10
)

// Allocate serves fallocate(2) on the file:
//   - PUNCH_HOLE|KEEP_SIZE (a loop device's discard): the device
//     deallocates the range (Unmapper), which then reads back as zeros;
//     EOPNOTSUPP when it cannot, so the loop driver stops sending discards;
//   - ZERO_RANGE (a loop device's write-zeroes): zeros, kept allocated
//     (Zeroer, else plain writes);
//   - anything else (preallocation, growing the file): EOPNOTSUPP, since a
//     LUN has a fixed size and a thin one cannot reserve space.
//
// Parts of blocks at the edges are zeroed by read-modify-write; a range
// past the end is clipped when KEEP_SIZE is set.
func (n *Node) Allocate(ctx context.Context, fh fs.FileHandle, off, size uint64, mode uint32) syscall.Errno {
	if n.readOnly {
		return syscall.EROFS
	}
	punch := mode == fallocPunchHole|fallocKeepSize
	zero := mode&^fallocKeepSize == fallocZeroRange
	if !punch && !zero {
		return syscall.EOPNOTSUPP
	}
	devSize := uint64(n.dev.Size())
	if off > 1<<62 || size > 1<<62 {
		return syscall.EFBIG
	}
	end := off + size
	if end > devSize {
		if mode&fallocKeepSize == 0 {
			return syscall.EFBIG
		}
		end = devSize
	}
	if off >= end {
		return 0
	}
	if punch {
		if _, ok := n.dev.(blockdev.Unmapper); !ok {
			return syscall.EOPNOTSUPP
		}
	}
	start, stop := int64(off), int64(end)
	a, e := roundUp(start, n.bs), stop-stop%n.bs // whole blocks [a, e)
	if a < e {
		n.wmu.RLock()
		var err error
		if punch {
			err = n.dev.(blockdev.Unmapper).Unmap(ctx, a, e-a)
		} else {
			err = n.writeZeroes(ctx, a, e-a)
		}
		n.wmu.RUnlock()
		if errors.Is(err, blockdev.ErrNotSupported) {
			return syscall.EOPNOTSUPP
		}
		if err != nil {
			return toErrno(err)
		}
	} else {
		a, e = stop, stop // inside one block: all of it is an edge
	}
	for _, r := range [][2]int64{{start, min(a, stop)}, {max(e, start), stop}} {
		if r[0] < r[1] {
			if err := n.rmw(ctx, make([]byte, r[1]-r[0]), r[0]); err != nil {
				return toErrno(err)
			}
		}
	}
	return 0
}

// writeZeroes zeros whole blocks, with the device's Zeroer if it has one.
func (n *Node) writeZeroes(ctx context.Context, off, size int64) error {
	if z, ok := n.dev.(blockdev.Zeroer); ok {
		return z.WriteZeroes(ctx, off, size)
	}
	buf := make([]byte, min(size, 1<<20))
	for done := int64(0); done < size; {
		c := min(int64(len(buf)), size-done)
		if _, err := n.dev.WriteAt(ctx, buf[:c], off+done); err != nil {
			return err
		}
		done += c
	}
	return nil
}

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
	_ fs.NodeStatfser  = (*Node)(nil)
	_ fs.NodeAllocater = (*Node)(nil)
	_ fs.NodeStatfser  = (*rootNode)(nil)
)
