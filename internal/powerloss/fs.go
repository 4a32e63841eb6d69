// Package powerloss is a FUSE file system for power-loss tests, in the
// spirit of LazyFS (the file system Jepsen uses): it holds the whole tree
// in memory in two states and can lose everything that was not made
// durable, as a machine losing power would.
//
//	programs ──► kernel ──► FUSE ──► volatile state ──fsync──► durable state
//	                                       ▲                        │
//	                                       └──── Cut + Remount ◄────┘
//
// The volatile state is what programs see. The durable state changes only
// on these calls, modelling ext4 with data=ordered strictly (nothing the
// journal might happen to commit early is kept):
//
//   - fsync or fdatasync of a file or directory makes that inode's data,
//     size, attributes (mode, owner, times) and extended attributes durable;
//   - fsync of a directory also makes its entries durable: every name it
//     holds now (created, linked, renamed in), and the absence of every name
//     it no longer holds (unlinked, renamed away). An inode first made
//     reachable this way exists durably with its type, mode, owner and
//     symlink target, but empty (size 0, no xattrs, a directory with no
//     entries) until it is fsynced itself;
//   - a rename is two directory changes: the new name is durable after the
//     target directory's fsync, the removal of the old one after the source
//     directory's. A program that fsyncs only one of two different
//     directories may find the file under both names, or neither.
//
// Cut is the power loss: from that instant every request fails with EIO
// (so nothing acknowledged after the cut can have been made durable after
// it), and Remount then replaces the volatile state by the durable one, as
// a reboot would. Directories reachable twice after a cut (a directory
// renamed with only one side fsynced) keep their first name in breadth-first
// order, as fsck would keep one; unreachable inodes are dropped.
//
// Supported: regular files (sparse, 64 KiB chunk map, copy-on-write between
// the two states), directories, symlinks, hard links, device nodes and
// fifos (metadata only), xattrs, fallocate (allocate and PUNCH_HOLE),
// SEEK_DATA/SEEK_HOLE, rename with RENAME_NOREPLACE, statfs. File locks
// are left to the kernel (local to the mount, as flock needs). There is
// no support for O_TMPFILE, RENAME_EXCHANGE or mmap writes (the store does
// not use them).
package powerloss

import (
	"errors"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/tristore/tristore/internal/fusectl"
)

const rootIno = 1

// meta is an inode's attributes.
type meta struct {
	mode, uid, gid, rdev uint32
	atime, mtime, ctime  int64 // ns since the epoch
}

// node is an inode in the volatile state.
type node struct {
	ino uint64
	meta
	nlink   uint32
	data    fileData
	target  string            // symlink
	kids    map[string]uint64 // directory entries
	xattr   map[string][]byte
	lookups uint64 // kernel references (FORGET gives them back)
	opens   int
}

func (n *node) isDir() bool { return n.mode&syscall.S_IFMT == syscall.S_IFDIR }
func (n *node) isReg() bool { return n.mode&syscall.S_IFMT == syscall.S_IFREG }

// dnode is an inode in the durable state; a durable snapshot never changes
// after it is made (a later sync replaces it).
type dnode struct {
	meta
	data   durData
	target string
	kids   map[string]uint64
	xattr  map[string][]byte
}

// handle is an open file or directory.
type handle struct {
	ino     uint64
	entries []fuse.DirEntry // directory listing taken at OPENDIR
}

// Stats counts what the file system was asked to do (for test logs).
type Stats struct {
	FileSyncs, DirSyncs, Writes, Cuts, RefusedAfterCut int64
}

// FS is the power-loss file system. Create it with New, mount it with
// Mount, cut power with Cut and bring back the durable state with Remount.
type FS struct {
	fuse.RawFileSystem

	mu      sync.Mutex
	cut     bool
	nodes   map[uint64]*node
	dur     map[uint64]*dnode
	nextIno uint64
	fhs     map[uint64]*handle
	nextFh  uint64
	stats   Stats
	// Capacity is the size statfs reports (bytes); 0 means 8 GiB.
	capacity int64

	srv  *fuse.Server
	dir  string
	conn uint64 // fusectl connection number of the mount
	// noXattr makes every xattr request fail with EOPNOTSUPP, like a file
	// system without user xattrs (the store then keeps metadata in sidecar
	// files).
	noXattr bool
	// noExport mounts without FUSE export support: open_by_handle_at then
	// fails, as on file systems that cannot decode handles.
	noExport bool
	// holds are the fsyncs a test holds back (HoldFsync).
	holds []*fsyncHold
}

// fsyncHold is one HoldFsync: the first fsync of ino waits for release.
type fsyncHold struct {
	ino     uint64
	fired   bool
	held    chan struct{}
	release chan struct{}
}

