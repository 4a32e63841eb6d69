// Package frontend defines what every protocol server (S3, NFS, iSCSI)
// looks like to `tristore serve`, which runs them all in one errgroup.
package frontend

import (
	"context"
	"net"
)

// Server serves one protocol on listeners it is given.
type Server interface {
	// Name is a short protocol name for logs ("s3", "nfs", "iscsi").
	Name() string
	// Serve accepts connections on ln until ctx is cancelled or Close is
	// called; it then stops accepting, lets in-flight requests finish
	// (bounded by the caller's shutdown timeout) and returns nil.
	Serve(ctx context.Context, ln net.Listener) error
	// Close stops the server and releases its resources.
	Close() error
}
