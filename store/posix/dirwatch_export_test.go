package posix

// SetWatchMinDirSize sets the directory size from which listing snapshots
// are kept current by a watch (dirwatch.go) and returns the old value.
func SetWatchMinDirSize(n int64) int64 {
	old := watchMinDirSize
	watchMinDirSize = n
	return old
}

// WatchedDirs is the number of directory snapshots kept by a watch.
func (b *Backend) WatchedDirs() int {
	b.dirs.mu.Lock()
	defer b.dirs.mu.Unlock()
	return len(b.dirs.w.wds)
}

// ListRecordsCached is the number of object records listings keep
// (listmeta.go).
func (b *Backend) ListRecordsCached() int { return b.dirs.recs.len() }