// HoldFsync makes the next fsync of the file or directory at rel (a path
// inside the mount that exists now) wait until release is called; held
// is closed when that fsync arrives. The held fsync then runs as usual,
// so after a Cut it fails with EIO and makes nothing durable: a test can
// cut the power while one writer's fsync is "still on its way to the
// disk" and see what another writer's acknowledgement relied on.
func (f *FS) HoldFsync(rel string) (held <-chan struct{}, release func(), err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	ino := uint64(rootIno)
	for _, name := range strings.Split(filepath.Clean("/"+rel), "/") {
		if name == "" {
			continue
		}
		n := f.nodes[ino]
		if n == nil || !n.isDir() {
			return nil, nil, fmt.Errorf("powerloss: hold %s: not a directory on the way", rel)
		}
		next, ok := n.kids[name]
		if !ok {
			return nil, nil, fmt.Errorf("powerloss: hold %s: %s does not exist", rel, name)
		}
		ino = next
	}
	h := &fsyncHold{ino: ino, held: make(chan struct{}), release: make(chan struct{})}
	f.holds = append(f.holds, h)
	var once sync.Once
	return h.held, func() { once.Do(func() { close(h.release) }) }, nil
}

// waitHold blocks an fsync of ino that a HoldFsync holds (the first one
// after the hold) until it is released or the request is interrupted.
func (f *FS) waitHold(cancel <-chan struct{}, ino uint64) {
	f.mu.Lock()
	var h *fsyncHold
	for _, c := range f.holds {
		if c.ino == ino && !c.fired {
			c.fired, h = true, c
			break
		}
	}
	f.mu.Unlock()
	if h == nil {
		return
	}
	close(h.held)
	select {
	case <-h.release:
	case <-cancel:
	}
}

// New returns an empty file system (a durable root directory, mode 0755).
func New() *FS {
	now := time.Now().UnixNano()
	f := &FS{
		RawFileSystem: fuse.NewDefaultRawFileSystem(),
		nodes:         map[uint64]*node{},
		dur:           map[uint64]*dnode{},
		nextIno:       rootIno + 1,
		fhs:           map[uint64]*handle{},
		capacity:      8 << 30,
	}
	m := meta{mode: syscall.S_IFDIR | 0o755, atime: now, mtime: now, ctime: now}
	f.dur[rootIno] = &dnode{meta: m, kids: map[string]uint64{}, xattr: map[string][]byte{}}
	f.restore()
	return f
}

// DisableXattrs makes the file system refuse extended attributes
// (EOPNOTSUPP), as one mounted without user_xattr would. Call it before
// Mount.
func (f *FS) DisableXattrs() {
	f.mu.Lock()
	f.noXattr = true
	f.mu.Unlock()
}

// DisableExport mounts without export support, so file handles cannot be
// opened (the NFS server then uses its own handle index). Call it before
// Mount.
func (f *FS) DisableExport() {
	f.mu.Lock()
	f.noExport = true
	f.mu.Unlock()
}

// Mount serves the file system at dir (root only: it mounts directly).
func (f *FS) Mount(dir string) error {
	f.mu.Lock()
	if f.srv != nil {
		f.mu.Unlock()
		return errors.New("powerloss: already mounted")
	}
	extra := uint64(fuse.CAP_EXPORT_SUPPORT)
	if f.noExport {
		extra = 0
	}
	f.mu.Unlock()
	srv, err := fuse.NewServer(f, dir, &fuse.MountOptions{
		AllowOther:           true,
		DirectMountStrict:    true,
		FsName:               "powerloss",
		Name:                 "powerloss",
		Options:              []string{"default_permissions"},
		MaxWrite:             1 << 20,
		DisabledCapabilities: fuse.CAP_READDIRPLUS,
		// Export support lets open_by_handle_at find an inode the kernel
		// has forgotten (LOOKUP of "." and ".." by node id), so file
		// handles survive a remount as ext4's survive a reboot: the NFS
		// server's handles from before a cut must still resolve after it.
		ExtraCapabilities: extra,
	})
	if err != nil {
		return fmt.Errorf("powerloss: mount %s: %w", dir, err)
	}
	go srv.Serve()
	if err := srv.WaitMount(); err != nil {
		srv.Unmount()
		return fmt.Errorf("powerloss: mount %s: %w", dir, err)
	}
	f.mu.Lock()
	f.srv, f.dir, f.conn = srv, dir, fusectl.Conn(dir)
	f.mu.Unlock()
	return nil
}

// Cut is the power loss: from now on every request fails with EIO, so
// nothing more becomes durable and nothing more is acknowledged by the
// file system. The processes using the mount should be killed next, then
// Remount shows what survived.
func (f *FS) Cut() {
	f.mu.Lock()
	f.cut = true
	f.stats.Cuts++
	f.mu.Unlock()
}

// Remount is the reboot after Cut (or a clean remount without one): it
// unmounts, replaces the volatile state by the durable one and mounts
// again at the same directory. Every process with a file open on the
// mount must be gone.
func (f *FS) Remount() error {
	f.mu.Lock()
	f.cut = true // no request may change anything while we rebuild
	dir := f.dir
	f.mu.Unlock()
	if err := f.Unmount(); err != nil {
		return err
	}
	f.mu.Lock()
	f.restore()
	f.mu.Unlock()
	return f.Mount(dir)
}

