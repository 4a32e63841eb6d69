package netem

import (
	"encoding/binary"
	"fmt"
	"io"
	"sort"
	"sync"
	"sync/atomic"
	"text/tabwriter"
)

// DirStats counts one direction. Bytes are IP packet bytes (what the wire
// carries at layer 3); PayloadBytes are TCP payload bytes among them, so
// Bytes/PayloadBytes is the per-byte overhead and retransmissions show up
// as payload sent more than once (seed 000's amplification ratio, seed
// 004's transmission efficiency).
type DirStats struct {
	Dir            string `json:"dir"` // "up" (client->server) or "down"
	Packets        uint64 `json:"packets"`
	Bytes          uint64 `json:"bytes"`
	PayloadBytes   uint64 `json:"payload_bytes"`
	Delivered      uint64 `json:"delivered_packets"`
	DeliveredBytes uint64 `json:"delivered_bytes"`
	DroppedLoss    uint64 `json:"dropped_loss"`
	DroppedQueue   uint64 `json:"dropped_queue"`
	// Late counts the written frames by how late the loop woke to write
	// them, measured from the due time of the frame's first segment (a
	// train or joined frame is as late as its first segment): bucket i
	// counts lateness up to LateBoundsUs[i] µs, the last one the rest.
	// LateMaxUs is the largest. Allowed by design: the train window
	// (1/20 of the one-way delay, at most 1 ms; docs/netem.md).
	Late      [len(LateBoundsUs) + 1]uint64 `json:"late_hist"`
	LateMaxUs uint64                        `json:"late_max_us"`
}

// LateBoundsUs are the upper bounds (µs) of DirStats.Late's buckets.
var LateBoundsUs = [...]uint64{50, 250, 1000, 2000, 5000}

// LateOver returns how many writes were more than us µs late; us is one
// of LateBoundsUs (otherwise the count starts at the next bound below).
func (d DirStats) LateOver(us uint64) uint64 {
	var n uint64
	for i := range d.Late {
		if i > 0 && LateBoundsUs[i-1] >= us {
			n += d.Late[i]
		}
	}
	return n
}

// PortStats counts TCP packets of one server port in one direction, as
// offered to the link (before loss): dst port going up, src port coming
// down, so both directions of a connection to port 9000 count under 9000.
type PortStats struct {
	Dir          string `json:"dir"`
	Port         uint16 `json:"port"`
	Packets      uint64 `json:"packets"`
	Bytes        uint64 `json:"bytes"`
	PayloadBytes uint64 `json:"payload_bytes"`
}

// Counters is a snapshot of a link's counters.
type Counters struct {
	Up    DirStats    `json:"up"`
	Down  DirStats    `json:"down"`
	Ports []PortStats `json:"ports"`
}

type portCount struct{ packets, bytes, payload atomic.Uint64 }

// dirCounters is updated by one reader goroutine and one delivery
// goroutine with atomics; ports is only inserted into by the reader.
type dirCounters struct {
	name                      string
	packets, bytes, payload   atomic.Uint64
	delivered, deliveredBytes atomic.Uint64
	droppedLoss, droppedQueue atomic.Uint64
	late                      [len(LateBoundsUs) + 1]atomic.Uint64
	lateMax                   atomic.Uint64
	supers                    atomic.Uint64 // TCP super-packets among packets (tests: offload at work)
	writes                    atomic.Uint64 // frames written (tests: joined at delivery)
	serverPortIsDst           bool
	mu                        sync.RWMutex
	ports                     map[uint16]*portCount
	lastPort                  uint16 // the reader's last portCount (only it uses these)
	lastPC                    *portCount
}

func newDirCounters(name string, up bool) *dirCounters {
	return &dirCounters{name: name, serverPortIsDst: up, ports: map[uint16]*portCount{}}
}

// ingress counts a packet entering the link.
func (d *dirCounters) ingress(pkt []byte) {
	d.packets.Add(1)
	d.bytes.Add(uint64(len(pkt)))
	src, dst, payload, ok := parseTCP(pkt)
	if !ok {
		return
	}
	d.payload.Add(uint64(payload))
	port := src
	if d.serverPortIsDst {
		port = dst
	}
	pc := d.portCount(port)
	pc.packets.Add(1)
	pc.bytes.Add(uint64(len(pkt)))
	pc.payload.Add(uint64(payload))
}

// ingressSuper counts a TCP super-packet (ip: its IP packet) entering the
// link as the segments it stands for: each has its own headers on the wire.
func (d *dirCounters) ingressSuper(ip []byte, sp superPacket) {
	wire := uint64(sp.wire(0, sp.segs))
	d.supers.Add(1)
	d.packets.Add(uint64(sp.segs))
	d.bytes.Add(wire)
	d.payload.Add(uint64(sp.payload))
	t := ip[sp.ipHdr:]
	port := binary.BigEndian.Uint16(t[0:2])
	if d.serverPortIsDst {
		port = binary.BigEndian.Uint16(t[2:4])
	}
	pc := d.portCount(port)
	pc.packets.Add(uint64(sp.segs))
	pc.bytes.Add(wire)
	pc.payload.Add(uint64(sp.payload))
}

// portCount returns port's counters, adding them on first use (only the
// reader goroutine inserts).
func (d *dirCounters) portCount(port uint16) *portCount {
	if d.lastPC != nil && d.lastPort == port { // one bulk stream: no map lookup per packet
		return d.lastPC
	}
	pc := d.ports[port] // only this goroutine writes the map
	if pc == nil {
		pc = &portCount{}
		d.mu.Lock()
		d.ports[port] = pc
		d.mu.Unlock()
	}
	d.lastPort, d.lastPC = port, pc
	return pc
}

