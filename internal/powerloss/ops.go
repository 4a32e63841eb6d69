package powerloss

import (
	"sort"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"
)

// The FUSE requests. Every one takes f.mu for its whole duration and fails
// with EIO once the power is cut, so the cut is atomic with respect to
// them: a request either finished (and its effect is in the state) before
// the cut, or fails.

const (
	entryTimeout = time.Second
	attrTimeout  = time.Second
	maxXattr     = 64 << 10
	nameMax      = 255
	renameNoRepl = 1 // RENAME_NOREPLACE
)

// begin locks f for one request and reports OK; after a cut it counts the
// refusal, leaves f unlocked and reports EIO. On OK the caller unlocks.
func (f *FS) begin() fuse.Status {
	f.mu.Lock()
	if f.cut {
		f.stats.RefusedAfterCut++
		f.mu.Unlock()
		return fuse.EIO
	}
	return fuse.OK
}

func (f *FS) get(ino uint64) (*node, fuse.Status) {
	n, ok := f.nodes[ino]
	if !ok {
		return nil, fuse.Status(syscall.ESTALE)
	}
	return n, fuse.OK
}

func (f *FS) getDir(ino uint64) (*node, fuse.Status) {
	n, st := f.get(ino)
	if !st.Ok() {
		return nil, st
	}
	if !n.isDir() {
		return nil, fuse.ENOTDIR
	}
	return n, fuse.OK
}

func nowNs() int64 { return time.Now().UnixNano() }

func (f *FS) fillAttr(n *node, a *fuse.Attr) {
	*a = fuse.Attr{Ino: n.ino, Mode: n.mode, Nlink: n.nlink, Rdev: n.rdev, Blksize: 4096}
	a.Uid, a.Gid = n.uid, n.gid
	switch {
	case n.isReg():
		a.Size, a.Blocks = uint64(n.data.size), n.data.blocks()
	case n.isDir():
		a.Size, a.Blocks = 4096, 8
	case n.mode&syscall.S_IFMT == syscall.S_IFLNK:
		a.Size = uint64(len(n.target))
	}
	a.Atime, a.Atimensec = uint64(n.atime/1e9), uint32(n.atime%1e9)
	a.Mtime, a.Mtimensec = uint64(n.mtime/1e9), uint32(n.mtime%1e9)
	a.Ctime, a.Ctimensec = uint64(n.ctime/1e9), uint32(n.ctime%1e9)
}

func (f *FS) fillEntry(n *node, out *fuse.EntryOut) {
	n.lookups++
	out.NodeId, out.Generation = n.ino, 1
	out.SetEntryTimeout(entryTimeout)
	out.SetAttrTimeout(attrTimeout)
	f.fillAttr(n, &out.Attr)
}

// maybeFree drops an inode nobody can reach any more (no name, no open
// file, no kernel reference).
func (f *FS) maybeFree(n *node) {
	if n.nlink == 0 && n.opens == 0 && n.lookups == 0 && n.ino != rootIno {
		delete(f.nodes, n.ino)
	}
}

func (f *FS) Lookup(cancel <-chan struct{}, h *fuse.InHeader, name string, out *fuse.EntryOut) fuse.Status {
	if st := f.begin(); !st.Ok() {
		return st
	}
	defer f.mu.Unlock()
	if name == "." || name == ".." { // export support: by node id
		n, st := f.get(h.NodeId)
		if !st.Ok() {
			return st
		}
		if name == ".." {
			if !n.isDir() {
				return fuse.ENOTDIR
			}
			p := uint64(rootIno)
			if n.ino != rootIno {
				var ok bool
				if p, ok = f.parentOf(n.ino); !ok {
					return fuse.ENOENT
				}
			}
			n = f.nodes[p]
		}
		f.fillEntry(n, out)
		return fuse.OK
	}
	d, st := f.getDir(h.NodeId)
	if !st.Ok() {
		return st
	}
	ino, ok := d.kids[name]
	if !ok {
		return fuse.ENOENT
	}
	f.fillEntry(f.nodes[ino], out)
	return fuse.OK
}

func (f *FS) Forget(nodeid, nlookup uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if n, ok := f.nodes[nodeid]; ok {
		n.lookups -= min(n.lookups, nlookup)
		f.maybeFree(n)
	}
}

