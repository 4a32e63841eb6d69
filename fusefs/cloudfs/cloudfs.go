// Package cloudfs is the FUSE file system of `tristore mount s3://...`:
// a POSIX tree kept in an S3 bucket by client/s3/chunkstore (manifest plus
// content-addressed chunks, local LRU disk cache, write-back), or with
// Plain a read-mostly view of a bucket of ordinary objects (plain.go).
//
// Every inode is a chunkstore inode and keeps its number, so hard links,
// rename over open files and unlinked-but-open files behave as on a local
// disk. Listing and stat read only the manifest; data is fetched chunk by
// chunk on demand (with the store's prefetching). Writes land in the
// cache; fsync(2) uploads the file's dirty chunks and publishes the
// manifest before it returns, close(2) uploads the file's dirty chunks
// (FlushOnClose) and the manifest follows at the next write-back check,
// and everything else is written back once older than the store's
// write-back age. What cannot be done is refused, never faked:
// fallocate(2) gets EOPNOTSUPP, xattrs ENOTSUP, a full cache ENOSPC.
package cloudfs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/tristore/tristore/client/s3/chunkstore"
)

// Options tune a mount.
type Options struct {
	// FlushOnClose uploads a file's dirty chunks when it is closed
	// (default true in the CLI).
	FlushOnClose bool
	// AttrTimeout: how long the kernel caches attributes and names (1 s).
	// One gateway writes a store at a time, so the cache is coherent for
	// everything done through this mount.
	AttrTimeout time.Duration
	// ReadAhead is the kernel's read-ahead window for the mount's files,
	// in bytes (0: DefaultReadAhead; negative: off). The kernel reads
	// that far past a sequential read and keeps those pages locked until
	// the READ is answered: a READ that reaches into a chunk the cache
	// does not hold waits for its fetch, and so does a write to any of
	// its pages. Off, a read asks the store for its pages one by one
	// (the store's own prefetching still works by chunks).
	ReadAhead int
	FsName    string
	Debug     bool
	Log       *slog.Logger
}

// DefaultReadAhead is the kernel's read-ahead window when ReadAhead is 0:
// 128 KiB, which is also the most the kernel allows a FUSE mount unless
// its read_ahead_kb is raised (the 1 MiB asked for before was silently
// cut to this).
const DefaultReadAhead = 128 << 10

// FS is one mounted chunk store.
type FS struct {
	st   *chunkstore.Store
	opts Options
	log  *slog.Logger
	eio  atomic.Int64 // errors reported as EIO (logged)
}

// New wraps an open KindFS store.
func New(st *chunkstore.Store, o Options) (*FS, error) {
	if st.Kind() != chunkstore.KindFS {
		return nil, fmt.Errorf("cloudfs: the store is a %s, not a file tree", st.Kind())
	}
	if o.AttrTimeout == 0 {
		o.AttrTimeout = time.Second
	}
	if o.FsName == "" {
		o.FsName = "tristore-cloudfs"
	}
	if o.Log == nil {
		o.Log = slog.Default()
	}
	return &FS{st: st, opts: o, log: o.Log}, nil
}

// Mount mounts the tree on dir.
func (f *FS) Mount(dir string) (*fuse.Server, error) {
	t := f.opts.AttrTimeout
	ra := f.opts.ReadAhead
	switch {
	case ra == 0:
		ra = DefaultReadAhead
	case ra < 0:
		ra = 1 // less than a page: none (0 would mean the kernel's default)
	}
	mo := fuse.MountOptions{
		FsName:        f.opts.FsName,
		Name:          "tristore",
		MaxWrite:      1 << 20,
		MaxReadAhead:  ra,
		Debug:         f.opts.Debug,
		DisableXAttrs: true,
		// The store keeps modes and owners; the kernel checks them.
		Options: []string{"default_permissions"},
	}
	if os.Geteuid() == 0 {
		mo.AllowOther = true
		mo.DirectMount = true
	}
	root := &Node{fsys: f, ino: chunkstore.RootIno}
	return fs.Mount(dir, root, &fs.Options{
		MountOptions:   mo,
		EntryTimeout:   &t,
		AttrTimeout:    &t,
		RootStableAttr: &fs.StableAttr{Ino: chunkstore.RootIno},
	})
}

// Node is one inode of the store.
type Node struct {
	fs.Inode
	fsys *FS
	ino  uint64
}

