package sunrpc

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"testing"
)

func TestXDRRoundTrip(t *testing.T) {
	var w Writer
	w.Uint32(7)
	w.Int32(-2)
	w.Uint64(1 << 40)
	w.Bool(true)
	w.Opaque([]byte{1, 2, 3})
	w.String("hello")
	w.FixedOpaque([]byte{9, 9, 9, 9, 9})
	if w.Len()%4 != 0 {
		t.Fatalf("length %d not aligned", w.Len())
	}
	r := NewReader(w.Bytes())
	if r.Uint32() != 7 || r.Int32() != -2 || r.Uint64() != 1<<40 || !r.Bool() {
		t.Fatal("scalar mismatch")
	}
	if !bytes.Equal(r.Opaque(10), []byte{1, 2, 3}) || r.String(10) != "hello" {
		t.Fatal("opaque/string mismatch")
	}
	if !bytes.Equal(r.FixedOpaque(5), []byte{9, 9, 9, 9, 9}) || r.Remaining() != 0 || r.Err() != nil {
		t.Fatalf("fixed opaque mismatch, err %v", r.Err())
	}
}

func TestXDRLimits(t *testing.T) {
	var w Writer
	w.String("toolong")
	r := NewReader(w.Bytes())
	if r.String(3); !errors.Is(r.Err(), ErrGarbage) {
		t.Fatalf("over-limit string: err %v", r.Err())
	}
	w.Reset()
	w.Uint32(1000) // length past the end
	w.Uint32(0)
	r = NewReader(w.Bytes())
	if r.Opaque(1 << 20); !errors.Is(r.Err(), ErrGarbage) {
		t.Fatalf("length past end: err %v", r.Err())
	}
	r = NewReader([]byte{0, 0, 0, 2})
	if r.Bool(); !errors.Is(r.Err(), ErrGarbage) {
		t.Fatal("bool 2 accepted")
	}
	// Sticky: later reads return zero.
	if r.Uint32() != 0 {
		t.Fatal("read after error returned data")
	}
}

func TestRecordMarking(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteRecord(&buf, []byte("abcd")); err != nil {
		t.Fatal(err)
	}
	// A three-fragment record.
	b := AppendFragmentHeader(nil, 2, false)
	b = append(b, "xy"...)
	b = AppendFragmentHeader(b, 0, false)
	b = AppendFragmentHeader(b, 3, true)
	b = append(b, "zzz"...)
	buf.Write(b)
	br := bufio.NewReader(&buf)
	rec, err := ReadRecord(br, 100)
	if err != nil || string(rec) != "abcd" {
		t.Fatalf("first record %q %v", rec, err)
	}
	rec, err = ReadRecord(br, 100)
	if err != nil || string(rec) != "xyzzz" {
		t.Fatalf("fragmented record %q %v", rec, err)
	}
	if _, err := ReadRecord(br, 100); err != io.EOF {
		t.Fatalf("at end: %v", err)
	}
	// Oversized: refused from the header alone.
	big := AppendFragmentHeader(nil, 1<<30, true)
	if _, err := ReadRecord(bytes.NewReader(big), 1<<20); !errors.Is(err, ErrRecordTooLarge) {
		t.Fatalf("oversized: %v", err)
	}
	// Truncated inside a record.
	tr := AppendFragmentHeader(nil, 10, true)
	tr = append(tr, "abc"...)
	if _, err := ReadRecord(bytes.NewReader(tr), 100); err != io.ErrUnexpectedEOF {
		t.Fatalf("truncated: %v", err)
	}
}

