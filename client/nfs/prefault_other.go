//go:build !linux

package nfs

// prefault is a no-op outside Linux (see prefault_linux.go).
func prefault(p []byte) {}
