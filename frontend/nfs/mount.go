package nfs

import (
	"path"
	"sort"
	"strings"

	"github.com/tristore/tristore/proto/nfs3"
	"github.com/tristore/tristore/proto/sunrpc"
	"github.com/tristore/tristore/vfs"
)

// MOUNT v3: NULL, MNT, DUMP, UMNT, UMNTALL, EXPORT.

var mountProcs = []procFunc{
	nfs3.MountProcNull:    nfsNull,
	nfs3.MountProcMnt:     mountMnt,
	nfs3.MountProcDump:    mountDump,
	nfs3.MountProcUmnt:    mountUmnt,
	nfs3.MountProcUmntall: mountUmntall,
	nfs3.MountProcExport:  mountExport,
}

// findExport returns the export containing dirpath and the remaining
// components below it (a client may mount a subdirectory of an export).
func (s *Server) findExport(dirpath string) (*Export, []string) {
	p := path.Clean("/" + dirpath)
	var best *Export
	for _, e := range s.exports {
		if p == e.Path || e.Path == "/" || strings.HasPrefix(p, e.Path+"/") {
			if best == nil || len(e.Path) > len(best.Path) {
				best = e
			}
		}
	}
	if best == nil {
		return nil, nil
	}
	rest := strings.TrimPrefix(strings.TrimPrefix(p, best.Path), "/")
	if rest == "" {
		return best, nil
	}
	return best, strings.Split(rest, "/")
}

func mountMnt(s *Server, req *request, r *sunrpc.Reader, w *sunrpc.Writer) error {
	var args nfs3.DirPath
	if err := decodeArgs(r, &args); err != nil {
		return err
	}
	res := nfs3.MntRes{}
	e, rest := s.findExport(args.Path)
	switch {
	case e == nil:
		res.Status = nfs3.MntErrNoEnt
	case !e.allows(req.c.addr):
		res.Status = nfs3.MntErrAcces
	default:
		cred := e.cred(&req.auth)
		h := e.fs.Root()
		res.Status = nfs3.MntOK
		for _, name := range rest {
			nh, a, _, err := e.fs.Lookup(cred, h, name)
			if err != nil {
				res.Status = mountStatus(statusOf(err))
				break
			}
			if a.Type != vfs.TypeDir {
				res.Status = nfs3.MntErrNotDir
				break
			}
			h = nh
		}
		if res.Status == nfs3.MntOK {
			res.FH = nfs3.FH(h)
			res.AuthFlavors = []uint32{sunrpc.AuthFlavorSys, sunrpc.AuthFlavorNone}
			host := req.c.addr.String()
			s.mu.Lock()
			if len(s.mounts) < 4096 {
				s.mounts[mountKey{host, path.Clean("/" + args.Path)}] = struct{}{}
			}
			s.mu.Unlock()
		}
	}
	res.Encode(w)
	return nil
}

func mountStatus(st nfs3.Status) nfs3.MountStatus {
	switch st {
	case nfs3.ErrNoEnt, nfs3.ErrStale:
		return nfs3.MntErrNoEnt
	case nfs3.ErrAcces, nfs3.ErrPerm:
		return nfs3.MntErrAcces
	case nfs3.ErrNotDir:
		return nfs3.MntErrNotDir
	case nfs3.ErrNameTooLong:
		return nfs3.MntErrNameTooLong
	}
	return nfs3.MntErrIO
}

func mountDump(s *Server, req *request, r *sunrpc.Reader, w *sunrpc.Writer) error {
	var res nfs3.DumpRes
	s.mu.Lock()
	for k := range s.mounts {
		res.Mounts = append(res.Mounts, nfs3.MountEntry{Host: k.host, Dir: k.dir})
	}
	s.mu.Unlock()
	sort.Slice(res.Mounts, func(i, j int) bool {
		a, b := res.Mounts[i], res.Mounts[j]
		return a.Host < b.Host || a.Host == b.Host && a.Dir < b.Dir
	})
	res.Encode(w)
	return nil
}

func mountUmnt(s *Server, req *request, r *sunrpc.Reader, w *sunrpc.Writer) error {
	var args nfs3.DirPath
	if err := decodeArgs(r, &args); err != nil {
		return err
	}
	s.mu.Lock()
	delete(s.mounts, mountKey{req.c.addr.String(), path.Clean("/" + args.Path)})
	s.mu.Unlock()
	return nil
}

func mountUmntall(s *Server, req *request, r *sunrpc.Reader, w *sunrpc.Writer) error {
	host := req.c.addr.String()
	s.mu.Lock()
	for k := range s.mounts {
		if k.host == host {
			delete(s.mounts, k)
		}
	}
	s.mu.Unlock()
	return nil
}

func mountExport(s *Server, req *request, r *sunrpc.Reader, w *sunrpc.Writer) error {
	var res nfs3.ExportRes
	for _, e := range s.exports {
		res.Exports = append(res.Exports, nfs3.ExportEntry{Dir: e.Path, Groups: e.groups()})
	}
	res.Encode(w)
	return nil
}
