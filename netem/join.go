package netem

import "encoding/binary"

// Joining frames at delivery: why one write per due instant, not per part.
//
// Trains (gso.go) are built from one super-packet at a time, and the
// sender hands the TUN device one super-packet per pacing interval (BBR at
// 100 Mbit/s: ~12.5 KB every ~1.2 ms). On a link with jitter and no
// reordering, though, a segment never leaves before the one ahead of it,
// so the segments of several consecutive super-packets often share one
// due instant (the latest of their jittered times), and the loop wrote
// them back to back, one write each: at 100 Mbit/s, 25 ms, σ 10 ms,
// 10,384 writes in 10 s went out in 2,124 wake-ups, and 7,956 of them
// continued the TCP stream of the frame written just before. A write is
// the most expensive thing the loop does (the receiving namespace's TCP
// input runs in it, per frame). deliver therefore joins each frame with
// the ones right behind it in the queue that are due by the same wake-up
// and continue it (joinable) into one super-packet of up to 64 KiB: the
// receiving stack sees what a GRO-capable NIC would hand it, and no
// segment leaves earlier or later than when it was written alone.
//
// What may differ from separate frames is only what a GSO packet cannot
// carry per segment: all segments of the joined frame have the first
// frame's IP ID base and TCP timestamp value (TSval). A later frame's
// TSval is accepted if it is not older than the first's and its TSecr is
// the same; a receiver that acknowledges the joined data in one ACK echoes
// the first segment's TSval anyway (RFC 7323, 4.3), which is what the
// joined frame makes it echo. The kernel's own GRO refuses to merge
// segments with different timestamps; joining them is this forwarder's
// choice, for the write it saves.

const (
	tcpFlagSYN = 0x02
	tcpFlagRST = 0x04
	tcpFlagACK = 0x10
	tcpFlagURG = 0x20
	maxIPLen   = 65535
)

// tcpFrame is a parsed vnet header + IPv4/TCP frame.
//
// While frames are joined, the first one's tcpFrame describes the whole
// run: payload and ipLen count every joined frame's payload (written after
// the first frame with writev), vh and the TCP flags in tcp are the joined
// frame's (joinStep), and finishJoin writes them into the first frame's
// headers.
type tcpFrame struct {
	vh      vnetHdr
	frame   []byte
	ip, tcp []byte // IP packet; TCP header and payload (of this frame alone)
	ipHdr   int
	tcpHdr  int
	payload int
	ipLen   int
}

func parseTCPFrame(f []byte) (t tcpFrame, ok bool) {
	if len(f) < vnetHdrLen+40 {
		return t, false
	}
	t.vh = decodeVnet(f)
	t.frame = f
	t.ip = f[vnetHdrLen:]
	t.ipLen = len(t.ip)
	if t.ip[0]>>4 != 4 || t.ip[9] != 6 || int(binary.BigEndian.Uint16(t.ip[2:])) != len(t.ip) {
		return t, false
	}
	if binary.BigEndian.Uint16(t.ip[6:])&0x3fff != 0 { // a fragment (MF or offset)
		return t, false
	}
	t.ipHdr = int(t.ip[0]&0x0f) * 4
	if t.ipHdr < 20 || len(t.ip) < t.ipHdr+20 {
		return t, false
	}
	t.tcp = t.ip[t.ipHdr:]
	t.tcpHdr = int(t.tcp[12]>>4) * 4
	if t.tcpHdr < 20 || len(t.tcp) < t.tcpHdr {
		return t, false
	}
	t.payload = len(t.tcp) - t.tcpHdr
	return t, true
}

// mss is the frame's segment size if it is a GSO frame, else 0.
func (t tcpFrame) mss() int {
	if t.vh.gsoType&^vnetGSOECN == vnetGSOTCPv4 {
		return int(t.vh.gsoSize)
	}
	return 0
}

// tsOption reports whether the TCP options are exactly NOP, NOP,
// timestamp (what Linux sends on an established connection with
// timestamps), the layout joinable accepts a different TSval in.
func (t tcpFrame) tsOption() bool {
	o := t.tcp[20:t.tcpHdr]
	return len(o) == 12 && o[0] == 1 && o[1] == 1 && o[2] == 8 && o[3] == 10
}

