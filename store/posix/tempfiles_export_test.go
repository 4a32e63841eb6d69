package posix

// SetHookCleanupStart makes f run at the start of the background removal
// of stale temp files, before it reads any directory (nil: none).
func SetHookCleanupStart(f func()) { hookCleanupStart = f }

// Incarnation is the incarnation in this opener's temp file names.
func (b *Backend) Incarnation() uint64 { return b.incarnation }

// TempIncarnation parses a temp file name (tempIncarnation).
func TempIncarnation(name string) (uint64, bool) { return tempIncarnation(name) }
