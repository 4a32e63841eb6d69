package nfs

import (
	"context"
	"fmt"

	"github.com/tristore/tristore/proto/nfs3"
)

// LOOKUP, READLINK and the namespace-changing procedures. The creating and
// removing calls are not idempotent: after a connection drop they fail with
// ErrConnLost instead of being retransmitted (a retransmitted REMOVE that
// already ran would report NOENT for a removal that succeeded).

// Lookup finds name in dir.
func (c *Client) Lookup(ctx context.Context, dir FH, name string) (FH, *Attr, error) {
	var res nfs3.LookupRes
	if err := c.callNFS(ctx, "LOOKUP", nfs3.ProcLookup, true, &nfs3.LookupArgs{Dir: nfs3.FH(dir), Name: name}, &res); err != nil {
		return nil, nil, err
	}
	if err := status("LOOKUP", res.Status); err != nil {
		return nil, nil, err
	}
	return cloneFH(res.FH), fromFattr(res.Attr.Attr), nil
}

// Readlink returns a symbolic link's target.
func (c *Client) Readlink(ctx context.Context, fh FH) (string, error) {
	var res nfs3.ReadlinkRes
	if err := c.callNFS(ctx, "READLINK", nfs3.ProcReadlink, true, &nfs3.GetattrArgs{FH: nfs3.FH(fh)}, &res); err != nil {
		return "", err
	}
	if err := status("READLINK", res.Status); err != nil {
		return "", err
	}
	return res.Path, nil
}

// created finishes CREATE/MKDIR/SYMLINK/MKNOD: servers may omit the new
// handle (post_op_fh3 is optional), in which case it is looked up.
func (c *Client) created(ctx context.Context, op string, dir FH, name string, res *nfs3.CreateRes) (FH, *Attr, error) {
	if err := status(op, res.Status); err != nil {
		return nil, nil, err
	}
	if res.FH.FH == nil {
		fh, attr, err := c.Lookup(ctx, dir, name)
		if err != nil {
			return nil, nil, &OpError{Op: op, Err: fmt.Errorf("reply without handle, and lookup failed: %w", err)}
		}
		return fh, attr, nil
	}
	fh := cloneFH(res.FH.FH)
	attr := fromFattr(res.Attr.Attr)
	if attr == nil {
		a, err := c.Getattr(ctx, fh)
		if err != nil {
			return nil, nil, err
		}
		attr = a
	}
	return fh, attr, nil
}

// Create makes a regular file. With Exclusive, verf identifies this
// request so a retransmission is recognised by the server; the file's
// attributes (s) must then be set with a SETATTR afterwards, which Create
// does.
func (c *Client) Create(ctx context.Context, dir FH, name string, how CreateMode, s SetAttr, verf Verifier) (FH, *Attr, error) {
	args := &nfs3.CreateArgs{Where: nfs3.DirOpArgs{Dir: nfs3.FH(dir), Name: name}, Mode: nfs3.CreateMode(how)}
	if how == Exclusive {
		args.Verf = verf
	} else {
		args.Attr = toSattr(s)
	}
	var res nfs3.CreateRes
	// EXCLUSIVE creates are safe to retransmit: the verifier makes the
	// server answer a repeat with success.
	if err := c.callNFS(ctx, "CREATE", nfs3.ProcCreate, how == Exclusive, args, &res); err != nil {
		return nil, nil, err
	}
	fh, attr, err := c.created(ctx, "CREATE", dir, name, &res)
	if err != nil || how != Exclusive || (s == SetAttr{}) {
		return fh, attr, err
	}
	wcc, err := c.Setattr(ctx, fh, s, nil)
	if err != nil {
		return nil, nil, err
	}
	if wcc.After != nil {
		attr = wcc.After
	}
	return fh, attr, nil
}

