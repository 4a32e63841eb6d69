package netem

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"
)

// tsFrame is superFrame with flags ACK (plus extra), sequence number seq,
// NOP NOP TS(tsval, tsecr) as its options and payload bytes starting at
// value seq (so that joined payloads can be checked byte by byte).
func tsFrame(seq uint32, payload, mss int, extra byte, tsval, tsecr uint32) []byte {
	f := superFrame(payload, mss)
	if payload <= mss {
		vnetHdr{flags: vnetFNeedsCsum, hdrLen: 52, csumStart: 20, csumOffset: 16}.encode(f)
	}
	tcp := f[vnetHdrLen+20:]
	binary.BigEndian.PutUint32(tcp[4:], seq)
	tcp[13] = tcpFlagACK | extra
	copy(tcp[20:], []byte{1, 1, 8, 10})
	binary.BigEndian.PutUint32(tcp[24:], tsval)
	binary.BigEndian.PutUint32(tcp[28:], tsecr)
	for i := range payload {
		tcp[32+i] = byte(int(seq) + i)
	}
	return f
}

func mustFrame(t *testing.T, f []byte) tcpFrame {
	t.Helper()
	fr, ok := parseTCPFrame(f)
	if !ok {
		t.Fatal("parseTCPFrame refused a well-formed frame")
	}
	return fr
}

// TestJoinFrames joins a GSO frame, a plain full segment (PSH) and a GSO
// frame with a short tail (PSH, FIN) of one stream, then splits the result
// as the receiving stack would (parseSuper + buildPart per segment): every
// segment has the sequence number and payload it had before, PSH and FIN
// only on the last, the first frame's TSval, valid lengths and checksums.
func TestJoinFrames(t *testing.T) {
	const mss = 1000
	a := tsFrame(5000, 3000, mss, 0, 100, 7)                     // 3 segments
	b := tsFrame(8000, 1000, mss, tcpFlagPSH, 101, 7)            // 1 plain segment
	c := tsFrame(9000, 1500, mss, tcpFlagPSH|tcpFlagFIN, 101, 7) // 1000 + 500
	run := mustFrame(t, a)
	j := append([]byte(nil), a...) // what writev sends: a's frame, then each joined payload
	for _, next := range [][]byte{b, c} {
		fn := mustFrame(t, next)
		m, ok := joinable(run, fn)
		if !ok || m != mss {
			t.Fatalf("joinable %v mss %d, want true %d", ok, m, mss)
		}
		joinStep(&run, fn, m)
		j = append(j, fn.tcp[fn.tcpHdr:]...)
	}
	finishJoin(run)
	copy(j, a[:vnetHdrLen+52]) // finishJoin fixed a's headers in place
	sp, ok := parseSuper(j)
	if !ok || sp.segs != 6 || sp.mss != mss || sp.payload != 5500 {
		t.Fatalf("joined frame: parseSuper %+v %v, want 6 segments of %d, 5500 bytes", sp, ok, mss)
	}
	ip := j[vnetHdrLen:]
	if csumFold(csumAdd(0, ip[:20])) != 0xffff || int(binary.BigEndian.Uint16(ip[2:])) != len(ip) {
		t.Error("joined frame: IP checksum or total length wrong")
	}
	if pseudo := csumAdd(0, ip[12:20]) + 6 + uint32(len(ip)-20); binary.BigEndian.Uint16(ip[36:]) != csumFold(pseudo) {
		t.Error("joined frame: TCP pseudo-header checksum wrong")
	}
	seg := make([]byte, 70000)
	for i := range sp.segs {
		n := buildPart(seg, j, sp, i, i+1)
		tcp := seg[vnetHdrLen+20 : n]
		seq := binary.BigEndian.Uint32(tcp[4:])
		if want := uint32(5000 + i*mss); seq != want {
			t.Errorf("segment %d: seq %d, want %d", i, seq, want)
		}
		want := tsFrame(seq, min(mss, 10500-int(seq)), mss, 0, 0, 0)[vnetHdrLen+52:]
		if !bytes.Equal(tcp[32:], want) {
			t.Errorf("segment %d: payload differs from the original's", i)
		}
		last := i == sp.segs-1
		if fl := tcp[13]; fl&tcpFlagACK == 0 || (fl&tcpFlagPSH != 0) != last || (fl&tcpFlagFIN != 0) != last {
			t.Errorf("segment %d: flags %#x, want ACK, PSH and FIN only on the last", i, fl)
		}
		if v := binary.BigEndian.Uint32(tcp[24:]); v != 100 {
			t.Errorf("segment %d: TSval %d, want the first frame's 100", i, v)
		}
	}
}

