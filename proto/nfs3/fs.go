package nfs3

import "github.com/tristore/tristore/proto/sunrpc"

// FSSTAT, FSINFO and PATHCONF results (their arguments are GetattrArgs).

// FsstatRes is FSSTAT3res.
type FsstatRes struct {
	Status   Status
	Attr     PostOpAttr
	TBytes   uint64
	FBytes   uint64
	ABytes   uint64
	TFiles   uint64
	FFiles   uint64
	AFiles   uint64
	Invarsec uint32
}

func (x *FsstatRes) Encode(w *sunrpc.Writer) {
	w.Uint32(uint32(x.Status))
	x.Attr.Encode(w)
	if x.Status == OK {
		for _, v := range []uint64{x.TBytes, x.FBytes, x.ABytes, x.TFiles, x.FFiles, x.AFiles} {
			w.Uint64(v)
		}
		w.Uint32(x.Invarsec)
	}
}

func (x *FsstatRes) Decode(r *sunrpc.Reader) error {
	x.Status = Status(r.Uint32())
	x.Attr.Decode(r)
	if x.Status == OK {
		x.TBytes, x.FBytes, x.ABytes = r.Uint64(), r.Uint64(), r.Uint64()
		x.TFiles, x.FFiles, x.AFiles = r.Uint64(), r.Uint64(), r.Uint64()
		x.Invarsec = r.Uint32()
	}
	return r.Err()
}

// FsinfoRes is FSINFO3res.
type FsinfoRes struct {
	Status      Status
	Attr        PostOpAttr
	RtMax       uint32
	RtPref      uint32
	RtMult      uint32
	WtMax       uint32
	WtPref      uint32
	WtMult      uint32
	DtPref      uint32
	MaxFileSize uint64
	TimeDelta   Time
	Properties  uint32
}

func (x *FsinfoRes) Encode(w *sunrpc.Writer) {
	w.Uint32(uint32(x.Status))
	x.Attr.Encode(w)
	if x.Status == OK {
		for _, v := range []uint32{x.RtMax, x.RtPref, x.RtMult, x.WtMax, x.WtPref, x.WtMult, x.DtPref} {
			w.Uint32(v)
		}
		w.Uint64(x.MaxFileSize)
		x.TimeDelta.Encode(w)
		w.Uint32(x.Properties)
	}
}

func (x *FsinfoRes) Decode(r *sunrpc.Reader) error {
	x.Status = Status(r.Uint32())
	x.Attr.Decode(r)
	if x.Status == OK {
		x.RtMax, x.RtPref, x.RtMult = r.Uint32(), r.Uint32(), r.Uint32()
		x.WtMax, x.WtPref, x.WtMult = r.Uint32(), r.Uint32(), r.Uint32()
		x.DtPref = r.Uint32()
		x.MaxFileSize = r.Uint64()
		x.TimeDelta.Decode(r)
		x.Properties = r.Uint32()
	}
	return r.Err()
}

// PathconfRes is PATHCONF3res.
type PathconfRes struct {
	Status          Status
	Attr            PostOpAttr
	LinkMax         uint32
	NameMax         uint32
	NoTrunc         bool
	ChownRestricted bool
	CaseInsensitive bool
	CasePreserving  bool
}

func (x *PathconfRes) Encode(w *sunrpc.Writer) {
	w.Uint32(uint32(x.Status))
	x.Attr.Encode(w)
	if x.Status == OK {
		w.Uint32(x.LinkMax)
		w.Uint32(x.NameMax)
		w.Bool(x.NoTrunc)
		w.Bool(x.ChownRestricted)
		w.Bool(x.CaseInsensitive)
		w.Bool(x.CasePreserving)
	}
}

func (x *PathconfRes) Decode(r *sunrpc.Reader) error {
	x.Status = Status(r.Uint32())
	x.Attr.Decode(r)
	if x.Status == OK {
		x.LinkMax = r.Uint32()
		x.NameMax = r.Uint32()
		x.NoTrunc = r.Bool()
		x.ChownRestricted = r.Bool()
		x.CaseInsensitive = r.Bool()
		x.CasePreserving = r.Bool()
	}
	return r.Err()
}
