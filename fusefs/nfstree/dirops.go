package nfstree

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fs"
	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/tristore/tristore/client/nfs"
)

// Namespace operations: create, mkdir, mknod, unlink, rmdir, rename, link,
// symlink, readlink. Each one is a single NFS call; the directory's
// READDIRPLUS cache is dropped after any change to it.

func errorsIsNotSupp(err error) bool { return errors.Is(err, nfs.ErrNotSupp) }

// owner returns the SETATTR owner fields for a new object: the calling
// process's uid/gid. All calls go out under the mount's one AUTH_SYS
// identity, so without this every file would belong to that identity;
// when that identity is root the server lets us set the real owner.
func (n *Node) owner(ctx context.Context, s *nfs.SetAttr) {
	if os.Geteuid() != 0 || n.fsys.opts.CallerCreds {
		// With caller credentials the server sets the owner itself.
		return
	}
	if caller, ok := fuse.FromContext(ctx); ok && caller != nil {
		if caller.Uid != 0 {
			u := caller.Uid
			s.UID = &u
		}
		if caller.Gid != 0 {
			g := caller.Gid
			s.GID = &g
		}
	}
}

// Create implements fs.NodeCreater: EXCLUSIVE (with a random verifier)
// for O_EXCL, as the Linux client does, so a create whose reply was lost
// can be sent again safely; else UNCHECKED.
func (n *Node) Create(ctx context.Context, name string, flags uint32, mode uint32, out *fuse.EntryOut) (*fs.Inode, fs.FileHandle, uint32, syscall.Errno) {
	ctx = n.fsys.cctx(ctx)
	m := mode & 0o7777
	s := nfs.SetAttr{Mode: &m}
	n.owner(ctx, &s)
	how := nfs.Unchecked
	var verf nfs.Verifier
	if flags&syscall.O_EXCL != 0 {
		how = nfs.Exclusive
		binary.LittleEndian.PutUint64(verf[:], rand.Uint64())
	} else if flags&syscall.O_TRUNC != 0 {
		sz := uint64(0)
		s.Size = &sz
	}
	fh, a, err := n.fsys.c.Create(ctx, n.handle(), name, how, s, verf)
	n.forgetPlus()
	if err != nil {
		return nil, nil, 0, errno(err)
	}
	ino := n.child(ctx, fh, a, out)
	child := ino.Operations().(*Node)
	h, fuseFlags := child.newHandle(ctx, flags, a)
	return ino, h, fuseFlags, 0
}

// Mkdir implements fs.NodeMkdirer.
func (n *Node) Mkdir(ctx context.Context, name string, mode uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	ctx = n.fsys.cctx(ctx)
	m := mode & 0o7777
	s := nfs.SetAttr{Mode: &m}
	n.owner(ctx, &s)
	fh, a, err := n.fsys.c.Mkdir(ctx, n.handle(), name, s)
	n.forgetPlus()
	if err != nil {
		return nil, errno(err)
	}
	return n.child(ctx, fh, a, out), 0
}

// Mknod implements fs.NodeMknoder for FIFOs, sockets and devices.
func (n *Node) Mknod(ctx context.Context, name string, mode uint32, dev uint32, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	ctx = n.fsys.cctx(ctx)
	var typ nfs.FileType
	switch mode & syscall.S_IFMT {
	case syscall.S_IFIFO:
		typ = nfs.TypeFIFO
	case syscall.S_IFSOCK:
		typ = nfs.TypeSock
	case syscall.S_IFCHR:
		typ = nfs.TypeChr
	case syscall.S_IFBLK:
		typ = nfs.TypeBlk
	case syscall.S_IFREG, 0:
		var verf nfs.Verifier
		binary.LittleEndian.PutUint64(verf[:], rand.Uint64())
		fh, a, err := n.fsys.c.Create(ctx, n.handle(), name, nfs.Exclusive, nfs.SetAttr{Mode: ptr(mode & 0o7777)}, verf)
		n.forgetPlus()
		if err != nil {
			return nil, errno(err)
		}
		return n.child(ctx, fh, a, out), 0
	default:
		return nil, syscall.EINVAL
	}
	m := mode & 0o7777
	s := nfs.SetAttr{Mode: &m}
	n.owner(ctx, &s)
	major, minor := (dev>>8)&0xfff, (dev&0xff)|((dev>>12)&0xfff00)
	fh, a, err := n.fsys.c.Mknod(ctx, n.handle(), name, typ, s, major, minor)
	n.forgetPlus()
	if err != nil {
		return nil, errno(err)
	}
	return n.child(ctx, fh, a, out), 0
}