// TestJoinableRefuses: frames that do not continue each other's stream, or
// whose headers a GSO packet could not carry, stay apart.
func TestJoinableRefuses(t *testing.T) {
	const mss = 1000
	a := func() []byte { return tsFrame(5000, 2000, mss, 0, 100, 7) }
	next := func() []byte { return tsFrame(7000, 2000, mss, 0, 100, 7) }
	if _, ok := joinable(mustFrame(t, a()), mustFrame(t, next())); !ok {
		t.Fatal("the base case is not joinable")
	}
	for _, c := range []struct {
		name string
		a, b func([]byte)
	}{
		{"gap in sequence", nil, func(f []byte) { binary.BigEndian.PutUint32(f[vnetHdrLen+24:], 7001) }},
		{"other port", nil, func(f []byte) { f[vnetHdrLen+23]++ }},
		{"other address", nil, func(f []byte) { f[vnetHdrLen+19]++ }},
		{"other ACK number", nil, func(f []byte) { f[vnetHdrLen+31]++ }},
		{"other window", nil, func(f []byte) { f[vnetHdrLen+35]++ }},
		{"other TTL", nil, func(f []byte) { f[vnetHdrLen+8]-- }},
		{"older TSval", nil, func(f []byte) { binary.BigEndian.PutUint32(f[vnetHdrLen+44:], 99) }},
		{"other TSecr", nil, func(f []byte) { binary.BigEndian.PutUint32(f[vnetHdrLen+48:], 8) }},
		{"first has FIN", func(f []byte) { f[vnetHdrLen+33] |= tcpFlagFIN }, nil},
		{"second has SYN", nil, func(f []byte) { f[vnetHdrLen+33] |= tcpFlagSYN }},
		{"second has CWR", nil, func(f []byte) { f[vnetHdrLen+33] |= tcpFlagCWR }},
		{"second has ECE only", nil, func(f []byte) { f[vnetHdrLen+33] |= 0x40 }},
		{"other segment size", nil, func(f []byte) { binary.NativeEndian.PutUint16(f[4:], 900) }},
		{"first not whole segments", func(f []byte) { binary.NativeEndian.PutUint16(f[4:], 1500) }, nil},
	} {
		fa, fb := a(), next()
		if c.a != nil {
			c.a(fa)
		}
		if c.b != nil {
			c.b(fb)
		}
		if _, ok := joinable(mustFrame(t, fa), mustFrame(t, fb)); ok {
			t.Errorf("%s: joinable", c.name)
		}
	}
	// Two plain segments: the segment size is not known.
	p1, p2 := tsFrame(5000, 1000, mss, 0, 1, 1), tsFrame(6000, 1000, mss, 0, 1, 1)
	if _, ok := joinable(mustFrame(t, p1), mustFrame(t, p2)); ok {
		t.Error("two plain segments: joinable")
	}
	// More than 64 KiB of IP packet.
	big, more := tsFrame(5000, 64000, mss, 0, 1, 1), tsFrame(69000, 2000, mss, 0, 1, 1)
	if _, ok := joinable(mustFrame(t, big), mustFrame(t, more)); ok {
		t.Error("over 64 KiB: joinable")
	}
}

// TestLinkJoinsDeliveries sends a known stream through the link
// shape (rate limit, 25 ms one way, σ 10 ms jitter without reordering,
// loss): consecutive super-packets due at the same instant go out in one
// write, so there are fewer writes than super-packets read, and the
// stream arrives intact.
func TestLinkJoinsDeliveries(t *testing.T) {
	l := startLink(t, Symmetric(Dir{Rate: 100e6, Delay: 25 * time.Millisecond, Jitter: 10 * time.Millisecond, Loss: 0.001}))
	ln, err := l.Listen(ServerSide, "tcp", net.JoinHostPort(l.ServerAddr().String(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	const size = 24 << 20
	data := make([]byte, size)
	x := uint64(88172645463325252)
	for i := range data {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		data[i] = byte(x)
	}
	got := make(chan []byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- nil
			return
		}
		defer c.Close()
		c.SetReadDeadline(time.Now().Add(60 * time.Second))
		b, _ := io.ReadAll(c)
		got <- b
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := l.DialContext(ctx, "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c.SetWriteDeadline(time.Now().Add(60 * time.Second))
	if _, err := c.Write(data); err != nil {
		t.Fatal(err)
	}
	c.Close()
	b := <-got
	if len(b) != size || !bytes.Equal(b, data) {
		t.Fatalf("received %d bytes, want %d, equal %v", len(b), size, bytes.Equal(b, data))
	}
	supers, writes := l.up.supers.Load(), l.up.writes.Load()
	up := l.Counters().Up
	t.Logf("up: %d segments in %d super-packets read, %d delivered in %d writes", up.Packets, supers, up.Delivered, writes)
	if supers < 100 {
		t.Fatalf("only %d super-packets read: offload not at work", supers)
	}
	if writes*10 > supers*9 {
		t.Errorf("%d writes for %d super-packets read: deliveries due together were not joined", writes, supers)
	}
}
