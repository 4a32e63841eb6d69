package nfs

import (
	"github.com/tristore/tristore/proto/nfs3"
	"github.com/tristore/tristore/proto/sunrpc"
	"github.com/tristore/tristore/vfs"
)

// READDIR and READDIRPLUS.
//
// Cookies are the file system's directory offsets (vfs.DirEntry.Cookie), which
// stay valid across restarts and unrelated changes, so the cookie verifier is
// constant zero, as knfsd uses on ext4; the Linux client accepts that and
// never sees NFS3ERR_BAD_COOKIE from a directory that merely changed.

// Fixed parts of a READDIR(PLUS) reply: status, post_op_attr (1+84 words
// worth of bytes), verifier, list terminator, eof.
const readdirOverhead = 4 + 88 + 8 + 4 + 4

func nfsReaddir(s *Server, req *request, r *sunrpc.Reader, w *sunrpc.Writer) error {
	var args nfs3.ReaddirArgs
	if err := decodeArgs(r, &args); err != nil {
		return err
	}
	res := nfs3.ReaddirRes{}
	e, cred, st := s.exportOf(req, args.Dir)
	if st == nfs3.OK {
		count := int(min(args.Count, maxReaddr))
		budget := count - readdirOverhead
		maxEnts := budget / 24 // smallest entry3 on the wire
		if budget < 24 {
			st = nfs3.ErrTooSmall
		} else if args.Cookie != 0 && args.CookieVerf != ([8]byte{}) {
			st = nfs3.ErrBadCookie
		} else {
			ents, eof, da, err := e.fs.ReadDir(cred, vfs.Handle(args.Dir), args.Cookie, maxEnts, false)
			st = statusOf(err)
			res.DirAttr = postOp(&da)
			used := 0
			for i := range ents {
				ne := nfs3.Entry{FileID: ents[i].FileID, Name: ents[i].Name, Cookie: ents[i].Cookie}
				if used+ne.EntrySize() > budget {
					eof = false
					break
				}
				used += ne.EntrySize()
				res.Entries = append(res.Entries, ne)
			}
			if st == nfs3.OK && len(res.Entries) == 0 && len(ents) > 0 {
				st = nfs3.ErrTooSmall
			}
			res.EOF = eof
		}
	}
	res.Status = st
	res.Encode(w)
	return nil
}

func nfsReaddirplus(s *Server, req *request, r *sunrpc.Reader, w *sunrpc.Writer) error {
	var args nfs3.ReaddirplusArgs
	if err := decodeArgs(r, &args); err != nil {
		return err
	}
	res := nfs3.ReaddirplusRes{}
	e, cred, st := s.exportOf(req, args.Dir)
	if st == nfs3.OK {
		maxCount := int(min(args.MaxCount, maxReaddr))
		dirCount := int(min(args.DirCount, maxReaddr))
		budget := maxCount - readdirOverhead
		maxEnts := min(budget/(24+8+88+4+68), max(dirCount/24, 1))
		if budget < 24+8+88+4+68 {
			st = nfs3.ErrTooSmall
		} else if args.Cookie != 0 && args.CookieVerf != ([8]byte{}) {
			st = nfs3.ErrBadCookie
		} else {
			ents, eof, da, err := e.fs.ReadDir(cred, vfs.Handle(args.Dir), args.Cookie, max(maxEnts, 1), true)
			st = statusOf(err)
			res.DirAttr = postOp(&da)
			used, dused := 0, 0
			for i := range ents {
				ent := &ents[i]
				ne := nfs3.EntryPlus{FileID: ent.FileID, Name: ent.Name, Cookie: ent.Cookie, Attr: postOp(ent.Attr)}
				if ent.Handle != nil {
					ne.FH = nfs3.PostOpFH{FH: nfs3.FH(ent.Handle)}
				}
				small := nfs3.Entry{Name: ent.Name}
				if used+ne.EntrySize() > budget || (dirCount > 0 && dused+small.EntrySize() > dirCount && len(res.Entries) > 0) {
					eof = false
					break
				}
				used += ne.EntrySize()
				dused += small.EntrySize()
				res.Entries = append(res.Entries, ne)
			}
			if st == nfs3.OK && len(res.Entries) == 0 && len(ents) > 0 {
				st = nfs3.ErrTooSmall
			}
			res.EOF = eof
		}
	}
	res.Status = st
	res.Encode(w)
	return nil
}
