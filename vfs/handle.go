package vfs

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Handle is an opaque, restart-stable file handle of at most MaxHandle bytes.
//
// Layout (big-endian):
//
//	[0]      version (1)
//	[1]      flags: 1 = carries a kernel file handle,
//	                2 = also carries its parent directory's kernel handle
//	[2:6]    export id
//	[6:14]   inode number
//	[14:18]  fallback mode: inode generation. Kernel mode: the parent
//	         directory's kernel handle type with flag 2, else 0 (the
//	         kernel handle carries the generation)
//	[18:22]  kernel handle type            (kernel mode only)
//	[22]     kernel handle length n <= 41  (kernel mode only)
//	[23:23+n] kernel handle bytes          (kernel mode only)
//	[23+n]   parent handle length m        (flag 2 only)
//	[24+n:24+n+m] parent handle bytes      (flag 2 only)
//
// Why a non-directory carries its parent (kernel mode): open_by_handle_at
// of a file whose dentry is not cached (after a restart or an eviction)
// gives a disconnected dentry, whose path the kernel does not know, and
// resolve must know the path to refuse objects outside the export or in
// its reserved directories. A directory is never a problem (it has one
// parent, recorded on disk as "..", so the kernel always reconnects it),
// but a file can only be found again by looking for its inode number in
// a directory. See reconnect.go for the order resolve tries (this parent,
// the hint index, a bounded search) and why. The parent is the directory
// the handle was issued through, so a file reached through two hard links
// or looked up again after a move to another directory gets a different
// (equally valid) handle, as under knfsd's subtree_check; within one
// directory a file's handle never changes. Handles issued before the
// parent was added (flag 1 alone) still resolve, via the hints or the
// search. Directories, the root and fallback-mode handles are encoded as
// before.
type Handle []byte

// MaxHandle is the longest handle (NFSv3's limit).
const MaxHandle = 64

const (
	handleVersion = 1
	flagKernel    = 1
	flagParent    = 2
	baseLen       = 18
	maxKernelLen  = MaxHandle - 23
)

// HandleExportID returns the export id inside h, so a server with several
// exports can pick the FS that issued it.
func HandleExportID(h Handle) (uint32, error) {
	if len(h) < baseLen || h[0] != handleVersion {
		return 0, ErrBadHandle
	}
	return binary.BigEndian.Uint32(h[2:6]), nil
}

// FileID returns the inode number inside h.
func (h Handle) FileID() uint64 {
	if len(h) < baseLen {
		return 0
	}
	return binary.BigEndian.Uint64(h[6:14])
}

// Identity names the object itself: the export, the inode number and (in
// the kernel handle, or the fallback generation) the inode's generation,
// without the parent directory a non-directory's handle also carries. Two
// handles of one file (issued through different directories) have one
// identity; a new file on a reused inode number has another.
func (h Handle) Identity() string {
	if len(h) < baseLen {
		return string(h)
	}
	if h[1]&flagKernel != 0 && len(h) >= 23 {
		if n := int(h[22]); 23+n <= len(h) {
			return string(h[2:14]) + string(h[18:23+n])
		}
	}
	return string(h[2:18])
}

func probeKernelHandles(rootFd int) bool {
	fh, _, err := unix.NameToHandleAt(rootFd, "", unix.AT_EMPTY_PATH)
	if err != nil || len(fh.Bytes()) > maxKernelLen {
		return false
	}
	fd, err := unix.OpenByHandleAt(rootFd, fh, unix.O_PATH|unix.O_CLOEXEC)
	if err != nil {
		return false
	}
	unix.Close(fd)
	return true
}

// handleOf builds the handle of name in dirfd (name "" means dirfd itself).
// st is the object's stat; parentIno is its directory's inode (fallback index).
func (fs *FS) handleOf(dirfd int, name string, st *unix.Stat_t, parentIno uint64, _ string) (Handle, error) {
	h := make([]byte, baseLen, MaxHandle)
	h[0] = handleVersion
	binary.BigEndian.PutUint32(h[2:6], fs.exportID)
	binary.BigEndian.PutUint64(h[6:14], st.Ino)
	if fs.kernel {
		flags := 0
		if name == "" {
			flags = unix.AT_EMPTY_PATH
		}
		kh, _, err := unix.NameToHandleAt(dirfd, name, flags)
		if err != nil {
			return nil, err
		}
		b := kh.Bytes()
		if len(b) > maxKernelLen {
			return nil, fmt.Errorf("vfs: kernel file handle of %d bytes is too long", len(b))
		}
		h[1] = flagKernel
		h = binary.BigEndian.AppendUint32(h, uint32(kh.Type()))
		h = append(h, byte(len(b)))
		h = append(h, b...)
		if name != "" && name != "." && name != ".." && st.Mode&unix.S_IFMT != unix.S_IFDIR {
			// The directory's handle, when it fits (it does on ext4, xfs,
			// tmpfs, btrfs); without it the file still resolves through
			// the hints or the search.
			if ph, _, err := unix.NameToHandleAt(dirfd, "", unix.AT_EMPTY_PATH); err == nil && len(h)+1+len(ph.Bytes()) <= MaxHandle {
				h[1] |= flagParent
				binary.BigEndian.PutUint32(h[14:18], uint32(ph.Type()))
				h = append(h, byte(len(ph.Bytes())))
				h = append(h, ph.Bytes()...)
			}
		}
		return h, nil
	}
	gen := generation(dirfd, name, st)
	binary.BigEndian.PutUint32(h[14:18], gen)
	if st.Ino != fs.rootIno && name != "" && name != "." && name != ".." {
		if err := fs.index.record(st.Ino, parentIno, name, gen); err != nil {
			return nil, err
		}
	}
	return h, nil
}

