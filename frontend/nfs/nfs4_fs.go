package nfs

// NFSv4 filehandle and namespace operations: PUTFH, PUTROOTFH, GETFH,
// SAVEFH, RESTOREFH, LOOKUP, LOOKUPP, GETATTR, VERIFY, NVERIFY, ACCESS,
// READLINK, READDIR, CREATE, REMOVE, RENAME, LINK, SETATTR, COMMIT, SECINFO.
//
// The v4 namespace: when "/" is exported it is the root (PUTROOTFH), and a
// bucket exported on its own (with its own options) is reached by LOOKUP of
// its name from there; otherwise the root is a read-only pseudo directory
// listing the exports this client may use. Handles are the same
// restart-stable vfs handles v3 uses, so a file has one handle in both.

import (
	"bytes"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tristore/tristore/proto/nfs4"
	"github.com/tristore/tristore/proto/sunrpc"
	"github.com/tristore/tristore/vfs"
)

// pseudoFH is the pseudo root's handle (vfs handles start with version 1).
var pseudoFH = []byte{0xfe, 'p', 's', 'e', 'u', 'd', 'o', '4'}

// fh4 is a current or saved filehandle.
type fh4 struct {
	set    bool
	pseudo bool
	e      *Export
	h      vfs.Handle
}

func (f fh4) bytes() []byte {
	if f.pseudo {
		return pseudoFH
	}
	return f.h
}

func (f fh4) isRoot() bool { return f.pseudo || bytes.Equal(f.h, f.e.fs.Root()) }

// rootExport is the export of "/", or nil.
func (s *Server) rootExport() *Export {
	for _, e := range s.exports {
		if e.Path == "/" {
			return e
		}
	}
	return nil
}

// v4root is the root of the v4 namespace.
func (s *Server) v4root() fh4 {
	if e := s.rootExport(); e != nil {
		return fh4{set: true, e: e, h: e.fs.Root()}
	}
	return fh4{set: true, pseudo: true}
}

// need returns the current filehandle, checking that the client may use
// its export, with the caller's squashed identity.
func (c *compound) need() (fh4, vfs.Cred, nfs4.Status) {
	if !c.cur.set {
		return fh4{}, vfs.Cred{}, nfs4.ErrNoFileHandle
	}
	if c.cur.pseudo {
		return c.cur, vfs.Cred{UID: 65534, GID: 65534}, nfs4.OK
	}
	if !c.cur.e.allows(c.req.c.addr) {
		return fh4{}, vfs.Cred{}, nfs4.ErrAccess
	}
	return c.cur, c.cur.e.cred(&c.req.auth), nfs4.OK
}

// needReal is need for operations the pseudo root cannot do.
func (c *compound) needReal(pseudoErr nfs4.Status) (fh4, vfs.Cred, nfs4.Status) {
	f, cred, st := c.need()
	if st == nfs4.OK && f.pseudo {
		return f, cred, pseudoErr
	}
	return f, cred, st
}

// checkName4 applies RFC 7530's rules for component names.
func checkName4(name string) nfs4.Status {
	switch {
	case name == "":
		return nfs4.ErrInval
	case !utf8.ValidString(name):
		return nfs4.ErrInval
	case len(name) > vfs.NameMax:
		return nfs4.ErrNameTooLong
	case name == "." || name == "..", strings.ContainsAny(name, "/\x00"):
		return nfs4.ErrBadName
	}
	return nfs4.OK
}

func op4PutFH(c *compound, a nfs4.Args) nfs4.Res {
	args := a.(*nfs4.PutFHArgs)
	if bytes.Equal(args.FH, pseudoFH) {
		c.setFH(fh4{set: true, pseudo: true})
		return &nfs4.StatusRes{}
	}
	id, err := vfs.HandleExportID(vfs.Handle(args.FH))
	if err != nil {
		return &nfs4.StatusRes{Status: nfs4.ErrBadHandle}
	}
	e := c.s.byID[id]
	if e == nil {
		return &nfs4.StatusRes{Status: nfs4.ErrStale}
	}
	if _, err := e.fs.GetAttr(vfs.Handle(args.FH)); err != nil {
		// A file removed while open keeps its handle for the holders of
		// the open (CLOSE, LOCKU must still work), as an open-but-unlinked
		// file does locally.
		if st := statusOf4(err); st != nfs4.ErrStale || !c.s.v4.isOpen(e, vfs.Handle(args.FH)) {
			return &nfs4.StatusRes{Status: st}
		}
	}
	c.setFH(fh4{set: true, e: e, h: append(vfs.Handle(nil), args.FH...)})
	return &nfs4.StatusRes{}
}

