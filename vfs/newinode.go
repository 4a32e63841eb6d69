package vfs

import (
	"golang.org/x/sys/unix"

	"github.com/tristore/tristore/internal/fsjournal"
)

// New inodes and the directory fsync.
//
// The sync export makes a new name durable with one fsync of its
// directory. On a journaling file system that is enough for a new empty
// file: ext4 (with its journal) and XFS log the new inode in the same
// transaction as the entry, and the directory's fsync commits it. Without
// a journal it is not: ext4 with -O ^has_journal (the benchmark disk)
// writes the directory's own blocks and inode on that fsync, and the new
// file's inode only when write-back gets to its inode table block, up to
// dirty_expire_centisecs (30 s) later. A power cut in between leaves an
// entry pointing at an unused inode, which e2fsck removes: the
// acknowledged file is gone (test/powerloss/kernel_test.go shows it on a
// real journal-less ext4). There the new file is fsynced too, which writes
// its inode table block.

// DirSyncKeepsNewInodes reports whether an fsync of a directory on the
// file system holding path also makes the inodes of files newly linked
// into it durable: true only for file systems known to journal the new
// inode with its entry (ext4 with a journal, XFS), which is
// internal/fsjournal's Journaled. Anything else, and anything that cannot
// be determined, is false (fsync the new file too).
func DirSyncKeepsNewInodes(path string) bool { return fsjournal.JournaledPath(path) }

func dirSyncKeepsNewInodes(fd int) bool { return fsjournal.Journaled(fd) }

// ext4NoJournal is fsjournal.Ext4WithoutJournal: the ext4 driver without a
// journal, where an fsync of a file given a new name also writes that
// name's directory (and new directories above it).
func ext4NoJournal(fd int) bool { return fsjournal.Ext4WithoutJournal(fd) }

// commitNewFile is commitMeta for a CREATE that made the empty regular
// file fd in dir: the directory's fsync, and where that does not keep the
// new inode (no journal) the file's fsync too. On ext4 without a journal
// the file's fsync alone does both (ext4NoJournal) and takes the
// directory fsync's place, one disk flush instead of two; the kernel rig
// (test/powerloss TestKernelExt4PowerLoss/nojournal) checks that it does.
func (fs *FS) commitNewFile(err error, dir *obj, fd int) error {
	switch {
	case err != nil || fs.async:
		return err
	case fs.dirSyncKeepsInodes && dir.st.Dev == fs.dev, faultSkip("nfs-new-inode"):
		return fs.commitMeta(nil, dir, "")
	case fs.fileSyncWritesParent && dir.st.Dev == fs.dev:
		return fs.commitMetaVia(dir, func() error { return unix.Fsync(fd) })
	}
	if err := unix.Fsync(fd); err != nil {
		return err
	}
	return fs.commitMeta(nil, dir, "")
}

// syncNewSpecial makes a new symbolic link, FIFO, socket or device node in
// dir durable where the directory's fsync would not (see above). Such an
// inode cannot be opened for fsync, so the whole file system is synced
// (syncfs: every dirty inode and page on it); these are rare. A sync
// export only.
func (fs *FS) syncNewSpecial(dir *obj) error {
	if fs.async || (fs.dirSyncKeepsInodes && dir.st.Dev == fs.dev) || faultSkip("nfs-new-inode") {
		return nil
	}
	fd := fs.rootFd
	if dir.st.Dev != fs.dev {
		// Another file system mounted inside the export: sync that one.
		f, err := unix.Open(dir.procPath(), unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			return err
		}
		defer unix.Close(f)
		fd = f
	}
	return unix.Syncfs(fd)
}
