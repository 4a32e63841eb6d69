package nfs3

import (
	"errors"
	"reflect"
	"testing"

	"github.com/tristore/tristore/proto/sunrpc"
)

type codec interface {
	Encode(w *sunrpc.Writer)
	Decode(r *sunrpc.Reader) error
}

func sampleAttr() *Fattr {
	return &Fattr{Type: TypeReg, Mode: 0o644, Nlink: 1, UID: 1, GID: 2, Size: 3, Used: 4096,
		Rdev: SpecData{1, 2}, FSID: 9, FileID: 77, Atime: Time{1, 2}, Mtime: Time{3, 4}, Ctime: Time{5, 6}}
}

func sampleWcc() WccData {
	return WccData{Before: PreOpAttr{&WccAttr{Size: 1, Mtime: Time{1, 1}, Ctime: Time{2, 2}}}, After: PostOpAttr{sampleAttr()}}
}

// allCodecs returns one populated value of every argument and result type,
// paired with a constructor of an empty value to decode into.
func allCodecs() []struct {
	v     codec
	empty func() codec
} {
	fh := FH{1, 2, 3, 4, 5}
	sa := Sattr{Mode: Uint32Ptr(0o600), Size: Uint64Ptr(10), Atime: SetTime{How: SetToServerTime}, Mtime: SetTime{How: SetToClientTime, Time: Time{7, 8}}}
	where := DirOpArgs{Dir: fh, Name: "file.txt"}
	type pair = struct {
		v     codec
		empty func() codec
	}
	return []pair{
		{&GetattrArgs{FH: fh}, func() codec { return new(GetattrArgs) }},
		{&GetattrRes{Status: OK, Attr: *sampleAttr()}, func() codec { return new(GetattrRes) }},
		{&GetattrRes{Status: ErrStale}, func() codec { return new(GetattrRes) }},
		{&SetattrArgs{FH: fh, Attr: sa, Guard: &Time{5, 6}}, func() codec { return new(SetattrArgs) }},
		{&WccRes{Status: ErrNotSync, Wcc: sampleWcc()}, func() codec { return new(WccRes) }},
		{&AccessArgs{FH: fh, Access: 0x3f}, func() codec { return new(AccessArgs) }},
		{&AccessRes{Status: OK, Attr: PostOpAttr{sampleAttr()}, Access: 3}, func() codec { return new(AccessRes) }},
		{&LookupRes{Status: OK, FH: fh, Attr: PostOpAttr{sampleAttr()}, DirAttr: PostOpAttr{sampleAttr()}}, func() codec { return new(LookupRes) }},
		{&LookupRes{Status: ErrNoEnt, DirAttr: PostOpAttr{sampleAttr()}}, func() codec { return new(LookupRes) }},
		{&ReadlinkRes{Status: OK, Path: "../x"}, func() codec { return new(ReadlinkRes) }},
		{&ReadArgs{FH: fh, Offset: 1 << 33, Count: 4096}, func() codec { return new(ReadArgs) }},
		{&ReadRes{Status: OK, Count: 3, EOF: true, Data: []byte("abc")}, func() codec { return new(ReadRes) }},
		{&WriteArgs{FH: fh, Offset: 5, Count: 2, Stable: FileSync, Data: []byte("hi")}, func() codec { return new(WriteArgs) }},
		{&WriteRes{Status: OK, Wcc: sampleWcc(), Count: 2, Committed: FileSync, Verf: [8]byte{1, 2, 3}}, func() codec { return new(WriteRes) }},
		{&CommitArgs{FH: fh, Offset: 0, Count: 0}, func() codec { return new(CommitArgs) }},
		{&CommitRes{Status: OK, Wcc: sampleWcc(), Verf: [8]byte{9}}, func() codec { return new(CommitRes) }},
		{&CreateArgs{Where: where, Mode: Guarded, Attr: sa}, func() codec { return new(CreateArgs) }},
		{&CreateArgs{Where: where, Mode: Exclusive, Verf: [8]byte{1, 1, 2, 3}}, func() codec { return new(CreateArgs) }},
		{&CreateRes{Status: OK, FH: PostOpFH{fh}, Attr: PostOpAttr{sampleAttr()}, DirWcc: sampleWcc()}, func() codec { return new(CreateRes) }},
		{&MkdirArgs{Where: where, Attr: sa}, func() codec { return new(MkdirArgs) }},
		{&SymlinkArgs{Where: where, Attr: sa, Target: "t"}, func() codec { return new(SymlinkArgs) }},
		{&MknodArgs{Where: where, Type: TypeChr, Attr: sa, Spec: SpecData{1, 3}}, func() codec { return new(MknodArgs) }},
		{&MknodArgs{Where: where, Type: TypeFifo, Attr: sa}, func() codec { return new(MknodArgs) }},
		{&RenameArgs{From: where, To: DirOpArgs{Dir: fh, Name: "b"}}, func() codec { return new(RenameArgs) }},
		{&RenameRes{Status: OK, FromWcc: sampleWcc(), ToWcc: sampleWcc()}, func() codec { return new(RenameRes) }},
		{&LinkArgs{FH: fh, Link: where}, func() codec { return new(LinkArgs) }},
		{&LinkRes{Status: OK, Attr: PostOpAttr{sampleAttr()}, LinkWcc: sampleWcc()}, func() codec { return new(LinkRes) }},
		{&ReaddirArgs{Dir: fh, Cookie: 3, CookieVerf: [8]byte{1}, Count: 4096}, func() codec { return new(ReaddirArgs) }},
		{&ReaddirRes{Status: OK, CookieVerf: [8]byte{2}, Entries: []Entry{{1, "a", 1}, {2, "bb", 2}}, EOF: true}, func() codec { return new(ReaddirRes) }},
		{&ReaddirplusArgs{Dir: fh, Cookie: 3, DirCount: 10, MaxCount: 100}, func() codec { return new(ReaddirplusArgs) }},
		{&ReaddirplusRes{Status: OK, Entries: []EntryPlus{{FileID: 1, Name: "a", Cookie: 1, Attr: PostOpAttr{sampleAttr()}, FH: PostOpFH{fh}}}}, func() codec { return new(ReaddirplusRes) }},
		{&FsstatRes{Status: OK, TBytes: 1, FBytes: 2, ABytes: 3, TFiles: 4, FFiles: 5, AFiles: 6, Invarsec: 7}, func() codec { return new(FsstatRes) }},
		{&FsinfoRes{Status: OK, RtMax: 1 << 20, RtPref: 1 << 20, RtMult: 4096, WtMax: 1 << 20, WtPref: 1 << 20, WtMult: 4096, DtPref: 8192, MaxFileSize: 1 << 62, TimeDelta: Time{0, 1}, Properties: FSFLink | FSFSymlink}, func() codec { return new(FsinfoRes) }},
		{&PathconfRes{Status: OK, LinkMax: 1000, NameMax: 255, NoTrunc: true, CasePreserving: true}, func() codec { return new(PathconfRes) }},
		{&DirPath{Path: "/bucket"}, func() codec { return new(DirPath) }},
		{&MntRes{Status: MntOK, FH: fh, AuthFlavors: []uint32{0, 1}}, func() codec { return new(MntRes) }},
		{&DumpRes{Mounts: []MountEntry{{"h", "/"}}}, func() codec { return new(DumpRes) }},
		{&ExportRes{Exports: []ExportEntry{{Dir: "/", Groups: []string{"127.0.0.0/8"}}}}, func() codec { return new(ExportRes) }},
		{&Mapping{Prog: ProgNFS, Vers: 3, Prot: PortmapProto, Port: 2049}, func() codec { return new(Mapping) }},
	}
}

