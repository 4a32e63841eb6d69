package netem

import (
	"encoding/binary"
	"time"
)

// Offload: why the forwarder reads and writes TCP super-packets.
//
// Without offloads every 1,500-byte packet costs the forwarder a read, a
// write (which also runs the receiving namespace's TCP input on the
// forwarder's thread) and a wake-up: at 100 Mbit/s that is ~8,000 of each
// per second and a quarter of a core, at 3 Gbit/s more than a core. With
// IFF_VNET_HDR and TUNSETOFFLOAD (TSO4 + checksum offload) the sending
// namespace hands the TUN device whole TCP super-packets (up to 64 KiB,
// one virtio_net_hdr in front saying "segment at gso_size"), and the
// forwarder may write such a packet to the other device, whose namespace
// takes it as one GRO'd packet. The emulation still works per segment: the
// stage chain sees every segment of a super-packet as its own packet (its
// wire length: headers + its share of the payload), so loss, the rate
// limiter, its queue and jitter behave as for separate packets. Only the
// delivery is grouped: consecutive surviving segments whose due times lie
// within a train window (trainWindow) of the first are written as one super-packet at the
// due time of the last, i.e. up to the window late, never early; a lost
// segment, a reordered one or the window ends a train. Non-TCP packets and
// TCP packets the kernel did not coalesce pass as before, one by one.

// virtio_net_hdr (include/uapi/linux/virtio_net.h), in host byte order as
// the TUN device uses it without TUNSETVNETLE/BE.
const (
	vnetHdrLen       = 10
	vnetFNeedsCsum   = 1
	vnetGSONone      = 0
	vnetGSOTCPv4     = 1
	vnetGSOECN       = 0x80
	tunFCsum         = 0x01 // TUN_F_CSUM (include/uapi/linux/if_tun.h)
	tunFTSO4         = 0x02 // TUN_F_TSO4
	maxTrainWindow   = time.Millisecond
	trainWindowShare = 20 // at most this fraction (1/20) of the one-way delay
	tcpFlagFIN       = 0x01
	tcpFlagPSH       = 0x08
	tcpFlagCWR       = 0x80
)

// trainWindow is how late a segment may be delivered so that it can go out
// in one write with the segments after it: 1/20 of the one-way delay, at
// most 1 ms and at least minNap, the delivery timer's own granularity
// (25 ms delay: 1 ms; 1 ms delay: 50 µs; 0.1 ms or none: 30 µs).
func trainWindow(d Dir) int64 {
	return int64(max(minNap, min(maxTrainWindow, d.Delay/trainWindowShare)))
}

// vnetHdr is a decoded virtio_net_hdr.
type vnetHdr struct {
	flags, gsoType                         uint8
	hdrLen, gsoSize, csumStart, csumOffset uint16
}

func decodeVnet(b []byte) vnetHdr {
	return vnetHdr{
		flags: b[0], gsoType: b[1],
		hdrLen: binary.NativeEndian.Uint16(b[2:]), gsoSize: binary.NativeEndian.Uint16(b[4:]),
		csumStart: binary.NativeEndian.Uint16(b[6:]), csumOffset: binary.NativeEndian.Uint16(b[8:]),
	}
}

func (h vnetHdr) encode(b []byte) {
	b[0], b[1] = h.flags, h.gsoType
	binary.NativeEndian.PutUint16(b[2:], h.hdrLen)
	binary.NativeEndian.PutUint16(b[4:], h.gsoSize)
	binary.NativeEndian.PutUint16(b[6:], h.csumStart)
	binary.NativeEndian.PutUint16(b[8:], h.csumOffset)
}

// superPacket describes a TCPv4 GSO packet read from a TUN device: frame
// is vnet header + IP packet.
type superPacket struct {
	vh      vnetHdr
	ipHdr   int // IPv4 header length
	hdr     int // IPv4 + TCP header length (repeated in every segment on the wire)
	payload int // TCP payload bytes in all segments
	mss     int
	segs    int
}

// parseSuper reads frame (vnet header + IPv4 packet). ok is false for
// anything that is not a well-formed TCPv4 GSO packet of at least two
// segments; such frames are forwarded whole, as they came.
func parseSuper(frame []byte) (sp superPacket, ok bool) {
	if len(frame) < vnetHdrLen+40 {
		return sp, false
	}
	sp.vh = decodeVnet(frame)
	if sp.vh.gsoType&^vnetGSOECN != vnetGSOTCPv4 || sp.vh.gsoSize == 0 {
		return sp, false
	}
	ip := frame[vnetHdrLen:]
	if ip[0]>>4 != 4 || ip[9] != 6 {
		return sp, false
	}
	sp.ipHdr = int(ip[0]&0x0f) * 4
	if sp.ipHdr < 20 || len(ip) < sp.ipHdr+20 {
		return sp, false
	}
	doff := int(ip[sp.ipHdr+12]>>4) * 4
	sp.hdr = sp.ipHdr + doff
	if doff < 20 || len(ip) < sp.hdr {
		return sp, false
	}
	sp.payload = len(ip) - sp.hdr
	sp.mss = int(sp.vh.gsoSize)
	sp.segs = (sp.payload + sp.mss - 1) / sp.mss
	return sp, sp.segs >= 2
}