// setFH changes the current filehandle; the current stateid no longer
// applies to it (RFC 8881 16.2.3.1.2).
func (c *compound) setFH(f fh4) {
	c.cur = f
	c.hasSt = false
}

func op4PutRootFH(c *compound, _ nfs4.Args) nfs4.Res {
	c.setFH(c.s.v4root())
	return &nfs4.StatusRes{}
}

func op4GetFH(c *compound, _ nfs4.Args) nfs4.Res {
	f, _, st := c.need()
	if st != nfs4.OK {
		return &nfs4.GetFHRes{Status: st}
	}
	return &nfs4.GetFHRes{FH: f.bytes()}
}

func op4SaveFH(c *compound, _ nfs4.Args) nfs4.Res {
	if !c.cur.set {
		return &nfs4.StatusRes{Status: nfs4.ErrNoFileHandle}
	}
	c.saved, c.savedSt, c.savedHasSt = c.cur, c.curSt, c.hasSt
	return &nfs4.StatusRes{}
}

func op4RestoreFH(c *compound, _ nfs4.Args) nfs4.Res {
	if !c.saved.set {
		return &nfs4.StatusRes{Status: nfs4.ErrRestoreFH}
	}
	c.cur, c.curSt, c.hasSt = c.saved, c.savedSt, c.savedHasSt
	return &nfs4.StatusRes{}
}

// dirStatus is the error for a directory operation on a non-directory.
func dirStatus(t vfs.FileType) nfs4.Status {
	if t == vfs.TypeSymlink {
		return nfs4.ErrSymlink
	}
	return nfs4.ErrNotDir
}

func op4Lookup(c *compound, a nfs4.Args) nfs4.Res {
	name := a.(*nfs4.NameArgs).Name
	f, cred, st := c.need()
	if st != nfs4.OK {
		return &nfs4.StatusRes{Status: st}
	}
	if f.pseudo {
		if st := checkName4(name); st != nfs4.OK {
			return &nfs4.StatusRes{Status: st}
		}
		for _, e := range c.s.exports {
			if e.Path == "/"+name && e.allows(c.req.c.addr) {
				c.setFH(fh4{set: true, e: e, h: e.fs.Root()})
				return &nfs4.StatusRes{}
			}
		}
		return &nfs4.StatusRes{Status: nfs4.ErrNoEnt}
	}
	da, err := f.e.fs.GetAttr(f.h)
	if err != nil {
		return &nfs4.StatusRes{Status: statusOf4(err)}
	}
	if da.Type != vfs.TypeDir {
		return &nfs4.StatusRes{Status: dirStatus(da.Type)}
	}
	if st := checkName4(name); st != nfs4.OK {
		return &nfs4.StatusRes{Status: st}
	}
	// A bucket exported with its own options is entered from "/".
	if f.e.Path == "/" && f.isRoot() {
		for _, e := range c.s.exports {
			if e.Path == "/"+name {
				if !e.allows(c.req.c.addr) {
					return &nfs4.StatusRes{Status: nfs4.ErrAccess}
				}
				c.setFH(fh4{set: true, e: e, h: e.fs.Root()})
				return &nfs4.StatusRes{}
			}
		}
	}
	h, _, _, err := f.e.fs.Lookup(cred, f.h, name)
	if err != nil {
		return &nfs4.StatusRes{Status: statusOf4(err)}
	}
	c.setFH(fh4{set: true, e: f.e, h: h})
	return &nfs4.StatusRes{}
}

func op4LookupP(c *compound, _ nfs4.Args) nfs4.Res {
	f, cred, st := c.need()
	if st != nfs4.OK {
		return &nfs4.StatusRes{Status: st}
	}
	if f.pseudo {
		return &nfs4.StatusRes{Status: nfs4.ErrNoEnt}
	}
	a, err := f.e.fs.GetAttr(f.h)
	if err != nil {
		return &nfs4.StatusRes{Status: statusOf4(err)}
	}
	if a.Type != vfs.TypeDir {
		return &nfs4.StatusRes{Status: dirStatus(a.Type)}
	}
	if f.isRoot() {
		if f.e.Path == "/" {
			return &nfs4.StatusRes{Status: nfs4.ErrNoEnt}
		}
		c.setFH(c.s.v4root())
		return &nfs4.StatusRes{}
	}
	h, _, _, err := f.e.fs.Lookup(cred, f.h, "..")
	if err != nil {
		return &nfs4.StatusRes{Status: statusOf4(err)}
	}
	c.setFH(fh4{set: true, e: f.e, h: h})
	return &nfs4.StatusRes{}
}

