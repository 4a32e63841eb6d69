package nfs

import (
	"context"
	"time"

	"github.com/tristore/tristore/proto/nfs3"
)

// GETATTR, SETATTR and ACCESS.

// Getattr returns the attributes of fh.
func (c *Client) Getattr(ctx context.Context, fh FH) (*Attr, error) {
	var res nfs3.GetattrRes
	if err := c.callNFS(ctx, "GETATTR", nfs3.ProcGetattr, true, &nfs3.GetattrArgs{FH: nfs3.FH(fh)}, &res); err != nil {
		return nil, err
	}
	if err := status("GETATTR", res.Status); err != nil {
		return nil, err
	}
	return fromFattr(&res.Attr), nil
}

// Setattr changes the attributes set in s. guard, when non-nil, is the
// ctime the object must still have (else ErrNotSync), which makes the call
// safe to retransmit; unguarded size changes are retransmitted too (setting
// the same size twice is harmless).
func (c *Client) Setattr(ctx context.Context, fh FH, s SetAttr, guard *time.Time) (WCC, error) {
	args := &nfs3.SetattrArgs{FH: nfs3.FH(fh), Attr: toSattr(s)}
	if guard != nil {
		t := toTime(*guard)
		args.Guard = &t
	}
	var res nfs3.SetattrRes
	if err := c.callNFS(ctx, "SETATTR", nfs3.ProcSetattr, true, args, &res); err != nil {
		return WCC{}, err
	}
	return fromWcc(&res.Wcc), status("SETATTR", res.Status)
}

// Access asks which of the ACCESS3 bits in mask the caller has on fh.
func (c *Client) Access(ctx context.Context, fh FH, mask uint32) (uint32, error) {
	var res nfs3.AccessRes
	if err := c.callNFS(ctx, "ACCESS", nfs3.ProcAccess, true, &nfs3.AccessArgs{FH: nfs3.FH(fh), Access: mask}, &res); err != nil {
		return 0, err
	}
	if err := status("ACCESS", res.Status); err != nil {
		return 0, err
	}
	return res.Access, nil
}

var _ encoder = (*nfs3.SetattrArgs)(nil)
var _ decoder = (*nfs3.GetattrRes)(nil)
