package nfs

import (
	"context"
	"errors"
	"fmt"

	"github.com/tristore/tristore/proto/nfs3"
)

// LOOKUP, READLINK and the namespace-changing procedures.
//
// Most of the namespace-changing calls are not idempotent: if the
// connection drops before the reply, the call may or may not have run, and
// a plain retransmission that finds its own earlier work ("NOENT" for a
// REMOVE that already ran, "EXIST" for a MKDIR) would report failure for a
// success. So after ErrConnLost they are sent again (at most lostRetries
// times) and the second answer is interpreted: REMOVE/RMDIR -> NOENT,
// RENAME -> source NOENT with the target present, MKDIR/SYMLINK/LINK ->
// EXIST with the object we asked for in place, all count as success. This
// is the same judgement the Linux client makes; it can be fooled by another
// client changing the same name in that instant, which NFS v3 cannot rule
// out. UNCHECKED and EXCLUSIVE CREATE are simply retransmitted (they are
// safe to repeat); GUARDED CREATE is not (use EXCLUSIVE for O_EXCL).

// lostRetries bounds the re-sends after ErrConnLost.
const lostRetries = 3

// afterLost runs call; while it fails with ErrConnLost it runs it again,
// and if a re-sent call fails with an error that done accepts, the earlier
// attempt is taken to have succeeded.
func afterLost(call func() error, done func(error) bool) error {
	err := call()
	for i := 0; i < lostRetries && errors.Is(err, ErrConnLost); i++ {
		err = call()
		if err != nil && !errors.Is(err, ErrConnLost) && done(err) {
			return nil
		}
	}
	return err
}

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
	return c.withAttr(ctx, cloneFH(res.FH.FH), fromFattr(res.Attr.Attr))
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
	// EXCLUSIVE creates are safe to retransmit (the verifier makes the
	// server answer a repeat with success), and so are UNCHECKED ones
	// (a repeat finds the file and applies the same attributes).
	if err := c.callNFS(ctx, "CREATE", nfs3.ProcCreate, how != Guarded, args, &res); err != nil {
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
	var fh FH
	var attr *Attr
	err := afterLost(func() error {
		if err := c.callNFS(ctx, "MKDIR", nfs3.ProcMkdir, false, &nfs3.MkdirArgs{Where: nfs3.DirOpArgs{Dir: nfs3.FH(dir), Name: name}, Attr: toSattr(s)}, &res); err != nil {
			return err
		}
		var err error
		fh, attr, err = c.created(ctx, "MKDIR", dir, name, &res)
		return err
	}, func(err error) bool {
		if !errors.Is(err, ErrExist) {
			return false
		}
		var lerr error
		fh, attr, lerr = c.Lookup(ctx, dir, name)
		return lerr == nil && attr != nil && attr.Type == TypeDir
	})
	if err != nil {
		return nil, nil, err
	}
	return fh, attr, nil
}

// Symlink makes a symbolic link name -> target.
func (c *Client) Symlink(ctx context.Context, dir FH, name, target string, s SetAttr) (FH, *Attr, error) {
	var res nfs3.CreateRes
	var fh FH
	var attr *Attr
	err := afterLost(func() error {
		if err := c.callNFS(ctx, "SYMLINK", nfs3.ProcSymlink, false, &nfs3.SymlinkArgs{Where: nfs3.DirOpArgs{Dir: nfs3.FH(dir), Name: name}, Attr: toSattr(s), Target: target}, &res); err != nil {
			return err
		}
		var err error
		fh, attr, err = c.created(ctx, "SYMLINK", dir, name, &res)
		return err
	}, func(err error) bool {
		if !errors.Is(err, ErrExist) {
			return false
		}
		var lerr error
		if fh, attr, lerr = c.Lookup(ctx, dir, name); lerr != nil || attr == nil || attr.Type != TypeLnk {
			return false
		}
		got, lerr := c.Readlink(ctx, fh)
		return lerr == nil && got == target
	})
	if err != nil {
		return nil, nil, err
	}
	return fh, attr, nil
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
	return afterLost(func() error {
		var res nfs3.RemoveRes
		if err := c.callNFS(ctx, "REMOVE", nfs3.ProcRemove, false, &nfs3.DirOpArgs{Dir: nfs3.FH(dir), Name: name}, &res); err != nil {
			return err
		}
		return status("REMOVE", res.Status)
	}, func(err error) bool { return errors.Is(err, ErrNoEnt) })
}

// Rmdir removes an empty directory.
func (c *Client) Rmdir(ctx context.Context, dir FH, name string) error {
	return afterLost(func() error {
		var res nfs3.WccRes
		if err := c.callNFS(ctx, "RMDIR", nfs3.ProcRmdir, false, &nfs3.DirOpArgs{Dir: nfs3.FH(dir), Name: name}, &res); err != nil {
			return err
		}
		return status("RMDIR", res.Status)
	}, func(err error) bool { return errors.Is(err, ErrNoEnt) })
}

// Rename moves fromDir/fromName to toDir/toName, replacing a compatible
// target atomically.
func (c *Client) Rename(ctx context.Context, fromDir FH, fromName string, toDir FH, toName string) error {
	args := &nfs3.RenameArgs{From: nfs3.DirOpArgs{Dir: nfs3.FH(fromDir), Name: fromName}, To: nfs3.DirOpArgs{Dir: nfs3.FH(toDir), Name: toName}}
	return afterLost(func() error {
		var res nfs3.RenameRes
		if err := c.callNFS(ctx, "RENAME", nfs3.ProcRename, false, args, &res); err != nil {
			return err
		}
		return status("RENAME", res.Status)
	}, func(err error) bool {
		if !errors.Is(err, ErrNoEnt) {
			return false
		}
		_, _, lerr := c.Lookup(ctx, toDir, toName)
		return lerr == nil
	})
}

// Link makes dir/name a new hard link to fh and returns fh's new attributes.
func (c *Client) Link(ctx context.Context, fh FH, dir FH, name string) (*Attr, error) {
	var attr *Attr
	err := afterLost(func() error {
		var res nfs3.LinkRes
		if err := c.callNFS(ctx, "LINK", nfs3.ProcLink, false, &nfs3.LinkArgs{FH: nfs3.FH(fh), Link: nfs3.DirOpArgs{Dir: nfs3.FH(dir), Name: name}}, &res); err != nil {
			return err
		}
		if err := status("LINK", res.Status); err != nil {
			return err
		}
		attr = fromFattr(res.Attr.Attr)
		return nil
	}, func(err error) bool {
		if !errors.Is(err, ErrExist) {
			return false
		}
		_, la, lerr := c.Lookup(ctx, dir, name)
		a, gerr := c.Getattr(ctx, fh)
		if lerr != nil || gerr != nil || la == nil || la.FileID != a.FileID {
			return false
		}
		attr = a
		return true
	})
	return attr, err
}
