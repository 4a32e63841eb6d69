package netem

import (
	"bytes"
	"encoding/binary"
	"testing"
	"time"
)

// superFrame builds vnet header + IPv4/TCP super-packet: a 20-byte IP
// header (ID 100), a 32-byte TCP header (seq 1000, flags ACK|PSH|FIN|CWR),
// payload bytes 0,1,2,... and gso_size mss.
func superFrame(payload, mss int) []byte {
	const ipHdr, tcpHdr = 20, 32
	f := make([]byte, vnetHdrLen+ipHdr+tcpHdr+payload)
	vnetHdr{flags: vnetFNeedsCsum, gsoType: vnetGSOTCPv4, hdrLen: ipHdr + tcpHdr, gsoSize: uint16(mss), csumStart: ipHdr, csumOffset: 16}.encode(f)
	ip := f[vnetHdrLen:]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(len(ip)))
	binary.BigEndian.PutUint16(ip[4:], 100)
	ip[6] = 0x40 // DF
	ip[8], ip[9] = 64, 6
	copy(ip[12:], []byte{192, 0, 2, 1, 192, 0, 2, 2})
	tcp := ip[ipHdr:]
	binary.BigEndian.PutUint16(tcp[0:], 40000)
	binary.BigEndian.PutUint16(tcp[2:], 9000)
	binary.BigEndian.PutUint32(tcp[4:], 1000)
	tcp[12] = (tcpHdr / 4) << 4
	tcp[13] = 0x10 | tcpFlagPSH | tcpFlagFIN | tcpFlagCWR
	for i := range payload {
		tcp[tcpHdr+i] = byte(i)
	}
	return f
}

func TestBuildPartSplitsSuperPacket(t *testing.T) {
	src := superFrame(3500, 1000) // segments of 1000, 1000, 1000, 500
	sp, ok := parseSuper(src)
	if !ok || sp.segs != 4 || sp.hdr != 52 || sp.ipHdr != 20 || sp.payload != 3500 {
		t.Fatalf("parseSuper: %+v %v", sp, ok)
	}
	if w := sp.wire(0, 4); w != 4*52+3500 {
		t.Errorf("wire bytes of all segments %d, want %d (headers per segment)", w, 4*52+3500)
	}
	if w := sp.wire(3, 4); w != 52+500 {
		t.Errorf("wire bytes of the last segment %d, want 552", w)
	}
	for _, c := range []struct {
		a, b           int
		gso            bool
		psh, fin, cwr  bool
		payloadFrom, n int
	}{
		{0, 1, false, false, false, true, 0, 1000},
		{1, 3, true, false, false, false, 1000, 2000},
		{3, 4, false, true, true, false, 3000, 500},
		{0, 4, true, true, true, true, 0, 3500},
	} {
		dst := make([]byte, 70000)
		n := buildPart(dst, src, sp, c.a, c.b)
		f := dst[:n]
		vh := decodeVnet(f)
		ip := f[vnetHdrLen:]
		tcp := ip[20:]
		if n != vnetHdrLen+52+c.n {
			t.Errorf("[%d,%d): length %d, want %d", c.a, c.b, n, vnetHdrLen+52+c.n)
			continue
		}
		if got := int(binary.BigEndian.Uint16(ip[2:])); got != len(ip) {
			t.Errorf("[%d,%d): IP total length %d, want %d", c.a, c.b, got, len(ip))
		}
		if id := binary.BigEndian.Uint16(ip[4:]); id != uint16(100+c.a) {
			t.Errorf("[%d,%d): IP ID %d, want %d", c.a, c.b, id, 100+c.a)
		}
		if csumFold(csumAdd(0, ip[:20])) != 0xffff {
			t.Errorf("[%d,%d): IP header checksum wrong", c.a, c.b)
		}
		if seq := binary.BigEndian.Uint32(tcp[4:]); seq != uint32(1000+c.payloadFrom) {
			t.Errorf("[%d,%d): seq %d, want %d", c.a, c.b, seq, 1000+c.payloadFrom)
		}
		fl := tcp[13]
		if fl&tcpFlagPSH != 0 != c.psh || fl&tcpFlagFIN != 0 != c.fin || fl&tcpFlagCWR != 0 != c.cwr || fl&0x10 == 0 {
			t.Errorf("[%d,%d): flags %#x, want PSH %v FIN %v CWR %v and ACK", c.a, c.b, fl, c.psh, c.fin, c.cwr)
		}
		want := superFrame(3500, 1000)[vnetHdrLen+52+c.payloadFrom:][:c.n]
		if !bytes.Equal(tcp[32:], want) {
			t.Errorf("[%d,%d): payload differs", c.a, c.b)
		}
		if (vh.gsoType == vnetGSOTCPv4) != c.gso || c.gso && vh.gsoSize != 1000 {
			t.Errorf("[%d,%d): gso type %d size %d, want GSO %v", c.a, c.b, vh.gsoType, vh.gsoSize, c.gso)
		}
		if vh.flags&vnetFNeedsCsum == 0 || vh.csumStart != 20 || vh.csumOffset != 16 || vh.hdrLen != 52 {
			t.Errorf("[%d,%d): vnet header %+v", c.a, c.b, vh)
		}
		pseudo := csumAdd(0, ip[12:20]) + 6 + uint32(len(tcp))
		if got := binary.BigEndian.Uint16(tcp[16:]); got != csumFold(pseudo) {
			t.Errorf("[%d,%d): TCP pseudo-header checksum %#x, want %#x", c.a, c.b, got, csumFold(pseudo))
		}
	}
}