func (f *FS) GetAttr(cancel <-chan struct{}, in *fuse.GetAttrIn, out *fuse.AttrOut) fuse.Status {
	if st := f.begin(); !st.Ok() {
		return st
	}
	defer f.mu.Unlock()
	n, st := f.get(in.NodeId)
	if !st.Ok() {
		return st
	}
	out.SetTimeout(attrTimeout)
	f.fillAttr(n, &out.Attr)
	return fuse.OK
}

func (f *FS) SetAttr(cancel <-chan struct{}, in *fuse.SetAttrIn, out *fuse.AttrOut) fuse.Status {
	if st := f.begin(); !st.Ok() {
		return st
	}
	defer f.mu.Unlock()
	n, st := f.get(in.NodeId)
	if !st.Ok() {
		return st
	}
	now := nowNs()
	if in.Valid&fuse.FATTR_SIZE != 0 {
		if !n.isReg() {
			return fuse.EINVAL
		}
		n.data.truncate(int64(in.Size))
		n.mtime = now
	}
	if in.Valid&fuse.FATTR_MODE != 0 {
		n.mode = n.mode&syscall.S_IFMT | in.Mode&0o7777
	}
	if in.Valid&fuse.FATTR_UID != 0 {
		n.uid = in.Uid
	}
	if in.Valid&fuse.FATTR_GID != 0 {
		n.gid = in.Gid
	}
	switch {
	case in.Valid&fuse.FATTR_ATIME_NOW != 0:
		n.atime = now
	case in.Valid&fuse.FATTR_ATIME != 0:
		n.atime = int64(in.Atime)*1e9 + int64(in.Atimensec)
	}
	switch {
	case in.Valid&fuse.FATTR_MTIME_NOW != 0:
		n.mtime = now
	case in.Valid&fuse.FATTR_MTIME != 0:
		n.mtime = int64(in.Mtime)*1e9 + int64(in.Mtimensec)
	}
	n.ctime = now
	if in.Valid&fuse.FATTR_CTIME != 0 {
		n.ctime = int64(in.Ctime)*1e9 + int64(in.Ctimensec)
	}
	out.SetTimeout(attrTimeout)
	f.fillAttr(n, &out.Attr)
	return fuse.OK
}

// newNode makes an inode named name in dir d (f.mu held).
func (f *FS) newNode(d *node, name string, mode, uid, gid uint32) (*node, fuse.Status) {
	if len(name) > nameMax {
		return nil, fuse.Status(syscall.ENAMETOOLONG)
	}
	if _, ok := d.kids[name]; ok {
		return nil, fuse.Status(syscall.EEXIST)
	}
	now := nowNs()
	n := &node{ino: f.nextIno, nlink: 1, data: newData(), xattr: map[string][]byte{},
		meta: meta{mode: mode, uid: uid, gid: gid, atime: now, mtime: now, ctime: now}}
	f.nextIno++
	if d.mode&syscall.S_ISGID != 0 {
		n.gid = d.gid
		if n.isDir() {
			n.mode |= syscall.S_ISGID
		}
	}
	if n.isDir() {
		n.nlink = 2
		n.kids = map[string]uint64{}
		d.nlink++
	}
	f.nodes[n.ino] = n
	d.kids[name] = n.ino
	d.mtime, d.ctime = now, now
	return n, fuse.OK
}

func (f *FS) Mknod(cancel <-chan struct{}, in *fuse.MknodIn, name string, out *fuse.EntryOut) fuse.Status {
	if st := f.begin(); !st.Ok() {
		return st
	}
	defer f.mu.Unlock()
	d, st := f.getDir(in.NodeId)
	if !st.Ok() {
		return st
	}
	n, st := f.newNode(d, name, in.Mode&^in.Umask, in.Uid, in.Gid)
	if !st.Ok() {
		return st
	}
	n.rdev = in.Rdev
	f.fillEntry(n, out)
	return fuse.OK
}

func (f *FS) Mkdir(cancel <-chan struct{}, in *fuse.MkdirIn, name string, out *fuse.EntryOut) fuse.Status {
	if st := f.begin(); !st.Ok() {
		return st
	}
	defer f.mu.Unlock()
	d, st := f.getDir(in.NodeId)
	if !st.Ok() {
		return st
	}
	n, st := f.newNode(d, name, syscall.S_IFDIR|(in.Mode&^in.Umask&0o7777), in.Uid, in.Gid)
	if !st.Ok() {
		return st
	}
	f.fillEntry(n, out)
	return fuse.OK
}

