package posix

// Temp files and their removal after a crash.
//
// Every temp file the store makes (a PUT, a part, a sidecar, a version
// link, a probe) is named by Backend.tempPath:
//
//	.tristore-tmp-<incarnation: 16 hex digits>-<random: 16 hex digits>
//
// The incarnation is a number fixed when the tree is opened and kept in
// DATA/.tristore/incarnation. The opener that has the tree to itself (the
// exclusive flock, see lock) picks one above every earlier one (the larger
// of the stored number + 1 and the clock in nanoseconds, so a lost file
// cannot make a number come back), writes it durably, and only then makes
// temp files. Openers that share the tree with it (shared flock) read the
// stored number, which cannot change while they hold the flock: their temp
// files carry an incarnation at least as large.
//
// A temp file with a smaller incarnation, or with none (names of older
// versions: ".tristore-tmp-<random>"), was therefore left by a process that
// is gone: the exclusive opener saw no other process holding the tree.
// Removing them needs a walk of the whole tree, which on a large tree takes
// many seconds, so it runs in the background after Open returns; a file
// of the running incarnation (or of a later shared opener) is never
// touched. Until the walk reaches a stale temp file nothing shows it:
// every listing, Stat and Get skips names with store.ReservedPrefix (and a
// key with that prefix is refused or kept in the hidden area).
//
// The two cheap parts stay synchronous, under the exclusive flock: all of
// DATA/.tristore/tmp (scratch, one directory) and upload directories
// without info.json (cleanupUploads, one directory).

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tristore/tristore/internal/fsjournal"
)

const incarnationFile = "incarnation" // in DATA/.tristore

// CleanupDoneLog is the message of the log line (level info; warn, with
// the first error, if a directory could not be read or a file removed)
// that reports the end of the background removal of stale temp files,
// with the count removed and the time it took; tests of a `tristore serve` process wait
// for it before they look for leftovers.
const CleanupDoneLog = "posix store: leftover temp file removal done"

// tempCleanup is the state of the background removal of stale temp files.
type tempCleanup struct {
	done    chan struct{} // closed when the walk has ended (or was not started)
	wg      sync.WaitGroup
	removed int   // valid after done
	err     error // valid after done
}

// hookCleanupStart, set only by tests, runs at the start of the background
// walk, before it reads any directory.
var hookCleanupStart func()

// tempName returns a new temp-file name of this incarnation; every temp
// file the store makes is named by it (or tempPath).
func (b *Backend) tempName() string {
	return fmt.Sprintf("%s%016x-%s", tmpPrefix, b.incarnation, randomHex(8))
}

// tempPath returns a new temp-file path in dir (tempName).
func (b *Backend) tempPath(dir string) string { return filepath.Join(dir, b.tempName()) }

// tempIncarnation returns the incarnation in a temp file's name; ok is
// false for a name without one (older versions' names).
func tempIncarnation(name string) (inc uint64, ok bool) {
	s, found := strings.CutPrefix(name, tmpPrefix)
	if !found || len(s) < 17 || s[16] != '-' {
		return 0, false
	}
	inc, err := strconv.ParseUint(s[:16], 16, 64)
	return inc, err == nil
}

// stale reports whether the temp file name was left by an earlier
// incarnation (see above).
func (b *Backend) stale(name string) bool {
	inc, ok := tempIncarnation(name)
	return !ok || inc < b.incarnation
}

// readIncarnation returns the stored incarnation (0 and no error when
// there is none yet).
func (b *Backend) readIncarnation() (uint64, error) {
	data, err := os.ReadFile(filepath.Join(b.sys, incarnationFile))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	v, err := strconv.ParseUint(strings.TrimSpace(string(data)), 16, 64)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", incarnationFile, err)
	}
	return v, nil
}

// newIncarnation picks this opener's incarnation (the caller holds the
// exclusive flock) and stores it durably. It reports whether it was
// stored: if not, nothing may be removed by incarnation (a later shared
// opener would read the old number and make temp files that look stale).
func (b *Backend) newIncarnation() bool {
	old, rerr := b.readIncarnation()
	inc := uint64(time.Now().UnixNano())
	if inc <= old {
		inc = old + 1
	}
	b.incarnation = inc
	if rerr != nil {
		b.log.Warn("posix store: unreadable incarnation file; writing a new one", "err", rerr)
	}
	err := b.writeFileAtomic(filepath.Join(b.sys, incarnationFile), []byte(fmt.Sprintf("%016x\n", inc)), true)
	if err != nil {
		b.log.Warn("posix store: cannot store the incarnation; leftover temp files are kept until the next start", "err", err)
		return false
	}
	return true
}

