// Package faultsync lets a test build of tristore skip chosen fsync calls,
// so the power-loss harness (test/powerloss) can show it notices a missing
// one. It is imported only by the sync_fault.go files, which build only
// with -tags faultsync; production builds use sync_normal.go, whose skip
// check is the constant false.
//
// TRISTORE_FAULT_SKIP is a comma-separated list of site names:
//
//	put-file    store/posix: fsync of a published object's temp file (PUT, Complete, Copy, part)
//	put-dir     store/posix: fsync of the directories after the publishing rename
//	delete-dir  store/posix: fsync of the directory after DeleteObject's unlink
//	nfs-write   vfs: fsync/fdatasync of a FILE_SYNC/DATA_SYNC WRITE
//	nfs-commit  vfs: fsync of COMMIT
//	nfs-dir     vfs: fsync of the directory after a namespace change (sync export)
//	nfs-rename-src  vfs: fsync of the source directory of a cross-directory RENAME
//	nfs-new-inode  vfs: on a file system without a journal, fsync of a new empty file (CREATE/OPEN), syncfs after SYMLINK/MKNOD
//	nfs4-clients  frontend/nfs: fsyncs of the NFSv4 client list (file and directory) that decides who may reclaim after a restart
//	lun-fua     blockdev/filelun: fsync after a FUA write
//	lun-flush   blockdev/filelun: fsync of SYNCHRONIZE CACHE (Flush)
package faultsync

import (
	"os"
	"strings"
	"sync"
)

var skip = sync.OnceValue(func() map[string]bool {
	m := map[string]bool{}
	for _, s := range strings.Split(os.Getenv("TRISTORE_FAULT_SKIP"), ",") {
		if s = strings.TrimSpace(s); s != "" {
			m[s] = true
		}
	}
	return m
})

// Skip reports whether the fsync at site is to be skipped.
func Skip(site string) bool { return skip()[site] }