// handle is one open file.
type handle struct {
	wrote atomic.Bool
}

// errno is the one place store errors become errno values. Errors that
// are not about the request (the endpoint, a conflict, corruption) are
// EIO and logged, since EIO alone would hide the cause.
func (f *FS) errno(err error) syscall.Errno {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, chunkstore.ErrNotExist):
		return syscall.ENOENT
	case errors.Is(err, chunkstore.ErrExist):
		return syscall.EEXIST
	case errors.Is(err, chunkstore.ErrNotDir):
		return syscall.ENOTDIR
	case errors.Is(err, chunkstore.ErrIsDir):
		return syscall.EISDIR
	case errors.Is(err, chunkstore.ErrNotEmpty):
		return syscall.ENOTEMPTY
	case errors.Is(err, chunkstore.ErrInvalid):
		return syscall.EINVAL
	case errors.Is(err, chunkstore.ErrNameTooLong):
		return syscall.ENAMETOOLONG
	case errors.Is(err, chunkstore.ErrTooLarge):
		return syscall.EFBIG
	case errors.Is(err, chunkstore.ErrReadOnly):
		return syscall.EROFS
	case errors.Is(err, chunkstore.ErrNoSpace):
		return syscall.ENOSPC
	case errors.Is(err, context.Canceled):
		return syscall.EINTR
	}
	f.eio.Add(1)
	f.log.Error("cloudfs: I/O error", "err", err)
	return syscall.EIO
}

func fillAttr(a *chunkstore.Inode, out *fuse.Attr) {
	out.Ino = a.Ino
	out.Mode = a.Mode
	out.Size = uint64(a.Size)
	out.Blocks = (out.Size + 511) / 512
	out.Blksize = 1 << 17
	out.Nlink = a.Nlink
	out.Owner = fuse.Owner{Uid: a.UID, Gid: a.GID}
	out.Rdev = a.Rdev
	at, mt, ct := time.Unix(0, a.Atime), time.Unix(0, a.Mtime), time.Unix(0, a.Ctime)
	out.SetTimes(&at, &mt, &ct)
}

func (n *Node) child(ctx context.Context, a *chunkstore.Inode, out *fuse.EntryOut) *fs.Inode {
	fillAttr(a, &out.Attr)
	return n.NewInode(ctx, &Node{fsys: n.fsys, ino: a.Ino}, fs.StableAttr{Mode: a.Mode & syscall.S_IFMT, Ino: a.Ino})
}

func caller(ctx context.Context) (uid, gid uint32) {
	if c, ok := fuse.FromContext(ctx); ok {
		return c.Uid, c.Gid
	}
	return uint32(os.Getuid()), uint32(os.Getgid())
}

// Lookup finds a name in the manifest (no data is read).
func (n *Node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	a, err := n.fsys.st.Lookup(n.ino, name)
	if err != nil {
		return nil, n.fsys.errno(err)
	}
	return n.child(ctx, &a, out), 0
}

// Getattr reports the inode's attributes from the manifest.
func (n *Node) Getattr(ctx context.Context, fh fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	a, err := n.fsys.st.Getattr(n.ino)
	if err != nil {
		return n.fsys.errno(err)
	}
	fillAttr(&a, &out.Attr)
	return 0
}

// Setattr changes mode, owner, times or size (truncate).
func (n *Node) Setattr(ctx context.Context, fh fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	var sa chunkstore.SetAttr
	if m, ok := in.GetMode(); ok {
		sa.Mode = &m
	}
	if u, ok := in.GetUID(); ok {
		sa.UID = &u
	}
	if g, ok := in.GetGID(); ok {
		sa.GID = &g
	}
	now := time.Now().UnixNano()
	if t, ok := in.GetATime(); ok {
		v := t.UnixNano()
		sa.Atime = &v
	} else if in.Valid&fuse.FATTR_ATIME_NOW != 0 {
		sa.Atime = &now
	}
	if t, ok := in.GetMTime(); ok {
		v := t.UnixNano()
		sa.Mtime = &v
	} else if in.Valid&fuse.FATTR_MTIME_NOW != 0 {
		sa.Mtime = &now
	}
	if sz, ok := in.GetSize(); ok {
		if sz > chunkstore.MaxFileSize {
			return syscall.EFBIG
		}
		v := int64(sz)
		sa.Size = &v
		if h, ok := fh.(*handle); ok {
			h.wrote.Store(true)
		}
	}
	a, err := n.fsys.st.Setattr(ctx, n.ino, sa)
	if err != nil {
		return n.fsys.errno(err)
	}
	fillAttr(&a, &out.Attr)
	return 0
}