func TestRoundTrip(t *testing.T) {
	for _, c := range allCodecs() {
		var w sunrpc.Writer
		c.v.Encode(&w)
		if w.Len()%4 != 0 {
			t.Errorf("%T: encoded length %d not aligned", c.v, w.Len())
		}
		got := c.empty()
		r := sunrpc.NewReader(w.Bytes())
		if err := got.Decode(r); err != nil {
			t.Errorf("%T: decode: %v", c.v, err)
			continue
		}
		if r.Remaining() != 0 {
			t.Errorf("%T: %d bytes left over", c.v, r.Remaining())
		}
		if !reflect.DeepEqual(got, c.v) {
			t.Errorf("%T: round trip\n got %+v\nwant %+v", c.v, got, c.v)
		}
		// Every strict prefix must fail to decode (no panic, ErrGarbage).
		b := w.Bytes()
		for n := 0; n < len(b); n += 4 {
			if err := c.empty().Decode(sunrpc.NewReader(b[:n])); err == nil {
				// Some prefixes are valid shorter messages (e.g. lists); that is fine
				// only if the decoder stopped at a list end, which DeepEqual would catch.
				continue
			} else if !errors.Is(err, sunrpc.ErrGarbage) {
				t.Errorf("%T prefix %d: error %v not ErrGarbage", c.v, n, err)
			}
		}
	}
}