var v4types = [...]nfs4.FileType{
	vfs.TypeRegular: nfs4.TypeReg, vfs.TypeDir: nfs4.TypeDir, vfs.TypeBlock: nfs4.TypeBlk,
	vfs.TypeChar: nfs4.TypeChr, vfs.TypeSymlink: nfs4.TypeLnk, vfs.TypeSocket: nfs4.TypeSock, vfs.TypeFIFO: nfs4.TypeFIFO,
}

var vfsType4 = map[nfs4.FileType]vfs.FileType{nfs4.TypeBlk: vfs.TypeBlock, nfs4.TypeChr: vfs.TypeChar,
	nfs4.TypeSock: vfs.TypeSocket, nfs4.TypeFIFO: vfs.TypeFIFO}

func v4time(t time.Time) nfs4.Time { return nfs4.Time{Sec: t.Unix(), Nsec: uint32(t.Nanosecond())} }

// supported4 is supported_attrs for a minor version.
func supported4(minor uint32) nfs4.Bitmap {
	b := append(nfs4.Bitmap(nil), nfs4.Encodable...)
	if minor == 0 {
		b = b.Minus(nfs4.NewBitmap(nfs4.AttrSuppattrExclcreat))
	}
	return b
}

// exclCreatAttrs may be set together with an EXCLUSIVE4_1 create (not the
// times: the verifier lives there).
var exclCreatAttrs = nfs4.NewBitmap(nfs4.AttrSize, nfs4.AttrMode, nfs4.AttrOwner, nfs4.AttrOwnerGroup)

// fattr4 builds the attribute values of an object for mask.
func (c *compound) fattr4(f fh4, a *vfs.Attr, mask nfs4.Bitmap) *nfs4.Fattr {
	fa := &nfs4.Fattr{
		SupportedAttrs: supported4(c.minor), FHExpireType: nfs4.FHPersistent,
		LinkSupport: true, SymlinkSupport: true, LeaseTime: uint32(c.s.v4.lease / time.Second),
		CanSetTime: true, CasePreserving: true, ChownRestricted: true, Homogeneous: true,
		MaxFileSize: 1<<63 - 1, MaxLink: 65000, MaxName: vfs.NameMax, MaxRead: maxIO, MaxWrite: maxIO,
		NoTrunc: true, TimeDelta: nfs4.Time{Nsec: 1}, SuppattrExclcreat: exclCreatAttrs,
		FileHandle: f.bytes(),
	}
	if f.pseudo {
		t := v4time(c.s.started)
		fa.Type, fa.Mode, fa.NumLinks = nfs4.TypeDir, 0o555, 2
		fa.FileID, fa.MountedOnFileID, fa.Change = 1, 1, uint64(c.s.started.UnixNano())
		fa.Owner, fa.OwnerGroup = "0", "0"
		fa.TimeAccess, fa.TimeModify, fa.TimeMetadata = t, t, t
		return fa
	}
	fa.Type = nfs4.TypeReg
	if int(a.Type) < len(v4types) && v4types[a.Type] != 0 {
		fa.Type = v4types[a.Type]
	}
	fa.FSID = nfs4.FSID{Major: uint64(f.e.fs.ExportID()), Minor: 0}
	fa.Change = uint64(a.Ctime.UnixNano())
	fa.Size, fa.Mode, fa.NumLinks = a.Size, a.Mode&0o7777, a.Nlink
	fa.FileID, fa.MountedOnFileID = a.FileID, a.FileID
	fa.Owner, fa.OwnerGroup = strconv.FormatUint(uint64(a.UID), 10), strconv.FormatUint(uint64(a.GID), 10)
	fa.RawDev = [2]uint32{a.RdevMajor, a.RdevMinor}
	fa.SpaceUsed = a.Used
	fa.TimeAccess, fa.TimeModify, fa.TimeMetadata = v4time(a.Atime), v4time(a.Mtime), v4time(a.Ctime)
	if mask.Has(nfs4.AttrFilesAvail) || mask.Has(nfs4.AttrFilesFree) || mask.Has(nfs4.AttrFilesTotal) ||
		mask.Has(nfs4.AttrSpaceAvail) || mask.Has(nfs4.AttrSpaceFree) || mask.Has(nfs4.AttrSpaceTotal) {
		if fs, _, err := f.e.fs.StatFS(f.h); err == nil {
			fa.FilesAvail, fa.FilesFree, fa.FilesTotal = fs.AvailFiles, fs.FreeFiles, fs.TotalFiles
			fa.SpaceAvail, fa.SpaceFree, fa.SpaceTotal = fs.AvailBytes, fs.FreeBytes, fs.TotalBytes
		}
	}
	return fa
}

