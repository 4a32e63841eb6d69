package netem

import (
	"bytes"
	"encoding/binary"
	"strings"
	"testing"
)

// tcpPacket builds an IPv4/TCP packet with n payload bytes.
func tcpPacket(src, dst uint16, n int) []byte {
	p := make([]byte, 20+32+n)
	p[0] = 0x45
	binary.BigEndian.PutUint16(p[2:4], uint16(len(p)))
	p[9] = 6
	binary.BigEndian.PutUint16(p[20:22], src)
	binary.BigEndian.PutUint16(p[22:24], dst)
	p[20+12] = 8 << 4 // 32-byte TCP header (with options)
	return p
}

func TestParseTCP(t *testing.T) {
	src, dst, pl, ok := parseTCP(tcpPacket(40000, 9000, 100))
	if !ok || src != 40000 || dst != 9000 || pl != 100 {
		t.Errorf("got %d %d %d %v", src, dst, pl, ok)
	}
	udp := tcpPacket(1, 2, 3)
	udp[9] = 17
	if _, _, _, ok := parseTCP(udp); ok {
		t.Error("UDP parsed as TCP")
	}
	if _, _, _, ok := parseTCP(tcpPacket(1, 2, 3)[:30]); ok {
		t.Error("truncated packet parsed")
	}
}

func FuzzParseTCP(f *testing.F) {
	f.Add(tcpPacket(1234, 80, 10))
	f.Add([]byte{0x45, 0, 0, 20})
	f.Add([]byte{})
	f.Add(bytes.Repeat([]byte{0xff}, 60))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _, pl, ok := parseTCP(b)
		if ok && (pl < 0 || pl > len(b)) {
			t.Fatalf("payload %d of %d-byte packet", pl, len(b))
		}
	})
}

func TestCountersPerPort(t *testing.T) {
	up, down := newDirCounters("up", true), newDirCounters("down", false)
	for i := 0; i < 3; i++ {
		up.ingress(tcpPacket(40000+uint16(i), 9000, 1000))
		down.ingress(tcpPacket(9000, 40000+uint16(i), 0))
	}
	up.drop(DropLoss)
	down.drop(DropQueue)
	c := snapshot(up, down)
	if c.Up.Packets != 3 || c.Up.PayloadBytes != 3000 || c.Up.DroppedLoss != 1 || c.Down.DroppedQueue != 1 {
		t.Errorf("counters %+v", c)
	}
	if len(c.Ports) != 2 || c.Ports[0].Port != 9000 || c.Ports[0].Dir != "up" || c.Ports[0].Packets != 3 || c.Ports[1].Dir != "down" {
		t.Errorf("ports %+v", c.Ports)
	}
	var b strings.Builder
	if err := c.WriteTable(&b); err != nil || !strings.Contains(b.String(), "9000") {
		t.Errorf("table %q %v", b.String(), err)
	}
}

func TestCountersLateness(t *testing.T) {
	d := newDirCounters("up", true)
	for _, late := range []int64{-5_000, 0, 50_000, 51_000, 999_000, 1_500_000, 2_000_000, 7_000_000} {
		d.delivered1(1, 100, late)
	}
	s, _ := d.snapshot()
	// buckets: <=50, <=250, <=1000, <=2000, <=5000 µs, more
	want := [len(LateBoundsUs) + 1]uint64{3, 1, 1, 2, 0, 1}
	if s.Late != want || s.LateMaxUs != 7000 {
		t.Errorf("late %v max %d, want %v max 7000", s.Late, s.LateMaxUs, want)
	}
	if got := s.LateOver(1000); got != 3 {
		t.Errorf("LateOver(1000) = %d, want 3", got)
	}
	if got := s.LateOver(2000); got != 1 {
		t.Errorf("LateOver(2000) = %d, want 1", got)
	}
}