func (n *Node) create(ctx context.Context, name string, mode, rdev uint32, target string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	uid, gid := caller(ctx)
	a, err := n.fsys.st.Create(n.ino, name, mode, rdev, uid, gid, target)
	if err != nil {
		return nil, n.fsys.errno(err)
	}
	return n.child(ctx, &a, out), 0
}

// Create makes and opens a regular file.
func (n *Node) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	ch, e := n.create(ctx, name, syscall.S_IFREG|mode&0o7777, 0, "", out)
	if e != 0 {
		return nil, nil, 0, e
	}
	if err := n.fsys.st.Open(out.Ino); err != nil {
		return nil, nil, 0, n.fsys.errno(err)
	}
	return ch, &handle{}, fuse.FOPEN_KEEP_CACHE, 0
}

// Mkdir makes a directory.
func (n *Node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return n.create(ctx, name, syscall.S_IFDIR|mode&0o7777, 0, "", out)
}

// Mknod makes a FIFO, socket or device node (metadata only) or a file.
func (n *Node) Mknod(ctx context.Context, name string, mode uint32, dev uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	return n.create(ctx, name, mode, dev, "", out)
}

// Symlink makes a symbolic link.
func (n *Node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	if len(target) > 4095 {
		return nil, syscall.ENAMETOOLONG
	}
	return n.create(ctx, name, syscall.S_IFLNK|0o777, 0, target, out)
}

// Readlink returns a symlink's target.
func (n *Node) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	t, err := n.fsys.st.Readlink(n.ino)
	if err != nil {
		return nil, n.fsys.errno(err)
	}
	return []byte(t), 0
}

// Link makes a hard link.
func (n *Node) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	t, ok := target.(*Node)
	if !ok {
		return nil, syscall.EXDEV
	}
	a, err := n.fsys.st.Link(t.ino, n.ino, name)
	if err != nil {
		return nil, n.fsys.errno(err)
	}
	return n.child(ctx, &a, out), 0
}

// Unlink removes a name.
func (n *Node) Unlink(ctx context.Context, name string) syscall.Errno {
	return n.fsys.errno(n.fsys.st.Unlink(n.ino, name))
}

// Rmdir removes an empty directory.
func (n *Node) Rmdir(ctx context.Context, name string) syscall.Errno {
	return n.fsys.errno(n.fsys.st.Rmdir(n.ino, name))
}

// Rename moves a name, atomically (RENAME_NOREPLACE and RENAME_EXCHANGE too).
func (n *Node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	np, ok := newParent.(*Node)
	if !ok {
		return syscall.EXDEV
	}
	return n.fsys.errno(n.fsys.st.Rename(n.ino, name, np.ino, newName, flags))
}

// Readdir lists the directory from the manifest.
func (n *Node) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	ents, err := n.fsys.st.ReadDir(n.ino)
	if err != nil {
		return nil, n.fsys.errno(err)
	}
	out := make([]fuse.DirEntry, len(ents))
	for i, e := range ents {
		out[i] = fuse.DirEntry{Name: e.Name, Ino: e.Ino, Mode: e.Mode}
	}
	return fs.NewListDirStream(out), 0
}

// Open counts the open (an unlinked file lives until its last release).
func (n *Node) Open(ctx context.Context, flags uint32) (fs.FileHandle, uint32, syscall.Errno) {
	if err := n.fsys.st.Open(n.ino); err != nil {
		return nil, 0, n.fsys.errno(err)
	}
	if flags&syscall.O_DIRECT != 0 {
		return &handle{}, fuse.FOPEN_DIRECT_IO, 0
	}
	return &handle{}, fuse.FOPEN_KEEP_CACHE, 0
}

// Read reads through the chunk cache.
func (n *Node) Read(ctx context.Context, fh fs.FileHandle, dest []byte, off int64) (fuse.ReadResult, syscall.Errno) {
	c, err := n.fsys.st.ReadAt(ctx, n.ino, dest, off)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, n.fsys.errno(err)
	}
	return fuse.ReadResultData(dest[:c]), 0
}

