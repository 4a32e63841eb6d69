package nfs

import (
	"github.com/tristore/tristore/proto/nfs3"
	"github.com/tristore/tristore/proto/sunrpc"
	"github.com/tristore/tristore/vfs"
)

// LOOKUP, READLINK, CREATE, MKDIR, SYMLINK, MKNOD, REMOVE, RMDIR, RENAME, LINK.

func nfsLookup(s *Server, req *request, r *sunrpc.Reader, w *sunrpc.Writer) error {
	var args nfs3.DirOpArgs
	if err := decodeArgs(r, &args); err != nil {
		return err
	}
	res := nfs3.LookupRes{}
	e, cred, st := s.exportOf(req, args.Dir)
	if st == nfs3.OK {
		h, a, da, err := e.fs.Lookup(cred, vfs.Handle(args.Dir), args.Name)
		st = statusOf(err)
		res.DirAttr = postOp(da)
		if st == nfs3.OK {
			res.FH = nfs3.FH(h)
			res.Attr = postOp(&a)
		}
	}
	res.Status = st
	res.Encode(w)
	return nil
}

func nfsReadlink(s *Server, req *request, r *sunrpc.Reader, w *sunrpc.Writer) error {
	var args nfs3.GetattrArgs
	if err := decodeArgs(r, &args); err != nil {
		return err
	}
	res := nfs3.ReadlinkRes{}
	e, _, st := s.exportOf(req, args.FH)
	if st == nfs3.OK {
		target, a, err := e.fs.Readlink(vfs.Handle(args.FH))
		st = statusOf(err)
		if a.FileID != 0 {
			res.Attr = postOp(&a)
		}
		res.Path = target
	}
	res.Status = st
	res.Encode(w)
	return nil
}

// created fills a CREATE/MKDIR/SYMLINK result.
func created(st nfs3.Status, h vfs.Handle, a vfs.Attr, dc vfs.DirChange, err error) nfs3.CreateRes {
	res := nfs3.CreateRes{Status: st}
	if st == nfs3.OK {
		res.Status = statusOf(err)
	}
	if res.Status == nfs3.OK {
		res.FH = nfs3.PostOpFH{FH: nfs3.FH(h)}
		res.Attr = postOp(&a)
	}
	res.DirWcc = dirWcc(dc)
	return res
}

func nfsCreate(s *Server, req *request, r *sunrpc.Reader, w *sunrpc.Writer) error {
	var args nfs3.CreateArgs
	if err := decodeArgs(r, &args); err != nil {
		return err
	}
	var res nfs3.CreateRes
	e, cred, st := s.exportOf(req, args.Where.Dir)
	if st == nfs3.OK {
		mode := vfs.CreateUnchecked
		switch args.Mode {
		case nfs3.Guarded:
			mode = vfs.CreateGuarded
		case nfs3.Exclusive:
			mode = vfs.CreateExclusive
		}
		h, a, dc, err := e.fs.CreateFile(cred, vfs.Handle(args.Where.Dir), args.Where.Name, mode, sattr(&args.Attr), args.Verf)
		res = created(st, h, a, dc, err)
	} else {
		res.Status = st
	}
	res.Encode(w)
	return nil
}

func nfsMkdir(s *Server, req *request, r *sunrpc.Reader, w *sunrpc.Writer) error {
	var args nfs3.MkdirArgs
	if err := decodeArgs(r, &args); err != nil {
		return err
	}
	var res nfs3.CreateRes
	e, cred, st := s.exportOf(req, args.Where.Dir)
	if st == nfs3.OK {
		h, a, dc, err := e.fs.Mkdir(cred, vfs.Handle(args.Where.Dir), args.Where.Name, sattr(&args.Attr))
		res = created(st, h, a, dc, err)
	} else {
		res.Status = st
	}
	res.Encode(w)
	return nil
}

func nfsSymlink(s *Server, req *request, r *sunrpc.Reader, w *sunrpc.Writer) error {
	var args nfs3.SymlinkArgs
	if err := decodeArgs(r, &args); err != nil {
		return err
	}
	var res nfs3.CreateRes
	e, cred, st := s.exportOf(req, args.Where.Dir)
	if st == nfs3.OK {
		h, a, dc, err := e.fs.Symlink(cred, vfs.Handle(args.Where.Dir), args.Where.Name, args.Target, sattr(&args.Attr))
		res = created(st, h, a, dc, err)
	} else {
		res.Status = st
	}
	res.Encode(w)
	return nil
}

