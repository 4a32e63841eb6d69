package vfs

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Reconnecting a file handle (kernel mode).
//
// open_by_handle_at identifies the object exactly (inode and generation),
// but for a non-directory whose dentry is not in the cache it returns a
// disconnected dentry: /proc/self/fd names it "/", so resolve cannot tell
// whether it lies inside this export (a handle of another export on the
// same file system, or of the store's own .tristore files, must be stale
// here). knfsd avoids the question with no_subtree_check; we cannot,
// because exports are subtrees of one file system.
//
// We chose to find the file's name ourselves rather than rely on
// AT_HANDLE_CONNECTABLE (Linux 6.13+): that flag makes the kernel do the
// same parent lookup, but it fails outright once the file has moved to
// another directory, it needs a new kernel, and it leaves handles issued
// before it unresolvable. Here, with the disconnected descriptor held (so
// its inode number cannot be reused meanwhile), resolve looks for a
// directory entry with that inode number, in this order:
//
//  1. the parent directory carried in the handle (directories always
//     reconnect), by scanning it for the inode number: covers files never
//     moved, renamed within their directory, and hard links looked up
//     through this directory;
//  2. the hint recorded under IndexDir/parents when the file was renamed
//     into another directory over NFS (or found by a search before);
//  3. a search of the whole export, bounded by searchMaxEntries and
//     searchMaxTime: covers handles issued before parents were encoded,
//     moves made over S3 or on disk, and a removed hard link whose
//     other link lives elsewhere. A find is recorded as a hint.
//
// The entry found is opened by name (O_PATH|O_NOFOLLOW) and must be the
// same device and inode; resolve then uses that connected descriptor and
// its real path. Nothing found: ErrStale.

// searchMaxEntries and searchMaxTime bound the last-resort search of the
// export for an inode number (one resolve; the next finds the hint).
// A search that found nothing is not repeated for missTTL, so a client
// retrying a handle of an object outside the export (or beyond the bound)
// does not walk the tree on every call.
const (
	searchMaxEntries = 1_000_000
	searchMaxTime    = 5 * time.Second
	missTTL          = 30 * time.Second
	missMax          = 4096
)

// missCache remembers inodes a search did not find (at most missMax; when
// full it starts over, which costs searches, never a wrong answer).
type missCache struct {
	mu sync.Mutex
	m  map[[2]uint64]time.Time
}

func (c *missCache) recent(ino, dev uint64) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	t, ok := c.m[[2]uint64{ino, dev}]
	return ok && time.Since(t) < missTTL
}

func (c *missCache) add(ino, dev uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil || len(c.m) >= missMax {
		c.m = make(map[[2]uint64]time.Time)
	}
	c.m[[2]uint64{ino, dev}] = time.Now()
}

// kernelHandles parses the kernel handle of h and, if h carries one, its
// parent directory's kernel handle.
func (fs *FS) kernelHandles(h Handle) (unix.FileHandle, *unix.FileHandle, error) {
	if !fs.kernel || len(h) < 23 {
		return unix.FileHandle{}, nil, ErrBadHandle
	}
	end := 23 + int(h[22])
	if end > len(h) {
		return unix.FileHandle{}, nil, ErrBadHandle
	}
	kh := unix.NewFileHandle(int32(binary.BigEndian.Uint32(h[18:22])), h[23:end])
	if h[1]&flagParent == 0 {
		if end != len(h) {
			return unix.FileHandle{}, nil, ErrBadHandle
		}
		return kh, nil, nil
	}
	if end >= len(h) || int(h[end]) == 0 || end+1+int(h[end]) != len(h) {
		return unix.FileHandle{}, nil, ErrBadHandle
	}
	ph := unix.NewFileHandle(int32(binary.BigEndian.Uint32(h[14:18])), h[end+1:])
	return kh, &ph, nil
}

// openByHandle is open_by_handle_at relative to the export's mount,
// with "no such object" answers mapped to ErrStale.
func openByHandle(mountFd int, kh unix.FileHandle, flags int) (int, error) {
	fd, err := unix.OpenByHandleAt(mountFd, kh, flags)
	if err != nil {
		if errors.Is(err, unix.ESTALE) || errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EINVAL) {
			return -1, ErrStale
		}
		return -1, err
	}
	return fd, nil
}