func ptr(v uint32) *uint32 { return &v }

// Unlink implements fs.NodeUnlinker. A file that is still open here is
// renamed to a hidden name instead and removed at its last close (the
// kernel NFS client's "silly rename"), so open descriptors keep working as
// POSIX promises.
//
// FUSE sends RELEASE asynchronously after the last close(2), so a program
// that closes and then unlinks (the common case) can reach Unlink while
// its RELEASE is still on the way; stillOpen waits briefly for it rather
// than silly-renaming a file nobody has open.
func (n *Node) Unlink(ctx context.Context, name string) syscall.Errno {
	ctx = n.fsys.cctx(ctx)
	defer n.forgetPlus()
	hidden, e := n.sillyRename(ctx, name)
	if hidden != nil || e != 0 {
		return e
	}
	return errno(n.fsys.c.Remove(ctx, n.handle(), name))
}

// sillyRename moves name in n to a hidden name if it is a file open
// through this mount, and records the hidden name on its node so the last
// Release removes it. It returns the node it renamed (nil if none). Unlink
// uses it, and so does Rename for the file a rename would replace: the
// server drops the replaced inode (its handle goes stale) just as it would
// on REMOVE.
func (n *Node) sillyRename(ctx context.Context, name string) (*Node, syscall.Errno) {
	ch := n.GetChild(name)
	if ch == nil || ch.IsDir() {
		return nil, 0
	}
	cn, ok := ch.Operations().(*Node)
	if !ok || !cn.stillOpen() {
		return nil, 0
	}
	hidden := fmt.Sprintf(".nfs%016x%08x", ch.StableAttr().Ino, rand.Uint32())
	if err := n.fsys.c.Rename(ctx, n.handle(), name, n.handle(), hidden); err != nil {
		return nil, errno(err)
	}
	cn.mu.Lock()
	cn.sillyDir, cn.sillyName = n.handle(), hidden
	cn.mu.Unlock()
	return cn, 0
}

// unsilly puts a silly-renamed file back under name (the rename that was
// to replace it failed), unless its last close already removed it.
func (n *Node) unsilly(ctx context.Context, cn *Node, name string) {
	cn.mu.Lock()
	dir, hidden := cn.sillyDir, cn.sillyName
	cn.sillyDir, cn.sillyName = nil, ""
	cn.mu.Unlock()
	if hidden == "" {
		return
	}
	if err := n.fsys.c.Rename(ctx, dir, hidden, n.handle(), name); err != nil {
		// Keep the hidden name so the last close still removes it.
		cn.mu.Lock()
		cn.sillyDir, cn.sillyName = dir, hidden
		cn.mu.Unlock()
	}
}

// Rmdir implements fs.NodeRmdirer.
func (n *Node) Rmdir(ctx context.Context, name string) syscall.Errno {
	ctx = n.fsys.cctx(ctx)
	err := n.fsys.c.Rmdir(ctx, n.handle(), name)
	n.forgetPlus()
	return errno(err)
}

// renameNoReplace and renameExchange are the renameat2 flags.
const (
	renameNoReplace = 1
	renameExchange  = 2
)