// attrs encodes the attributes of mask for the current object.
func (c *compound) attrs(f fh4, mask nfs4.Bitmap) (nfs4.RawFattr, nfs4.Status) {
	var a vfs.Attr
	if !f.pseudo {
		var err error
		if a, err = f.e.fs.GetAttr(f.h); err != nil {
			return nfs4.RawFattr{}, statusOf4(err)
		}
	}
	return encodeAttrs(c.fattr4(f, &a, mask), mask.And(supported4(c.minor))), nfs4.OK
}

func encodeAttrs(fa *nfs4.Fattr, mask nfs4.Bitmap) nfs4.RawFattr {
	var w sunrpc.Writer
	fa.EncodeVals(&w, mask)
	return nfs4.RawFattr{Mask: mask, Vals: w.Bytes()}
}

func op4Getattr(c *compound, a nfs4.Args) nfs4.Res {
	mask := a.(*nfs4.GetattrArgs).Request
	f, _, st := c.need()
	if st != nfs4.OK {
		return &nfs4.GetattrRes{Status: st}
	}
	if !mask.And(nfs4.WriteOnly).Empty() {
		return &nfs4.GetattrRes{Status: nfs4.ErrInval}
	}
	raw, st := c.attrs(f, mask)
	return &nfs4.GetattrRes{Status: st, Attrs: raw}
}

func verify(c *compound, a nfs4.Args, wantSame bool) nfs4.Res {
	want := a.(*nfs4.VerifyArgs).Attrs
	f, _, st := c.need()
	if st != nfs4.OK {
		return &nfs4.StatusRes{Status: st}
	}
	if !want.Mask.And(nfs4.WriteOnly).Empty() || want.Mask.Has(nfs4.AttrRdattrError) {
		return &nfs4.StatusRes{Status: nfs4.ErrInval}
	}
	if !want.Mask.Minus(supported4(c.minor)).Empty() {
		return &nfs4.StatusRes{Status: nfs4.ErrAttrNotSupp}
	}
	if _, st := want.Parse(); st != nfs4.OK {
		return &nfs4.StatusRes{Status: st}
	}
	have, st := c.attrs(f, want.Mask)
	if st != nfs4.OK {
		return &nfs4.StatusRes{Status: st}
	}
	same := bytes.Equal(have.Vals, want.Vals)
	switch {
	case wantSame && !same:
		return &nfs4.StatusRes{Status: nfs4.ErrNotSame}
	case !wantSame && same:
		return &nfs4.StatusRes{Status: nfs4.ErrSame}
	}
	return &nfs4.StatusRes{}
}

func op4Verify(c *compound, a nfs4.Args) nfs4.Res  { return verify(c, a, true) }
func op4NVerify(c *compound, a nfs4.Args) nfs4.Res { return verify(c, a, false) }

func op4Access(c *compound, a nfs4.Args) nfs4.Res {
	want := a.(*nfs4.AccessArgs).Access
	f, cred, st := c.need()
	if st != nfs4.OK {
		return &nfs4.AccessRes{Status: st}
	}
	if want&^0x3f != 0 {
		return &nfs4.AccessRes{Status: nfs4.ErrInval}
	}
	if f.pseudo {
		return &nfs4.AccessRes{Supported: want, Access: want & (nfs4.AccessRead | nfs4.AccessLookup)}
	}
	got, at, err := f.e.fs.Access(cred, f.h, want)
	if err != nil {
		return &nfs4.AccessRes{Status: statusOf4(err)}
	}
	// Only the bits that mean something for the object's type are
	// "supported" (RFC 7530 16.1.4): EXECUTE not for directories, LOOKUP
	// and DELETE only for them.
	supp := want
	if at.Type == vfs.TypeDir {
		supp &^= nfs4.AccessExecute
	} else {
		supp &^= nfs4.AccessLookup | nfs4.AccessDelete
	}
	return &nfs4.AccessRes{Supported: supp, Access: got & supp}
}

func op4Readlink(c *compound, _ nfs4.Args) nfs4.Res {
	f, _, st := c.needReal(nfs4.ErrInval)
	if st != nfs4.OK {
		return &nfs4.ReadlinkRes{Status: st}
	}
	target, a, err := f.e.fs.Readlink(f.h)
	if err != nil {
		if a.Type != 0 && a.Type != vfs.TypeSymlink {
			return &nfs4.ReadlinkRes{Status: nfs4.ErrInval}
		}
		return &nfs4.ReadlinkRes{Status: statusOf4(err)}
	}
	return &nfs4.ReadlinkRes{Link: target}
}