// connectedPath returns the path of the object open as fd if the kernel
// knows it (the dentry is connected), it lies inside the export, and it
// still names the same object (st).
func (fs *FS) connectedPath(fd int, st *unix.Stat_t) (string, bool) {
	p, err := os.Readlink(fdPath(fd))
	if err != nil || !strings.HasPrefix(p, "/") || !fs.inside(p) {
		return "", false
	}
	var lst unix.Stat_t
	if unix.Lstat(p, &lst) != nil || lst.Ino != st.Ino || lst.Dev != st.Dev {
		return "", false
	}
	return p, true
}

// reconnect finds a name inside the export for the disconnected
// non-directory o and replaces o's descriptor and path with connected
// ones (see the comment at the top of this file).
func (fs *FS) reconnect(o *obj, parent *unix.FileHandle) error {
	if parent != nil && fs.reconnectIn(o, *parent, "") {
		return nil
	}
	if fs.hints != nil {
		if ph, name, ok := fs.hints.hint(o.st.Ino); ok && fs.reconnectIn(o, ph, name) {
			return nil
		}
	}
	if fs.missed.recent(o.st.Ino, o.st.Dev) {
		return ErrStale
	}
	rel, name, ok := fs.search(o.st.Ino)
	if !ok {
		fs.missed.add(o.st.Ino, o.st.Dev)
		return ErrStale
	}
	dfd, err := unix.Openat(fs.rootFd, rel, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return ErrStale
	}
	defer unix.Close(dfd)
	var dst unix.Stat_t
	if unix.Fstat(dfd, &dst) != nil {
		return ErrStale
	}
	dpath, ok := fs.connectedPath(dfd, &dst)
	if !ok || !fs.attach(o, dfd, dpath, name) {
		return ErrStale
	}
	if fs.hints != nil {
		fs.hints.setHint(o.st.Ino, dfd, name) // best effort: only speeds up the next resolve
	}
	return nil
}

// reconnectIn attaches o to its entry in the directory with kernel handle
// ph: name if it is given and still names o, else the entry found by
// scanning the directory for o's inode number.
func (fs *FS) reconnectIn(o *obj, ph unix.FileHandle, name string) bool {
	dfd, err := openByHandle(fs.rootFd, ph, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC)
	if err != nil {
		return false
	}
	defer unix.Close(dfd)
	var dst unix.Stat_t
	if unix.Fstat(dfd, &dst) != nil || dst.Mode&unix.S_IFMT != unix.S_IFDIR {
		return false
	}
	dpath, ok := fs.connectedPath(dfd, &dst)
	if !ok {
		return false
	}
	if name != "" && fs.attach(o, dfd, dpath, name) {
		return true
	}
	found := ""
	budget := searchMaxEntries
	scanDir(dfd, &budget, func(ino uint64, _ uint8, nm string) bool {
		if ino == o.st.Ino && !strings.HasPrefix(nm, ReservedPrefix) {
			found = nm
			return false
		}
		return true
	})
	return found != "" && fs.attach(o, dfd, dpath, found)
}