// Mkdir makes a directory.
func (c *Client) Mkdir(ctx context.Context, dir FH, name string, s SetAttr) (FH, *Attr, error) {
	var res nfs3.CreateRes
	if err := c.callNFS(ctx, "MKDIR", nfs3.ProcMkdir, false, &nfs3.MkdirArgs{Where: nfs3.DirOpArgs{Dir: nfs3.FH(dir), Name: name}, Attr: toSattr(s)}, &res); err != nil {
		return nil, nil, err
	}
	return c.created(ctx, "MKDIR", dir, name, &res)
}

// Symlink makes a symbolic link name -> target.
func (c *Client) Symlink(ctx context.Context, dir FH, name, target string, s SetAttr) (FH, *Attr, error) {
	var res nfs3.CreateRes
	if err := c.callNFS(ctx, "SYMLINK", nfs3.ProcSymlink, false, &nfs3.SymlinkArgs{Where: nfs3.DirOpArgs{Dir: nfs3.FH(dir), Name: name}, Attr: toSattr(s), Target: target}, &res); err != nil {
		return nil, nil, err
	}
	return c.created(ctx, "SYMLINK", dir, name, &res)
}

// Mknod makes a special file (character or block device, socket, FIFO).
func (c *Client) Mknod(ctx context.Context, dir FH, name string, typ FileType, s SetAttr, major, minor uint32) (FH, *Attr, error) {
	args := &nfs3.MknodArgs{Where: nfs3.DirOpArgs{Dir: nfs3.FH(dir), Name: name}, Type: nfs3.FileType(typ), Attr: toSattr(s), Spec: nfs3.SpecData{Major: major, Minor: minor}}
	var res nfs3.CreateRes
	if err := c.callNFS(ctx, "MKNOD", nfs3.ProcMknod, false, args, &res); err != nil {
		return nil, nil, err
	}
	return c.created(ctx, "MKNOD", dir, name, &res)
}

// Remove unlinks a non-directory.
func (c *Client) Remove(ctx context.Context, dir FH, name string) error {
	var res nfs3.RemoveRes
	if err := c.callNFS(ctx, "REMOVE", nfs3.ProcRemove, false, &nfs3.DirOpArgs{Dir: nfs3.FH(dir), Name: name}, &res); err != nil {
		return err
	}
	return status("REMOVE", res.Status)
}

// Rmdir removes an empty directory.
func (c *Client) Rmdir(ctx context.Context, dir FH, name string) error {
	var res nfs3.WccRes
	if err := c.callNFS(ctx, "RMDIR", nfs3.ProcRmdir, false, &nfs3.DirOpArgs{Dir: nfs3.FH(dir), Name: name}, &res); err != nil {
		return err
	}
	return status("RMDIR", res.Status)
}

// Rename moves fromDir/fromName to toDir/toName, replacing a compatible
// target atomically.
func (c *Client) Rename(ctx context.Context, fromDir FH, fromName string, toDir FH, toName string) error {
	args := &nfs3.RenameArgs{From: nfs3.DirOpArgs{Dir: nfs3.FH(fromDir), Name: fromName}, To: nfs3.DirOpArgs{Dir: nfs3.FH(toDir), Name: toName}}
	var res nfs3.RenameRes
	if err := c.callNFS(ctx, "RENAME", nfs3.ProcRename, false, args, &res); err != nil {
		return err
	}
	return status("RENAME", res.Status)
}

// Link makes dir/name a new hard link to fh and returns fh's new attributes.
func (c *Client) Link(ctx context.Context, fh FH, dir FH, name string) (*Attr, error) {
	var res nfs3.LinkRes
	if err := c.callNFS(ctx, "LINK", nfs3.ProcLink, false, &nfs3.LinkArgs{FH: nfs3.FH(fh), Link: nfs3.DirOpArgs{Dir: nfs3.FH(dir), Name: name}}, &res); err != nil {
		return nil, err
	}
	if err := status("LINK", res.Status); err != nil {
		return nil, err
	}
	return fromFattr(res.Attr.Attr), nil
}
