// Package posix is tristore's embedded default store: a directory tree on the
// local file system in which a bucket is a top-level directory and an object
// is a file (a key with '/' is a nested path). Because the data is plain
// files, the NFS and iSCSI views serve the very same bytes.
//
// Layout under the data root DATA:
//
//	DATA/<bucket>/<key path>             object content
//	DATA/<bucket>/<dir>/.tristore-dir    content of the "directory marker" object "<dir>/"
//	DATA/<dir>/.tristore-tmp-<inc>-<random>  a PUT in progress (same directory as its target,
//	                                     so the final rename is atomic; <inc>: the
//	                                     writer's incarnation, tempfiles.go)
//	DATA/<bucket>/.tristore-hidden/keys/<sha256 of key>  keys with no plain path (hidden.go)
//	DATA/<bucket>/.tristore-hidden/versions/  reserved for old versions
//	DATA/.tristore/tmp/                  scratch (probe files)
//	DATA/.tristore/multipart/<uploadID>/ info.json and part-NNNNN files
//	DATA/.tristore/meta/<bucket>/<key>.json  metadata sidecars (no-xattr fallback)
//	DATA/.tristore/buckets/<bucket>/     bucket info and config fallback files
//	DATA/.tristore/lock                  flock: exclusive during start-up cleanup, then shared
//	DATA/.tristore/incarnation           the number in this start's temp file names (tempfiles.go)
//	DATA/.tristore/iam/                  owned by the iam package, never touched here
//
// A key ending in '/' (a "directory marker", as S3 consoles make for
// folders) is the file <dir>/.tristore-dir, so "a/" and "a/b" coexist. Keys
// that cannot be a plain path (empty, "." or ".." segments, "a" while "a/b"
// exists and vice versa, ...) live in the hidden area (hidden.go).
// Directories without any object in them (made over NFS) are not prefixes
// of any key and are not listed.
// Metadata (ETag, content type, user metadata, multipart part list) lives in
// the extended attribute user.tristore.meta of the object file, written to the
// temp file before the rename so content and metadata are published together.
// When the file system has no user xattrs (or Options.NoXattr is set, or the
// value is too big for the file system's xattr space) it lives in a sidecar
// JSON file instead, keyed by inode number: a sidecar left behind by a
// foreign rename is recognised as stale, and a crash between writing the
// sidecar and renaming the data leaves the old file with its own record.
//
// The record also keeps the size and mtime its ETag was computed for. Files
// written by other views (NFS through vfs, iSCSI through Filer) change size or
// mtime, and the ETag is then recomputed on the next Stat/Get/List.
package posix

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tristore/tristore/internal/fsjournal"
)

// Options configures the posix backend.
type Options struct {
	Log *slog.Logger
	// NoXattr forces the sidecar metadata fallback even where xattrs work
	// (for tests of the fallback path).
	NoXattr bool
}

// Backend is the embedded default store.
type Backend struct {
	root     string // absolute data root
	sys      string // root/.tristore
	log      *slog.Logger
	useXattr bool
	// noJournal: the data tree's file system does not journal metadata
	// (internal/fsjournal); removals then take the extra steps of
	// retire.go and victim.go.
	noJournal bool

	// keyLocks serialises the publish step of writers of one key when
	// metadata lives in sidecars (the sidecar and the rename are two steps).
	keyLocks [64]sync.Mutex
	// uploadLocks serialises Complete/Abort/PutPart bookkeeping per upload.
	uploadMu    sync.Mutex
	uploadLocks map[string]*uploadLock

	// hidden indexes the hidden area of each bucket (hidden.go); dirs
	// keeps sorted directory snapshots for listings (dircache.go).
	hidden hiddenIndex
	dirs   dirCache
	vers   versionIndex // versions_index.go
	// bcache keeps each bucket's record and documents (bucketcache.go).
	bcache bucketCache

	// incarnation is in the name of every temp file this opener makes;
	// clean is the background removal of earlier ones (tempfiles.go).
	incarnation uint64
	clean       tempCleanup

	lockFile  *os.File // flock on .tristore/lock, held while open
	closeOnce sync.Once
	closed    chan struct{}
}

type uploadLock struct {
	mu   sync.Mutex
	refs int
}

const (
	tmpPrefix   = ".tristore-tmp-"
	dirMarker   = ".tristore-dir"
	sysDirName  = ".tristore"
	metaXattr   = "user.tristore.meta"
	bucketXattr = "user.tristore.bucket"
	cfgXattrPfx = "user.tristore.cfg."
)

