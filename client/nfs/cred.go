package nfs

import (
	"context"

	"github.com/tristore/tristore/proto/sunrpc"
)

// Per-call identities. A Client has one AUTH_SYS identity (Options.UID,
// GID, GIDs). A caller acting for several users (the FUSE mount with
// CallerCreds, like the kernel client sending each process's credentials)
// attaches a Cred to the context instead; every call made with that
// context carries it.

// Cred is an AUTH_SYS identity: user, primary group and up to 16
// supplementary groups (more are cut off, as AUTH_SYS allows no more).
type Cred struct {
	UID, GID uint32
	GIDs     []uint32
}

type credKey struct{}

// WithCred returns a context whose calls go out as cred.
func WithCred(ctx context.Context, cred Cred) context.Context {
	return context.WithValue(ctx, credKey{}, cred)
}

// CredFrom returns the identity WithCred attached to ctx, if any.
func CredFrom(ctx context.Context) (Cred, bool) {
	c, ok := ctx.Value(credKey{}).(Cred)
	return c, ok
}

// authFor is the credential a call made with ctx carries.
func (rc *rpcClient) authFor(ctx context.Context) sunrpc.OpaqueAuth {
	c, ok := CredFrom(ctx)
	if !ok || rc.base == nil {
		return rc.cred
	}
	gids := c.GIDs
	if len(gids) > sunrpc.MaxAuthSysGIDs {
		gids = gids[:sunrpc.MaxAuthSysGIDs]
	}
	return sunrpc.AuthSys{Stamp: rc.base.Stamp, MachineName: rc.base.MachineName, UID: c.UID, GID: c.GID, GIDs: gids}.Auth()
}