// Cookies 1 and 2 are reserved by RFC 7530 (for "." and ".."); the vfs
// cookies are the file system's directory offsets, which on ext4 are hashes.
func op4Readdir(c *compound, a nfs4.Args) nfs4.Res {
	args := a.(*nfs4.ReaddirArgs)
	f, cred, st := c.need()
	if st != nfs4.OK {
		return &nfs4.ReaddirRes{Status: st}
	}
	if args.Cookie == 1 || args.Cookie == 2 {
		return &nfs4.ReaddirRes{Status: nfs4.ErrBadCookie}
	}
	if args.Cookie != 0 && args.CookieVerf != ([8]byte{}) {
		return &nfs4.ReaddirRes{Status: nfs4.ErrNotSame}
	}
	if !args.Request.And(nfs4.WriteOnly).Empty() {
		return &nfs4.ReaddirRes{Status: nfs4.ErrInval}
	}
	mask := args.Request.And(supported4(c.minor))
	const overhead = 8 + 4 + 4 // verifier, end of list and eof: READDIR4resok of an empty directory
	if args.MaxCount < overhead {
		return &nfs4.ReaddirRes{Status: nfs4.ErrTooSmall}
	}
	budget := int(min(args.MaxCount, maxReaddr)) - overhead
	res := &nfs4.ReaddirRes{}
	if f.pseudo {
		i := uint64(3)
		for _, e := range c.s.exports {
			if e.Path == "/" || !e.allows(c.req.c.addr) {
				continue
			}
			if i > args.Cookie {
				ef := fh4{set: true, e: e, h: e.fs.Root()}
				raw, st := c.attrs(ef, mask)
				if st != nfs4.OK {
					continue
				}
				res.Entries = append(res.Entries, nfs4.DirEntry{Cookie: i, Name: e.Path[1:], Attrs: raw})
			}
			i++
		}
		res.EOF = true
		return res
	}
	da, err := f.e.fs.GetAttr(f.h)
	if err != nil {
		return &nfs4.ReaddirRes{Status: statusOf4(err)}
	}
	if da.Type != vfs.TypeDir {
		return &nfs4.ReaddirRes{Status: nfs4.ErrNotDir}
	}
	cookie, used := args.Cookie, 0
	for round := 0; round < 1024; round++ {
		ents, eof, _, err := f.e.fs.ReadDir(cred, f.h, cookie, 256, true)
		if err != nil {
			if len(res.Entries) > 0 {
				break
			}
			return &nfs4.ReaddirRes{Status: statusOf4(err)}
		}
		for _, ent := range ents {
			ef := fh4{set: true, e: f.e, h: ent.Handle}
			var raw nfs4.RawFattr
			switch {
			case ent.Attr != nil:
				raw = encodeAttrs(c.fattr4(ef, ent.Attr, mask), mask)
			case mask.Has(nfs4.AttrRdattrError):
				fa := &nfs4.Fattr{RdattrError: nfs4.ErrNoEnt}
				raw = encodeAttrs(fa, nfs4.NewBitmap(nfs4.AttrRdattrError))
			default:
				cookie = ent.Cookie
				continue // vanished between listing and stat
			}
			size := 4 + 8 + 4 + (len(ent.Name)+3)&^3 + 4 + 4*len(raw.Mask) + 4 + len(raw.Vals)
			if used+size > budget {
				if len(res.Entries) == 0 {
					return &nfs4.ReaddirRes{Status: nfs4.ErrTooSmall}
				}
				return res
			}
			used += size
			res.Entries = append(res.Entries, nfs4.DirEntry{Cookie: ent.Cookie, Name: ent.Name, Attrs: raw})
			cookie = ent.Cookie
		}
		if eof {
			res.EOF = true
			return res
		}
	}
	return res
}

