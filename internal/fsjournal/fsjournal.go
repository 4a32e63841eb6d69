// Package fsjournal tells whether a file system journals its metadata, the
// property the store's crash safety leans on beyond fsync itself.
//
// On a journaling file system (ext4 with its jbd2 journal, XFS) metadata
// changes reach the disk in order: a directory fsync commits a new child's
// inode with its entry, and an inode or block freed by unlink or rmdir
// cannot be reused and written before the freeing is committed. Without a
// journal (ext4 made with -O ^has_journal, the project's benchmark disk)
// neither holds: a directory fsync writes the directory but not a new
// child's inode, and a freed inode or block can be reused and written by a
// later fsync while the old owner's state (the directory entry, the inode
// still claiming its blocks) is what the disk holds. After a power cut
// e2fsck then finds an entry pointing at someone else's inode, or two
// inodes claiming one block. test/powerloss/kernel_test.go shows both on a
// real ext4. Code that frees or makes inodes checks Journaled and, when it
// is false, writes the old state away itself (fsync of the new inode, of
// the directory after a removal, of the removed inode before its last
// reference goes).
package fsjournal

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"golang.org/x/sys/unix"
)

// cache keeps each answer per file system: its device and its statfs id
// (for ext4, from the UUID), so a device number reused by another file
// system (a loop device detached and attached again) is asked again.
var cache sync.Map // fsKey -> bool

type fsKey struct {
	dev  uint64
	fsid unix.Fsid
}

// Journaled reports whether the file system holding fd journals metadata
// as above: true only for XFS and for ext4 with a jbd2 journal on its
// device (listed in /proc/fs/jbd2). Anything else, and anything that
// cannot be determined, is false (the caller then does the extra fsyncs).
// The answer is kept per file system.
func Journaled(fd int) bool {
	var st unix.Stat_t
	var sfs unix.Statfs_t
	if unix.Fstat(fd, &st) != nil || unix.Fstatfs(fd, &sfs) != nil {
		return false
	}
	k := fsKey{st.Dev, sfs.Fsid}
	if v, ok := cache.Load(k); ok {
		return v.(bool)
	}
	v := journaled(&sfs, st.Dev)
	cache.Store(k, v)
	return v
}

// JournaledPath is Journaled for the file system holding path.
func JournaledPath(path string) bool {
	fd, err := unix.Open(path, unix.O_PATH|unix.O_CLOEXEC, 0)
	if err != nil {
		return false
	}
	defer unix.Close(fd)
	return Journaled(fd)
}

func journaled(sfs *unix.Statfs_t, dev uint64) bool {
	switch sfs.Type {
	case unix.XFS_SUPER_MAGIC:
		return true
	case unix.EXT4_SUPER_MAGIC: // ext2, ext3 and ext4 share it
		return jbd2Journal(dev)
	}
	return false
}

// jbd2Journal reports whether jbd2 runs a journal for the block device dev:
// /proc/fs/jbd2 lists each as <device>-<journal inode> (an external
// journal is named after its own device; then it is not found here and
// the answer is a safe false).
func jbd2Journal(dev uint64) bool {
	name := blockDevName(dev)
	if name == "" {
		return false
	}
	ents, err := os.ReadDir("/proc/fs/jbd2")
	if err != nil {
		return false
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), name+"-") {
			return true
		}
	}
	return false
}

// blockDevName is the kernel's name of block device dev (as in
// /proc/fs/ext4 and /proc/fs/jbd2), or "" if it cannot be told.
func blockDevName(dev uint64) string {
	link, err := os.Readlink(fmt.Sprintf("/sys/dev/block/%d:%d", unix.Major(dev), unix.Minor(dev)))
	if err != nil {
		return ""
	}
	return filepath.Base(link)
}

// Ext4WithoutJournal reports whether the file system holding fd is run by
// the ext4 driver (it has /proc/fs/ext4/<device>; the ext2 driver shares
// the magic number but not this) without a journal. There an fsync of a
// file given a new name also writes that name's directory, and the
// directories above it that are new too (ext4_sync_parent, for inodes in
// the EXT4_STATE_NEWENTRY state), before its one flush of the disk (vfs
// leans on it). Not cached.
func Ext4WithoutJournal(fd int) bool {
	var sfs unix.Statfs_t
	var st unix.Stat_t
	if unix.Fstatfs(fd, &sfs) != nil || unix.Fstat(fd, &st) != nil || sfs.Type != unix.EXT4_SUPER_MAGIC {
		return false
	}
	name := blockDevName(st.Dev)
	if name == "" {
		return false
	}
	if _, err := os.Stat(filepath.Join("/proc/fs/ext4", name)); err != nil {
		return false
	}
	return !jbd2Journal(st.Dev)
}

// Retire prepares the last reference fd of a file that may have lost its
// last name (unlink, rmdir, a rename over it) to be closed: on a file
// system without a journal, when the inode has no name left, it is
// fsynced first, so the disk records it as deleted before the close frees
// its inode and blocks for reuse (otherwise, after a power cut, the stale
// inode still claims blocks another file was given). fd may be O_PATH
// (it is reopened through /proc). The caller closes fd afterwards.
func Retire(fd int) {
	if Journaled(fd) {
		return
	}
	var st unix.Stat_t
	if unix.Fstat(fd, &st) != nil || st.Nlink != 0 {
		return
	}
	m := st.Mode & unix.S_IFMT
	if m != unix.S_IFREG && m != unix.S_IFDIR {
		return
	}
	rfd, err := unix.Open(fmt.Sprintf("/proc/self/fd/%d", fd), unix.O_RDONLY|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	unix.Fsync(rfd)
	unix.Close(rfd)
}

// LinkFd gives the inode that fd refers to (fd may be O_PATH) the extra
// name path. It links through /proc/self/fd, so it links the held inode
// itself, not whatever its old name names by now (AT_EMPTY_PATH would need
// CAP_DAC_READ_SEARCH). Without a journal, a file about to be replaced by
// a rename gets such a second name first: the rename then takes its link
// count from 2 to 1, never to 0 before the rename is durable (a neighbour's
// fsync could write the 0 while the disk still names the file; e2fsck then
// clears that name). The caller removes the second name once the rename
// is durable, fsyncs its directory, and Retires the inode.
func LinkFd(fd int, path string) error {
	return unix.Linkat(unix.AT_FDCWD, fmt.Sprintf("/proc/self/fd/%d", fd), unix.AT_FDCWD, path, unix.AT_SYMLINK_FOLLOW)
}

// SyncDir fsyncs directory dir, making its entries (a rename, a new or
// removed name) durable.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}
