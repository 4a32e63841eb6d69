package nfs3

import "github.com/tristore/tristore/proto/sunrpc"

// LOOKUP, READLINK, CREATE, MKDIR, SYMLINK, MKNOD, REMOVE, RMDIR, RENAME and
// LINK arguments and results.

// LookupArgs is LOOKUP3args (also REMOVE3args and RMDIR3args).
type LookupArgs = DirOpArgs

// LookupRes is LOOKUP3res. FH and Attr are valid when Status == OK; DirAttr always.
type LookupRes struct {
	Status  Status
	FH      FH
	Attr    PostOpAttr
	DirAttr PostOpAttr
}

func (x *LookupRes) Encode(w *sunrpc.Writer) {
	w.Uint32(uint32(x.Status))
	if x.Status == OK {
		x.FH.Encode(w)
		x.Attr.Encode(w)
	}
	x.DirAttr.Encode(w)
}

func (x *LookupRes) Decode(r *sunrpc.Reader) error {
	x.Status = Status(r.Uint32())
	if x.Status == OK {
		x.FH.Decode(r)
		x.Attr.Decode(r)
	}
	return x.DirAttr.Decode(r)
}

// ReadlinkRes is READLINK3res (args: GetattrArgs).
type ReadlinkRes struct {
	Status Status
	Attr   PostOpAttr
	Path   string
}

func (x *ReadlinkRes) Encode(w *sunrpc.Writer) {
	w.Uint32(uint32(x.Status))
	x.Attr.Encode(w)
	if x.Status == OK {
		w.String(x.Path)
	}
}

func (x *ReadlinkRes) Decode(r *sunrpc.Reader) error {
	x.Status = Status(r.Uint32())
	x.Attr.Decode(r)
	if x.Status == OK {
		x.Path = r.String(MaxPath)
	}
	return r.Err()
}

// CreateArgs is CREATE3args. Attr is used for Unchecked and Guarded, Verf for Exclusive.
type CreateArgs struct {
	Where DirOpArgs
	Mode  CreateMode
	Attr  Sattr
	Verf  [CreateVerfSize]byte
}

func (a *CreateArgs) Encode(w *sunrpc.Writer) {
	a.Where.Encode(w)
	w.Uint32(uint32(a.Mode))
	if a.Mode == Exclusive {
		w.FixedOpaque(a.Verf[:])
	} else {
		a.Attr.Encode(w)
	}
}

func (a *CreateArgs) Decode(r *sunrpc.Reader) error {
	a.Where.Decode(r)
	a.Mode = CreateMode(r.Uint32())
	switch a.Mode {
	case Unchecked, Guarded:
		a.Attr.Decode(r)
	case Exclusive:
		copy(a.Verf[:], r.FixedOpaque(CreateVerfSize))
	default:
		r.Fail("createmode3 %d", a.Mode)
	}
	return r.Err()
}

// CreateRes is the result of CREATE, MKDIR, SYMLINK and MKNOD: on OK the new
// object's (optional) handle and attributes; in every case the directory's wcc_data.
type CreateRes struct {
	Status Status
	FH     PostOpFH
	Attr   PostOpAttr
	DirWcc WccData
}

func (x *CreateRes) Encode(w *sunrpc.Writer) {
	w.Uint32(uint32(x.Status))
	if x.Status == OK {
		x.FH.Encode(w)
		x.Attr.Encode(w)
	}
	x.DirWcc.Encode(w)
}

func (x *CreateRes) Decode(r *sunrpc.Reader) error {
	x.Status = Status(r.Uint32())
	if x.Status == OK {
		x.FH.Decode(r)
		x.Attr.Decode(r)
	}
	return x.DirWcc.Decode(r)
}

// MkdirArgs is MKDIR3args.
type MkdirArgs struct {
	Where DirOpArgs
	Attr  Sattr
}

