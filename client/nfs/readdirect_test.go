package nfs

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/tristore/tristore/proto/nfs3"
	"github.com/tristore/tristore/proto/sunrpc"
)

// readReply is a READ reply record with a verifier of verfLen bytes
// (servers may send one; the client must skip it) and, if attr, post-op
// attributes, so the header before the data varies in length.
func readReply(xid uint32, verfLen int, attr bool, eof bool, data []byte) []byte {
	var w sunrpc.Writer
	w.Uint32(xid)
	w.Uint32(sunrpc.MsgReply)
	w.Uint32(sunrpc.MsgAccepted)
	sunrpc.OpaqueAuth{Flavor: 7, Body: bytes.Repeat([]byte{0xaa}, verfLen)}.Encode(&w)
	w.Uint32(uint32(sunrpc.Success))
	res := nfs3.ReadRes{Status: nfs3.OK, Count: uint32(len(data)), EOF: eof, Data: data}
	if attr {
		res.Attr = nfs3.PostOpAttr{Attr: &nfs3.Fattr{Type: nfs3.TypeReg, Size: 1 << 40, FileID: 9}}
	}
	res.Encode(&w)
	return w.Bytes()
}

// dialClient is fakeClient with the test's own DialFunc.
func dialClient(t *testing.T, dial DialFunc, opts Options) *Client {
	t.Helper()
	opts.Dial, opts.Timeout = dial, 10*time.Second
	c, err := Dial(context.Background(), "fake:2049", opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

func pattern(off uint64, n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(off>>12) ^ byte(i*7) ^ byte(i>>9)
	}
	return b
}

// A large READ reply's data goes from the connection straight into the
// caller's buffer: a 64 MiB ReadAt with 8 READs in flight reads no reply
// into a record buffer (before, every one did and was copied out again),
// and every byte lands where it belongs, whatever the length of the
// header before the data (verifier, attributes) and for short reads.
func TestReadIntoCallerBuffer(t *testing.T) {
	const mib = 1 << 20
	f := &fakeServer{}
	f.handle = func(call sunrpc.Call, r *sunrpc.Reader) ([]byte, bool) {
		var a nfs3.ReadArgs
		a.Decode(r)
		n := int(a.Count)
		if a.Offset%(3*mib) == 0 {
			n -= 4097 // a short read, odd length: the client asks again for the rest
		}
		verf, attr := int(a.Offset>>20)%5*100, a.Offset%(2*mib) == 0
		return readReply(call.XID, verf, attr, false, pattern(a.Offset, n)), false
	}
	c := fakeClient(t, f, Options{Rsize: mib, Parallel: 8})
	p := make([]byte, 64*mib)
	before := recordBufGets.Load()
	if n, err := c.ReadAt(context.Background(), FH{1}, p, 0); err != nil || n != len(p) {
		t.Fatalf("ReadAt: %d %v", n, err)
	}
	if got := recordBufGets.Load() - before; got != 0 {
		t.Errorf("%d of the READ replies went through a record buffer, want 0", got)
	}
	for off := 0; off < len(p); off += mib {
		want := pattern(uint64(off), mib)
		if off%(3*mib) == 0 {
			// The first part came in one READ, the last 4097 bytes in another.
			want = append(pattern(uint64(off), mib-4097), pattern(uint64(off+mib-4097), 4097)...)
		}
		if !bytes.Equal(p[off:off+mib], want) {
			t.Fatalf("MiB at %d differs", off)
		}
	}
}

// Replies the direct path does not take (more data than asked, a record
// in two fragments, an error) still come out right through the general
// one.
func TestReadDirectFallbacks(t *testing.T) {
	const n = 256 << 10
	data := pattern(0, n)
	cases := []struct {
		name  string
		reply func(xid uint32) [][]byte // fragments
		check func(t *testing.T, got int, eof bool, p []byte, err error)
	}{
		{"more data than asked", func(xid uint32) [][]byte {
			return [][]byte{readReply(xid, 0, true, false, pattern(0, n+4))}
		}, func(t *testing.T, got int, eof bool, p []byte, err error) {
			if err == nil || !bytes.Contains([]byte(err.Error()), []byte("bytes for a")) {
				t.Fatalf("got %d, %v; want the too-much-data error", got, err)
			}
		}},
		{"two fragments", func(xid uint32) [][]byte {
			rec := readReply(xid, 8, true, true, data)
			return [][]byte{rec[:1000], rec[1000:]}
		}, func(t *testing.T, got int, eof bool, p []byte, err error) {
			if err != nil || got != n || !eof || !bytes.Equal(p[:n], data) {
				t.Fatalf("got %d eof %v, %v", got, eof, err)
			}
		}},
		{"error status", func(xid uint32) [][]byte {
			var w sunrpc.Writer
			sunrpc.EncodeAccepted(&w, xid, sunrpc.Success)
			(&nfs3.ReadRes{Status: nfs3.ErrStale}).Encode(&w)
			// Padded past the direct path's threshold with junk after the result.
			return [][]byte{append(w.Bytes(), make([]byte, bigRecord)...)}
		}, func(t *testing.T, got int, eof bool, p []byte, err error) {
			if !errors.Is(err, nfs3.ErrStale) {
				t.Fatalf("got %d, %v; want ErrStale", got, err)
			}
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cl, sv := net.Pipe()
			defer sv.Close()
			c := dialClient(t, func(context.Context, string, string) (net.Conn, error) { return cl, nil }, Options{Rsize: 1 << 20})
			go func() {
				rec, err := sunrpc.ReadRecord(sv, sunrpc.DefaultMaxRecord)
				if err != nil {
					return
				}
				frags := tc.reply(binary.BigEndian.Uint32(rec))
				for i, f := range frags {
					h := uint32(len(f))
					if i == len(frags)-1 {
						h |= 1 << 31
					}
					sv.Write(binary.BigEndian.AppendUint32(nil, h))
					sv.Write(f)
				}
			}()
			p := make([]byte, n)
			got, eof, err := c.Read(context.Background(), FH{1}, 0, p)
			tc.check(t, got, eof, p, err)
		})
	}
}

// A READ abandoned while its data is arriving (here: cancelled) returns,
// and nothing writes into the caller's buffer after it has: the client
// drops the connection that was filling it, so the rest of the reply
// goes nowhere, and the next call works on a new connection.
func TestReadAbandonedWhileDataArrives(t *testing.T) {
	const n = 1 << 20
	conns := make(chan net.Conn, 4)
	dial := func(context.Context, string, string) (net.Conn, error) {
		cl, sv := net.Pipe()
		conns <- sv
		return cl, nil
	}
	c := dialClient(t, dial, Options{Rsize: n})
	sv := <-conns
	defer sv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	half := make(chan struct{})
	rest := make(chan error, 1)
	go func() {
		rec, err := sunrpc.ReadRecord(sv, sunrpc.DefaultMaxRecord)
		if err != nil {
			rest <- err
			return
		}
		reply := readReply(binary.BigEndian.Uint32(rec), 0, true, false, bytes.Repeat([]byte{0x5a}, n))
		reply = append(binary.BigEndian.AppendUint32(nil, uint32(len(reply))|1<<31), reply...)
		cut := len(reply) - n/2
		if _, err := sv.Write(reply[:cut]); err != nil {
			rest <- err
			return
		}
		close(half)
		time.Sleep(100 * time.Millisecond) // the caller gives up meanwhile
		_, err = sv.Write(reply[cut:])
		rest <- err
	}()
	go func() { <-half; cancel() }()
	p := make([]byte, n)
	done := make(chan error, 1)
	go func() { _, _, err := c.Read(ctx, FH{1}, 0, p); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Read: %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Read did not return after its context was cancelled")
	}
	snap := append([]byte(nil), p...)
	if !bytes.Equal(p[:n/2], bytes.Repeat([]byte{0x5a}, n/2)) {
		t.Fatal("the first half did not go straight into the buffer (test setup)")
	}
	select {
	case err := <-rest:
		if err == nil {
			t.Fatal("the rest of the abandoned reply was accepted: the connection was not dropped")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the server's write of the rest neither failed nor ended")
	}
	time.Sleep(50 * time.Millisecond)
	if !bytes.Equal(p, snap) {
		t.Fatal("the buffer changed after Read returned")
	}
	// The next call dials again and works.
	go func() {
		sv2 := <-conns
		defer sv2.Close()
		rec, err := sunrpc.ReadRecord(sv2, sunrpc.DefaultMaxRecord)
		if err != nil {
			return
		}
		sunrpc.WriteRecord(sv2, readReply(binary.BigEndian.Uint32(rec), 0, false, true, []byte("ok")))
		io.Copy(io.Discard, sv2)
	}()
	q := make([]byte, 2)
	if got, eof, err := c.Read(context.Background(), FH{1}, 0, q); err != nil || got != 2 || !eof || string(q) != "ok" {
		t.Fatalf("next Read: %d %v %q %v", got, eof, q, err)
	}
}

// Without Options.Rsize, NFSv3 READs ask for 4 MiB (Mount lowers that to
// the server's rtmax): a 16 MiB ReadAt is 4 READs, not 16 of 1 MiB.
func TestDefaultRsize(t *testing.T) {
	const mib = 1 << 20
	var mu sync.Mutex
	var counts []uint32
	f := &fakeServer{}
	f.handle = func(call sunrpc.Call, r *sunrpc.Reader) ([]byte, bool) {
		var a nfs3.ReadArgs
		a.Decode(r)
		mu.Lock()
		counts = append(counts, a.Count)
		mu.Unlock()
		return readReply(call.XID, 0, true, false, pattern(a.Offset, int(a.Count))), false
	}
	c := fakeClient(t, f, Options{})
	if c.Rsize() != 4*mib || c.Wsize() != mib {
		t.Fatalf("default rsize/wsize %d/%d, want 4 MiB / 1 MiB", c.Rsize(), c.Wsize())
	}
	p := make([]byte, 16*mib)
	if n, err := c.ReadAt(context.Background(), FH{1}, p, 0); err != nil || n != len(p) {
		t.Fatalf("ReadAt: %d %v", n, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(counts) != 4 {
		t.Fatalf("%d READs (%v), want 4 of 4 MiB", len(counts), counts)
	}
	for _, n := range counts {
		if n != 4*mib {
			t.Fatalf("READ counts %v, want 4 MiB each", counts)
		}
	}
	for off := 0; off < len(p); off += 4 * mib {
		if !bytes.Equal(p[off:off+4*mib], pattern(uint64(off), 4*mib)) {
			t.Fatalf("4 MiB at %d differs", off)
		}
	}
}
