package sse

import (
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/tristore/tristore/internal/fsjournal"
)

// LoadOrCreateKey returns the 32-byte server key kept in path, creating it
// (mode 0600, its directory 0700) on first use, as iam keeps master.key.
// The directory's parent must exist or be made durable by its creator
// (DATA/.tristore is, by the store).
// The new key is written to a temp file, fsynced and then hard-linked into
// place, so two processes creating it at once end up with one key (the
// loser of link reads the winner's), and a crash never leaves a short key.
func LoadOrCreateKey(path string) ([]byte, error) {
	if k, err := readKey(path); err == nil || !errors.Is(err, os.ErrNotExist) {
		return k, err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	key := make([]byte, KeySize)
	if _, err := rand.Read(key); err != nil {
		return nil, err
	}
	f, err := os.CreateTemp(dir, ".key-*")
	if err != nil {
		return nil, err
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return nil, err
	}
	if _, err := f.Write(key); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, err
	}
	if err := os.Link(tmp, path); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, err
	}
	// The key's name, and the directory's own entry (made just now by
	// MkdirAll, perhaps), must survive a power cut before any object is
	// sealed under the key.
	for _, d := range []string{dir, filepath.Dir(dir)} {
		if err := fsjournal.SyncDir(d); err != nil {
			return nil, err
		}
	}
	return readKey(path)
}

func readKey(path string) ([]byte, error) {
	k, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if len(k) != KeySize {
		return nil, fmt.Errorf("sse: server key %s has %d bytes, want %d", path, len(k), KeySize)
	}
	return k, nil
}