func (f *FS) Symlink(cancel <-chan struct{}, h *fuse.InHeader, target, name string, out *fuse.EntryOut) fuse.Status {
	if st := f.begin(); !st.Ok() {
		return st
	}
	defer f.mu.Unlock()
	d, st := f.getDir(h.NodeId)
	if !st.Ok() {
		return st
	}
	n, st := f.newNode(d, name, syscall.S_IFLNK|0o777, h.Uid, h.Gid)
	if !st.Ok() {
		return st
	}
	n.target = target
	f.fillEntry(n, out)
	return fuse.OK
}

func (f *FS) Readlink(cancel <-chan struct{}, h *fuse.InHeader) ([]byte, fuse.Status) {
	if st := f.begin(); !st.Ok() {
		return nil, st
	}
	defer f.mu.Unlock()
	n, st := f.get(h.NodeId)
	if !st.Ok() {
		return nil, st
	}
	if n.mode&syscall.S_IFMT != syscall.S_IFLNK {
		return nil, fuse.EINVAL
	}
	return []byte(n.target), fuse.OK
}

func (f *FS) Link(cancel <-chan struct{}, in *fuse.LinkIn, name string, out *fuse.EntryOut) fuse.Status {
	if st := f.begin(); !st.Ok() {
		return st
	}
	defer f.mu.Unlock()
	d, st := f.getDir(in.NodeId)
	if !st.Ok() {
		return st
	}
	n, st := f.get(in.Oldnodeid)
	if !st.Ok() {
		return st
	}
	if n.isDir() {
		return fuse.EPERM
	}
	if _, ok := d.kids[name]; ok {
		return fuse.Status(syscall.EEXIST)
	}
	if len(name) > nameMax {
		return fuse.Status(syscall.ENAMETOOLONG)
	}
	now := nowNs()
	d.kids[name] = n.ino
	n.nlink++
	n.ctime, d.mtime, d.ctime = now, now, now
	f.fillEntry(n, out)
	return fuse.OK
}

// unlinkName removes name from d (f.mu held); the inode goes when nothing
// holds it any more.
func (f *FS) unlinkName(d *node, name string) {
	ino := d.kids[name]
	delete(d.kids, name)
	now := nowNs()
	d.mtime, d.ctime = now, now
	n := f.nodes[ino]
	if n == nil {
		return
	}
	n.ctime = now
	if n.isDir() {
		n.nlink = 0
		d.nlink--
	} else if n.nlink > 0 {
		n.nlink--
	}
	f.maybeFree(n)
}

func (f *FS) Unlink(cancel <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	if st := f.begin(); !st.Ok() {
		return st
	}
	defer f.mu.Unlock()
	d, st := f.getDir(h.NodeId)
	if !st.Ok() {
		return st
	}
	ino, ok := d.kids[name]
	if !ok {
		return fuse.ENOENT
	}
	if f.nodes[ino].isDir() {
		return fuse.Status(syscall.EISDIR)
	}
	f.unlinkName(d, name)
	return fuse.OK
}

func (f *FS) Rmdir(cancel <-chan struct{}, h *fuse.InHeader, name string) fuse.Status {
	if st := f.begin(); !st.Ok() {
		return st
	}
	defer f.mu.Unlock()
	d, st := f.getDir(h.NodeId)
	if !st.Ok() {
		return st
	}
	ino, ok := d.kids[name]
	if !ok {
		return fuse.ENOENT
	}
	n := f.nodes[ino]
	if !n.isDir() {
		return fuse.ENOTDIR
	}
	if len(n.kids) > 0 {
		return fuse.Status(syscall.ENOTEMPTY)
	}
	f.unlinkName(d, name)
	return fuse.OK
}

// isAncestor reports whether a is b or one of b's ancestors (f.mu held).
func (f *FS) isAncestor(a, b uint64) bool {
	for range 4096 {
		if a == b {
			return true
		}
		if b == rootIno {
			return false
		}
		p, ok := f.parentOf(b)
		if !ok {
			return false
		}
		b = p
	}
	return false
}

// parentOf finds the directory holding directory ino (linear; renames of
// directories are rare in the store).
func (f *FS) parentOf(ino uint64) (uint64, bool) {
	for pi, p := range f.nodes {
		if p.isDir() {
			for _, c := range p.kids {
				if c == ino {
					return pi, true
				}
			}
		}
	}
	return 0, false
}

