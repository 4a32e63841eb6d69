// Package vfs gives file semantics (handles, attributes, partial writes,
// rename, links, directories) over one subtree of the posix store's data
// directory, for the NFS server (and later NFSv4). It knows nothing of any
// wire protocol: errors are syscall.Errno values or the sentinels below, and
// each front end maps them to its own status codes in one place.
//
// Because the store is a plain directory tree, a file written here is an
// object over S3 (the posix backend recomputes the ETag when size or mtime
// changed) and an object PUT over S3 is a file here.
//
// File handles are derived from what the file system itself keeps stable
// across restarts: the kernel's own file handle (name_to_handle_at(2), which
// on ext4 is inode + generation), plus the inode number, the inode generation
// (FS_IOC_GETVERSION) and the export id. Resolution uses open_by_handle_at(2)
// (needs CAP_DAC_READ_SEARCH, i.e. root). A handle whose inode was freed or
// reused (generation changed) resolves to ErrStale. Nothing is kept in memory,
// so handles survive a server restart: a non-directory's handle also carries
// its directory's kernel handle, because a file whose dentry is not cached
// decodes without a path and must be found again by inode number to prove it
// lies inside the export (reconnect.go). When open_by_handle_at is unavailable
// (not root), a persistent index under DATA/.tristore/vfs maps inode numbers
// to (parent inode, name) and is updated whenever a handle is issued.
//
// Permission checks are the kernel's: each operation runs on a locked OS
// thread with fsuid/fsgid/groups set to the caller's (setfsuid(2) is
// per-thread), so mode bits, sticky directories and ownership of new files
// behave as on a local file system. When the server is not root, operations
// run as the server's own user.
package vfs

import (
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/tristore/tristore/store/inodepool"
	"golang.org/x/sys/unix"
)

// Sentinel errors (besides syscall.Errno values from the file system).
var (
	ErrStale       = errors.New("vfs: stale file handle") // the object behind a handle is gone
	ErrBadHandle   = errors.New("vfs: malformed handle")  // not a handle this server issued
	ErrInvalidName = errors.New("vfs: invalid name")      // empty, ".", "..", contains '/' or NUL
	ErrReserved    = errors.New("vfs: reserved name")     // ".tristore*" names are the store's own
	ErrNotSupp     = errors.New("vfs: operation not supported")
	ErrNotSync     = errors.New("vfs: guard ctime mismatch") // SETATTR guard failed
	ErrReadOnly    = errors.New("vfs: read-only export")
)

// ReservedPrefix starts names kept by the store (temp files, system dir);
// they are invisible and cannot be created here. (Same value as store.ReservedPrefix.)
const ReservedPrefix = ".tristore"

// NameMax is the longest name accepted (ext4's NAME_MAX).
const NameMax = 255

// FileType is an object's type.
type FileType uint8

const (
	TypeRegular FileType = iota + 1
	TypeDir
	TypeBlock
	TypeChar
	TypeSymlink
	TypeSocket
	TypeFIFO
)

// Attr are an object's attributes in protocol-neutral form.
type Attr struct {
	Type                FileType
	Mode                uint32 // permission bits incl. setuid/setgid/sticky (07777)
	Nlink               uint32
	UID, GID            uint32
	Size                uint64
	Used                uint64 // bytes allocated on disk
	RdevMajor           uint32
	RdevMinor           uint32
	FSID                uint64
	FileID              uint64 // inode number
	Atime, Mtime, Ctime time.Time
}

// Cred is the caller's identity, already squashed by the front end's export rules.
type Cred struct {
	UID, GID uint32
	Groups   []uint32
}

// Options configures an FS.
type Options struct {
	// ExportID distinguishes handles of different exports; 0 derives one from the root path.
	ExportID uint32
	// ReadOnly refuses every modifying operation with ErrReadOnly.
	ReadOnly bool
	// IndexDir is where the fallback handle index lives (needed only when
	// open_by_handle_at is unavailable); "" disables the fallback.
	IndexDir string
	// ForceIndex uses the fallback index even as root (for tests).
	ForceIndex bool
	// Async skips committing namespace and attribute changes to disk before
	// returning (knfsd's "async"): faster, but a crash can lose acknowledged
	// creates, renames and removals. Data writes keep their own rules.
	Async bool
}

// FS is one exported subtree. It keeps no per-file state (beyond a small
// cache of handles that a search failed to find, reconnect.go, a few
// unnamed files ready for CreateFile, tmppool.go, and a bounded cache of
// files open for READ and WRITE, checked before each use, filecache.go); it is
// safe for concurrent use.
type FS struct {
	root     string // absolute, symlinks resolved
	rootFd   int    // fd of root (O_RDONLY); also the mount fd for open_by_handle_at
	rootIno  uint64
	dev      uint64
	fsid     uint64
	exportID uint32
	readOnly bool
	async    bool
	kernel   bool   // open_by_handle_at works
	switchID bool   // running as root: switch fsuid per operation
	index    *index // fallback mode: where each handle's object is
	hints    *index // kernel mode: where moved files are (reconnect.go)
	missed   missCache
	rootFH   Handle
	pool     *inodepool.Pool // unnamed files for CreateFile (nil: read-only or no O_TMPFILE)
	files    fileCache       // files open for READ and WRITE (filecache.go)
	// dirSyncKeepsInodes: a directory fsync makes new files' inodes
	// durable here (a journal); else they are fsynced too (newinode.go).
	dirSyncKeepsInodes bool
	// fileSyncWritesParent: ext4 without a journal, where a new file's
	// fsync also writes its directory (newinode.go).
	fileSyncWritesParent bool
}

