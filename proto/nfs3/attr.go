package nfs3

import "github.com/tristore/tristore/proto/sunrpc"

// GETATTR, SETATTR and ACCESS arguments and results.

// GetattrArgs is GETATTR3args (also used by FSSTAT, FSINFO, PATHCONF, READLINK: a bare handle).
type GetattrArgs struct{ FH FH }

func (a *GetattrArgs) Encode(w *sunrpc.Writer)       { a.FH.Encode(w) }
func (a *GetattrArgs) Decode(r *sunrpc.Reader) error { return a.FH.Decode(r) }

// GetattrRes is GETATTR3res; Attr is valid when Status == OK.
type GetattrRes struct {
	Status Status
	Attr   Fattr
}

func (x *GetattrRes) Encode(w *sunrpc.Writer) {
	w.Uint32(uint32(x.Status))
	if x.Status == OK {
		x.Attr.Encode(w)
	}
}

func (x *GetattrRes) Decode(r *sunrpc.Reader) error {
	x.Status = Status(r.Uint32())
	if x.Status == OK {
		x.Attr.Decode(r)
	}
	return r.Err()
}

// SetattrArgs is SETATTR3args. Guard, when non-nil, is the ctime the object
// must still have (else NFS3ERR_NOT_SYNC).
type SetattrArgs struct {
	FH    FH
	Attr  Sattr
	Guard *Time
}

func (a *SetattrArgs) Encode(w *sunrpc.Writer) {
	a.FH.Encode(w)
	a.Attr.Encode(w)
	w.Bool(a.Guard != nil)
	if a.Guard != nil {
		a.Guard.Encode(w)
	}
}

func (a *SetattrArgs) Decode(r *sunrpc.Reader) error {
	a.FH.Decode(r)
	a.Attr.Decode(r)
	a.Guard = nil
	if r.Bool() {
		a.Guard = new(Time)
		a.Guard.Decode(r)
	}
	return r.Err()
}

// WccRes is the result shape "status + wcc_data in every case" (SETATTR3res,
// REMOVE3res, RMDIR3res).
type WccRes struct {
	Status Status
	Wcc    WccData
}

func (x *WccRes) Encode(w *sunrpc.Writer) { w.Uint32(uint32(x.Status)); x.Wcc.Encode(w) }
func (x *WccRes) Decode(r *sunrpc.Reader) error {
	x.Status = Status(r.Uint32())
	return x.Wcc.Decode(r)
}

// SetattrRes is SETATTR3res.
type SetattrRes = WccRes

// AccessArgs is ACCESS3args.
type AccessArgs struct {
	FH     FH
	Access uint32
}

func (a *AccessArgs) Encode(w *sunrpc.Writer) { a.FH.Encode(w); w.Uint32(a.Access) }
func (a *AccessArgs) Decode(r *sunrpc.Reader) error {
	a.FH.Decode(r)
	a.Access = r.Uint32()
	return r.Err()
}

// AccessRes is ACCESS3res; Access is valid when Status == OK.
type AccessRes struct {
	Status Status
	Attr   PostOpAttr
	Access uint32
}

func (x *AccessRes) Encode(w *sunrpc.Writer) {
	w.Uint32(uint32(x.Status))
	x.Attr.Encode(w)
	if x.Status == OK {
		w.Uint32(x.Access)
	}
}

func (x *AccessRes) Decode(r *sunrpc.Reader) error {
	x.Status = Status(r.Uint32())
	x.Attr.Decode(r)
	if x.Status == OK {
		x.Access = r.Uint32()
	}
	return r.Err()
}