func (f *FS) Rename(cancel <-chan struct{}, in *fuse.RenameIn, oldName, newName string) fuse.Status {
	if st := f.begin(); !st.Ok() {
		return st
	}
	defer f.mu.Unlock()
	if in.Flags&^renameNoRepl != 0 {
		return fuse.EINVAL // RENAME_EXCHANGE and RENAME_WHITEOUT are not modelled
	}
	src, st := f.getDir(in.NodeId)
	if !st.Ok() {
		return st
	}
	dst, st := f.getDir(in.Newdir)
	if !st.Ok() {
		return st
	}
	if len(newName) > nameMax {
		return fuse.Status(syscall.ENAMETOOLONG)
	}
	ino, ok := src.kids[oldName]
	if !ok {
		return fuse.ENOENT
	}
	n := f.nodes[ino]
	if old, exists := dst.kids[newName]; exists {
		if in.Flags&renameNoRepl != 0 {
			return fuse.Status(syscall.EEXIST)
		}
		if old == ino {
			return fuse.OK // same inode: rename does nothing
		}
		o := f.nodes[old]
		switch {
		case n.isDir() && !o.isDir():
			return fuse.ENOTDIR
		case !n.isDir() && o.isDir():
			return fuse.Status(syscall.EISDIR)
		case o.isDir() && len(o.kids) > 0:
			return fuse.Status(syscall.ENOTEMPTY)
		}
	}
	if n.isDir() && f.isAncestor(ino, dst.ino) {
		return fuse.EINVAL
	}
	if _, exists := dst.kids[newName]; exists {
		f.unlinkName(dst, newName)
	}
	delete(src.kids, oldName)
	dst.kids[newName] = ino
	if n.isDir() && src != dst {
		src.nlink--
		dst.nlink++
	}
	now := nowNs()
	src.mtime, src.ctime, dst.mtime, dst.ctime, n.ctime = now, now, now, now, now
	return fuse.OK
}

func (f *FS) Access(cancel <-chan struct{}, in *fuse.AccessIn) fuse.Status {
	if st := f.begin(); !st.Ok() {
		return st
	}
	defer f.mu.Unlock()
	_, st := f.get(in.NodeId)
	return st // permissions are checked by the kernel (default_permissions)
}

func (f *FS) GetXAttr(cancel <-chan struct{}, h *fuse.InHeader, attr string, dest []byte) (uint32, fuse.Status) {
	if st := f.begin(); !st.Ok() {
		return 0, st
	}
	defer f.mu.Unlock()
	if f.noXattr {
		return 0, fuse.Status(syscall.EOPNOTSUPP)
	}
	n, st := f.get(h.NodeId)
	if !st.Ok() {
		return 0, st
	}
	v, ok := n.xattr[attr]
	if !ok {
		return 0, fuse.ENOATTR
	}
	if len(dest) == 0 {
		return uint32(len(v)), fuse.OK
	}
	if len(dest) < len(v) {
		return uint32(len(v)), fuse.ERANGE
	}
	return uint32(copy(dest, v)), fuse.OK
}

func (f *FS) ListXAttr(cancel <-chan struct{}, h *fuse.InHeader, dest []byte) (uint32, fuse.Status) {
	if st := f.begin(); !st.Ok() {
		return 0, st
	}
	defer f.mu.Unlock()
	if f.noXattr {
		return 0, fuse.Status(syscall.EOPNOTSUPP)
	}
	n, st := f.get(h.NodeId)
	if !st.Ok() {
		return 0, st
	}
	names := make([]string, 0, len(n.xattr))
	for k := range n.xattr {
		names = append(names, k)
	}
	sort.Strings(names)
	var b []byte
	for _, k := range names {
		b = append(append(b, k...), 0)
	}
	if len(dest) == 0 {
		return uint32(len(b)), fuse.OK
	}
	if len(dest) < len(b) {
		return uint32(len(b)), fuse.ERANGE
	}
	return uint32(copy(dest, b)), fuse.OK
}

