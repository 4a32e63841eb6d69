// Package nfstree is a FUSE file system (go-fuse v2 tree API) over the
// userspace NFS v3 client in client/nfs: `tristore mount nfs://...` mounts
// an export as a real POSIX tree on machines with no kernel NFS client.
//
// Each FUSE inode wraps one NFS file handle. Inode identity is the NFS
// fileid plus a hash of the handle as the generation, so a fileid the
// server reuses for a new file (ext4 does, quickly) becomes a new kernel
// inode instead of a stale one.
//
// Caching and write policy follow the access forms of seed 000 (Table I),
// chosen per open(2) (see file.go and docs/nfs.md):
//
//	O_DIRECT   read-through, write-through: FUSE direct_io (no page cache);
//	           every write is on stable storage before write(2) returns
//	O_SYNC     page cache + kernel read-ahead for reads; writes FILE_SYNC
//	           (O_DSYNC: DATA_SYNC)
//	default    page cache + read-ahead; write-back: writes are buffered,
//	           sent UNSTABLE in large parallel chunks, COMMITted on
//	           fsync(2) and close(2), and resent if the server's write
//	           verifier changed (server restart) before the COMMIT
//
// Attributes and names are cached by the kernel for Options.AttrTimeout
// (close-to-open: open(2) always revalidates with GETATTR and keeps the
// page cache only if size and mtime are unchanged).
package nfstree

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/tristore/tristore/client/nfs"
)

// Options configure the mount.
type Options struct {
	// AttrTimeout is how long the kernel may cache attributes and names
	// (default 1 s; 0 after setting NoCache).
	AttrTimeout time.Duration
	// NoCache disables attribute/name caching (every stat goes to the server).
	NoCache bool
	// WriteBehind is how many bytes a default-mode open buffers before
	// sending them (default 8 MiB); CommitEvery is how much uncommitted
	// data it keeps before committing early (default 64 MiB).
	WriteBehind int
	CommitEvery int
	// Form forces one access form on every open: "sync" (all writes
	// FILE_SYNC) or "direct" (no page cache, write-through); "" or
	// "default" chooses per open from O_DIRECT / O_SYNC / O_DSYNC.
	Form string
	// Debug logs every FUSE request.
	Debug bool
	// FsName shows in /proc/mounts (e.g. the nfs:// URL).
	FsName string
	// Root, if set, is the directory to mount instead of the export's root
	// (a subdirectory found with LookupPath).
	Root nfs.FH
	// CallerCreds sends each calling process's uid/gid/groups in AUTH_SYS
	// (see cred.go) instead of the client's one identity.
	CallerCreds bool
}

// FS is the state shared by all nodes of one mount.
type FS struct {
	c    Conn
	opts Options
	root *Node

	groups  groupCache
	closer  func()       // v4: stops the lease renewal
	commits atomic.Int64 // COMMITs that succeeded
	resends atomic.Int64 // times uncommitted data was resent (verifier changed)
}

// Close releases what the tree holds besides the client (v4: stops
// renewing the lease). Call it after the FUSE server stopped.
func (f *FS) Close() {
	if f.closer != nil {
		f.closer()
	}
}

// GiveUp makes calls waiting for a server that is down fail now (see
// nfs.Client.GiveUp); a mount calls it on shutdown.
func (f *FS) GiveUp() {
	if g, ok := f.c.(interface{ GiveUp() }); ok {
		g.GiveUp()
	}
}

// Stats reports how many COMMITs succeeded and how often uncommitted data
// had to be resent because the server's write verifier changed.
func (f *FS) Stats() (commits, resends int64) { return f.commits.Load(), f.resends.Load() }

