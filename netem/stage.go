package netem

import (
	"math"
	"math/rand/v2"
	"time"
)

// Packet is one unit travelling through a direction of a link: an IP
// packet in the forwarder, a chunk of a byte stream in the proxy. Times are
// nanoseconds on the link's monotonic clock.
type Packet struct {
	Data []byte
	// Arrive is when the packet entered the link.
	Arrive int64
	// Due is when the packet leaves the stage chain so far; stages only
	// ever move it later. The scheduler delivers at Due.
	Due int64
	buf []byte // backing buffer, reused
	// segs and wire are the TCP segments and IP bytes the packet stands
	// for on the wire (a super-packet carries several; see gso.go).
	segs, wire int
	seq        uint64 // queueing order, for ties in Due
	// first is the due time of the packet's first segment: a
	// super-packet goes at the due time of its last (gso.go), so its
	// first segment is already due - first late.
	first int64
}

// Verdict is a stage's decision about one packet.
type Verdict uint8

const (
	Pass      Verdict = iota // keep going
	DropLoss                 // lost on the wire (random loss)
	DropQueue                // tail-dropped: the queue in front of the rate limiter was full
)

// Stage is one effect on a direction of a link (loss, rate, delay+jitter).
// Process is called once per packet, in arrival order, from one goroutine,
// so stages keep their state without locks.
type Stage interface {
	Name() string
	Process(p *Packet) Verdict
}

// Chain runs stages in order and stops at the first drop.
type Chain []Stage

// Name lists the stages.
func (c Chain) Name() string {
	n := "chain("
	for i, s := range c {
		if i > 0 {
			n += ","
		}
		n += s.Name()
	}
	return n + ")"
}

// Process returns the first non-Pass verdict, or Pass.
func (c Chain) Process(p *Packet) Verdict {
	for _, s := range c {
		if v := s.Process(p); v != Pass {
			return v
		}
	}
	return Pass
}

// NewChain builds the stage chain of one direction: loss, then the rate
// limiter with its drop-tail queue, then propagation delay with jitter.
// Loss and jitter draw from a generator seeded with seed.
func NewChain(d Dir, reorder bool, seed uint64) Chain {
	var c Chain
	rng := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	if d.Loss > 0 {
		c = append(c, &Loss{P: d.Loss, rng: rng})
	}
	if d.Rate > 0 {
		c = append(c, &Rate{BitsPerSec: d.Rate, QueueBytes: d.Queue})
	}
	if d.Delay > 0 || d.Jitter > 0 {
		c = append(c, &Delay{Delay: d.Delay, Jitter: d.Jitter, Reorder: reorder, rng: rng})
	}
	return c
}

// Loss drops each packet independently with probability P (Bernoulli).
type Loss struct {
	P   float64
	rng *rand.Rand
}

func (l *Loss) Name() string { return "loss" }

func (l *Loss) Process(p *Packet) Verdict {
	if l.rng.Float64() < l.P {
		return DropLoss
	}
	return Pass
}

// Rate serialises packets at BitsPerSec behind a drop-tail queue of
// QueueBytes (0 = unbounded, used by the proxy which pushes back instead).
// It keeps the time the wire becomes free, so the queue is virtual: the
// backlog in bytes is (busyUntil - arrival) × rate. A packet leaves when
// its last bit has been sent.
type Rate struct {
	BitsPerSec int64
	QueueBytes int
	busyUntil  int64
}

func (r *Rate) Name() string { return "rate" }

func (r *Rate) Process(p *Packet) Verdict {
	t := p.Due
	if r.busyUntil < t {
		r.busyUntil = t
	}
	if r.QueueBytes > 0 {
		backlog := float64(r.busyUntil-t) * float64(r.BitsPerSec) / 8e9
		if backlog+float64(len(p.Data)) > float64(r.QueueBytes) {
			return DropQueue
		}
	}
	r.busyUntil += int64(float64(len(p.Data)) * 8e9 / float64(r.BitsPerSec))
	p.Due = r.busyUntil
	return Pass
}

// Delay adds a one-way propagation delay plus normally distributed jitter
// (standard deviation Jitter, never below zero total delay). Unless
// Reorder is set a packet never leaves before the one ahead of it, as on a
// single physical path.
type Delay struct {
	Delay, Jitter time.Duration
	Reorder       bool
	rng           *rand.Rand
	last          int64
}

func (d *Delay) Name() string { return "delay" }

func (d *Delay) Process(p *Packet) Verdict {
	x := float64(d.Delay)
	if d.Jitter > 0 {
		x += d.rng.NormFloat64() * float64(d.Jitter)
	}
	x = math.Max(x, 0)
	due := p.Due + int64(x)
	if !d.Reorder && due < d.last {
		due = d.last
	}
	d.last = due
	p.Due = due
	return Pass
}

var (
	_ Stage = (*Loss)(nil)
	_ Stage = (*Rate)(nil)
	_ Stage = (*Delay)(nil)
	_ Stage = Chain(nil)
)