func TestParseSuperRefuses(t *testing.T) {
	f := superFrame(3500, 1000)
	plain := append([]byte(nil), f...)
	plain[1] = vnetGSONone
	one := superFrame(900, 1000) // fits one segment
	udp := append([]byte(nil), f...)
	udp[vnetHdrLen+9] = 17
	for name, b := range map[string][]byte{"no GSO": plain, "one segment": one, "UDP": udp, "short": f[:40]} {
		if _, ok := parseSuper(b); ok {
			t.Errorf("%s: taken as a TCP super-packet", name)
		}
	}
}

// dropNth drops the packets with the given indices (counting from 0).
type dropNth struct {
	n    int
	drop map[int]bool
}

func (d *dropNth) Name() string { return "dropnth" }
func (d *dropNth) Process(*Packet) Verdict {
	i := d.n
	d.n++
	if d.drop[i] {
		return DropLoss
	}
	return Pass
}

func TestTrainsPerSegment(t *testing.T) {
	src := superFrame(10*1000, 1000) // 10 segments of 1052 wire bytes
	sp, _ := parseSuper(src)
	seg := int64(1052 * 8 * 1e9 / 8e6) // one segment at 8 Mbit/s
	for _, c := range []struct {
		name   string
		drop   map[int]bool
		window int64
		want   []part
	}{
		{"no window: one part per segment", nil, 0, nil},
		{"window of 2.5 segments", nil, 5 * seg / 2, []part{{0, 3, 3 * seg, seg}, {3, 6, 6 * seg, 4 * seg}, {6, 9, 9 * seg, 7 * seg}, {9, 10, 10 * seg, 10 * seg}}},
		// Lost segments never reach the wire: the survivors close up.
		{"loss splits", map[int]bool{2: true, 3: true, 7: true}, 100 * seg, []part{{0, 2, 2 * seg, seg}, {4, 7, 5 * seg, 3 * seg}, {8, 10, 7 * seg, 6 * seg}}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.want == nil {
				for i := range 10 {
					c.want = append(c.want, part{i, i + 1, int64(i+1) * seg, int64(i+1) * seg})
				}
			}
			d := &dropNth{drop: c.drop}
			rate := &Rate{BitsPerSec: 8e6, QueueBytes: 1 << 20}
			var dropped int
			got := trains(Chain{d, rate, &Delay{Delay: 0, rng: nil}}, sp, &Packet{}, src, 0, c.window, nil, func(Verdict) { dropped++ })
			if len(got) != len(c.want) {
				t.Fatalf("parts %v, want %v", got, c.want)
			}
			for i := range got {
				if got[i] != c.want[i] {
					t.Errorf("part %d: %v, want %v", i, got[i], c.want[i])
				}
			}
			if dropped != len(c.drop) {
				t.Errorf("%d drops reported, want %d", dropped, len(c.drop))
			}
			// The rate limiter counted wire bytes per surviving segment.
			if want := int64(10-len(c.drop)) * seg; rate.busyUntil != want {
				t.Errorf("wire busy until %d, want %d", rate.busyUntil, want)
			}
		})
	}
}