// joinable reports whether b continues a in one TCP stream so that the two
// can be written as one super-packet with a's headers, and the segment
// size of the result. Conditions: same addresses, ports, IP header and
// TOS/TTL/DF, same ACK number and window; b's sequence number right after
// a's payload; a carries only full segments of a known size (a GSO frame,
// or a single segment as long as b's segment size), b's segments are no
// longer; the same TCP options except a TSval in b not older than a's;
// flags: a has no FIN, SYN, RST or URG, b no SYN, RST, URG or CWR,
// otherwise equal but for PSH and b's FIN (the joined frame carries PSH
// and FIN on its last segment, as any GSO packet does: a's PSH moves to
// the end of data that reaches the receiver at the same instant; Linux's
// GRO would end a packet at a PSH, the receiving TCP ignores it; a's CWR
// stays on the first segment); and at most 64 KiB of IP packet in all.
func joinable(a, b tcpFrame) (mss int, ok bool) {
	ma, mb := a.mss(), b.mss()
	switch {
	case ma != 0 && mb != 0 && ma != mb:
		return 0, false
	case ma != 0:
		mss = ma
	case mb != 0:
		mss = mb
	default:
		return 0, false
	}
	if a.payload == 0 || a.payload%mss != 0 || b.payload == 0 || mb == 0 && b.payload > mss {
		return 0, false
	}
	if a.ipLen+b.payload > maxIPLen || a.ipHdr != b.ipHdr || a.tcpHdr != b.tcpHdr {
		return 0, false
	}
	if b.vh.gsoType&vnetGSOECN != 0 { // b's first segment has CWR: a frame of its own
		return 0, false
	}
	ai, bi := a.ip, b.ip
	// Version/IHL, TOS; flags/fragment offset, TTL, protocol; addresses;
	// IP options.
	if ai[0] != bi[0] || ai[1] != bi[1] || string(ai[6:10]) != string(bi[6:10]) ||
		string(ai[12:a.ipHdr]) != string(bi[12:b.ipHdr]) {
		return 0, false
	}
	at, bt := a.tcp, b.tcp
	if string(at[0:4]) != string(bt[0:4]) || string(at[8:12]) != string(bt[8:12]) || string(at[14:16]) != string(bt[14:16]) {
		return 0, false
	}
	if binary.BigEndian.Uint32(at[4:])+uint32(a.payload) != binary.BigEndian.Uint32(bt[4:]) {
		return 0, false
	}
	fa, fb := at[13], bt[13]
	if fa&(tcpFlagFIN|tcpFlagSYN|tcpFlagRST|tcpFlagURG) != 0 ||
		fb&(tcpFlagSYN|tcpFlagRST|tcpFlagURG|tcpFlagCWR) != 0 ||
		fa&^(tcpFlagCWR|tcpFlagPSH) != fb&^(tcpFlagPSH|tcpFlagFIN) || at[12] != bt[12] || string(at[18:20]) != string(bt[18:20]) {
		return 0, false
	}
	oa, ob := at[20:a.tcpHdr], bt[20:b.tcpHdr]
	if string(oa) == string(ob) {
		return mss, true
	}
	if !a.tsOption() || !b.tsOption() || string(oa[8:12]) != string(ob[8:12]) {
		return 0, false
	}
	if int32(binary.BigEndian.Uint32(ob[4:])-binary.BigEndian.Uint32(oa[4:])) < 0 {
		return 0, false
	}
	return mss, true
}

// joinStep adds b (joinable with segment size mss) to the run a
// describes: b's payload goes out right after a's (and those joined
// before it) in the same write.
func joinStep(a *tcpFrame, b tcpFrame, mss int) {
	a.payload += b.payload
	a.ipLen += b.payload
	a.vh = vnetHdr{flags: vnetFNeedsCsum, gsoType: vnetGSOTCPv4 | a.vh.gsoType&vnetGSOECN, hdrLen: uint16(a.ipHdr + a.tcpHdr),
		gsoSize: uint16(mss), csumStart: uint16(a.ipHdr), csumOffset: 16}
	a.tcp[13] |= b.tcp[13] & (tcpFlagPSH | tcpFlagFIN)
}

// finishJoin writes the joined frame's headers into a's frame: the GSO
// vnet header, the IP total length and header checksum, and the TCP
// pseudo-header checksum for the joined length (checksums stay offloaded,
// as in buildPart). What follows the frame in the write is the payload
// of the frames joined to it, in order.
func finishJoin(a tcpFrame) {
	a.vh.encode(a.frame)
	ip := a.ip
	binary.BigEndian.PutUint16(ip[2:], uint16(a.ipLen))
	ip[10], ip[11] = 0, 0
	binary.BigEndian.PutUint16(ip[10:], ^csumFold(csumAdd(0, ip[:a.ipHdr])))
	sum := csumAdd(0, ip[12:20]) + 6 + uint32(a.ipLen-a.ipHdr)
	binary.BigEndian.PutUint16(ip[a.ipHdr+16:], csumFold(sum))
}