// Node is one file, directory or link on the server.
type Node struct {
	fs.Inode
	fsys *FS

	mu sync.Mutex
	fh nfs.FH
	// seen is the size/mtime at the last open, for close-to-open caching.
	seenSize  uint64
	seenMtime time.Time
	// open default-mode handles with buffered data, flushed before
	// GETATTR/SETATTR so size and times come out right.
	writers map[*handle]struct{}
	// plus caches READDIRPLUS results briefly so the LOOKUPs the kernel
	// sends right after a readdir (ls -l) cost no round trip.
	plus     map[string]nfs.DirEntry
	plusTime time.Time
	// opens counts open handles; silly is where an unlinked-while-open
	// file was renamed to (see Unlink), removed at the last close.
	opens     int
	sillyDir  nfs.FH
	sillyName string
}

// New builds the root node for c, which must be mounted (c.Root() set).
func New(c *nfs.Client, opts Options) (*FS, error) {
	if c.Root() == nil && opts.Root == nil {
		return nil, errors.New("nfstree: client is not mounted")
	}
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	root := c.Root()
	if opts.Root != nil {
		root = opts.Root
	}
	return newFS(v3Conn{c}, root, opts), nil
}

// defaults fills in unset options and checks Form.
func (opts *Options) defaults() error {
	if opts.AttrTimeout == 0 && !opts.NoCache {
		opts.AttrTimeout = time.Second
	}
	if opts.NoCache {
		opts.AttrTimeout = 0
	}
	switch opts.Form {
	case "", "default", "sync", "direct":
	default:
		return fmt.Errorf("nfstree: access form %q: want default, sync or direct", opts.Form)
	}
	if opts.WriteBehind <= 0 {
		opts.WriteBehind = 8 << 20
	}
	if opts.CommitEvery <= 0 {
		opts.CommitEvery = 64 << 20
	}
	return nil
}

func newFS(c Conn, root nfs.FH, opts Options) *FS {
	f := &FS{c: c, opts: opts}
	f.root = &Node{fsys: f, fh: root}
	return f
}

// Mount mounts the tree on dir and returns the running server; call
// server.Unmount() (or fusermount3 -u dir) to stop, then server.Wait().
func (f *FS) Mount(ctx context.Context, dir string) (*fuse.Server, error) {
	a, err := f.c.Getattr(ctx, f.root.fh)
	if err != nil {
		return nil, err
	}
	t := f.opts.AttrTimeout
	neg := time.Duration(0)
	mo := fuse.MountOptions{
		FsName:       f.opts.FsName,
		Name:         "tristore-nfs",
		MaxWrite:     1 << 20,
		MaxReadAhead: 1 << 20,
		Debug:        f.opts.Debug,
		// NFS v3 has no extended attributes. ENOSYS (rather than ENODATA)
		// makes the kernel stop asking, e.g. for security.capability
		// before every write(2).
		DisableXAttrs: true,
		// The NFS calls carry one AUTH_SYS identity, so the kernel must
		// check permissions against the attributes itself.
		Options: []string{"default_permissions"},
	}
	if os.Geteuid() == 0 {
		mo.AllowOther = true
		// Mount with mount(2) directly when root: no fusermount3 needed.
		mo.DirectMount = true
	}
	return fs.Mount(dir, f.root, &fs.Options{
		MountOptions:    mo,
		EntryTimeout:    &t,
		AttrTimeout:     &t,
		NegativeTimeout: &neg,
		RootStableAttr:  &fs.StableAttr{Ino: a.FileID, Gen: fhGen(f.root.fh)},
		UID:             0,
		GID:             0,
	})
}

// fhGen derives the inode generation from the file handle (see package doc).
func fhGen(fh nfs.FH) uint64 {
	h := fnv.New64a()
	h.Write(fh)
	return h.Sum64()
}

func (n *Node) handle() nfs.FH {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.fh
}

// errno maps a client error for the kernel. Errors that are not an NFS
// status the server chose (transport failures, RPC errors, bad replies)
// all become EIO, so they are logged: EIO alone would hide the cause.
func errno(err error) syscall.Errno {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return syscall.EINTR
	}
	e := nfs.ToErrno(err)
	var st nfs.Status
	if e == syscall.EIO && !errors.As(err, &st) {
		slog.Warn("nfs mount: call failed", "err", err)
	}
	return e
}

