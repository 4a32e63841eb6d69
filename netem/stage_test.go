package netem

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

func TestRateSerialisesAndTailDrops(t *testing.T) {
	// 8 Mbit/s: a 1000-byte packet takes 1 ms on the wire.
	r := &Rate{BitsPerSec: 8e6, QueueBytes: 3000}
	var dues []int64
	var drops int
	for i := 0; i < 5; i++ { // five packets arrive at once
		p := &Packet{Data: make([]byte, 1000)}
		if r.Process(p) == DropQueue {
			drops++
			continue
		}
		dues = append(dues, p.Due)
	}
	ms := int64(time.Millisecond)
	// 3000-byte queue: packets 1-3 fit (backlog 0, 1000, 2000 bytes);
	// the 4th would make 4000 > 3000.
	if len(dues) != 3 || drops != 2 {
		t.Fatalf("passed %d dropped %d, want 3 and 2", len(dues), drops)
	}
	for i, d := range dues {
		if d != int64(i+1)*ms {
			t.Errorf("packet %d due %v, want %v", i, time.Duration(d), time.Duration(int64(i+1)*ms))
		}
	}
	// After the wire drained, a new packet leaves one serialisation later.
	p := &Packet{Data: make([]byte, 1000), Due: 10 * ms}
	if r.Process(p) != Pass || p.Due != 11*ms {
		t.Errorf("idle link: due %v", time.Duration(p.Due))
	}
}

func TestDelayJitterKeepsOrderAndSpread(t *testing.T) {
	d := NewChain(Dir{Delay: 20 * time.Millisecond, Jitter: 5 * time.Millisecond}, false, 1)[0].(*Delay)
	var last int64
	var sum, sum2 float64
	const n = 20000
	for i := 0; i < n; i++ {
		arrive := int64(i) * int64(100*time.Millisecond) // far apart: no clamping
		p := &Packet{Due: arrive}
		d.Process(p)
		if p.Due < last {
			t.Fatalf("reordered at %d", i)
		}
		last = p.Due
		x := float64(p.Due - arrive)
		sum += x
		sum2 += x * x
	}
	mean := sum / n
	sd := math.Sqrt(sum2/n - mean*mean)
	if math.Abs(mean-20e6) > 0.2e6 || math.Abs(sd-5e6) > 0.25e6 {
		t.Errorf("mean %v sd %v, want 20ms and 5ms", time.Duration(mean), time.Duration(sd))
	}
	// Packets close together never overtake each other without Reorder...
	d2 := NewChain(Dir{Delay: 20 * time.Millisecond, Jitter: 5 * time.Millisecond}, false, 2)[0].(*Delay)
	last = 0
	for i := 0; i < 1000; i++ {
		p := &Packet{Due: int64(i) * 1000}
		d2.Process(p)
		if p.Due < last {
			t.Fatalf("reordered")
		}
		last = p.Due
	}
	// ...and do with it.
	d3 := NewChain(Dir{Delay: 20 * time.Millisecond, Jitter: 5 * time.Millisecond}, true, 3)[0].(*Delay)
	reordered := false
	last = 0
	for i := 0; i < 1000; i++ {
		p := &Packet{Due: int64(i) * 1000}
		d3.Process(p)
		if p.Due < last {
			reordered = true
		}
		last = p.Due
	}
	if !reordered {
		t.Errorf("Reorder set but nothing reordered")
	}
}

func TestLossIsBernoulli(t *testing.T) {
	c := NewChain(Dir{Loss: 0.01}, false, 7)
	lost := 0
	const n = 200000
	for i := 0; i < n; i++ {
		if c.Process(&Packet{Data: []byte{1}}) == DropLoss {
			lost++
		}
	}
	if got := float64(lost) / n; math.Abs(got-0.01) > 0.001 {
		t.Errorf("loss %v, want 0.01", got)
	}
	if name := c.Name(); name != "chain(loss)" {
		t.Errorf("name %q", name)
	}
}

func TestSchedulerDeliversInOrderOnTime(t *testing.T) {
	clk := newClock()
	type rec struct {
		seq  int
		due  int64
		late time.Duration
	}
	got := make(chan rec, 100)
	s, err := newScheduler(clk, func(b []*Packet) {
		now := clk.now()
		for _, p := range b {
			got <- rec{int(p.Data[0]), p.Due, time.Duration(now - p.Due)}
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan []*Packet)
	go func() { done <- s.run(false) }()
	base := clk.now()
	// Pushed out of order (as with Reorder); delivered by due time.
	for _, i := range []int{3, 1, 4, 0, 2} {
		s.Push(&Packet{Data: []byte{byte(i)}, Due: base + int64(i+1)*int64(5*time.Millisecond), Arrive: int64(i)})
	}
	for want := 0; want < 5; want++ {
		select {
		case r := <-got:
			if r.seq != want {
				t.Fatalf("delivered %d, want %d", r.seq, want)
			}
			// Early by at most the batching slack; late is load-dependent,
			// so only an absurd lateness fails.
			if r.late < -slack || r.late > 200*time.Millisecond {
				t.Errorf("packet %d delivered %v off its due time", r.seq, r.late)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("scheduler delivered nothing")
		}
	}
	s.Push(&Packet{Data: []byte{9}, Due: clk.now() + int64(time.Hour)})
	s.stop()
	select {
	case rest := <-done:
		if len(rest) != 1 {
			t.Errorf("undelivered after stop: %d, want 1", len(rest))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("scheduler did not stop")
	}
}

// TestHeapKeepsQueueOrderOnTies: packets due at the same instant leave in
// the order they were queued, even with equal arrival times (the parts of
// one super-packet): otherwise a split train could be reordered.
func TestHeapKeepsQueueOrderOnTies(t *testing.T) {
	var h pktHeap
	var seq uint64
	for i := range 200 {
		h.push(&Packet{Data: []byte{byte(i)}, Due: 5, Arrive: 1}, &seq)
	}
	for want := range 200 {
		if p := h.pop(); int(p.Data[0]) != want {
			t.Fatalf("popped %d, want %d", p.Data[0], want)
		}
	}
}

// TestHeapOrder: push and pop (container/heap's algorithm on pktHeap)
// return random due times in order of Due, then of queueing, with pushes
// and pops interleaved.
func TestHeapOrder(t *testing.T) {
	var h pktHeap
	var seq uint64
	rng := rand.New(rand.NewPCG(1, 2))
	var last *Packet
	popped := 0
	for i := range 5000 {
		h.push(&Packet{Due: rng.Int64N(50)}, &seq)
		if i%3 == 2 {
			h.pop() // interleaved; order checked on the final drain
		}
	}
	for len(h) > 0 {
		p := h.pop()
		if last != nil && (p.Due < last.Due || p.Due == last.Due && p.seq < last.seq) {
			t.Fatalf("popped Due %d seq %d after Due %d seq %d", p.Due, p.seq, last.Due, last.seq)
		}
		last = p
		popped++
	}
	if popped != 5000-5000/3 {
		t.Errorf("popped %d, want %d", popped, 5000-5000/3)
	}
}
