package posix

// ListCounters returns how many directory entries listings have read from
// disk and how many snapshot entries and hidden keys they have looked at,
// so tests can check that a page's cost does not grow with the directory.
func (b *Backend) ListCounters() (read, visited int64) {
	return b.dirs.read.Load(), b.dirs.visited.Load()
}

// SetHookBeforeRename makes f run just before every publish rename (nil: none).
func SetHookBeforeRename(f func(target string)) { hookBeforeRename = f }

// SetHookAfterRename makes f run right after every successful publish
// rename, before the directory fsyncs (nil: none).
func SetHookAfterRename(f func(target string)) { hookAfterRename = f }

// SetHookAfterUnlink makes f run right after every successful object
// unlink (Delete), before the directory fsync (nil: none).
func SetHookAfterUnlink(f func(p string)) { hookAfterUnlink = f }

// SetHookVictimClose makes f run just before the background close of a
// replaced object's held descriptor (victim.go; nil: none).
func SetHookVictimClose(f func(fd int)) { hookVictimClose = f }

// SetDirSyncHooks sets the directory group commit's test hooks (dirsync.go;
// nil: none): join runs, under the committer's lock (it must not block),
// when a caller joined a round; start just before a round's fsync, and
// the function it returns just after it.
func SetDirSyncHooks(join func(dir string), start func(dir string) (done func())) {
	hookDirSyncJoin, hookDirFsync = join, start
}

// SetNoJournal makes b take (or skip) the steps for a file system without
// a journal whatever its file system is.
func (b *Backend) SetNoJournal(v bool) { b.noJournal = v }

// SetHookRetire makes f run before every retire of a held descriptor
// (retire.go; nil: none).
func SetHookRetire(f func(fd int)) { hookRetire = f }

// SetHookBeforeAtomicRename makes f run just before writeFileAtomic's
// rename without a journal (nil: none).
func SetHookBeforeAtomicRename(f func(path string)) { hookBeforeAtomicRename = f }

// WriteFileAtomic is writeFileAtomic with sync.
func (b *Backend) WriteFileAtomic(path string, data []byte) error {
	return b.writeFileAtomic(path, data, true)
}

// SetHookVictimHeld makes f run in a replacing publish after the file to
// be replaced is held, just before the rename (nil: none).
func SetHookVictimHeld(f func(target string)) { hookVictimHeld = f }

// SetHookBodyHash makes f run with the choice of every body hash of a
// known size of at least 1 MiB or not (bodyhash.go; nil: none): simd says
// it went to the md5-simd lanes.
func SetHookBodyHash(f func(simd bool)) { hookBodyHashSIMD = f }