func TestCallReply(t *testing.T) {
	var w Writer
	cred := AuthSys{Stamp: 1, MachineName: "host", UID: 1000, GID: 100, GIDs: []uint32{4, 5}}.Auth()
	Call{XID: 42, Prog: 100003, Vers: 3, Proc: 6, Cred: cred, Verf: AuthNone()}.Encode(&w)
	w.Uint32(0xdead)
	r := NewReader(w.Bytes())
	c, err := DecodeCall(r)
	if err != nil || c.XID != 42 || c.Prog != 100003 || c.Vers != 3 || c.Proc != 6 || c.Cred.Flavor != AuthFlavorSys {
		t.Fatalf("call %+v %v", c, err)
	}
	as, err := DecodeAuthSys(c.Cred.Body)
	if err != nil || as.UID != 1000 || as.GID != 100 || len(as.GIDs) != 2 || as.MachineName != "host" {
		t.Fatalf("authsys %+v %v", as, err)
	}
	if r.Uint32() != 0xdead {
		t.Fatal("args misaligned")
	}

	for _, tc := range []struct {
		enc  func(*Writer)
		want string
	}{
		{func(w *Writer) { EncodeAccepted(w, 1, Success) }, ""},
		{func(w *Writer) { EncodeAccepted(w, 1, ProcUnavail) }, "rpc: PROC_UNAVAIL"},
		{func(w *Writer) { EncodeProgMismatch(w, 1, 3, 3) }, "rpc: PROG_MISMATCH (supported 3..3)"},
		{func(w *Writer) { EncodeRPCMismatch(w, 1) }, "rpc: RPC_MISMATCH (supported 2..2)"},
		{func(w *Writer) { EncodeAuthError(w, 1, AuthTooWeak) }, "rpc: AUTH_ERROR (auth_stat 5)"},
	} {
		w.Reset()
		tc.enc(&w)
		rep, err := DecodeReply(NewReader(w.Bytes()))
		if err != nil || rep.XID != 1 {
			t.Fatalf("reply decode: %v", err)
		}
		got := ""
		if e := rep.Err(); e != nil {
			got = e.Error()
		}
		if got != tc.want {
			t.Fatalf("reply err %q, want %q", got, tc.want)
		}
	}

	// RPC version 3 -> ErrRPCVersion with the XID intact.
	w.Reset()
	w.Uint32(9)
	w.Uint32(MsgCall)
	w.Uint32(3)
	c, err = DecodeCall(NewReader(w.Bytes()))
	if !errors.Is(err, ErrRPCVersion) || c.XID != 9 {
		t.Fatalf("rpcvers 3: %v", err)
	}
	// Bad AUTH_SYS bodies.
	if _, err := DecodeAuthSys([]byte{0, 0, 0, 1}); !errors.Is(err, ErrGarbage) {
		t.Fatalf("short authsys: %v", err)
	}
	bad := AuthSys{GIDs: make([]uint32, 17)}.Auth()
	if _, err := DecodeAuthSys(bad.Body); !errors.Is(err, ErrGarbage) {
		t.Fatalf("17 gids: %v", err)
	}
}

func FuzzReadRecord(f *testing.F) {
	f.Add(AppendFragmentHeader(nil, 0, true))
	f.Add(append(AppendFragmentHeader(nil, 4, true), 1, 2, 3, 4))
	f.Add(append(AppendFragmentHeader(append(AppendFragmentHeader(nil, 1, false), 7), 1, true), 8))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	f.Fuzz(func(t *testing.T, b []byte) {
		br := bufio.NewReader(bytes.NewReader(b))
		for i := 0; i < 64; i++ {
			rec, err := ReadRecord(br, 4096)
			if err != nil {
				return
			}
			if len(rec) > 4096 {
				t.Fatalf("record of %d bytes over limit", len(rec))
			}
		}
	})
}

func FuzzDecodeCall(f *testing.F) {
	var w Writer
	Call{XID: 1, Prog: 100003, Vers: 3, Proc: 1, Cred: AuthSys{MachineName: "m", UID: 1}.Auth(), Verf: AuthNone()}.Encode(&w)
	f.Add(append([]byte(nil), w.Bytes()...))
	f.Add([]byte{0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := DecodeCall(NewReader(b))
		if err == nil && c.Cred.Flavor == AuthFlavorSys {
			DecodeAuthSys(c.Cred.Body)
		}
		DecodeReply(NewReader(b))
	})
}

func TestRecordBuffers(t *testing.T) {
	var buf bytes.Buffer
	if err := WriteRecordBuffers(&buf, []byte("ab"), nil, []byte("cde")); err != nil {
		t.Fatal(err)
	}
	WriteRecord(&buf, []byte("xyz"))
	store := make([]byte, 0, 16)
	rec, err := ReadRecordInto(&buf, 100, store)
	if err != nil || string(rec) != "abcde" || &rec[0] != &store[:1][0] {
		t.Fatalf("ReadRecordInto %q %v (reused: %v)", rec, err, err == nil && &rec[0] == &store[:1][0])
	}
	rec, err = ReadRecordInto(&buf, 100, rec)
	if err != nil || string(rec) != "xyz" {
		t.Fatalf("second record %q %v", rec, err)
	}
}