func TestEntrySizes(t *testing.T) {
	e := Entry{FileID: 1, Name: "abcde", Cookie: 2}
	res := ReaddirRes{Status: OK, Entries: []Entry{e}}
	var w sunrpc.Writer
	res.Encode(&w)
	empty := ReaddirRes{Status: OK}
	var w0 sunrpc.Writer
	empty.Encode(&w0)
	if got := w.Len() - w0.Len(); got != e.EntrySize() {
		t.Fatalf("Entry.EntrySize %d, encoded %d", e.EntrySize(), got)
	}
	ep := EntryPlus{FileID: 1, Name: "abcdef", Cookie: 2, Attr: PostOpAttr{sampleAttr()}, FH: PostOpFH{FH{1, 2, 3}}}
	resp := ReaddirplusRes{Status: OK, Entries: []EntryPlus{ep}}
	w.Reset()
	resp.Encode(&w)
	w0.Reset()
	(&ReaddirplusRes{Status: OK}).Encode(&w0)
	if got := w.Len() - w0.Len(); got != ep.EntrySize() {
		t.Fatalf("EntryPlus.EntrySize %d, encoded %d", ep.EntrySize(), got)
	}
}

func TestBadArgs(t *testing.T) {
	var w sunrpc.Writer
	// WRITE whose count disagrees with its data.
	(&WriteArgs{FH: FH{1}, Count: 10, Data: []byte("abc")}).Encode(&w)
	if err := new(WriteArgs).Decode(sunrpc.NewReader(w.Bytes())); !errors.Is(err, sunrpc.ErrGarbage) {
		t.Fatalf("count mismatch: %v", err)
	}
	// Handle over 64 bytes.
	w.Reset()
	w.Opaque(make([]byte, 65))
	if err := new(GetattrArgs).Decode(sunrpc.NewReader(w.Bytes())); !errors.Is(err, sunrpc.ErrGarbage) {
		t.Fatalf("65-byte handle: %v", err)
	}
	// Unknown create mode.
	w.Reset()
	(&DirOpArgs{Dir: FH{1}, Name: "x"}).Encode(&w)
	w.Uint32(9)
	if err := new(CreateArgs).Decode(sunrpc.NewReader(w.Bytes())); !errors.Is(err, sunrpc.ErrGarbage) {
		t.Fatalf("createmode 9: %v", err)
	}
}

