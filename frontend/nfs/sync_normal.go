//go:build !faultsync

package nfs

// faultSkip is the test hook of the power-loss harness (see
// internal/faultsync): in this, the production build, it is the constant
// false, so every guarded fsync always runs.
func faultSkip(string) bool { return false }