// cleanTmpDir removes everything in DATA/.tristore/tmp (caller holds the
// exclusive flock).
func (b *Backend) cleanTmpDir() (int, error) {
	ents, err := os.ReadDir(b.tmpDir())
	if err != nil {
		return 0, err
	}
	n := 0
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(b.tmpDir(), e.Name())); err != nil {
			return n, err
		}
		n++
	}
	return n, nil
}

// startCleanup starts the background walk (run is false: nothing to do,
// CleanupDone is closed at once).
func (b *Backend) startCleanup(run bool) {
	b.clean.done = make(chan struct{})
	if !run {
		close(b.clean.done)
		return
	}
	b.clean.wg.Add(1)
	go func() {
		defer b.clean.wg.Done()
		defer close(b.clean.done)
		if hookCleanupStart != nil {
			hookCleanupStart()
		}
		start := time.Now()
		n, dirs, err := b.removeStaleTemps()
		b.clean.removed, b.clean.err = n, err
		attrs := []any{"removed", n, "dirs", dirs, "took", time.Since(start).Round(time.Millisecond)}
		select {
		case <-b.closed:
			b.log.Info("posix store: leftover temp file removal stopped by close", attrs...)
			return
		default:
		}
		if err != nil { // the same line, as a warning with the first error
			b.log.Warn(CleanupDoneLog, append(attrs, "err", err)...)
			return
		}
		b.log.Info(CleanupDoneLog, attrs...)
	}()
}

// CleanupDone is closed when the background removal of the temp files of
// earlier incarnations has ended: right after Open when this opener shared
// the tree with another process (which did it), else when the walk is
// done or Close stopped it. Tests that check for leftovers wait for it.
func (b *Backend) CleanupDone() <-chan struct{} { return b.clean.done }

// CleanupResult returns how many stale temp files the background walk
// removed and its first error; valid once CleanupDone is closed.
func (b *Backend) CleanupResult() (int, error) {
	<-b.clean.done
	return b.clean.removed, b.clean.err
}

// removeStaleTemps walks the tree (not following symlinks, skipping
// DATA/.tristore/iam, which belongs to the iam package) and removes every
// stale temp file. A directory read in batches keeps memory flat in a
// directory of a million entries; an error in one directory is kept and
// the walk goes on. It stops early when the backend is closed.
func (b *Backend) removeStaleTemps() (removed, dirs int, first error) {
	iam := filepath.Join(b.sys, "iam")
	keep := func(err error) {
		if first == nil && err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, unix.ENOTDIR) {
			first = err
		}
	}
	stack := []string{b.root}
	for len(stack) > 0 {
		dir := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		select {
		case <-b.closed:
			return removed, dirs, first
		default:
		}
		fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err != nil {
			keep(&os.PathError{Op: "open", Path: dir, Err: err})
			continue
		}
		dirs++
		f := os.NewFile(uintptr(fd), dir)
		var stale []string
		for {
			ents, err := f.ReadDir(1024)
			for _, e := range ents {
				name := e.Name()
				switch {
				case e.IsDir():
					if p := filepath.Join(dir, name); p != iam {
						stack = append(stack, p)
					}
				case strings.HasPrefix(name, tmpPrefix) && b.stale(name):
					stale = append(stale, name)
				}
			}
			if err != nil {
				if !errors.Is(err, io.EOF) {
					keep(err)
				}
				break
			}
			select {
			case <-b.closed:
				f.Close()
				return removed, dirs, first
			default:
			}
		}
		// Removed relative to the directory just read: a path component
		// swapped for a symlink meanwhile cannot send the unlink elsewhere.
		// Without a journal each removed file is held until the directory
		// is fsynced and then written as deleted (retire.go): a temp file
		// left by a crash was often fsynced, and its inode, freed with
		// only the in-memory state changed, would still claim its blocks
		// and show as a live file to a name that reuses the inode number
		// before that name's new inode is written (a new prefix directory
		// after a power cut: e2fsck "incorrect filetype", the key then
		// holding this file's content).
		var held []int
		careful := len(stale) > 0 && !fsjournal.Journaled(fd)
		for _, name := range stale {
			h := -1
			if careful {
				h, _ = unix.Openat(fd, name, unix.O_PATH|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
			}
			if err := unix.Unlinkat(fd, name, 0); err == nil {
				removed++
			} else if !errors.Is(err, unix.ENOENT) {
				keep(&os.PathError{Op: "unlink", Path: filepath.Join(dir, name), Err: err})
			}
			if h >= 0 {
				held = append(held, h)
			}
			if len(held) >= retireBatch {
				unix.Fsync(fd)
				retireFds(held)
				held = held[:0]
			}
		}
		if len(held) > 0 {
			unix.Fsync(fd)
			retireFds(held)
		}
		f.Close()
	}
	return removed, dirs, first
}
