package posix

import (
	"errors"
	"log/slog"
)

// Options configures the posix backend.
type Options struct {
	Log *slog.Logger
	// NoXattr forces the sidecar metadata fallback even where xattrs work
	// (for tests of the fallback path).
	NoXattr bool
}

// Open opens (creating if needed) the data tree at root, removes leftover
// temp files from a crash, and returns the backend.
// PLACEHOLDER: replaced by the real backend (being written now).
func Open(root string, opts Options) (*Backend, error) {
	return nil, errors.New("posix backend not written yet")
}

// Backend is the embedded default store.
type Backend struct{}