// fillAttr converts NFS attributes to FUSE's.
func fillAttr(a *nfs.Attr, out *fuse.Attr) {
	out.Ino = a.FileID
	out.Size = a.Size
	out.Blocks = (a.Used + 511) / 512
	out.Blksize = 4096
	out.Nlink = a.Nlink
	out.Owner = fuse.Owner{Uid: a.UID, Gid: a.GID}
	out.Rdev = uint32(a.RdevMajor<<8 | a.RdevMinor&0xff | (a.RdevMinor&^0xff)<<12)
	out.Mode = modeBits(a)
	out.SetTimes(&a.Atime, &a.Mtime, &a.Ctime)
}

func modeBits(a *nfs.Attr) uint32 {
	m := a.Mode & 0o7777
	switch a.Type {
	case nfs.TypeReg:
		m |= syscall.S_IFREG
	case nfs.TypeDir:
		m |= syscall.S_IFDIR
	case nfs.TypeLnk:
		m |= syscall.S_IFLNK
	case nfs.TypeBlk:
		m |= syscall.S_IFBLK
	case nfs.TypeChr:
		m |= syscall.S_IFCHR
	case nfs.TypeSock:
		m |= syscall.S_IFSOCK
	case nfs.TypeFIFO:
		m |= syscall.S_IFIFO
	}
	return m
}

// child makes (or finds) the inode for a handle the server returned and
// fills the entry reply.
func (n *Node) child(ctx context.Context, fh nfs.FH, a *nfs.Attr, out *fuse.EntryOut) *fs.Inode {
	fillAttr(a, &out.Attr)
	node := &Node{fsys: n.fsys, fh: fh}
	return n.NewInode(ctx, node, fs.StableAttr{Mode: modeBits(a) & syscall.S_IFMT, Ino: a.FileID, Gen: fhGen(fh)})
}

func (n *Node) forgetPlus() {
	n.mu.Lock()
	n.plus = nil
	n.mu.Unlock()
}

// flushWriters sends data buffered by this file's open write-back handles.
func (n *Node) flushWriters(ctx context.Context) syscall.Errno {
	n.mu.Lock()
	hs := make([]*handle, 0, len(n.writers))
	for h := range n.writers {
		hs = append(hs, h)
	}
	n.mu.Unlock()
	for _, h := range hs {
		if e := h.sendBuffered(ctx); e != 0 {
			return e
		}
	}
	return 0
}

// Lookup implements fs.NodeLookuper.
func (n *Node) Lookup(ctx context.Context, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	ctx = n.fsys.cctx(ctx)
	n.mu.Lock()
	if e, ok := n.plus[name]; ok && time.Since(n.plusTime) < n.fsys.opts.AttrTimeout && e.Attr != nil && len(e.FH) > 0 {
		// One use only: it serves the LOOKUP that follows the listing,
		// not later ones that may come after the file changed.
		delete(n.plus, name)
		n.mu.Unlock()
		return n.child(ctx, e.FH, e.Attr, out), 0
	}
	n.mu.Unlock()
	fh, a, err := n.fsys.c.Lookup(ctx, n.handle(), name)
	if err != nil {
		return nil, errno(err)
	}
	if a == nil {
		if a, err = n.fsys.c.Getattr(ctx, fh); err != nil {
			return nil, errno(err)
		}
	}
	return n.child(ctx, fh, a, out), 0
}

// Getattr implements fs.NodeGetattrer.
func (n *Node) Getattr(ctx context.Context, _ fs.FileHandle, out *fuse.AttrOut) syscall.Errno {
	ctx = n.fsys.cctx(ctx)
	if e := n.flushWriters(ctx); e != 0 {
		return e
	}
	a, err := n.fsys.c.Getattr(ctx, n.handle())
	if err != nil {
		return errno(err)
	}
	fillAttr(a, &out.Attr)
	return 0
}

