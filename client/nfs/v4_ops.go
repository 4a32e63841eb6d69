package nfs

// Single-object NFSv4.1 calls by file handle, for the FUSE mount
// (fusefs/nfstree) and other callers that keep handles: each is one
// COMPOUND that also returns the attributes the caller needs next (what
// v3 gets as post-op attributes). READ and WRITE take a stateid; the
// anonymous stateid (the zero value) needs no OPEN.

import (
	"context"

	"github.com/tristore/tristore/proto/nfs4"
	"github.com/tristore/tristore/proto/sunrpc"
)

func putFH(fh FH) Op4 { return Op4{nfs4.OpPutFH, &nfs4.PutFHArgs{FH: fh}, nil} }

// AttrFullMask is what the calls of this file return: Attr4Mask plus fsid,
// raw device and space used (everything a stat(2) shows).
var AttrFullMask = nfs4.NewBitmap(append(Attr4Mask.Bits(), nfs4.AttrFSID, nfs4.AttrRawDev, nfs4.AttrSpaceUsed)...)

func getattrOp(ga *nfs4.GetattrRes) Op4 {
	return Op4{nfs4.OpGetattr, &nfs4.GetattrArgs{Request: AttrFullMask}, ga}
}

// RawAttrs encodes the attributes of mask from fa for SETATTR, CREATE and
// OPEN.
func RawAttrs(fa *nfs4.Fattr, mask nfs4.Bitmap) nfs4.RawFattr {
	var w sunrpc.Writer
	fa.EncodeVals(&w, mask)
	return nfs4.RawFattr{Mask: mask, Vals: w.Bytes()}
}

// Getattr returns the attributes of fh (AttrFullMask).
func (c *Client4) Getattr(ctx context.Context, fh FH) (*nfs4.Fattr, error) {
	var ga nfs4.GetattrRes
	if err := c.Compound(ctx, putFH(fh), getattrOp(&ga)); err != nil {
		return nil, err
	}
	return parseAttr(&ga)
}

// GetattrMask returns the attributes of mask of fh (e.g. the space and
// file-count attributes a statfs needs).
func (c *Client4) GetattrMask(ctx context.Context, fh FH, mask nfs4.Bitmap) (*nfs4.Fattr, error) {
	var ga nfs4.GetattrRes
	if err := c.Compound(ctx, putFH(fh), Op4{nfs4.OpGetattr, &nfs4.GetattrArgs{Request: mask}, &ga}); err != nil {
		return nil, err
	}
	return parseAttr(&ga)
}

// Lookup finds name in dir and returns its handle and attributes
// (PUTFH, LOOKUP, GETFH, GETATTR).
func (c *Client4) Lookup(ctx context.Context, dir FH, name string) (FH, *nfs4.Fattr, error) {
	var fh nfs4.GetFHRes
	var ga nfs4.GetattrRes
	if err := c.Compound(ctx, putFH(dir), Op4{nfs4.OpLookup, &nfs4.NameArgs{Name: name}, nil},
		Op4{nfs4.OpGetFH, &nfs4.NoArgs{}, &fh}, getattrOp(&ga)); err != nil {
		return nil, nil, err
	}
	fa, err := parseAttr(&ga)
	return fh.FH, fa, err
}

// Setattr sets attrs on fh (stateid: the zero value, or an open's for a
// size change) and returns the attributes after (PUTFH, SETATTR, GETATTR).
func (c *Client4) Setattr(ctx context.Context, fh FH, stateid nfs4.Stateid, attrs nfs4.RawFattr) (*nfs4.Fattr, error) {
	var ga nfs4.GetattrRes
	if err := c.Compound(ctx, putFH(fh), Op4{nfs4.OpSetattr, &nfs4.SetattrArgs{Stateid: stateid, Attrs: attrs}, &nfs4.SetattrRes{}},
		getattrOp(&ga)); err != nil {
		return nil, err
	}
	return parseAttr(&ga)
}

// CreateObject makes a non-regular object (directory, symbolic link,
// device, FIFO, socket) with CREATE and returns its handle and attributes.
func (c *Client4) CreateObject(ctx context.Context, dir FH, args nfs4.CreateArgs) (FH, *nfs4.Fattr, error) {
	var fh nfs4.GetFHRes
	var ga nfs4.GetattrRes
	if err := c.Compound(ctx, putFH(dir), Op4{nfs4.OpCreate, &args, &nfs4.CreateRes{}},
		Op4{nfs4.OpGetFH, &nfs4.NoArgs{}, &fh}, getattrOp(&ga)); err != nil {
		return nil, nil, err
	}
	fa, err := parseAttr(&ga)
	return fh.FH, fa, err
}

