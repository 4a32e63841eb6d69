package posix

// ListCounters returns how many directory entries listings have read from
// disk and how many snapshot entries and hidden keys they have looked at,
// so tests can check that a page's cost does not grow with the directory.
func (b *Backend) ListCounters() (read, visited int64) {
	return b.dirs.read.Load(), b.dirs.visited.Load()
}

// SetHookBeforeRename makes f run just before every publish rename (nil: none).
func SetHookBeforeRename(f func(target string)) { hookBeforeRename = f }