func (f *FS) SetXAttr(cancel <-chan struct{}, in *fuse.SetXAttrIn, attr string, data []byte) fuse.Status {
	if st := f.begin(); !st.Ok() {
		return st
	}
	defer f.mu.Unlock()
	if f.noXattr {
		return fuse.Status(syscall.EOPNOTSUPP)
	}
	n, st := f.get(in.NodeId)
	if !st.Ok() {
		return st
	}
	if len(data) > maxXattr {
		return fuse.Status(syscall.E2BIG)
	}
	_, exists := n.xattr[attr]
	if in.Flags&1 != 0 && exists { // XATTR_CREATE
		return fuse.Status(syscall.EEXIST)
	}
	if in.Flags&2 != 0 && !exists { // XATTR_REPLACE
		return fuse.ENOATTR
	}
	n.xattr[attr] = append([]byte(nil), data...)
	n.ctime = nowNs()
	return fuse.OK
}

func (f *FS) RemoveXAttr(cancel <-chan struct{}, h *fuse.InHeader, attr string) fuse.Status {
	if st := f.begin(); !st.Ok() {
		return st
	}
	defer f.mu.Unlock()
	if f.noXattr {
		return fuse.Status(syscall.EOPNOTSUPP)
	}
	n, st := f.get(h.NodeId)
	if !st.Ok() {
		return st
	}
	if _, ok := n.xattr[attr]; !ok {
		return fuse.ENOATTR
	}
	delete(n.xattr, attr)
	n.ctime = nowNs()
	return fuse.OK
}

func (f *FS) newFh(ino uint64) uint64 {
	f.nextFh++
	f.fhs[f.nextFh] = &handle{ino: ino}
	return f.nextFh
}

func (f *FS) Create(cancel <-chan struct{}, in *fuse.CreateIn, name string, out *fuse.CreateOut) fuse.Status {
	if st := f.begin(); !st.Ok() {
		return st
	}
	defer f.mu.Unlock()
	d, st := f.getDir(in.NodeId)
	if !st.Ok() {
		return st
	}
	n, st := f.newNode(d, name, syscall.S_IFREG|(in.Mode&^in.Umask&0o7777), in.Uid, in.Gid)
	if !st.Ok() {
		return st
	}
	f.fillEntry(n, &out.EntryOut)
	n.opens++
	out.Fh = f.newFh(n.ino)
	return fuse.OK
}

func (f *FS) Open(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	if st := f.begin(); !st.Ok() {
		return st
	}
	defer f.mu.Unlock()
	n, st := f.get(in.NodeId)
	if !st.Ok() {
		return st
	}
	if n.isDir() {
		return fuse.Status(syscall.EISDIR)
	}
	n.opens++
	out.Fh = f.newFh(n.ino)
	return fuse.OK
}

func (f *FS) Read(cancel <-chan struct{}, in *fuse.ReadIn, buf []byte) (fuse.ReadResult, fuse.Status) {
	if st := f.begin(); !st.Ok() {
		return nil, st
	}
	defer f.mu.Unlock()
	n, st := f.get(in.NodeId)
	if !st.Ok() {
		return nil, st
	}
	if len(buf) > int(in.Size) {
		buf = buf[:in.Size]
	}
	m := n.data.readAt(buf, int64(in.Offset))
	return fuse.ReadResultData(buf[:m]), fuse.OK
}

func (f *FS) Write(cancel <-chan struct{}, in *fuse.WriteIn, data []byte) (uint32, fuse.Status) {
	if st := f.begin(); !st.Ok() {
		return 0, st
	}
	defer f.mu.Unlock()
	n, st := f.get(in.NodeId)
	if !st.Ok() {
		return 0, st
	}
	if int64(in.Offset)+int64(len(data)) > 1<<40 {
		return 0, fuse.Status(syscall.EFBIG)
	}
	n.data.writeAt(data, int64(in.Offset))
	now := nowNs()
	n.mtime, n.ctime = now, now
	f.stats.Writes++
	return uint32(len(data)), fuse.OK
}

func (f *FS) Flush(cancel <-chan struct{}, in *fuse.FlushIn) fuse.Status {
	if st := f.begin(); !st.Ok() {
		return st
	}
	f.mu.Unlock()
	return fuse.OK // close(2) makes nothing durable
}

func (f *FS) Release(cancel <-chan struct{}, in *fuse.ReleaseIn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if h, ok := f.fhs[in.Fh]; ok {
		delete(f.fhs, in.Fh)
		if n, ok := f.nodes[h.ino]; ok {
			n.opens--
			f.maybeFree(n)
		}
	}
}

