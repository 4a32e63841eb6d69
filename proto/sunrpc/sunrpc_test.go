package sunrpc

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"reflect"
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

// FuzzReadRecord checks record marking against a reference reading of the
// same bytes (fragment by fragment): the same records, the same place to
// stop, no record over the limit; and every record read, written back
// with WriteRecord, reads back identical.
func FuzzReadRecord(f *testing.F) {
	f.Add(AppendFragmentHeader(nil, 0, true))
	f.Add(append(AppendFragmentHeader(nil, 4, true), 1, 2, 3, 4))
	f.Add(append(AppendFragmentHeader(append(AppendFragmentHeader(nil, 1, false), 7), 1, true), 8))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff})
	const limit = 4096
	f.Fuzz(func(t *testing.T, b []byte) {
		ref := refRecords(b, limit)
		br := bufio.NewReader(bytes.NewReader(b))
		for i := 0; i < 64; i++ {
			rec, err := ReadRecord(br, limit)
			if i >= len(ref) {
				if err == nil {
					t.Fatalf("record %d read, the reference stops after %d", i, len(ref))
				}
				return
			}
			if err != nil {
				t.Fatalf("record %d: %v, the reference read %d bytes", i, err, len(ref[i]))
			}
			if len(rec) > limit || !bytes.Equal(rec, ref[i]) {
				t.Fatalf("record %d: %d bytes, reference %d", i, len(rec), len(ref[i]))
			}
			var w bytes.Buffer
			if err := WriteRecord(&w, rec); err != nil {
				t.Fatal(err)
			}
			if w.Len() != 4+len(rec) {
				t.Fatalf("WriteRecord of %d bytes wrote %d", len(rec), w.Len())
			}
			back, err := ReadRecord(&w, limit)
			if err != nil || !bytes.Equal(back, rec) {
				t.Fatalf("record round trip: %v", err)
			}
		}
	})
}

// refRecords is an independent, plain reading of RFC 5531 record marking:
// the complete records at the start of b (at most 64), stopping at the
// first incomplete, oversized or endless one.
func refRecords(b []byte, limit int) [][]byte {
	var out [][]byte
	for len(out) < 64 {
		var rec []byte
		empty := 0
		for {
			if len(b) < 4 {
				return out
			}
			h := binary.BigEndian.Uint32(b)
			n := int(h & 0x7fffffff)
			b = b[4:]
			if len(rec)+n > limit || n > len(b) {
				return out
			}
			rec = append(rec, b[:n]...)
			b = b[n:]
			if h&0x80000000 != 0 {
				break
			}
			if n == 0 {
				if empty++; empty > 1024 {
					return out
				}
			}
		}
		if rec == nil {
			rec = []byte{}
		}
		out = append(out, rec)
	}
	return out
}

// FuzzDecodeCall checks the call and reply header decoders and AUTH_SYS:
// what decodes re-encodes to bytes that decode to the same value; decoded
// lengths stay within the input and the protocol limits.
func FuzzDecodeCall(f *testing.F) {
	var w Writer
	Call{XID: 1, Prog: 100003, Vers: 3, Proc: 1, Cred: AuthSys{MachineName: "m", UID: 1, GIDs: []uint32{4, 5}}.Auth(), Verf: AuthNone()}.Encode(&w)
	f.Add(append([]byte(nil), w.Bytes()...))
	w.Reset()
	EncodeProgMismatch(&w, 7, 3, 3)
	f.Add(append([]byte(nil), w.Bytes()...))
	w.Reset()
	EncodeAuthError(&w, 8, AuthTooWeak)
	f.Add(append([]byte(nil), w.Bytes()...))
	f.Add([]byte{0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2})
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		r := NewReader(b)
		c, err := DecodeCall(r)
		if err == nil {
			if r.Offset() > len(b) || len(c.Cred.Body) > MaxAuthBytes || len(c.Verf.Body) > MaxAuthBytes {
				t.Fatalf("call decoded past its input or limits: offset %d of %d, bodies %d/%d", r.Offset(), len(b), len(c.Cred.Body), len(c.Verf.Body))
			}
			var w Writer
			c.Encode(&w)
			if w.Len() != r.Offset() {
				t.Fatalf("call header re-encodes to %d bytes, decoded from %d", w.Len(), r.Offset())
			}
			back, err := DecodeCall(NewReader(w.Bytes()))
			if err != nil || !reflect.DeepEqual(back, c) {
				t.Fatalf("call round trip: %+v -> %+v, %v", c, back, err)
			}
			if c.Cred.Flavor == AuthFlavorSys {
				if a, err := DecodeAuthSys(c.Cred.Body); err == nil {
					if len(a.GIDs) > MaxAuthSysGIDs || len(a.MachineName) > MaxMachineName {
						t.Fatalf("auth_sys over its limits: %d gids, name of %d", len(a.GIDs), len(a.MachineName))
					}
					body := a.Auth().Body
					if len(body) != len(c.Cred.Body) {
						t.Fatalf("auth_sys re-encodes to %d bytes, decoded from %d", len(body), len(c.Cred.Body))
					}
					if back, err := DecodeAuthSys(body); err != nil || !reflect.DeepEqual(back, a) {
						t.Fatalf("auth_sys round trip: %+v -> %+v, %v", a, back, err)
					}
				}
			}
		}
		r = NewReader(b)
		rep, err := DecodeReply(r)
		if err == nil {
			var w Writer
			encodeReply(&w, rep)
			if w.Len() != r.Offset() {
				t.Fatalf("reply header re-encodes to %d bytes, decoded from %d", w.Len(), r.Offset())
			}
			back, err := DecodeReply(NewReader(w.Bytes()))
			if err != nil || !reflect.DeepEqual(back, rep) {
				t.Fatalf("reply round trip: %+v -> %+v, %v", rep, back, err)
			}
		}
	})
}

// encodeReply writes a reply header from RFC 5531 section 9 (test-only:
// the server writes replies with EncodeAccepted and friends).
func encodeReply(w *Writer, r Reply) {
	w.Uint32(r.XID)
	w.Uint32(MsgReply)
	if r.Accepted {
		w.Uint32(MsgAccepted)
		r.Verf.Encode(w)
		w.Uint32(uint32(r.AcceptStat))
		if r.AcceptStat == ProgMismatch {
			w.Uint32(r.MismatchLow)
			w.Uint32(r.MismatchHigh)
		}
		return
	}
	w.Uint32(MsgDenied)
	w.Uint32(uint32(r.RejectStat))
	switch r.RejectStat {
	case RPCMismatch:
		w.Uint32(r.MismatchLow)
		w.Uint32(r.MismatchHigh)
	case AuthError:
		w.Uint32(uint32(r.AuthStat))
	}
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