// Open opens the export rooted at dir (which must exist and be a directory).
func Open(dir string, opts Options) (*FS, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	if abs, err = filepath.EvalSymlinks(abs); err != nil {
		return nil, fmt.Errorf("vfs: export root: %w", err)
	}
	fd, err := unix.Open(abs, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0) // not O_PATH: open_by_handle_at needs a real mount fd
	if err != nil {
		return nil, fmt.Errorf("vfs: open export root %s: %w", abs, err)
	}
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, err
	}
	fs := &FS{root: abs, rootFd: fd, rootIno: st.Ino, dev: st.Dev, readOnly: opts.ReadOnly, async: opts.Async, exportID: opts.ExportID}
	if fs.exportID == 0 {
		h := fnv.New32a()
		h.Write([]byte(abs))
		fs.exportID = h.Sum32() | 1
	}
	// The fsid names the file system to clients; derive it from the device
	// and the export so two exports never look like one file system.
	fs.fsid = st.Dev<<32 ^ uint64(fs.exportID)
	fs.switchID = os.Geteuid() == 0
	if !opts.ForceIndex {
		fs.kernel = probeKernelHandles(fd)
	}
	if fs.kernel && opts.IndexDir != "" {
		// Hints only save searches (reconnect.go), so a data directory
		// where they cannot be kept (read-only) is still served.
		if ix, err := openIndex(filepath.Join(opts.IndexDir, "parents")); err == nil {
			fs.hints = ix
		}
	}
	if !fs.kernel {
		if opts.IndexDir == "" {
			unix.Close(fd)
			return nil, errors.New("vfs: open_by_handle_at unavailable (needs root) and no handle index directory configured")
		}
		if fs.index, err = openIndex(opts.IndexDir); err != nil {
			unix.Close(fd)
			return nil, err
		}
	}
	fs.rootFH, err = fs.handleOf(fd, "", &st, 0, "")
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("vfs: root handle: %w", err)
	}
	if !fs.readOnly {
		fs.pool = inodepool.New(fd, 0o600) // CreateFile sets owner, mode and times
		fs.dirSyncKeepsInodes = dirSyncKeepsNewInodes(fd)
		fs.fileSyncWritesParent = !fs.dirSyncKeepsInodes && ext4NoJournal(fd)
	}
	return fs, nil
}

// Close releases the root descriptor and the unnamed files kept for CreateFile.
func (fs *FS) Close() error {
	fs.files.close()
	fs.pool.Close()
	return unix.Close(fs.rootFd)
}

// Root returns the handle of the export root.
func (fs *FS) Root() Handle { return fs.rootFH }

// RootPath is the absolute path of the export root.
func (fs *FS) RootPath() string { return fs.root }

// ReadOnly reports whether the export refuses modifications.
func (fs *FS) ReadOnly() bool { return fs.readOnly }

// ExportID is the id embedded in this export's handles.
func (fs *FS) ExportID() uint32 { return fs.exportID }

// checkName validates one path component for creation or lookup.
func checkName(name string) error {
	if name == "" || name == "." || name == ".." || strings.ContainsAny(name, "/\x00") {
		return ErrInvalidName
	}
	if len(name) > NameMax {
		return syscall.ENAMETOOLONG
	}
	if strings.HasPrefix(name, ReservedPrefix) {
		return ErrReserved
	}
	return nil
}

// checkNewName is checkName for a name Create, Mkdir, Symlink or Link is to
// make: "." and ".." always exist, so making them is EEXIST (as on Linux).
func checkNewName(name string) error {
	err := checkName(name)
	if err != nil && (name == "." || name == "..") {
		return unix.EEXIST
	}
	return err
}

func (fs *FS) writable() error {
	if fs.readOnly {
		return ErrReadOnly
	}
	return nil
}

func fileType(mode uint32) FileType {
	switch mode & unix.S_IFMT {
	case unix.S_IFDIR:
		return TypeDir
	case unix.S_IFLNK:
		return TypeSymlink
	case unix.S_IFBLK:
		return TypeBlock
	case unix.S_IFCHR:
		return TypeChar
	case unix.S_IFSOCK:
		return TypeSocket
	case unix.S_IFIFO:
		return TypeFIFO
	}
	return TypeRegular
}

// attrOf converts a stat result.
func (fs *FS) attrOf(st *unix.Stat_t) Attr {
	return Attr{
		Type:      fileType(st.Mode),
		Mode:      st.Mode & 0o7777,
		Nlink:     uint32(st.Nlink),
		UID:       st.Uid,
		GID:       st.Gid,
		Size:      uint64(st.Size),
		Used:      uint64(st.Blocks) * 512,
		RdevMajor: unix.Major(st.Rdev),
		RdevMinor: unix.Minor(st.Rdev),
		FSID:      fs.fsid,
		FileID:    st.Ino,
		Atime:     time.Unix(st.Atim.Sec, st.Atim.Nsec),
		Mtime:     time.Unix(st.Mtim.Sec, st.Mtim.Nsec),
		Ctime:     time.Unix(st.Ctim.Sec, st.Ctim.Nsec),
	}
}
