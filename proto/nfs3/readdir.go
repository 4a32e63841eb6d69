package nfs3

import "github.com/tristore/tristore/proto/sunrpc"

// READDIR and READDIRPLUS arguments and results.

// ReaddirArgs is READDIR3args.
type ReaddirArgs struct {
	Dir        FH
	Cookie     uint64
	CookieVerf [CookieVerfSize]byte
	Count      uint32
}

func (a *ReaddirArgs) Encode(w *sunrpc.Writer) {
	a.Dir.Encode(w)
	w.Uint64(a.Cookie)
	w.FixedOpaque(a.CookieVerf[:])
	w.Uint32(a.Count)
}

func (a *ReaddirArgs) Decode(r *sunrpc.Reader) error {
	a.Dir.Decode(r)
	a.Cookie = r.Uint64()
	copy(a.CookieVerf[:], r.FixedOpaque(CookieVerfSize))
	a.Count = r.Uint32()
	return r.Err()
}

// Entry is entry3 (READDIR).
type Entry struct {
	FileID uint64
	Name   string
	Cookie uint64
}

// EntrySize is the encoded size of e inside a dirlist3 (including the
// value_follows flag), for servers packing replies up to the client's count.
func (e *Entry) EntrySize() int { return 4 + 8 + 4 + pad4(len(e.Name)) + 8 }

func pad4(n int) int { return (n + 3) &^ 3 }

// ReaddirRes is READDIR3res.
type ReaddirRes struct {
	Status     Status
	DirAttr    PostOpAttr
	CookieVerf [CookieVerfSize]byte
	Entries    []Entry
	EOF        bool
}

func (x *ReaddirRes) Encode(w *sunrpc.Writer) {
	w.Uint32(uint32(x.Status))
	x.DirAttr.Encode(w)
	if x.Status != OK {
		return
	}
	w.FixedOpaque(x.CookieVerf[:])
	encodeList(w, x.Entries, func(e *Entry) {
		w.Uint64(e.FileID)
		w.String(e.Name)
		w.Uint64(e.Cookie)
	})
	w.Bool(x.EOF)
}

func (x *ReaddirRes) Decode(r *sunrpc.Reader) error {
	x.Status = Status(r.Uint32())
	x.DirAttr.Decode(r)
	if x.Status != OK {
		return r.Err()
	}
	copy(x.CookieVerf[:], r.FixedOpaque(CookieVerfSize))
	x.Entries = decodeList(r, x.Entries[:0], "too many directory entries", func(e *Entry) {
		e.FileID = r.Uint64()
		e.Name = r.String(MaxName)
		e.Cookie = r.Uint64()
	})
	x.EOF = r.Bool()
	return r.Err()
}

// ReaddirplusArgs is READDIRPLUS3args.
type ReaddirplusArgs struct {
	Dir        FH
	Cookie     uint64
	CookieVerf [CookieVerfSize]byte
	DirCount   uint32
	MaxCount   uint32
}

func (a *ReaddirplusArgs) Encode(w *sunrpc.Writer) {
	a.Dir.Encode(w)
	w.Uint64(a.Cookie)
	w.FixedOpaque(a.CookieVerf[:])
	w.Uint32(a.DirCount)
	w.Uint32(a.MaxCount)
}

func (a *ReaddirplusArgs) Decode(r *sunrpc.Reader) error {
	a.Dir.Decode(r)
	a.Cookie = r.Uint64()
	copy(a.CookieVerf[:], r.FixedOpaque(CookieVerfSize))
	a.DirCount = r.Uint32()
	a.MaxCount = r.Uint32()
	return r.Err()
}

// EntryPlus is entryplus3 (READDIRPLUS).
type EntryPlus struct {
	FileID uint64
	Name   string
	Cookie uint64
	Attr   PostOpAttr
	FH     PostOpFH
}

// EntrySize is the encoded size of e inside a dirlistplus3.
func (e *EntryPlus) EntrySize() int {
	n := 4 + 8 + 4 + pad4(len(e.Name)) + 8 + 4 + 4
	if e.Attr.Attr != nil {
		n += 84
	}
	if e.FH.FH != nil {
		n += 4 + pad4(len(e.FH.FH))
	}
	return n
}

// ReaddirplusRes is READDIRPLUS3res.
type ReaddirplusRes struct {
	Status     Status
	DirAttr    PostOpAttr
	CookieVerf [CookieVerfSize]byte
	Entries    []EntryPlus
	EOF        bool
}

func (x *ReaddirplusRes) Encode(w *sunrpc.Writer) {
	w.Uint32(uint32(x.Status))
	x.DirAttr.Encode(w)
	if x.Status != OK {
		return
	}
	w.FixedOpaque(x.CookieVerf[:])
	encodeList(w, x.Entries, func(e *EntryPlus) {
		w.Uint64(e.FileID)
		w.String(e.Name)
		w.Uint64(e.Cookie)
		e.Attr.Encode(w)
		e.FH.Encode(w)
	})
	w.Bool(x.EOF)
}

func (x *ReaddirplusRes) Decode(r *sunrpc.Reader) error {
	x.Status = Status(r.Uint32())
	x.DirAttr.Decode(r)
	if x.Status != OK {
		return r.Err()
	}
	copy(x.CookieVerf[:], r.FixedOpaque(CookieVerfSize))
	x.Entries = decodeList(r, x.Entries[:0], "too many directory entries", func(e *EntryPlus) {
		e.FileID = r.Uint64()
		e.Name = r.String(MaxName)
		e.Cookie = r.Uint64()
		e.Attr.Decode(r)
		e.FH.Decode(r)
	})
	x.EOF = r.Bool()
	return r.Err()
}