// sattr4 converts settable attributes to vfs.SetAttr.
func sattr4(fa *nfs4.Fattr, mask nfs4.Bitmap) (vfs.SetAttr, nfs4.Status) {
	var s vfs.SetAttr
	if mask.Has(nfs4.AttrMode) {
		m := fa.Mode & 0o7777
		s.Mode = &m
	}
	if mask.Has(nfs4.AttrSize) {
		sz := fa.Size
		s.Size = &sz
	}
	id := func(v string) (*uint32, nfs4.Status) {
		if v == "" {
			return nil, nfs4.ErrInval
		}
		name, _, _ := strings.Cut(v, "@")
		n, err := strconv.ParseUint(name, 10, 32)
		if err != nil {
			switch name {
			case "root":
				n = 0
			case "nobody":
				n = 65534
			default:
				return nil, nfs4.ErrBadOwner
			}
		}
		u := uint32(n)
		return &u, nfs4.OK
	}
	var st nfs4.Status
	if mask.Has(nfs4.AttrOwner) {
		if s.UID, st = id(fa.Owner); st != nfs4.OK {
			return s, st
		}
	}
	if mask.Has(nfs4.AttrOwnerGroup) {
		if s.GID, st = id(fa.OwnerGroup); st != nfs4.OK {
			return s, st
		}
	}
	for _, t := range []nfs4.SetTime{fa.TimeAccessSet, fa.TimeModifySet} {
		if t.Set && !t.Server && t.T.Nsec >= 1e9 {
			return s, nfs4.ErrInval
		}
	}
	conv := func(t nfs4.SetTime) vfs.SetTime {
		switch {
		case !t.Set:
			return vfs.SetTime{}
		case t.Server:
			return vfs.SetTime{Set: true, Now: true}
		}
		return vfs.SetTime{Set: true, T: time.Unix(t.T.Sec, int64(t.T.Nsec))}
	}
	if mask.Has(nfs4.AttrTimeAccessSet) {
		s.Atime = conv(fa.TimeAccessSet)
	}
	if mask.Has(nfs4.AttrTimeModifySet) {
		s.Mtime = conv(fa.TimeModifySet)
	}
	return s, nfs4.OK
}

// parseSettable decodes attributes a client wants set: only writable ones.
func parseSettable(raw nfs4.RawFattr, minor uint32) (*nfs4.Fattr, vfs.SetAttr, nfs4.Status) {
	if !raw.Mask.Minus(supported4(minor)).Empty() {
		return nil, vfs.SetAttr{}, nfs4.ErrAttrNotSupp
	}
	if !raw.Mask.Minus(nfs4.Writable).Empty() {
		return nil, vfs.SetAttr{}, nfs4.ErrInval
	}
	fa, st := raw.Parse()
	if st != nfs4.OK {
		return nil, vfs.SetAttr{}, st
	}
	s, st := sattr4(&fa, raw.Mask)
	return &fa, s, st
}

func cinfo(dc vfs.DirChange) nfs4.ChangeInfo {
	ci := nfs4.ChangeInfo{Atomic: true}
	if dc.Before != nil {
		ci.Before = uint64(dc.Before.Ctime.UnixNano())
	} else {
		ci.Atomic = false
	}
	if dc.After != nil {
		ci.After = uint64(dc.After.Ctime.UnixNano())
	} else {
		ci.Atomic = false
	}
	return ci
}

// dirOf checks that the current filehandle is a directory in a real export.
func (c *compound) dirOf() (fh4, vfs.Cred, nfs4.Status) {
	f, cred, st := c.needReal(nfs4.ErrROFS)
	if st != nfs4.OK {
		return f, cred, st
	}
	a, err := f.e.fs.GetAttr(f.h)
	if err != nil {
		return f, cred, statusOf4(err)
	}
	if a.Type != vfs.TypeDir {
		return f, cred, nfs4.ErrNotDir
	}
	return f, cred, nfs4.OK
}

func op4Create(c *compound, a nfs4.Args) nfs4.Res {
	args := a.(*nfs4.CreateArgs)
	f, cred, st := c.dirOf()
	if st != nfs4.OK {
		return &nfs4.CreateRes{Status: st}
	}
	if st := checkName4(args.Name); st != nfs4.OK {
		return &nfs4.CreateRes{Status: st}
	}
	_, sa, st := parseSettable(args.Attrs, c.minor)
	if st != nfs4.OK {
		return &nfs4.CreateRes{Status: st}
	}
	var (
		h   vfs.Handle
		dc  vfs.DirChange
		err error
	)
	switch args.Type {
	case nfs4.TypeDir:
		h, _, dc, err = f.e.fs.Mkdir(cred, f.h, args.Name, sa)
	case nfs4.TypeLnk:
		if args.LinkData == "" {
			return &nfs4.CreateRes{Status: nfs4.ErrInval}
		}
		h, _, dc, err = f.e.fs.Symlink(cred, f.h, args.Name, args.LinkData, sa)
	case nfs4.TypeReg, nfs4.TypeAttrDir, nfs4.TypeNamedAttr:
		return &nfs4.CreateRes{Status: nfs4.ErrBadType}
	case nfs4.TypeBlk, nfs4.TypeChr, nfs4.TypeSock, nfs4.TypeFIFO:
		h, _, dc, err = f.e.fs.Mknod(cred, f.h, args.Name, vfsType4[args.Type], args.Dev[0], args.Dev[1], sa)
	default:
		return &nfs4.CreateRes{Status: nfs4.ErrBadType}
	}
	if err != nil {
		return &nfs4.CreateRes{Status: statusOf4(err)}
	}
	c.setFH(fh4{set: true, e: f.e, h: h})
	return &nfs4.CreateRes{Cinfo: cinfo(dc), AttrSet: args.Attrs.Mask}
}