func (d *dirCounters) drop(v Verdict) {
	switch v {
	case DropLoss:
		d.droppedLoss.Add(1)
	case DropQueue:
		d.droppedQueue.Add(1)
	}
}

// delivered1 counts one write of segs packets, wire IP bytes in all,
// late ns after the due time of its first segment.
func (d *dirCounters) delivered1(segs, wire int, late int64) {
	us := uint64(max(late, 0) / 1000)
	i := 0
	for i < len(LateBoundsUs) && us > LateBoundsUs[i] {
		i++
	}
	d.late[i].Add(1)
	if us > d.lateMax.Load() { // one writer per direction
		d.lateMax.Store(us)
	}
	d.writes.Add(1)
	d.delivered.Add(uint64(segs))
	d.deliveredBytes.Add(uint64(wire))
}

func (d *dirCounters) snapshot() (DirStats, []PortStats) {
	s := DirStats{
		Dir: d.name, Packets: d.packets.Load(), Bytes: d.bytes.Load(), PayloadBytes: d.payload.Load(),
		Delivered: d.delivered.Load(), DeliveredBytes: d.deliveredBytes.Load(),
		DroppedLoss: d.droppedLoss.Load(), DroppedQueue: d.droppedQueue.Load(),
		LateMaxUs: d.lateMax.Load(),
	}
	for i := range d.late {
		s.Late[i] = d.late[i].Load()
	}
	d.mu.RLock()
	var ps []PortStats
	for port, c := range d.ports {
		ps = append(ps, PortStats{Dir: d.name, Port: port, Packets: c.packets.Load(), Bytes: c.bytes.Load(), PayloadBytes: c.payload.Load()})
	}
	d.mu.RUnlock()
	return s, ps
}

func snapshot(up, down *dirCounters) Counters {
	var c Counters
	var pu, pd []PortStats
	c.Up, pu = up.snapshot()
	c.Down, pd = down.snapshot()
	c.Ports = append(pu, pd...)
	sort.Slice(c.Ports, func(i, j int) bool {
		if c.Ports[i].Port != c.Ports[j].Port {
			return c.Ports[i].Port < c.Ports[j].Port
		}
		return c.Ports[i].Dir > c.Ports[j].Dir // up before down
	})
	return c
}

// parseTCP reads the ports and payload length of an IPv4/TCP packet. It
// reads only fixed header fields, and only after checking the lengths:
// a truncated or non-TCP packet just returns ok=false.
func parseTCP(p []byte) (src, dst uint16, payload int, ok bool) {
	if len(p) < 20 || p[0]>>4 != 4 || p[9] != 6 {
		return 0, 0, 0, false
	}
	ihl := int(p[0]&0x0f) * 4
	total := int(binary.BigEndian.Uint16(p[2:4]))
	if ihl < 20 || total > len(p) || total < ihl+20 {
		return 0, 0, 0, false
	}
	if binary.BigEndian.Uint16(p[6:8])&0x1fff != 0 { // a non-first fragment has no TCP header
		return 0, 0, 0, false
	}
	t := p[ihl:total]
	off := int(t[12]>>4) * 4
	if off < 20 || off > len(t) {
		return 0, 0, 0, false
	}
	return binary.BigEndian.Uint16(t[0:2]), binary.BigEndian.Uint16(t[2:4]), len(t) - off, true
}

// WriteTable prints the counters as a table.
func (c Counters) WriteTable(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "dir\tpackets\tbytes\ttcp payload\tdelivered\tlost\tqueue drops\tloss %\t")
	for _, d := range []DirStats{c.Up, c.Down} {
		lossPct := 0.0
		if d.Packets > 0 {
			lossPct = 100 * float64(d.DroppedLoss+d.DroppedQueue) / float64(d.Packets)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%.3f\t\n", d.Dir, d.Packets, d.Bytes, d.PayloadBytes, d.Delivered, d.DroppedLoss, d.DroppedQueue, lossPct)
	}
	fmt.Fprintln(tw, "\t\t\t\t\t\t\t\t")
	fmt.Fprintln(tw, "writes late\t<=50µs\t<=250µs\t<=1ms\t<=2ms\t<=5ms\t>5ms\tmax µs\t")
	for _, d := range []DirStats{c.Up, c.Down} {
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%d\t%d\t%d\t\n", d.Dir, d.Late[0], d.Late[1], d.Late[2], d.Late[3], d.Late[4], d.Late[5], d.LateMaxUs)
	}
	if len(c.Ports) > 0 {
		fmt.Fprintln(tw, "\t\t\t\t\t\t\t\t")
		fmt.Fprintln(tw, "tcp port\tdir\tpackets\tbytes\ttcp payload\twire/payload\t\t\t")
		for _, p := range c.Ports {
			ratio := "-"
			if p.PayloadBytes > 0 {
				ratio = fmt.Sprintf("%.3f", float64(p.Bytes)/float64(p.PayloadBytes))
			}
			fmt.Fprintf(tw, "%d\t%s\t%d\t%d\t%d\t%s\t\t\t\n", p.Port, p.Dir, p.Packets, p.Bytes, p.PayloadBytes, ratio)
		}
	}
	return tw.Flush()
}