func TestTrainsJitterNeverEarlyNoReorder(t *testing.T) {
	src := superFrame(40*1000, 1000)
	sp, _ := parseSuper(src)
	window := trainWindow(Dir{Delay: 25 * time.Millisecond})
	if window != int64(time.Millisecond) {
		t.Fatalf("train window for 25 ms: %v", time.Duration(window))
	}
	for d, want := range map[time.Duration]time.Duration{0: minNap, 100 * time.Microsecond: minNap, time.Millisecond: 50 * time.Microsecond, time.Second: time.Millisecond} {
		if w := time.Duration(trainWindow(Dir{Delay: d})); w != want {
			t.Errorf("train window for %v: %v, want %v", d, w, want)
		}
	}
	chain := NewChain(Dir{Rate: 100e6, Delay: 25 * time.Millisecond, Jitter: 10 * time.Millisecond}, false, 7)
	// Record each segment's own due time through a stage at the end.
	rec := &recordDue{}
	chain = append(chain, rec)
	var prev int64
	for round := range 50 {
		rec.dues = rec.dues[:0]
		now := int64(round) * int64(3*time.Millisecond)
		parts := trains(chain, sp, &Packet{}, src, now, window, nil, func(Verdict) {})
		next := 0
		for _, pt := range parts {
			if pt.a != next {
				t.Fatalf("round %d: part %v leaves a gap (no loss configured)", round, pt)
			}
			next = pt.b
			first := rec.dues[pt.a]
			for i := pt.a; i < pt.b; i++ {
				if pt.due < rec.dues[i] {
					t.Fatalf("round %d: segment %d due %d delivered early at %d", round, i, rec.dues[i], pt.due)
				}
			}
			if pt.due-first > window {
				t.Fatalf("round %d: part %v spans %v > window", round, pt, time.Duration(pt.due-first))
			}
			if pt.due < prev {
				t.Fatalf("round %d: part due %d before the previous part's %d (reordered)", round, pt.due, prev)
			}
			prev = pt.due
		}
		if next != sp.segs {
			t.Fatalf("round %d: parts cover %d of %d segments", round, next, sp.segs)
		}
	}
}

type recordDue struct{ dues []int64 }

func (r *recordDue) Name() string { return "record" }
func (r *recordDue) Process(p *Packet) Verdict {
	r.dues = append(r.dues, p.Due)
	return Pass
}

// TestTrainsOnReorderingLink: why a reordering link forwards packet by
// packet (Start). With the realistic preset's σ 10 ms jitter per segment
// and reordering, neighbouring segments are almost never due in order
// within the 1 ms train window, so a super-packet splits into parts of
// about one segment: offload would save no writes and add a rebuild
// (copy) per segment. Without reordering (due times only rise) the parts
// stay long.
func TestTrainsOnReorderingLink(t *testing.T) {
	d := Presets["realistic"].Dir
	src := superFrame(8*1448, 1448)
	sp, ok := parseSuper(src)
	if !ok {
		t.Fatal("superFrame did not parse")
	}
	for _, c := range []struct {
		reorder  bool
		min, max float64 // segments per part
	}{{true, 1, 1.1}, {false, 5, 8}} {
		chain := NewChain(d, c.reorder, 7)
		var parts []part
		segs, n := 0, 0
		for i := range 2000 {
			parts = trains(chain, sp, &Packet{}, src, int64(i)*int64(time.Millisecond), trainWindow(d), parts, func(Verdict) {})
			for _, p := range parts {
				segs += p.b - p.a
				n++
			}
		}
		per := float64(segs) / float64(n)
		t.Logf("reorder %v: %d segments in %d parts, %.2f per part", c.reorder, segs, n, per)
		if per < c.min || per > c.max {
			t.Errorf("reorder %v: %.2f segments per part, want %.1f-%.1f", c.reorder, per, c.min, c.max)
		}
	}
}