// Rename implements fs.NodeRenamer. NFS v3 RENAME always replaces, so
// RENAME_NOREPLACE is checked with a LOOKUP first (not atomic against other
// clients, as with the kernel NFS client) and RENAME_EXCHANGE is refused.
func (n *Node) Rename(ctx context.Context, name string, newParent fs.InodeEmbedder, newName string, flags uint32) syscall.Errno {
	ctx = n.fsys.cctx(ctx)
	np, ok := newParent.(*Node)
	if !ok {
		return syscall.EXDEV
	}
	if flags&renameExchange != 0 {
		return syscall.EINVAL
	}
	if flags&renameNoReplace != 0 {
		if _, _, err := n.fsys.c.Lookup(ctx, np.handle(), newName); err == nil {
			return syscall.EEXIST
		} else if !errors.Is(err, nfs.ErrNoEnt) {
			return errno(err)
		}
	}
	// A file this rename replaces may still be open here (a program
	// reading a config file while an editor saves it as tmp + rename):
	// silly-rename it first, as the Linux client does, so its open
	// descriptors keep reading the old contents instead of going stale.
	// Renaming a file onto itself (the same node) replaces nothing.
	var replaced *Node
	if ch := np.GetChild(newName); ch != nil && ch != n.GetChild(name) {
		var e syscall.Errno
		if replaced, e = np.sillyRename(ctx, newName); e != 0 {
			return e
		}
	}
	err := n.fsys.c.Rename(ctx, n.handle(), name, np.handle(), newName)
	if err != nil && replaced != nil {
		np.unsilly(ctx, replaced, newName)
	}
	n.forgetPlus()
	np.forgetPlus()
	return errno(err)
}

// Link implements fs.NodeLinker.
func (n *Node) Link(ctx context.Context, target fs.InodeEmbedder, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	ctx = n.fsys.cctx(ctx)
	t, ok := target.(*Node)
	if !ok {
		return nil, syscall.EXDEV
	}
	a, err := n.fsys.c.Link(ctx, t.handle(), n.handle(), name)
	n.forgetPlus()
	if err != nil {
		return nil, errno(err)
	}
	if a == nil {
		if a, err = n.fsys.c.Getattr(ctx, t.handle()); err != nil {
			return nil, errno(err)
		}
	}
	return n.child(ctx, t.handle(), a, out), 0
}

// Symlink implements fs.NodeSymlinker.
func (n *Node) Symlink(ctx context.Context, target, name string, out *fuse.EntryOut) (*fs.Inode, syscall.Errno) {
	ctx = n.fsys.cctx(ctx)
	var s nfs.SetAttr
	n.owner(ctx, &s)
	fh, a, err := n.fsys.c.Symlink(ctx, n.handle(), name, target, s)
	n.forgetPlus()
	if err != nil {
		return nil, errno(err)
	}
	return n.child(ctx, fh, a, out), 0
}

// Readlink implements fs.NodeReadlinker.
func (n *Node) Readlink(ctx context.Context) ([]byte, syscall.Errno) {
	ctx = n.fsys.cctx(ctx)
	s, err := n.fsys.c.Readlink(ctx, n.handle())
	if err != nil {
		return nil, errno(err)
	}
	return []byte(s), 0
}

var (
	_ fs.NodeCreater    = (*Node)(nil)
	_ fs.NodeMkdirer    = (*Node)(nil)
	_ fs.NodeMknoder    = (*Node)(nil)
	_ fs.NodeUnlinker   = (*Node)(nil)
	_ fs.NodeRmdirer    = (*Node)(nil)
	_ fs.NodeRenamer    = (*Node)(nil)
	_ fs.NodeLinker     = (*Node)(nil)
	_ fs.NodeSymlinker  = (*Node)(nil)
	_ fs.NodeReadlinker = (*Node)(nil)
)

// releaseWait bounds how long Unlink waits for RELEASEs in flight.
const releaseWait = 200 * time.Millisecond

// stillOpen reports whether the file has open handles (and no silly name
// yet), giving in-flight RELEASEs up to releaseWait to arrive.
func (n *Node) stillOpen() bool {
	deadline := time.Now().Add(releaseWait)
	for {
		n.mu.Lock()
		open := n.opens > 0 && n.sillyName == ""
		n.mu.Unlock()
		if !open || time.Now().After(deadline) {
			return open
		}
		time.Sleep(2 * time.Millisecond)
	}
}