// nfsMknod refuses special files: the store holds objects, and device
// nodes or FIFOs in it would be meaningless (or dangerous) over S3.
func nfsMknod(s *Server, req *request, r *sunrpc.Reader, w *sunrpc.Writer) error {
	var args nfs3.MknodArgs
	if err := decodeArgs(r, &args); err != nil {
		return err
	}
	var res nfs3.CreateRes
	e, cred, st := s.exportOf(req, args.Where.Dir)
	if st != nfs3.OK {
		res.Status = st
		res.Encode(w)
		return nil
	}
	var typ vfs.FileType
	switch args.Type {
	case nfs3.TypeChr:
		typ = vfs.TypeChar
	case nfs3.TypeBlk:
		typ = vfs.TypeBlock
	case nfs3.TypeSock:
		typ = vfs.TypeSocket
	case nfs3.TypeFifo:
		typ = vfs.TypeFIFO
	default:
		res.Status = nfs3.ErrBadType
		if a, err := e.fs.GetAttr(vfs.Handle(args.Where.Dir)); err == nil {
			res.DirWcc = wcc(&a, &a)
		}
		res.Encode(w)
		return nil
	}
	h, a, dc, err := e.fs.Mknod(cred, vfs.Handle(args.Where.Dir), args.Where.Name, typ, args.Spec.Major, args.Spec.Minor, sattr(&args.Attr))
	res = created(st, h, a, dc, err)
	res.Encode(w)
	return nil
}

func nfsRemove(s *Server, req *request, r *sunrpc.Reader, w *sunrpc.Writer) error {
	return removeOrRmdir(s, req, r, w, false)
}

func nfsRmdir(s *Server, req *request, r *sunrpc.Reader, w *sunrpc.Writer) error {
	return removeOrRmdir(s, req, r, w, true)
}

func removeOrRmdir(s *Server, req *request, r *sunrpc.Reader, w *sunrpc.Writer, dir bool) error {
	var args nfs3.DirOpArgs
	if err := decodeArgs(r, &args); err != nil {
		return err
	}
	res := nfs3.RemoveRes{}
	e, cred, st := s.exportOf(req, args.Dir)
	if st == nfs3.OK {
		var dc vfs.DirChange
		var err error
		if dir {
			dc, err = e.fs.Rmdir(cred, vfs.Handle(args.Dir), args.Name)
		} else {
			dc, err = e.fs.Remove(cred, vfs.Handle(args.Dir), args.Name)
		}
		st = statusOf(err)
		res.Wcc = dirWcc(dc)
	}
	res.Status = st
	res.Encode(w)
	return nil
}

func nfsRename(s *Server, req *request, r *sunrpc.Reader, w *sunrpc.Writer) error {
	var args nfs3.RenameArgs
	if err := decodeArgs(r, &args); err != nil {
		return err
	}
	res := nfs3.RenameRes{}
	e, cred, st := s.exportOf(req, args.From.Dir)
	if st == nfs3.OK {
		e2, _, st2 := s.exportOf(req, args.To.Dir)
		switch {
		case st2 != nfs3.OK:
			st = st2
		case e2 != e:
			st = nfs3.ErrXDev // two exports are two file systems to the client
		default:
			from, to, err := e.fs.Rename(cred, vfs.Handle(args.From.Dir), args.From.Name, vfs.Handle(args.To.Dir), args.To.Name)
			st = statusOf(err)
			res.FromWcc, res.ToWcc = dirWcc(from), dirWcc(to)
		}
	}
	res.Status = st
	res.Encode(w)
	return nil
}

func nfsLink(s *Server, req *request, r *sunrpc.Reader, w *sunrpc.Writer) error {
	var args nfs3.LinkArgs
	if err := decodeArgs(r, &args); err != nil {
		return err
	}
	res := nfs3.LinkRes{}
	e, cred, st := s.exportOf(req, args.FH)
	if st == nfs3.OK {
		e2, _, st2 := s.exportOf(req, args.Link.Dir)
		switch {
		case st2 != nfs3.OK:
			st = st2
		case e2 != e:
			st = nfs3.ErrXDev
		default:
			a, dc, err := e.fs.Link(cred, vfs.Handle(args.FH), vfs.Handle(args.Link.Dir), args.Link.Name)
			st = statusOf(err)
			if a.FileID != 0 {
				res.Attr = postOp(&a)
			}
			res.LinkWcc = dirWcc(dc)
		}
	}
	res.Status = st
	res.Encode(w)
	return nil
}