// segPayload is the TCP payload of segment i.
func (sp superPacket) segPayload(i int) int { return min(sp.mss, sp.payload-i*sp.mss) }

// wire is the IP bytes segments [a, b) occupy on the wire.
func (sp superPacket) wire(a, b int) int {
	return (b-a)*sp.hdr + min(b*sp.mss, sp.payload) - a*sp.mss
}

// buildPart writes the frame for segments [a, b) of the super-packet in
// src into dst (which must hold vnetHdrLen + wire(a, b) bytes) and returns
// its length: the headers of src with the IP total length, ID and
// checksum, the TCP sequence number, flags (FIN and PSH only on the part
// holding the last segment, CWR only on the first) and the TCP pseudo-header
// checksum fixed up, then that part's payload. One segment goes out as a
// plain packet (a GSO packet of one segment is refused by the kernel).
// Checksums stay offloaded (NEEDS_CSUM): the receiving stack takes them as
// verified, as it does for any packet that came in as a super-packet.
func buildPart(dst, src []byte, sp superPacket, a, b int) int {
	payload := min(b*sp.mss, sp.payload) - a*sp.mss
	n := vnetHdrLen + sp.hdr + payload
	copy(dst[vnetHdrLen:vnetHdrLen+sp.hdr], src[vnetHdrLen:vnetHdrLen+sp.hdr])
	copy(dst[vnetHdrLen+sp.hdr:n], src[vnetHdrLen+sp.hdr+a*sp.mss:])
	vh := vnetHdr{flags: vnetFNeedsCsum, hdrLen: uint16(sp.hdr), csumStart: uint16(sp.ipHdr), csumOffset: 16}
	if b-a >= 2 {
		vh.gsoType, vh.gsoSize = sp.vh.gsoType, sp.vh.gsoSize
	}
	vh.encode(dst)
	ip := dst[vnetHdrLen:n]
	binary.BigEndian.PutUint16(ip[2:], uint16(len(ip)))
	binary.BigEndian.PutUint16(ip[4:], binary.BigEndian.Uint16(ip[4:])+uint16(a))
	ip[10], ip[11] = 0, 0
	binary.BigEndian.PutUint16(ip[10:], ^csumFold(csumAdd(0, ip[:sp.ipHdr])))
	tcp := ip[sp.ipHdr:]
	binary.BigEndian.PutUint32(tcp[4:], binary.BigEndian.Uint32(tcp[4:])+uint32(a*sp.mss))
	if b < sp.segs {
		tcp[13] &^= tcpFlagFIN | tcpFlagPSH
	}
	if a > 0 {
		tcp[13] &^= tcpFlagCWR
	}
	// The pseudo-header sum (addresses, protocol, TCP length), not
	// complemented: what the kernel leaves for the device to finish.
	sum := csumAdd(0, ip[12:20]) + 6 + uint32(len(tcp))
	binary.BigEndian.PutUint16(tcp[16:], csumFold(sum))
	return n
}

// csumAdd adds b to a one's-complement sum as big-endian 16-bit words.
func csumAdd(sum uint32, b []byte) uint32 {
	for len(b) >= 2 {
		sum += uint32(binary.BigEndian.Uint16(b))
		b = b[2:]
	}
	if len(b) == 1 {
		sum += uint32(b[0]) << 8
	}
	return sum
}

func csumFold(sum uint32) uint16 {
	for sum>>16 != 0 {
		sum = sum&0xffff + sum>>16
	}
	return uint16(sum)
}

// part is a run of segments [a, b) delivered as one frame at due; first
// is the due time of its first segment (due - first <= the train window).
type part struct {
	a, b  int
	due   int64
	first int64
}

// trains runs every segment of sp through chain as its own packet (Data
// of the segment's wire length; its bytes are not the segment's: stages
// look only at lengths and times) and groups the survivors into parts: a
// part ends at a dropped segment, at a segment due before the one ahead
// of it (reordering) or when a segment is due more than window after the
// part's first. drop is called for every dropped segment. parts is reused.
func trains(chain Chain, sp superPacket, scratch *Packet, buf []byte, now, window int64, parts []part, drop func(Verdict)) []part {
	parts = parts[:0]
	open := false
	var cur part
	var first int64
	for i := 0; i < sp.segs; i++ {
		scratch.Data = buf[:sp.hdr+sp.segPayload(i)]
		scratch.Arrive, scratch.Due = now, now
		if v := chain.Process(scratch); v != Pass {
			drop(v)
			if open {
				parts = append(parts, cur)
				open = false
			}
			continue
		}
		due := scratch.Due
		if open && (due < cur.due || due-first > window) {
			parts = append(parts, cur)
			open = false
		}
		if !open {
			cur, first, open = part{a: i, b: i + 1, due: due, first: due}, due, true
			continue
		}
		cur.b, cur.due = i+1, due
	}
	if open {
		parts = append(parts, cur)
	}
	scratch.Data = nil
	return parts
}