// unmountWait bounds each wait for the FUSE server to stop in Unmount
// (a variable so the package's tests can shorten it).
var unmountWait = 10 * time.Second

// Unmount unmounts (a busy mount is aborted through fusectl and detached,
// so a test never leaves a mount behind). The state is kept.
//
// A process that made a new mount namespace while the file system was
// mounted (unshare --mount: a benchmark script of scripts/bench run at the
// same time was seen to) holds a copy of the mount: the unmount here
// succeeds, but the FUSE connection lives on and the server's readers
// never end. fusectl.Unmount bounds that wait (unmountWait), aborts the
// connection (the copy then fails every request with ENOTCONN) and gives
// the server another unmountWait; an error says if even that did not stop
// it.
func (f *FS) Unmount() error {
	f.mu.Lock()
	srv, dir, conn := f.srv, f.dir, f.conn
	f.srv = nil
	f.mu.Unlock()
	if srv == nil {
		return nil
	}
	err := fusectl.Unmount(srv.Unmount, conn, unmountWait)
	if err == nil {
		return nil
	}
	if errors.Is(err, fusectl.ErrStuck) {
		return fmt.Errorf("powerloss: %s: %w", dir, err)
	}
	fusectl.Abort(conn)
	if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) {
		return fmt.Errorf("powerloss: unmount %s: %w", dir, err)
	}
	return nil
}

// Stats returns the counters so far.
func (f *FS) Stats() Stats {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.stats
}

// restore rebuilds the volatile state from the durable one (f.mu held):
// walk from the root, count links, drop what is unreachable.
func (f *FS) restore() {
	f.nodes = map[uint64]*node{}
	f.fhs = map[uint64]*handle{}
	queue := []uint64{rootIno}
	f.nodes[rootIno] = f.fromDurable(rootIno)
	for len(queue) > 0 {
		d := f.nodes[queue[0]]
		queue = queue[1:]
		for name, ino := range d.kids {
			dn, ok := f.dur[ino]
			if !ok {
				delete(d.kids, name) // cannot happen: a synced entry has a record
				continue
			}
			if n, seen := f.nodes[ino]; seen {
				if n.isDir() {
					delete(d.kids, name) // a directory keeps one name
					continue
				}
				n.nlink++
				continue
			}
			n := f.fromDurable(ino)
			f.nodes[ino] = n
			if dn.mode&syscall.S_IFMT == syscall.S_IFDIR {
				d.nlink++ // the child's ".."
				queue = append(queue, ino)
			}
		}
	}
	for ino := range f.dur {
		if _, ok := f.nodes[ino]; !ok {
			delete(f.dur, ino)
		}
	}
	f.cut = false
}

func (f *FS) fromDurable(ino uint64) *node {
	d := f.dur[ino]
	n := &node{ino: ino, meta: d.meta, nlink: 1, data: d.data.restore(), target: d.target, xattr: cloneXattr(d.xattr)}
	if n.isDir() {
		n.nlink = 2
		n.kids = make(map[string]uint64, len(d.kids))
		for k, v := range d.kids {
			n.kids[k] = v
		}
	}
	return n
}

func cloneXattr(m map[string][]byte) map[string][]byte {
	c := make(map[string][]byte, len(m))
	for k, v := range m {
		c[k] = append([]byte(nil), v...)
	}
	return c
}

// syncNode makes n's content, attributes and xattrs durable (f.mu held);
// for a directory, also its entries (see the package doc).
func (f *FS) syncNode(n *node) {
	d := &dnode{meta: n.meta, data: n.data.snapshot(), target: n.target, xattr: cloneXattr(n.xattr)}
	if n.isDir() {
		d.kids = make(map[string]uint64, len(n.kids))
		for name, ino := range n.kids {
			d.kids[name] = ino
			if _, ok := f.dur[ino]; ok {
				continue
			}
			c := f.nodes[ino]
			cd := &dnode{meta: c.meta, target: c.target, xattr: map[string][]byte{}}
			if c.isDir() {
				cd.kids = map[string]uint64{}
			}
			f.dur[ino] = cd
		}
		f.stats.DirSyncs++
	} else {
		if old, ok := f.dur[n.ino]; ok {
			d.kids = old.kids
		}
		f.stats.FileSyncs++
	}
	f.dur[n.ino] = d
}

// DurablePaths lists every path of the durable state with its size
// (directories end in "/"), for test failure messages.
func (f *FS) DurablePaths() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	var walk func(ino uint64, p string, depth int)
	walk = func(ino uint64, p string, depth int) {
		d := f.dur[ino]
		if d == nil || depth > 64 {
			return
		}
		if d.mode&syscall.S_IFMT == syscall.S_IFDIR {
			out = append(out, p+"/")
			for name, c := range d.kids {
				walk(c, p+"/"+name, depth+1)
			}
			return
		}
		out = append(out, p+" "+strconv.FormatInt(d.data.size, 10))
	}
	walk(rootIno, "", 0)
	return out
}

var _ fuse.RawFileSystem = (*FS)(nil)