// generation reads the inode generation (FS_IOC_GETVERSION). Objects that
// cannot be opened for reading (symlinks, no permission) get 0.
func generation(dirfd int, name string, st *unix.Stat_t) uint32 {
	if st.Mode&unix.S_IFMT != unix.S_IFREG && st.Mode&unix.S_IFMT != unix.S_IFDIR {
		return 0
	}
	flags := unix.O_RDONLY | unix.O_NONBLOCK | unix.O_CLOEXEC
	if name == "" {
		// dirfd is the object itself (possibly O_PATH): reopen it through /proc.
		name = fdPath(dirfd)
	} else {
		flags |= unix.O_NOFOLLOW
	}
	fd, err := unix.Openat(dirfd, name, flags|unix.O_NOATIME, 0)
	if err != nil {
		fd, err = unix.Openat(dirfd, name, flags, 0)
		if err != nil {
			return 0
		}
	}
	defer unix.Close(fd)
	v, err := unix.IoctlGetUint32(fd, fsIocGetVersion)
	if err != nil {
		return 0
	}
	return v
}

// fsIocGetVersion is FS_IOC_GETVERSION, _IOR('v', 1, long) (not in x/sys).
const fsIocGetVersion = 0x80087601

// obj is a resolved handle: an O_PATH descriptor, its path and its stat.
type obj struct {
	fd   int
	path string
	st   unix.Stat_t
}

func (o *obj) close() {
	if o != nil && o.fd >= 0 {
		unix.Close(o.fd)
		o.fd = -1
	}
}

func (o *obj) isDir() bool { return o.st.Mode&unix.S_IFMT == unix.S_IFDIR }

// procPath names the object through /proc so it can be reopened (with a
// permission check under the caller's fsuid) for reading or writing.
func (o *obj) procPath() string { return fdPath(o.fd) }

// fdPath is the /proc magic link of descriptor fd of this process.
func fdPath(fd int) string { return "/proc/self/fd/" + strconv.Itoa(fd) }

// resolve turns a handle into an open object inside this export.
func (fs *FS) resolve(h Handle) (*obj, error) {
	if len(h) < baseLen || len(h) > MaxHandle || h[0] != handleVersion {
		return nil, ErrBadHandle
	}
	if binary.BigEndian.Uint32(h[2:6]) != fs.exportID {
		return nil, ErrStale
	}
	ino := binary.BigEndian.Uint64(h[6:14])
	o := &obj{fd: -1}
	if h[1]&flagKernel != 0 {
		kh, parent, err := fs.kernelHandles(h)
		if err != nil {
			return nil, err
		}
		fd, err := openByHandle(fs.rootFd, kh, unix.O_PATH|unix.O_CLOEXEC)
		if err != nil {
			return nil, err
		}
		o.fd = fd
		if err := unix.Fstat(fd, &o.st); err != nil {
			o.close()
			return nil, err
		}
		if o.st.Ino == fs.rootIno && o.st.Dev == fs.dev {
			o.path = fs.root
		} else if p, ok := fs.connectedPath(fd, &o.st); ok {
			o.path = p
		} else if o.isDir() || o.st.Nlink == 0 {
			// A directory the kernel could not connect is outside the
			// export (or being removed); a file with no links is gone.
			o.close()
			return nil, ErrStale
		} else if err := fs.reconnect(o, parent); err != nil {
			o.close()
			return nil, err
		}
	} else {
		if fs.index == nil {
			return nil, ErrBadHandle
		}
		p, err := fs.index.path(fs, ino)
		if err != nil {
			return nil, err
		}
		fd, err := unix.Open(p, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			return nil, ErrStale
		}
		o.fd, o.path = fd, p
		if err := unix.Fstat(fd, &o.st); err != nil {
			o.close()
			return nil, err
		}
		if gen := binary.BigEndian.Uint32(h[14:18]); gen != 0 && generation(fd, "", &o.st) != gen {
			o.close()
			return nil, ErrStale
		}
	}
	if o.st.Ino != ino || o.st.Nlink == 0 || !fs.inside(o.path) {
		o.close()
		return nil, ErrStale
	}
	return o, nil
}

