package nfs3

import "github.com/tristore/tristore/proto/sunrpc"

// READ, WRITE and COMMIT arguments and results.

// ReadArgs is READ3args (also COMMIT3args).
type ReadArgs struct {
	FH     FH
	Offset uint64
	Count  uint32
}

func (a *ReadArgs) Encode(w *sunrpc.Writer) { a.FH.Encode(w); w.Uint64(a.Offset); w.Uint32(a.Count) }
func (a *ReadArgs) Decode(r *sunrpc.Reader) error {
	a.FH.Decode(r)
	a.Offset = r.Uint64()
	a.Count = r.Uint32()
	return r.Err()
}

// ReadRes is READ3res. Count, EOF and Data are valid when Status == OK
// (Count is len(Data) on the wire as the RFC requires both).
type ReadRes struct {
	Status Status
	Attr   PostOpAttr
	Count  uint32
	EOF    bool
	Data   []byte
}

func (x *ReadRes) Encode(w *sunrpc.Writer) {
	w.Uint32(uint32(x.Status))
	x.Attr.Encode(w)
	if x.Status == OK {
		w.Uint32(x.Count)
		w.Bool(x.EOF)
		w.Opaque(x.Data)
	}
}

// EncodeHead writes the result up to and including the length of the data
// but not the data itself; the caller sends Data followed by pad zero bytes
// (pad = Pad(len(Data))) right after it, e.g. with
// sunrpc.WriteRecordBuffers. It avoids copying a 1 MiB READ payload.
func (x *ReadRes) EncodeHead(w *sunrpc.Writer) {
	w.Uint32(uint32(x.Status))
	x.Attr.Encode(w)
	if x.Status == OK {
		w.Uint32(x.Count)
		w.Bool(x.EOF)
		w.Uint32(uint32(len(x.Data)))
	}
}

// Pad returns the XDR padding after n opaque bytes (0-3 zero bytes).
func Pad(n int) []byte { return zeros[:(4-n%4)%4] }

var zeros [4]byte

func (x *ReadRes) Decode(r *sunrpc.Reader) error {
	x.Status = Status(r.Uint32())
	x.Attr.Decode(r)
	if x.Status == OK {
		x.Count = r.Uint32()
		x.EOF = r.Bool()
		x.Data = r.Opaque(MaxData)
		if r.Err() == nil && int(x.Count) != len(x.Data) {
			r.Fail("READ count %d but %d data bytes", x.Count, len(x.Data))
		}
	}
	return r.Err()
}

// DecodeHead reads what EncodeHead writes: the result up to and including
// the length of the data, and returns that length (0 unless Status is OK).
// The data and its padding are left unread: a client that reads a READ
// reply straight from the connection puts them where they belong without
// going through a record buffer. Data is left nil.
func (x *ReadRes) DecodeHead(r *sunrpc.Reader) (int, error) {
	x.Status = Status(r.Uint32())
	x.Attr.Decode(r)
	x.Data = nil
	n := 0
	if x.Status == OK {
		x.Count = r.Uint32()
		x.EOF = r.Bool()
		n = int(r.Uint32())
		if r.Err() == nil && (n > MaxData || int(x.Count) != n) {
			r.Fail("READ count %d but %d data bytes (limit %d)", x.Count, n, MaxData)
		}
	}
	return n, r.Err()
}

// WriteArgs is WRITE3args. Count must equal len(Data) (checked by Decode).
type WriteArgs struct {
	FH     FH
	Offset uint64
	Count  uint32
	Stable StableHow
	Data   []byte
}

func (a *WriteArgs) Encode(w *sunrpc.Writer) {
	a.FH.Encode(w)
	w.Uint64(a.Offset)
	w.Uint32(a.Count)
	w.Uint32(uint32(a.Stable))
	w.Opaque(a.Data)
}

func (a *WriteArgs) Decode(r *sunrpc.Reader) error {
	a.FH.Decode(r)
	a.Offset = r.Uint64()
	a.Count = r.Uint32()
	a.Stable = StableHow(r.Uint32())
	a.Data = r.Opaque(MaxData)
	if r.Err() == nil && a.Stable > FileSync {
		r.Fail("stable_how %d", a.Stable)
	}
	if r.Err() == nil && int(a.Count) != len(a.Data) {
		r.Fail("WRITE count %d but %d data bytes", a.Count, len(a.Data))
	}
	return r.Err()
}

// WriteRes is WRITE3res.
type WriteRes struct {
	Status    Status
	Wcc       WccData
	Count     uint32
	Committed StableHow
	Verf      [WriteVerfSize]byte
}

func (x *WriteRes) Encode(w *sunrpc.Writer) {
	w.Uint32(uint32(x.Status))
	x.Wcc.Encode(w)
	if x.Status == OK {
		w.Uint32(x.Count)
		w.Uint32(uint32(x.Committed))
		w.FixedOpaque(x.Verf[:])
	}
}

func (x *WriteRes) Decode(r *sunrpc.Reader) error {
	x.Status = Status(r.Uint32())
	x.Wcc.Decode(r)
	if x.Status == OK {
		x.Count = r.Uint32()
		x.Committed = StableHow(r.Uint32())
		copy(x.Verf[:], r.FixedOpaque(WriteVerfSize))
	}
	return r.Err()
}

// CommitArgs is COMMIT3args, which has the fields of READ3args (file,
// offset, count).
type CommitArgs = ReadArgs

// CommitRes is COMMIT3res.
type CommitRes struct {
	Status Status
	Wcc    WccData
	Verf   [WriteVerfSize]byte
}

func (x *CommitRes) Encode(w *sunrpc.Writer) {
	w.Uint32(uint32(x.Status))
	x.Wcc.Encode(w)
	if x.Status == OK {
		w.FixedOpaque(x.Verf[:])
	}
}

func (x *CommitRes) Decode(r *sunrpc.Reader) error {
	x.Status = Status(r.Uint32())
	x.Wcc.Decode(r)
	if x.Status == OK {
		copy(x.Verf[:], r.FixedOpaque(WriteVerfSize))
	}
	return r.Err()
}
