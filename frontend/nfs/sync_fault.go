//go:build faultsync

package nfs

import "github.com/tristore/tristore/internal/faultsync"

// faultSkip reports whether this test build (-tags faultsync) skips the
// fsync at site (TRISTORE_FAULT_SKIP, see internal/faultsync).
func faultSkip(site string) bool { return faultsync.Skip(site) }