// inside reports whether p is the export root or below it, and not inside a
// reserved (".tristore*") directory. A handle to anything else (another
// export, the store's own files, a deleted file) is stale for this export.
func (fs *FS) inside(p string) bool {
	if p == fs.root {
		return true
	}
	rel, ok := strings.CutPrefix(p, fs.root+"/")
	if fs.root == "/" {
		rel, ok = strings.CutPrefix(p, "/")
	}
	if !ok {
		return false
	}
	for _, c := range strings.Split(rel, "/") {
		if strings.HasPrefix(c, ReservedPrefix) {
			return false
		}
	}
	return true
}

// index is the persistent fallback map inode -> (parent inode, name,
// generation), one small file per inode under dir/<2 hex digits>/<inode hex>.
type index struct{ dir string }

func openIndex(dir string) (*index, error) {
	if err := mkdirDurable(dir, 8); err != nil {
		return nil, fmt.Errorf("vfs: handle index: %w", err)
	}
	return &index{dir: dir}, nil
}

// mkdirDurable makes dir (and up to depth missing parents, mode 0700) and
// fsyncs the parent of each directory it made, so the new path survives a
// power cut.
func mkdirDurable(dir string, depth int) error {
	if fi, err := os.Stat(dir); err == nil {
		if !fi.IsDir() {
			return &os.PathError{Op: "mkdir", Path: dir, Err: unix.ENOTDIR}
		}
		return nil
	}
	parent := filepath.Dir(dir)
	if parent != dir && depth > 0 {
		if err := mkdirDurable(parent, depth-1); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	return fsyncPath(parent)
}

// fsyncPath fsyncs the file or directory at p.
func fsyncPath(p string) error {
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	return unix.Fsync(fd)
}

func (ix *index) file(ino uint64) string {
	s := strconv.FormatUint(ino, 16)
	return filepath.Join(ix.dir, fmt.Sprintf("%02x", ino&0xff), s)
}

func (ix *index) record(ino, parent uint64, name string, gen uint32) error {
	return ix.put(ino, fmt.Sprintf("%d\n%d\n%s", parent, gen, name))
}

// put makes want the entry of ino, durably, unless it already is. The
// entry is durable before the handle goes out in a reply: a client keeps
// using a handle across a server reboot (RFC 1813), and after a power cut
// an entry that was only in the page cache would be gone, the handle stale.
func (ix *index) put(ino uint64, want string) error {
	f := ix.file(ino)
	if b, err := os.ReadFile(f); err == nil && string(b) == want {
		return nil
	}
	if err := mkdirDurable(filepath.Dir(f), 0); err != nil {
		return err
	}
	tmp := f + ".tmp" + strconv.Itoa(os.Getpid())
	if err := writeSynced(tmp, []byte(want)); err != nil {
		os.Remove(tmp)
		return err
	}
	if err := os.Rename(tmp, f); err != nil {
		return err
	}
	return fsyncPath(filepath.Dir(f))
}

// writeSynced writes data to a new file at p and fsyncs it.
func writeSynced(p string, data []byte) error {
	fl, err := os.OpenFile(p, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, err = fl.Write(data)
	if err == nil {
		err = fl.Sync()
	}
	if cerr := fl.Close(); err == nil {
		err = cerr
	}
	return err
}

// forget drops the entry of a removed inode.
func (ix *index) forget(ino uint64) { os.Remove(ix.file(ino)) }

// path rebuilds the path of ino by following parent links up to the root
// (at most 4096 levels) and checks that the result is still that inode.
func (ix *index) path(fs *FS, ino uint64) (string, error) {
	var comps []string
	cur := ino
	for depth := 0; cur != fs.rootIno; depth++ {
		if depth > 4096 {
			return "", ErrStale
		}
		b, err := os.ReadFile(ix.file(cur))
		if err != nil {
			return "", ErrStale
		}
		parts := strings.SplitN(string(b), "\n", 3)
		if len(parts) != 3 {
			return "", ErrStale
		}
		parent, err := strconv.ParseUint(parts[0], 10, 64)
		if err != nil {
			return "", ErrStale
		}
		comps = append(comps, parts[2])
		cur = parent
	}
	for i, j := 0, len(comps)-1; i < j; i, j = i+1, j-1 {
		comps[i], comps[j] = comps[j], comps[i]
	}
	p := filepath.Join(append([]string{fs.root}, comps...)...)
	var st unix.Stat_t
	if err := unix.Lstat(p, &st); err != nil || st.Ino != ino {
		return "", ErrStale
	}
	return p, nil
}