func (f *FS) Fsync(cancel <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	f.waitHold(cancel, in.NodeId)
	if st := f.begin(); !st.Ok() {
		return st
	}
	defer f.mu.Unlock()
	n, st := f.get(in.NodeId)
	if !st.Ok() {
		return st
	}
	// fdatasync (FsyncFlags&1) is modelled like fsync: size and xattrs the
	// store depends on are part of what it must persist.
	f.syncNode(n)
	return fuse.OK
}

func (f *FS) FsyncDir(cancel <-chan struct{}, in *fuse.FsyncIn) fuse.Status {
	return f.Fsync(cancel, in)
}

func (f *FS) Fallocate(cancel <-chan struct{}, in *fuse.FallocateIn) fuse.Status {
	if st := f.begin(); !st.Ok() {
		return st
	}
	defer f.mu.Unlock()
	n, st := f.get(in.NodeId)
	if !st.Ok() {
		return st
	}
	const keepSize, punchHole = 0x1, 0x2
	off, length := int64(in.Offset), int64(in.Length)
	switch in.Mode {
	case 0, keepSize:
		if in.Mode == 0 && off+length > n.data.size {
			n.data.size = off + length
		}
	case punchHole | keepSize:
		n.data.zero(off, min(length, max(n.data.size-off, 0)))
	default:
		return fuse.Status(syscall.EOPNOTSUPP)
	}
	now := nowNs()
	n.mtime, n.ctime = now, now
	return fuse.OK
}

func (f *FS) Lseek(cancel <-chan struct{}, in *fuse.LseekIn, out *fuse.LseekOut) fuse.Status {
	if st := f.begin(); !st.Ok() {
		return st
	}
	defer f.mu.Unlock()
	n, st := f.get(in.NodeId)
	if !st.Ok() {
		return st
	}
	const seekData, seekHole = 3, 4
	if in.Whence != seekData && in.Whence != seekHole {
		return fuse.EINVAL
	}
	off, ok := n.data.seekData(int64(in.Offset), in.Whence == seekData)
	if !ok {
		return fuse.Status(syscall.ENXIO)
	}
	out.Offset = uint64(off)
	return fuse.OK
}

func (f *FS) OpenDir(cancel <-chan struct{}, in *fuse.OpenIn, out *fuse.OpenOut) fuse.Status {
	if st := f.begin(); !st.Ok() {
		return st
	}
	defer f.mu.Unlock()
	d, st := f.getDir(in.NodeId)
	if !st.Ok() {
		return st
	}
	names := make([]string, 0, len(d.kids))
	for k := range d.kids {
		names = append(names, k)
	}
	sort.Strings(names)
	ents := []fuse.DirEntry{{Name: ".", Ino: d.ino, Mode: syscall.S_IFDIR}, {Name: "..", Ino: rootIno, Mode: syscall.S_IFDIR}}
	for _, k := range names {
		c := f.nodes[d.kids[k]]
		ents = append(ents, fuse.DirEntry{Name: k, Ino: c.ino, Mode: c.mode})
	}
	for i := range ents {
		ents[i].Off = uint64(i + 1)
	}
	out.Fh = f.newFh(d.ino)
	f.fhs[out.Fh].entries = ents
	return fuse.OK
}

func (f *FS) ReadDir(cancel <-chan struct{}, in *fuse.ReadIn, out *fuse.DirEntryList) fuse.Status {
	if st := f.begin(); !st.Ok() {
		return st
	}
	defer f.mu.Unlock()
	h, ok := f.fhs[in.Fh]
	if !ok {
		return fuse.EBADF
	}
	for i := int(in.Offset); i < len(h.entries); i++ {
		if !out.AddDirEntry(h.entries[i]) {
			break
		}
	}
	return fuse.OK
}

func (f *FS) ReleaseDir(in *fuse.ReleaseIn) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.fhs, in.Fh)
}

func (f *FS) StatFs(cancel <-chan struct{}, h *fuse.InHeader, out *fuse.StatfsOut) fuse.Status {
	if st := f.begin(); !st.Ok() {
		return st
	}
	defer f.mu.Unlock()
	var used uint64
	for _, n := range f.nodes {
		used += n.data.blocks() / 8
	}
	total := uint64(f.capacity) / 4096
	free := total - min(used, total)
	*out = fuse.StatfsOut{Blocks: total, Bfree: free, Bavail: free, Files: 1 << 20, Ffree: 1<<20 - uint64(len(f.nodes)), Bsize: 4096, Frsize: 4096, NameLen: nameMax}
	return fuse.OK
}
