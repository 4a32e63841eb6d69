package posix

// RecordCounters returns how many directory entries listings have read
// from disk and how many metadata records the store has read, so tests can
// check that a version listing's page costs no more than the page.
func (b *Backend) RecordCounters() (read, records int64) {
	return b.dirs.read.Load(), b.vers.records.Load()
}