// attach opens name in directory dfd (path dpath) and, if it is o's
// inode, makes that connected descriptor o's.
func (fs *FS) attach(o *obj, dfd int, dpath, name string) bool {
	if checkName(name) != nil {
		return false
	}
	fd, err := unix.Openat(dfd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	var st unix.Stat_t
	p := filepath.Join(dpath, name)
	if unix.Fstat(fd, &st) != nil || st.Ino != o.st.Ino || st.Dev != o.st.Dev || !fs.inside(p) {
		unix.Close(fd)
		return false
	}
	unix.Close(o.fd)
	o.fd, o.st, o.path = fd, st, p
	return true
}

// search walks the export (depth first, skipping reserved names, not
// following symlinks) for an entry with inode number ino and returns its
// directory (relative to the root, "." for the root) and name.
func (fs *FS) search(ino uint64) (dir, name string, ok bool) {
	deadline := time.Now().Add(searchMaxTime)
	budget := searchMaxEntries
	stack := []string{"."}
	for len(stack) > 0 && budget > 0 && time.Now().Before(deadline) {
		rel := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		dfd, err := unix.Openat(fs.rootFd, rel, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			continue
		}
		scanDir(dfd, &budget, func(eino uint64, typ uint8, nm string) bool {
			if nm == "." || nm == ".." || strings.HasPrefix(nm, ReservedPrefix) {
				return true
			}
			if eino == ino {
				dir, name, ok = rel, nm, true
				return false
			}
			if typ == unix.DT_UNKNOWN {
				var st unix.Stat_t
				if unix.Fstatat(dfd, nm, &st, unix.AT_SYMLINK_NOFOLLOW) == nil && st.Mode&unix.S_IFMT == unix.S_IFDIR {
					typ = unix.DT_DIR
				}
			}
			if typ == unix.DT_DIR {
				stack = append(stack, filepath.Join(rel, nm))
			}
			return time.Now().Before(deadline)
		})
		unix.Close(dfd)
		if ok {
			return dir, name, true
		}
	}
	return "", "", false
}

// scanDir calls fn for each entry of the directory open as fd (from its
// current offset) until fn returns false, the directory ends, or budget
// entries have been seen (budget is decremented).
func scanDir(fd int, budget *int, fn func(ino uint64, typ uint8, name string) bool) {
	buf := make([]byte, 32<<10)
	for *budget > 0 {
		n, err := unix.Getdents(fd, buf)
		if err != nil || n <= 0 {
			return
		}
		// struct linux_dirent64: ino u64, off s64, reclen u16, type u8, name.
		for off := 0; off+19 < n; {
			reclen := int(binary.NativeEndian.Uint16(buf[off+16:]))
			if reclen < 20 || off+reclen > n {
				return
			}
			ino := binary.NativeEndian.Uint64(buf[off:])
			typ := buf[off+18]
			nm := buf[off+19 : off+reclen]
			if i := indexByte(nm, 0); i >= 0 {
				nm = nm[:i]
			}
			off += reclen
			*budget--
			if !fn(ino, typ, string(nm)) || *budget <= 0 {
				return
			}
		}
	}
}

func indexByte(b []byte, c byte) int {
	for i, x := range b {
		if x == c {
			return i
		}
	}
	return -1
}

// Hints (kernel mode): inode number -> (parent directory's kernel handle,
// name), one small file per inode under IndexDir/parents, written when a
// non-directory is renamed into another directory over NFS and after a
// successful search. A hint is only a place to look first: resolve checks
// that the entry is the same inode, so a stale hint costs a lookup, never
// a wrong answer, and a lost one costs a search.

// hint reads the hint of ino.
func (ix *index) hint(ino uint64) (unix.FileHandle, string, bool) {
	b, err := os.ReadFile(ix.file(ino))
	if err != nil {
		return unix.FileHandle{}, "", false
	}
	parts := strings.SplitN(string(b), "\n", 3)
	if len(parts) != 3 {
		return unix.FileHandle{}, "", false
	}
	typ, err := strconv.ParseInt(parts[0], 10, 32)
	raw, herr := hex.DecodeString(parts[1])
	if err != nil || herr != nil || len(raw) == 0 || len(raw) > MaxHandle {
		return unix.FileHandle{}, "", false
	}
	return unix.NewFileHandle(int32(typ), raw), parts[2], true
}

// setHint records that ino is name in the directory open as dirfd,
// durably (a rename over NFS is durable before its reply, and so is the
// hint that lets old handles follow it).
func (ix *index) setHint(ino uint64, dirfd int, name string) error {
	ph, _, err := unix.NameToHandleAt(dirfd, "", unix.AT_EMPTY_PATH)
	if err != nil {
		return err
	}
	return ix.put(ino, fmt.Sprintf("%d\n%x\n%s", ph.Type(), ph.Bytes(), name))
}

// noteMove records, after a rename of a non-directory into directory to
// as name, where old handles of it (whose parent is the source directory)
// will find it. Best effort: without the hint they find it by search.
func (fs *FS) noteMove(to *obj, name string) {
	if fs.hints == nil {
		return
	}
	var st unix.Stat_t
	if unix.Fstatat(to.fd, name, &st, unix.AT_SYMLINK_NOFOLLOW) != nil || st.Mode&unix.S_IFMT == unix.S_IFDIR {
		return
	}
	fs.hints.setHint(st.Ino, to.fd, name)
}