// FuzzDecodeArgs feeds arbitrary bytes to every argument decoder the server
// uses: none may panic or return an error other than ErrGarbage.
func FuzzDecodeArgs(f *testing.F) {
	for _, c := range allCodecs() {
		var w sunrpc.Writer
		c.v.Encode(&w)
		f.Add(append([]byte(nil), w.Bytes()...))
	}
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	args := []func() codec{
		func() codec { return new(GetattrArgs) }, func() codec { return new(SetattrArgs) },
		func() codec { return new(DirOpArgs) }, func() codec { return new(AccessArgs) },
		func() codec { return new(ReadArgs) }, func() codec { return new(WriteArgs) },
		func() codec { return new(CreateArgs) }, func() codec { return new(MkdirArgs) },
		func() codec { return new(SymlinkArgs) }, func() codec { return new(MknodArgs) },
		func() codec { return new(RenameArgs) }, func() codec { return new(LinkArgs) },
		func() codec { return new(ReaddirArgs) }, func() codec { return new(ReaddirplusArgs) },
		func() codec { return new(CommitArgs) }, func() codec { return new(DirPath) },
		func() codec { return new(Mapping) }, func() codec { return new(ReaddirRes) },
		func() codec { return new(ReaddirplusRes) }, func() codec { return new(ExportRes) },
	}
	// The result types too: the client decodes them from servers it does not control.
	seen := map[reflect.Type]bool{}
	for _, mk := range args {
		seen[reflect.TypeOf(mk())] = true
	}
	for _, c := range allCodecs() {
		if t := reflect.TypeOf(c.empty()); !seen[t] {
			seen[t] = true
			args = append(args, c.empty)
		}
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		for _, mk := range args {
			r := sunrpc.NewReader(b)
			v := mk()
			err := v.Decode(r)
			if err != nil {
				if !errors.Is(err, sunrpc.ErrGarbage) {
					t.Fatalf("%T: non-garbage error %v", v, err)
				}
				continue
			}
			// Properties: decoding stays inside the input; what decoded
			// re-encodes to exactly the bytes it took (XDR is canonical up
			// to padding) and decodes again to the same value.
			if r.Offset() > len(b) {
				t.Fatalf("%T: decoded %d bytes of %d", v, r.Offset(), len(b))
			}
			var w sunrpc.Writer
			v.Encode(&w)
			if w.Len() != r.Offset() {
				t.Fatalf("%T: re-encodes to %d bytes, decoded from %d", v, w.Len(), r.Offset())
			}
			v2 := mk()
			if err := v2.Decode(sunrpc.NewReader(w.Bytes())); err != nil || !reflect.DeepEqual(v, v2) {
				t.Fatalf("%T: round trip %+v -> %+v, %v", v, v, v2, err)
			}
		}
	})
}

func TestReadResEncodeHead(t *testing.T) {
	for _, n := range []int{0, 1, 2, 3, 4, 5} {
		res := ReadRes{Status: OK, Attr: PostOpAttr{sampleAttr()}, Count: uint32(n), EOF: true, Data: make([]byte, n)}
		for i := range res.Data {
			res.Data[i] = byte(i + 1)
		}
		var full, head sunrpc.Writer
		res.Encode(&full)
		res.EncodeHead(&head)
		got := append(append(head.Bytes(), res.Data...), Pad(n)...)
		if !reflect.DeepEqual(got, full.Bytes()) {
			t.Fatalf("n=%d: EncodeHead+data+pad differs from Encode", n)
		}
	}
}

// DecodeHead reads exactly what EncodeHead wrote (the reader stops at the
// first data byte), for OK and error results, and refuses a data length
// that disagrees with the count.
func TestReadResDecodeHead(t *testing.T) {
	for _, res := range []ReadRes{
		{Status: OK, Attr: PostOpAttr{sampleAttr()}, Count: 5, EOF: true, Data: []byte{1, 2, 3, 4, 5}},
		{Status: OK, Count: 0, Data: []byte{}},
		{Status: ErrStale, Attr: PostOpAttr{sampleAttr()}},
		{Status: ErrIO},
	} {
		var head sunrpc.Writer
		res.EncodeHead(&head)
		r := sunrpc.NewReader(append(head.Bytes(), 0xee, 0xee))
		var got ReadRes
		n, err := got.DecodeHead(r)
		if err != nil || n != len(res.Data) || r.Offset() != head.Len() {
			t.Fatalf("%+v: n=%d offset %d of %d, %v", res, n, r.Offset(), head.Len(), err)
		}
		got.Data, res.Data = nil, nil
		if !reflect.DeepEqual(got, res) {
			t.Fatalf("decoded %+v, want %+v", got, res)
		}
	}
	var w sunrpc.Writer
	(&ReadRes{Status: OK, Count: 7, Data: make([]byte, 8)}).EncodeHead(&w)
	if _, err := new(ReadRes).DecodeHead(sunrpc.NewReader(w.Bytes())); err == nil {
		t.Fatal("count 7 with 8 data bytes accepted")
	}
}