func (a *MkdirArgs) Encode(w *sunrpc.Writer) { a.Where.Encode(w); a.Attr.Encode(w) }
func (a *MkdirArgs) Decode(r *sunrpc.Reader) error {
	a.Where.Decode(r)
	return a.Attr.Decode(r)
}

// SymlinkArgs is SYMLINK3args.
type SymlinkArgs struct {
	Where  DirOpArgs
	Attr   Sattr
	Target string
}

func (a *SymlinkArgs) Encode(w *sunrpc.Writer) {
	a.Where.Encode(w)
	a.Attr.Encode(w)
	w.String(a.Target)
}
func (a *SymlinkArgs) Decode(r *sunrpc.Reader) error {
	a.Where.Decode(r)
	a.Attr.Decode(r)
	a.Target = r.String(MaxPath)
	return r.Err()
}

// MknodArgs is MKNOD3args.
type MknodArgs struct {
	Where DirOpArgs
	Type  FileType
	Attr  Sattr    // CHR, BLK, SOCK, FIFO
	Spec  SpecData // CHR, BLK
}

func (a *MknodArgs) Encode(w *sunrpc.Writer) {
	a.Where.Encode(w)
	w.Uint32(uint32(a.Type))
	switch a.Type {
	case TypeChr, TypeBlk:
		a.Attr.Encode(w)
		a.Spec.Encode(w)
	case TypeSock, TypeFifo:
		a.Attr.Encode(w)
	}
}

func (a *MknodArgs) Decode(r *sunrpc.Reader) error {
	a.Where.Decode(r)
	a.Type = FileType(r.Uint32())
	switch a.Type {
	case TypeChr, TypeBlk:
		a.Attr.Decode(r)
		a.Spec.Decode(r)
	case TypeSock, TypeFifo:
		a.Attr.Decode(r)
	case TypeReg, TypeDir, TypeLnk:
	default:
		r.Fail("ftype3 %d", a.Type)
	}
	return r.Err()
}

// RemoveRes is REMOVE3res and RMDIR3res.
type RemoveRes = WccRes

// RenameArgs is RENAME3args.
type RenameArgs struct {
	From DirOpArgs
	To   DirOpArgs
}

func (a *RenameArgs) Encode(w *sunrpc.Writer) { a.From.Encode(w); a.To.Encode(w) }
func (a *RenameArgs) Decode(r *sunrpc.Reader) error {
	a.From.Decode(r)
	return a.To.Decode(r)
}

// RenameRes is RENAME3res.
type RenameRes struct {
	Status  Status
	FromWcc WccData
	ToWcc   WccData
}

func (x *RenameRes) Encode(w *sunrpc.Writer) {
	w.Uint32(uint32(x.Status))
	x.FromWcc.Encode(w)
	x.ToWcc.Encode(w)
}

func (x *RenameRes) Decode(r *sunrpc.Reader) error {
	x.Status = Status(r.Uint32())
	x.FromWcc.Decode(r)
	return x.ToWcc.Decode(r)
}

// LinkArgs is LINK3args.
type LinkArgs struct {
	FH   FH
	Link DirOpArgs
}

func (a *LinkArgs) Encode(w *sunrpc.Writer) { a.FH.Encode(w); a.Link.Encode(w) }
func (a *LinkArgs) Decode(r *sunrpc.Reader) error {
	a.FH.Decode(r)
	return a.Link.Decode(r)
}

// LinkRes is LINK3res.
type LinkRes struct {
	Status  Status
	Attr    PostOpAttr
	LinkWcc WccData
}

func (x *LinkRes) Encode(w *sunrpc.Writer) {
	w.Uint32(uint32(x.Status))
	x.Attr.Encode(w)
	x.LinkWcc.Encode(w)
}

func (x *LinkRes) Decode(r *sunrpc.Reader) error {
	x.Status = Status(r.Uint32())
	x.Attr.Decode(r)
	return x.LinkWcc.Decode(r)
}