// CreateFile makes (guarded: an existing name is ErrExist) or opens
// (unchecked: attrs apply only to a new file, but a size 0 truncates) a
// regular file with OPEN, GETFH, GETATTR and CLOSE in one COMPOUND, and
// returns its handle and attributes. The session's reply cache makes a
// retransmitted GUARDED create safe.
func (c *Client4) CreateFile(ctx context.Context, dir FH, name string, guarded bool, attrs nfs4.RawFattr) (FH, *nfs4.Fattr, error) {
	how := uint32(nfs4.CreateUnchecked)
	if guarded {
		how = nfs4.CreateGuarded
	}
	var fh nfs4.GetFHRes
	var ga nfs4.GetattrRes
	err := c.Compound(ctx, putFH(dir),
		Op4{nfs4.OpOpen, &nfs4.OpenArgs{ShareAccess: nfs4.ShareAccessWrite | 0x0400, Owner: c.openOwner(), Create: true,
			CreateMode: how, Attrs: attrs, Claim: nfs4.ClaimNull, Name: name}, &nfs4.OpenRes{}},
		Op4{nfs4.OpGetFH, &nfs4.NoArgs{}, &fh}, getattrOp(&ga),
		Op4{nfs4.OpClose, &nfs4.CloseArgs{Stateid: current()}, &nfs4.StateidRes{}})
	if err != nil {
		return nil, nil, err
	}
	fa, err := parseAttr(&ga)
	return fh.FH, fa, err
}

// Rename moves from in fromDir to to in toDir (SAVEFH + RENAME).
func (c *Client4) Rename(ctx context.Context, fromDir FH, from string, toDir FH, to string) error {
	return c.Compound(ctx, putFH(fromDir), Op4{nfs4.OpSaveFH, &nfs4.NoArgs{}, nil}, putFH(toDir),
		Op4{nfs4.OpRename, &nfs4.RenameArgs{From: from, To: to}, &nfs4.RenameRes{}})
}

// Link makes name in dir a hard link to fh and returns fh's attributes
// after.
func (c *Client4) Link(ctx context.Context, fh FH, dir FH, name string) (*nfs4.Fattr, error) {
	var ga nfs4.GetattrRes
	if err := c.Compound(ctx, putFH(fh), Op4{nfs4.OpSaveFH, &nfs4.NoArgs{}, nil}, putFH(dir),
		Op4{nfs4.OpLink, &nfs4.NameArgs{Name: name}, &nfs4.CinfoRes{}},
		Op4{nfs4.OpRestoreFH, &nfs4.NoArgs{}, nil}, getattrOp(&ga)); err != nil {
		return nil, err
	}
	return parseAttr(&ga)
}

// Readlink returns the target of the symbolic link fh.
func (c *Client4) Readlink(ctx context.Context, fh FH) (string, error) {
	var rl nfs4.ReadlinkRes
	if err := c.Compound(ctx, putFH(fh), Op4{nfs4.OpReadlink, &nfs4.NoArgs{}, &rl}); err != nil {
		return "", err
	}
	return rl.Link, nil
}

// Read reads up to count bytes of fh at off under stateid.
func (c *Client4) Read(ctx context.Context, fh FH, stateid nfs4.Stateid, off uint64, count uint32) ([]byte, bool, error) {
	var rd nfs4.ReadRes
	if err := c.Compound(ctx, putFH(fh), Op4{nfs4.OpRead, &nfs4.ReadArgs{Stateid: stateid, Offset: off, Count: count}, &rd}); err != nil {
		return nil, false, err
	}
	return rd.Data, rd.EOF, nil
}

// Write writes data (at most Wsize bytes) to fh at off under stateid with
// the given stability (nfs4.Unstable, DataSync, FileSync).
func (c *Client4) Write(ctx context.Context, fh FH, stateid nfs4.Stateid, off uint64, data []byte, stable uint32) (nfs4.WriteRes, error) {
	var wr nfs4.WriteRes
	err := c.Compound(ctx, putFH(fh), Op4{nfs4.OpWrite, &nfs4.WriteArgs{Stateid: stateid, Offset: off, Stable: stable, Data: data}, &wr})
	return wr, err
}

// Commit makes fh's UNSTABLE writes stable and returns the write verifier.
func (c *Client4) Commit(ctx context.Context, fh FH) ([nfs4.VerifierSize]byte, error) {
	var v nfs4.VerfRes
	err := c.Compound(ctx, putFH(fh), Op4{nfs4.OpCommit, &nfs4.CommitArgs{}, &v})
	return v.Verf, err
}

// Renew is a COMPOUND of SEQUENCE alone: it renews the client's lease.
func (c *Client4) Renew(ctx context.Context) error { return c.Compound(ctx) }

// GiveUp makes calls waiting for a down or silent server fail now, and
// later ones as soon as their first attempt does (see Client.GiveUp).
func (c *Client4) GiveUp() { c.rc.stopWaiting() }

// Redial makes a new client ID and session with the server c talks to,
// with c's options and c's owner ID (after a server restart lost c's
// session: SEQUENCE answers NFS4ERR_BADSESSION). To the server that is c
// rebooted: c's RECLAIM_COMPLETE counts towards ending its grace period.
// c itself is left as it is.
func (c *Client4) Redial(ctx context.Context) (*Client4, error) {
	opts := c.opts
	opts.V4Owner = string(c.owner)
	return Dial4(ctx, c.rc.addr, opts)
}