func op4Remove(c *compound, a nfs4.Args) nfs4.Res {
	name := a.(*nfs4.NameArgs).Name
	f, cred, st := c.dirOf()
	if st != nfs4.OK {
		return &nfs4.CinfoRes{Status: st}
	}
	if st := checkName4(name); st != nfs4.OK {
		return &nfs4.CinfoRes{Status: st}
	}
	dc, err := f.e.fs.Remove(cred, f.h, name)
	if st := statusOf4(err); st == nfs4.ErrIsDir || st == nfs4.ErrPerm {
		dc, err = f.e.fs.Rmdir(cred, f.h, name)
	}
	if err != nil {
		return &nfs4.CinfoRes{Status: statusOf4(err)}
	}
	return &nfs4.CinfoRes{Cinfo: cinfo(dc)}
}

func op4Rename(c *compound, a nfs4.Args) nfs4.Res {
	args := a.(*nfs4.RenameArgs)
	if !c.saved.set {
		return &nfs4.RenameRes{Status: nfs4.ErrNoFileHandle}
	}
	to, cred, st := c.dirOf()
	if st != nfs4.OK {
		return &nfs4.RenameRes{Status: st}
	}
	from := c.saved
	if from.pseudo {
		return &nfs4.RenameRes{Status: nfs4.ErrROFS}
	}
	if from.e != to.e {
		return &nfs4.RenameRes{Status: nfs4.ErrXDev}
	}
	if fa, err := from.e.fs.GetAttr(from.h); err != nil {
		return &nfs4.RenameRes{Status: statusOf4(err)}
	} else if fa.Type != vfs.TypeDir {
		return &nfs4.RenameRes{Status: nfs4.ErrNotDir}
	}
	for _, n := range []string{args.From, args.To} {
		if st := checkName4(n); st != nfs4.OK {
			return &nfs4.RenameRes{Status: st}
		}
	}
	fdc, tdc, err := to.e.fs.Rename(cred, from.h, args.From, to.h, args.To)
	if err != nil {
		return &nfs4.RenameRes{Status: statusOf4(err)}
	}
	return &nfs4.RenameRes{From: cinfo(fdc), To: cinfo(tdc)}
}

func op4Link(c *compound, a nfs4.Args) nfs4.Res {
	name := a.(*nfs4.NameArgs).Name
	if !c.saved.set {
		return &nfs4.CinfoRes{Status: nfs4.ErrNoFileHandle}
	}
	dir, cred, st := c.dirOf()
	if st != nfs4.OK {
		return &nfs4.CinfoRes{Status: st}
	}
	src := c.saved
	if src.pseudo || src.e != dir.e {
		return &nfs4.CinfoRes{Status: nfs4.ErrXDev}
	}
	if st := checkName4(name); st != nfs4.OK {
		return &nfs4.CinfoRes{Status: st}
	}
	if sa, err := src.e.fs.GetAttr(src.h); err != nil {
		return &nfs4.CinfoRes{Status: statusOf4(err)}
	} else if sa.Type == vfs.TypeDir {
		return &nfs4.CinfoRes{Status: nfs4.ErrIsDir}
	}
	_, dc, err := dir.e.fs.Link(cred, src.h, dir.h, name)
	if err != nil {
		return &nfs4.CinfoRes{Status: statusOf4(err)}
	}
	return &nfs4.CinfoRes{Cinfo: cinfo(dc)}
}

