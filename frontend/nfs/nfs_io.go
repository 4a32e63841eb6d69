package nfs

import (
	"sync"

	"github.com/tristore/tristore/proto/nfs3"
	"github.com/tristore/tristore/proto/sunrpc"
	"github.com/tristore/tristore/vfs"
)

// READ, WRITE and COMMIT: the durability rules live here.
//
//	WRITE UNSTABLE   -> page cache only; reply committed=UNSTABLE
//	WRITE DATA_SYNC  -> fdatasync before the reply
//	WRITE FILE_SYNC  -> fsync before the reply
//	COMMIT           -> fsync before the reply
//
// Every WRITE/COMMIT reply carries the server's write verifier (its start
// time): a client that sees it change re-sends its uncommitted writes.

var readBufs = sync.Pool{New: func() any { b := make([]byte, maxIO); return &b }}

func nfsRead(s *Server, req *request, r *sunrpc.Reader, w *sunrpc.Writer) error {
	var args nfs3.ReadArgs
	if err := decodeArgs(r, &args); err != nil {
		return err
	}
	res := nfs3.ReadRes{}
	e, cred, st := s.exportOf(req, args.FH)
	if st == nfs3.OK {
		count := args.Count
		if count > maxIO {
			count = maxIO
		}
		bp := readBufs.Get().(*[]byte)
		req.release = func() { readBufs.Put(bp) }
		n, eof, a, err := e.fs.Read(cred, vfs.Handle(args.FH), args.Offset, (*bp)[:count])
		st = statusOf(err)
		if a.FileID != 0 {
			res.Attr = postOp(&a)
		}
		if st == nfs3.OK {
			res.Count = uint32(n)
			res.EOF = eof
			res.Data = (*bp)[:n]
		}
	}
	res.Status = st
	// The data goes out straight from the read buffer (no copy into w).
	res.EncodeHead(w)
	if st == nfs3.OK {
		req.tail = [][]byte{res.Data, nfs3.Pad(len(res.Data))}
	}
	return nil
}

func nfsWrite(s *Server, req *request, r *sunrpc.Reader, w *sunrpc.Writer) error {
	var args nfs3.WriteArgs
	if err := decodeArgs(r, &args); err != nil {
		return err
	}
	res := nfs3.WriteRes{}
	e, cred, st := s.exportOf(req, args.FH)
	if st == nfs3.OK {
		how := vfs.Unstable
		switch args.Stable {
		case nfs3.DataSync:
			how = vfs.DataSync
		case nfs3.FileSync:
			how = vfs.FileSync
		}
		n, before, after, err := e.fs.Write(cred, vfs.Handle(args.FH), args.Offset, args.Data, how)
		st = statusOf(err)
		if before.FileID != 0 {
			res.Wcc = wcc(&before, &after)
		}
		if st == nfs3.OK {
			res.Count = uint32(n)
			res.Committed = args.Stable
			res.Verf = s.verf
		}
	}
	res.Status = st
	res.Encode(w)
	return nil
}

func nfsCommit(s *Server, req *request, r *sunrpc.Reader, w *sunrpc.Writer) error {
	var args nfs3.CommitArgs
	if err := decodeArgs(r, &args); err != nil {
		return err
	}
	res := nfs3.CommitRes{}
	e, _, st := s.exportOf(req, args.FH)
	if st == nfs3.OK {
		before, after, err := e.fs.Commit(vfs.Handle(args.FH))
		st = statusOf(err)
		if before.FileID != 0 {
			res.Wcc = wcc(&before, &after)
		}
		if st == nfs3.OK {
			res.Verf = s.verf
		}
	}
	res.Status = st
	res.Encode(w)
	return nil
}