// Open opens (creating if needed) the data tree at root and returns the
// backend. Temp files a crash left are removed in the background
// (tempfiles.go, CleanupDone); nothing shows them meanwhile.
func Open(root string, opts Options) (*Backend, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("posix: data root: %w", err)
	}
	log := opts.Log
	if log == nil {
		log = slog.Default()
	}
	b := &Backend{
		root:        abs,
		sys:         filepath.Join(abs, sysDirName),
		log:         log,
		uploadLocks: map[string]*uploadLock{},
		closed:      make(chan struct{}),
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return nil, fmt.Errorf("posix: creating %s: %w", abs, err)
	}
	// Object paths are opened refusing symlinks, so the root must have none.
	if abs, err = filepath.EvalSymlinks(abs); err != nil {
		return nil, fmt.Errorf("posix: data root: %w", err)
	}
	b.root, b.sys = abs, filepath.Join(abs, sysDirName)
	// The store's own directories must be durable before anything in them
	// is acknowledged (an upload's directory is fsynced into multipart/,
	// but multipart/ itself must survive a power cut too).
	var made []string
	for _, d := range []string{b.sys, b.tmpDir(), b.multipartDir(), b.metaDir(), b.bucketsDir()} {
		c, err := mkdirAll(d, 64)
		if err != nil {
			return nil, fmt.Errorf("posix: creating %s: %w", d, err)
		}
		made = append(made, c...)
	}
	for i := len(made) - 1; i >= 0; i-- {
		if err := fsyncDir(made[i]); err != nil {
			return nil, fmt.Errorf("posix: creating %s: %w", made[i], err)
		}
	}
	alone, err := b.lock()
	if err != nil {
		return nil, err
	}
	// The incarnation is fixed before any temp file is made (tempfiles.go).
	walk := false
	if alone {
		n, err := b.cleanTmpDir()
		if err != nil {
			b.Close()
			return nil, fmt.Errorf("posix: start-up cleanup: %w", err)
		}
		n += b.cleanupUploads()
		if n > 0 {
			log.Info("posix store: removed leftover scratch files and unfinished uploads", "count", n)
		}
		walk = b.newIncarnation()
	} else if b.incarnation, err = b.readIncarnation(); err != nil {
		b.Close()
		return nil, fmt.Errorf("posix: %w", err)
	}
	b.useXattr = !opts.NoXattr && b.probeXattr()
	b.noJournal = !fsjournal.JournaledPath(b.root)
	if !opts.NoXattr && !b.useXattr {
		log.Warn("posix store: file system has no user xattrs; keeping metadata in sidecar files", "root", abs)
	}
	if alone {
		b.repairVersions() // versions.go
		b.settleStartup()
		if err := unix.Flock(int(b.lockFile.Fd()), unix.LOCK_SH); err != nil {
			b.Close()
			return nil, fmt.Errorf("posix: lock: %w", err)
		}
	}
	// Temp files of earlier incarnations anywhere in the tree: removed in
	// the background, so that start-up does not grow with the tree.
	b.startCleanup(walk)
	return b, nil
}

// lock takes DATA/.tristore/lock: exclusively when no other process has
// the tree open (then temp files are leftovers of a crash and may be
// removed), else shared, so that a second opener (`tristore volume ...`
// next to a running server) never deletes a live PUT's temp file. It
// reports whether the lock was exclusive; the caller downgrades it.
func (b *Backend) lock() (bool, error) {
	f, err := os.OpenFile(filepath.Join(b.sys, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return false, fmt.Errorf("posix: lock file: %w", err)
	}
	b.lockFile = f
	err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
	if err == nil {
		return true, nil
	}
	if !errors.Is(err, unix.EWOULDBLOCK) {
		f.Close()
		return false, fmt.Errorf("posix: lock: %w", err)
	}
	// Another process has the tree open; it may be in its own start-up
	// cleanup (exclusive) for a moment.
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		if err = unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB); err == nil {
			b.log.Info("posix store: data tree is open in another process too; skipping temp-file cleanup", "root", b.root)
			return false, nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	f.Close()
	return false, fmt.Errorf("posix: data tree %s is locked by another process: %w", b.root, err)
}

// Close releases the backend. Every operation returns before Close is
// called by its owner; there is nothing buffered to flush because every
// acknowledged write was already made durable.
func (b *Backend) Close() error {
	b.closeOnce.Do(func() {
		close(b.closed)
		// The background walk (tempfiles.go) stops at its next batch.
		b.clean.wg.Wait()
		b.dirs.close() // the listing's directory watches (dirwatch.go)
		if b.lockFile != nil {
			b.lockFile.Close() // releases the flock
		}
	})
	return nil
}

// Root is the absolute path of the data tree (store.LocalPather).
func (b *Backend) Root() string { return b.root }

func (b *Backend) tmpDir() string       { return filepath.Join(b.sys, "tmp") }
func (b *Backend) multipartDir() string { return filepath.Join(b.sys, "multipart") }
func (b *Backend) metaDir() string      { return filepath.Join(b.sys, "meta") }
func (b *Backend) bucketsDir() string   { return filepath.Join(b.sys, "buckets") }

// probeXattr reports whether user xattrs work on the data file system.
func (b *Backend) probeXattr() bool {
	p := b.tempPath(b.tmpDir())
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o600)
	if err != nil {
		return false
	}
	f.Close()
	defer os.Remove(p)
	return unix.Setxattr(p, "user.tristore.probe", []byte("1"), 0) == nil
}

// cleanupUploads removes upload directories without an info.json: a crash
// hit CreateMultipart between making the directory and publishing its info,
// so the upload ID was never returned to anyone.
func (b *Backend) cleanupUploads() int {
	ents, err := os.ReadDir(b.multipartDir())
	if err != nil {
		return 0
	}
	n := 0
	for _, e := range ents {
		d := filepath.Join(b.multipartDir(), e.Name())
		if _, err := os.Stat(filepath.Join(d, "info.json")); errors.Is(err, fs.ErrNotExist) {
			if os.RemoveAll(d) == nil {
				n++
			}
		}
	}
	return n
}