// Setattr implements fs.NodeSetattrer (chmod, chown, truncate, utimes).
func (n *Node) Setattr(ctx context.Context, _ fs.FileHandle, in *fuse.SetAttrIn, out *fuse.AttrOut) syscall.Errno {
	ctx = n.fsys.cctx(ctx)
	if e := n.flushWriters(ctx); e != 0 {
		return e
	}
	var s nfs.SetAttr
	if m, ok := in.GetMode(); ok {
		m &= 0o7777
		s.Mode = &m
	}
	if u, ok := in.GetUID(); ok {
		s.UID = &u
	}
	if g, ok := in.GetGID(); ok {
		s.GID = &g
	}
	if sz, ok := in.GetSize(); ok {
		s.Size = &sz
	}
	if in.Valid&fuse.FATTR_ATIME_NOW != 0 {
		s.SetAtimeNow = true
	} else if t, ok := in.GetATime(); ok {
		s.Atime = &t
	}
	if in.Valid&fuse.FATTR_MTIME_NOW != 0 {
		s.SetMtimeNow = true
	} else if t, ok := in.GetMTime(); ok {
		s.Mtime = &t
	}
	wcc, err := n.fsys.c.Setattr(ctx, n.handle(), s, nil)
	if err != nil {
		return errno(err)
	}
	a := wcc.After
	if a == nil {
		if a, err = n.fsys.c.Getattr(ctx, n.handle()); err != nil {
			return errno(err)
		}
	}
	fillAttr(a, &out.Attr)
	return 0
}

// Readdir implements fs.NodeReaddirer with READDIRPLUS, keeping the
// attributes for the LOOKUPs that usually follow.
func (n *Node) Readdir(ctx context.Context) (fs.DirStream, syscall.Errno) {
	ctx = n.fsys.cctx(ctx)
	ents, err := n.fsys.c.Readdirplus(ctx, n.handle())
	if err != nil {
		if !errorsIsNotSupp(err) {
			return nil, errno(err)
		}
		if ents, err = n.fsys.c.Readdir(ctx, n.handle()); err != nil {
			return nil, errno(err)
		}
	}
	list := make([]fuse.DirEntry, 0, len(ents)+2)
	self := n.StableAttr().Ino
	parent := self
	if _, p := n.Parent(); p != nil {
		parent = p.StableAttr().Ino
	}
	list = append(list, fuse.DirEntry{Name: ".", Ino: self, Mode: syscall.S_IFDIR},
		fuse.DirEntry{Name: "..", Ino: parent, Mode: syscall.S_IFDIR})
	plus := make(map[string]nfs.DirEntry, len(ents))
	for _, e := range ents {
		if e.Name == "." || e.Name == ".." {
			continue
		}
		var mode uint32 = syscall.S_IFREG
		if e.Attr != nil {
			mode = modeBits(e.Attr) & syscall.S_IFMT
			plus[e.Name] = e
		}
		list = append(list, fuse.DirEntry{Name: e.Name, Ino: e.FileID, Mode: mode})
	}
	n.mu.Lock()
	n.plus, n.plusTime = plus, time.Now()
	n.mu.Unlock()
	return fs.NewListDirStream(list), 0
}

// Statfs implements fs.NodeStatfser with FSSTAT.
func (n *Node) Statfs(ctx context.Context, out *fuse.StatfsOut) syscall.Errno {
	ctx = n.fsys.cctx(ctx)
	st, err := n.fsys.c.Fsstat(ctx, n.handle())
	if err != nil {
		return errno(err)
	}
	const bs = 4096
	out.Bsize = bs
	out.Frsize = bs
	out.Blocks = st.TotalBytes / bs
	out.Bfree = st.FreeBytes / bs
	out.Bavail = st.AvailBytes / bs
	out.Files = st.TotalFiles
	out.Ffree = st.FreeFiles
	out.NameLen = 255
	return 0
}

var (
	_ fs.NodeLookuper  = (*Node)(nil)
	_ fs.NodeGetattrer = (*Node)(nil)
	_ fs.NodeSetattrer = (*Node)(nil)
	_ fs.NodeReaddirer = (*Node)(nil)
	_ fs.NodeStatfser  = (*Node)(nil)
	_ fs.InodeEmbedder = (*Node)(nil)
)