// Write writes into the cache (uploaded by write-back, fsync or close).
func (n *Node) Write(ctx context.Context, fh fs.FileHandle, data []byte, off int64) (uint32, syscall.Errno) {
	if h, ok := fh.(*handle); ok {
		h.wrote.Store(true)
	}
	c, err := n.fsys.st.WriteAt(ctx, n.ino, data, off)
	if err != nil {
		return uint32(c), n.fsys.errno(err)
	}
	return uint32(c), 0
}

// Fsync uploads the file's dirty chunks and publishes the manifest.
func (n *Node) Fsync(ctx context.Context, fh fs.FileHandle, flags uint32) syscall.Errno {
	return n.fsys.errno(n.fsys.st.Flush(ctx, n.ino, true))
}

// Flush (each close(2)) uploads what this open wrote, with FlushOnClose.
// That upload is early write-back, not a promise close(2) makes: the data
// is already safe in the cache (a killed mount uploads it at the next
// start). So a close interrupted by a signal (the kernel's INTERRUPT
// cancels ctx) returns success and leaves the chunks dirty for the
// write-back, as rclone mount's close does; EINTR there would make cp or
// an editor report a failure although nothing is lost, and on Linux the
// descriptor is gone anyway, so a retry cannot help. An upload that
// fails for another reason is still reported (EIO: the endpoint is down,
// the manifest changed). fsync(2) keeps EINTR: it promises the bucket.
func (n *Node) Flush(ctx context.Context, fh fs.FileHandle) syscall.Errno {
	h, ok := fh.(*handle)
	if !ok || !n.fsys.opts.FlushOnClose || !h.wrote.Load() {
		return 0
	}
	err := n.fsys.st.Flush(ctx, n.ino, false)
	if err != nil && errors.Is(ctx.Err(), context.Canceled) && errors.Is(err, context.Canceled) {
		n.fsys.log.Debug("cloudfs: close interrupted; its dirty chunks stay for the write-back", "ino", n.ino, "err", err)
		return 0
	}
	return n.fsys.errno(err)
}

// Release ends the open.
func (n *Node) Release(ctx context.Context, fh fs.FileHandle) syscall.Errno {
	return n.fsys.errno(n.fsys.st.Release(n.ino))
}

// Allocate is refused: the store cannot reserve space in a bucket, and
// faking preallocation would promise what it cannot keep.
func (n *Node) Allocate(ctx context.Context, fh fs.FileHandle, off, size uint64, mode uint32) syscall.Errno {
	return syscall.EOPNOTSUPP
}

// Statfs reports a large, mostly free file system: a bucket has no fixed
// capacity. Files and used blocks are what the manifest holds.
func (n *Node) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	files, bytes := n.fsys.st.StatFS()
	const total = 1 << 50
	bs := uint64(n.fsys.st.ChunkSize())
	used := min(uint64(bytes)/bs, total/bs-1)
	*out = fuse.StatfsOut{Bsize: uint32(bs), Frsize: uint32(bs), Blocks: total / bs, Bfree: total/bs - used,
		Bavail: total/bs - used, Files: files + 1<<30, Ffree: 1 << 30, NameLen: 255}
	return 0
}

var (
	_ fs.NodeLookuper   = (*Node)(nil)
	_ fs.NodeGetattrer  = (*Node)(nil)
	_ fs.NodeSetattrer  = (*Node)(nil)
	_ fs.NodeCreater    = (*Node)(nil)
	_ fs.NodeMkdirer    = (*Node)(nil)
	_ fs.NodeMknoder    = (*Node)(nil)
	_ fs.NodeSymlinker  = (*Node)(nil)
	_ fs.NodeReadlinker = (*Node)(nil)
	_ fs.NodeLinker     = (*Node)(nil)
	_ fs.NodeUnlinker   = (*Node)(nil)
	_ fs.NodeRmdirer    = (*Node)(nil)
	_ fs.NodeRenamer    = (*Node)(nil)
	_ fs.NodeReaddirer  = (*Node)(nil)
	_ fs.NodeOpener     = (*Node)(nil)
	_ fs.NodeReader     = (*Node)(nil)
	_ fs.NodeWriter     = (*Node)(nil)
	_ fs.NodeFsyncer    = (*Node)(nil)
	_ fs.NodeFlusher    = (*Node)(nil)
	_ fs.NodeReleaser   = (*Node)(nil)
	_ fs.NodeAllocater  = (*Node)(nil)
	_ fs.NodeStatfser   = (*Node)(nil)
)
