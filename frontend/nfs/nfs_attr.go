package nfs

import (
	"time"

	"github.com/tristore/tristore/proto/nfs3"
	"github.com/tristore/tristore/proto/sunrpc"
	"github.com/tristore/tristore/vfs"
)

// NULL, GETATTR, SETATTR, ACCESS, FSSTAT, FSINFO and PATHCONF, and the
// procedure table.

var nfsProcs = []procFunc{
	nfs3.ProcNull:        nfsNull,
	nfs3.ProcGetattr:     nfsGetattr,
	nfs3.ProcSetattr:     nfsSetattr,
	nfs3.ProcLookup:      nfsLookup,
	nfs3.ProcAccess:      nfsAccess,
	nfs3.ProcReadlink:    nfsReadlink,
	nfs3.ProcRead:        nfsRead,
	nfs3.ProcWrite:       nfsWrite,
	nfs3.ProcCreate:      nfsCreate,
	nfs3.ProcMkdir:       nfsMkdir,
	nfs3.ProcSymlink:     nfsSymlink,
	nfs3.ProcMknod:       nfsMknod,
	nfs3.ProcRemove:      nfsRemove,
	nfs3.ProcRmdir:       nfsRmdir,
	nfs3.ProcRename:      nfsRename,
	nfs3.ProcLink:        nfsLink,
	nfs3.ProcReaddir:     nfsReaddir,
	nfs3.ProcReaddirplus: nfsReaddirplus,
	nfs3.ProcFsstat:      nfsFsstat,
	nfs3.ProcFsinfo:      nfsFsinfo,
	nfs3.ProcPathconf:    nfsPathconf,
	nfs3.ProcCommit:      nfsCommit,
}

// exportOf finds the export that issued fh, checks that the client may use
// it and returns the caller's identity after squashing.
func (s *Server) exportOf(req *request, fh nfs3.FH) (*Export, vfs.Cred, nfs3.Status) {
	id, err := vfs.HandleExportID(vfs.Handle(fh))
	if err != nil {
		return nil, vfs.Cred{}, nfs3.ErrBadHandle
	}
	e := s.byID[id]
	if e == nil {
		return nil, vfs.Cred{}, nfs3.ErrStale
	}
	if !e.allows(req.c.addr) {
		return nil, vfs.Cred{}, nfs3.ErrAcces
	}
	return e, e.cred(&req.auth), nfs3.OK
}

func nfsNull(s *Server, req *request, r *sunrpc.Reader, w *sunrpc.Writer) error { return nil }

func nfsGetattr(s *Server, req *request, r *sunrpc.Reader, w *sunrpc.Writer) error {
	var args nfs3.GetattrArgs
	if err := decodeArgs(r, &args); err != nil {
		return err
	}
	res := nfs3.GetattrRes{}
	e, _, st := s.exportOf(req, args.FH)
	if st == nfs3.OK {
		a, err := e.fs.GetAttr(vfs.Handle(args.FH))
		st = statusOf(err)
		if st == nfs3.OK {
			res.Attr = *fattr(&a)
		}
	}
	res.Status = st
	res.Encode(w)
	return nil
}

func nfsSetattr(s *Server, req *request, r *sunrpc.Reader, w *sunrpc.Writer) error {
	var args nfs3.SetattrArgs
	if err := decodeArgs(r, &args); err != nil {
		return err
	}
	res := nfs3.SetattrRes{}
	e, cred, st := s.exportOf(req, args.FH)
	if st == nfs3.OK && args.Attr.Size != nil && s.v4.writeBlocked(e, vfs.Handle(args.FH), *args.Attr.Size, ^uint64(0)) {
		st = nfs3.ErrAcces // see nfsWrite
	}
	if st == nfs3.OK {
		var guard *time.Time
		if args.Guard != nil {
			t := fromNFSTime(*args.Guard)
			guard = &t
		}
		before, after, err := e.fs.SetAttrs(cred, vfs.Handle(args.FH), sattr(&args.Attr), guard)
		st = statusOf(err)
		if before.FileID != 0 {
			res.Wcc = wcc(&before, &after)
		}
	}
	res.Status = st
	res.Encode(w)
	return nil
}

func nfsAccess(s *Server, req *request, r *sunrpc.Reader, w *sunrpc.Writer) error {
	var args nfs3.AccessArgs
	if err := decodeArgs(r, &args); err != nil {
		return err
	}
	res := nfs3.AccessRes{}
	e, cred, st := s.exportOf(req, args.FH)
	if st == nfs3.OK {
		got, a, err := e.fs.Access(cred, vfs.Handle(args.FH), args.Access)
		st = statusOf(err)
		if st == nfs3.OK {
			res.Access = got
			res.Attr = postOp(&a)
		}
	}
	res.Status = st
	res.Encode(w)
	return nil
}

func nfsFsstat(s *Server, req *request, r *sunrpc.Reader, w *sunrpc.Writer) error {
	var args nfs3.GetattrArgs
	if err := decodeArgs(r, &args); err != nil {
		return err
	}
	res := nfs3.FsstatRes{}
	e, _, st := s.exportOf(req, args.FH)
	if st == nfs3.OK {
		fsst, a, err := e.fs.StatFS(vfs.Handle(args.FH))
		st = statusOf(err)
		if st == nfs3.OK {
			res.Attr = postOp(&a)
			res.TBytes, res.FBytes, res.ABytes = fsst.TotalBytes, fsst.FreeBytes, fsst.AvailBytes
			res.TFiles, res.FFiles, res.AFiles = fsst.TotalFiles, fsst.FreeFiles, fsst.AvailFiles
		}
	}
	res.Status = st
	res.Encode(w)
	return nil
}

func nfsFsinfo(s *Server, req *request, r *sunrpc.Reader, w *sunrpc.Writer) error {
	var args nfs3.GetattrArgs
	if err := decodeArgs(r, &args); err != nil {
		return err
	}
	res := nfs3.FsinfoRes{}
	e, _, st := s.exportOf(req, args.FH)
	if st == nfs3.OK {
		a, err := e.fs.GetAttr(vfs.Handle(args.FH))
		st = statusOf(err)
		if st == nfs3.OK {
			res.Attr = postOp(&a)
			res.RtMax, res.RtPref, res.RtMult = maxRead, prefIO, 4096
			res.WtMax, res.WtPref, res.WtMult = maxIO, prefIO, 4096
			res.DtPref = dirPref
			res.MaxFileSize = 1<<44 - 1 // ext4 with 4 KiB blocks: 16 TiB
			res.TimeDelta = nfs3.Time{Sec: 0, Nsec: 1}
			res.Properties = nfs3.FSFLink | nfs3.FSFSymlink | nfs3.FSFHomogeneous | nfs3.FSFCanSetTime
		}
	}
	res.Status = st
	res.Encode(w)
	return nil
}

func nfsPathconf(s *Server, req *request, r *sunrpc.Reader, w *sunrpc.Writer) error {
	var args nfs3.GetattrArgs
	if err := decodeArgs(r, &args); err != nil {
		return err
	}
	res := nfs3.PathconfRes{}
	e, _, st := s.exportOf(req, args.FH)
	if st == nfs3.OK {
		a, err := e.fs.GetAttr(vfs.Handle(args.FH))
		st = statusOf(err)
		if st == nfs3.OK {
			res.Attr = postOp(&a)
			res.LinkMax = 65000 // ext4 EXT4_LINK_MAX
			res.NameMax = vfs.NameMax
			res.NoTrunc = true
			res.ChownRestricted = true
			res.CasePreserving = true
		}
	}
	res.Status = st
	res.Encode(w)
	return nil
}