func op4Setattr(c *compound, a nfs4.Args) nfs4.Res {
	args := a.(*nfs4.SetattrArgs)
	f, cred, st := c.needReal(nfs4.ErrROFS)
	if st != nfs4.OK {
		return &nfs4.SetattrRes{Status: st}
	}
	_, sa, st := parseSettable(args.Attrs, c.minor)
	if st != nfs4.OK {
		return &nfs4.SetattrRes{Status: st}
	}
	if sa.Size != nil && *sa.Size > 1<<63-1 {
		return &nfs4.SetattrRes{Status: nfs4.ErrFBig}
	}
	if sa.Size != nil {
		cur, err := f.e.fs.GetAttr(f.h)
		if err != nil {
			return &nfs4.SetattrRes{Status: statusOf4(err)}
		}
		switch cur.Type {
		case vfs.TypeRegular:
		case vfs.TypeDir:
			return &nfs4.SetattrRes{Status: nfs4.ErrIsDir}
		default:
			return &nfs4.SetattrRes{Status: nfs4.ErrInval}
		}
		if st := c.ioCheck(f, args.Stateid, true, *sa.Size, 0); st != nfs4.OK {
			return &nfs4.SetattrRes{Status: st}
		}
	}
	if _, _, err := f.e.fs.SetAttrs(cred, f.h, sa, nil); err != nil {
		return &nfs4.SetattrRes{Status: statusOf4(err)}
	}
	return &nfs4.SetattrRes{AttrSet: args.Attrs.Mask}
}

func op4Commit(c *compound, a nfs4.Args) nfs4.Res {
	args := a.(*nfs4.CommitArgs)
	f, _, st := c.needReal(nfs4.ErrIsDir)
	if st != nfs4.OK {
		return &nfs4.VerfRes{Status: st}
	}
	if args.Count != 0 && args.Offset+uint64(args.Count) < args.Offset {
		return &nfs4.VerfRes{Status: nfs4.ErrInval}
	}
	at, err := f.e.fs.GetAttr(f.h)
	if err != nil {
		return &nfs4.VerfRes{Status: statusOf4(err)}
	}
	switch at.Type {
	case vfs.TypeRegular:
	case vfs.TypeDir:
		return &nfs4.VerfRes{Status: nfs4.ErrIsDir}
	case vfs.TypeSymlink:
		return &nfs4.VerfRes{Status: nfs4.ErrSymlink}
	default:
		return &nfs4.VerfRes{Status: nfs4.ErrInval}
	}
	if _, _, err := f.e.fs.Commit(f.h); err != nil {
		return &nfs4.VerfRes{Status: statusOf4(err)}
	}
	return &nfs4.VerfRes{Verf: c.s.verf}
}

// secFlavors are the flavors every export accepts.
var secFlavors = []uint32{nfs4.AuthSys, nfs4.AuthNone}

func op4Secinfo(c *compound, a nfs4.Args) nfs4.Res {
	name := a.(*nfs4.NameArgs).Name
	f, cred, st := c.need()
	if st != nfs4.OK {
		return &nfs4.SecinfoRes{Status: st}
	}
	if st := checkName4(name); st != nfs4.OK {
		return &nfs4.SecinfoRes{Status: st}
	}
	if f.pseudo {
		found := false
		for _, e := range c.s.exports {
			found = found || e.Path == "/"+name
		}
		if !found {
			return &nfs4.SecinfoRes{Status: nfs4.ErrNoEnt}
		}
	} else {
		da, err := f.e.fs.GetAttr(f.h)
		if err != nil {
			return &nfs4.SecinfoRes{Status: statusOf4(err)}
		}
		if da.Type != vfs.TypeDir {
			return &nfs4.SecinfoRes{Status: nfs4.ErrNotDir}
		}
		if _, _, _, err := f.e.fs.Lookup(cred, f.h, name); err != nil {
			return &nfs4.SecinfoRes{Status: statusOf4(err)}
		}
	}
	if c.minor >= 1 {
		c.cur = fh4{} // RFC 8881 section 2.6.3.1.1.8: SECINFO consumes the filehandle
	}
	return &nfs4.SecinfoRes{Flavors: secFlavors}
}

func op4SecinfoNoName(c *compound, a nfs4.Args) nfs4.Res {
	style := a.(*nfs4.SecinfoNoNameArgs).Style
	f, _, st := c.need()
	if st != nfs4.OK {
		return &nfs4.SecinfoRes{Status: st}
	}
	switch style {
	case nfs4.SecinfoStyleCurrentFH:
	case nfs4.SecinfoStyleParent:
		if f.pseudo || (f.isRoot() && f.e.Path == "/") {
			return &nfs4.SecinfoRes{Status: nfs4.ErrNoEnt}
		}
		if at, err := f.e.fs.GetAttr(f.h); err != nil {
			return &nfs4.SecinfoRes{Status: statusOf4(err)}
		} else if at.Type != vfs.TypeDir {
			return &nfs4.SecinfoRes{Status: nfs4.ErrNotDir}
		}
	default:
		return &nfs4.SecinfoRes{Status: nfs4.ErrInval}
	}
	c.cur = fh4{}
	return &nfs4.SecinfoRes{Flavors: secFlavors}
}
