package netem

import (
	"fmt"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// clock is the link's monotonic clock in nanoseconds since start.
type clock struct{ base time.Time }

func newClock() clock                 { return clock{base: time.Now()} }
func (c clock) now() int64            { return int64(time.Since(c.base)) }
func (c clock) at(ns int64) time.Time { return c.base.Add(time.Duration(ns)) }

// Delivery timing. One timerfd per scheduler, armed (relative, in ns) to
// the head of the heap's due time: the delivery goroutine parks in the Go
// poller on it, so one expiry is one wake-up and no thread sits in a
// blocking sleep. (A nanosleep per wait, as before, blocked a thread in a
// syscall each time; Go's sysmon then woke every 20 µs to take its P away,
// which was most of the forwarder's wake-ups and context switches.) A
// timerfd is an hrtimer without timer slack, accurate to a few µs, unlike
// Go's timers (~1 ms here). Push re-arms it only when a packet becomes the
// new head. A wake-up delivers everything due within slack, and the next
// one comes no sooner than minNap later, so that at high packet rates one
// wake-up delivers a batch. A packet goes out at most slack early and
// typically a few tens of µs late.
const (
	slack    = 10 * time.Microsecond
	minNap   = 30 * time.Microsecond
	maxBatch = 64
)

// pktHeap orders packets by Due, then by the order they were queued
// (stable: two parts of one super-packet due at the same instant keep
// their order).
type pktHeap []*Packet

func (h pktHeap) Len() int { return len(h) }
func (h pktHeap) Less(i, j int) bool {
	if h[i].Due != h[j].Due {
		return h[i].Due < h[j].Due
	}
	return h[i].seq < h[j].seq
}

// push queues p behind everything queued before it with the same Due.
// push and pop are container/heap's algorithm on this type, without the
// interface calls (heap.Pop's Less was 1.3-1.6 % of the forwarder's
// samples at 100 Mbit/s).
func (h *pktHeap) push(p *Packet, seq *uint64) {
	*seq++
	p.seq = *seq
	*h = append(*h, p)
	h.up(len(*h) - 1)
}

// pop removes and returns the packet due first.
func (h *pktHeap) pop() *Packet {
	old := *h
	n := len(old) - 1
	p := old[0]
	old[0] = old[n]
	old[n] = nil
	*h = old[:n]
	if n > 0 {
		h.down(0, n)
	}
	return p
}

func (h pktHeap) before(i, j int) bool {
	a, b := h[i], h[j]
	return a.Due < b.Due || a.Due == b.Due && a.seq < b.seq
}

func (h pktHeap) up(j int) {
	for j > 0 {
		i := (j - 1) / 2
		if i == j || !h.before(j, i) {
			break
		}
		h[i], h[j] = h[j], h[i]
		j = i
	}
}

func (h pktHeap) down(i, n int) {
	for {
		j := 2*i + 1
		if j >= n || j < 0 {
			break
		}
		if r := j + 1; r < n && h.before(r, j) {
			j = r
		}
		if !h.before(j, i) {
			break
		}
		h[i], h[j] = h[j], h[i]
		i = j
	}
}
func (h pktHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *pktHeap) Push(x any)   { *h = append(*h, x.(*Packet)) }
func (h *pktHeap) Pop() any {
	old := *h
	p := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return p
}

// scheduler holds packets until their Due time and hands them, in order,
// to deliver. One scheduler per direction; Push from one goroutine, run
// in another.
type scheduler struct {
	clk     clock
	mu      sync.Mutex
	h       pktHeap
	bytes   int // bytes held
	seq     uint64
	timer   *os.File
	tfd     int        // timer's descriptor, for timerfd_settime
	closed  bool       // timer closed: arm no more (its fd number may be reused)
	space   *sync.Cond // signalled when bytes drop (proxy backpressure)
	stopped bool
	deliver func([]*Packet) // called without the lock; packets are recycled by the caller of deliver
}

func newScheduler(clk clock, deliver func([]*Packet)) (*scheduler, error) {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("netem: timerfd_create: %w", err)
	}
	s := &scheduler{clk: clk, timer: os.NewFile(uintptr(fd), "netem-timer"), tfd: fd, deliver: deliver}
	s.space = sync.NewCond(&s.mu)
	return s, nil
}

// armLocked makes the timer expire d from now (at least 1 ns; d <= 0
// means at once). s.mu is held.
func (s *scheduler) armLocked(d int64) {
	if s.closed {
		return
	}
	spec := unix.ItimerSpec{Value: unix.NsecToTimespec(max(d, 1))}
	_ = unix.TimerfdSettime(s.tfd, 0, &spec, nil)
}

// Push queues p for delivery at p.Due.
func (s *scheduler) Push(p *Packet) {
	s.mu.Lock()
	first := len(s.h) == 0 || p.Due < s.h[0].Due
	s.h.push(p, &s.seq)
	s.bytes += len(p.Data)
	if first {
		s.armLocked(p.Due - int64(slack) - s.clk.now())
	}
	s.mu.Unlock()
}

// WaitBelow blocks while more than limit bytes are held (or until stop).
func (s *scheduler) WaitBelow(limit int) {
	s.mu.Lock()
	for s.bytes > limit && !s.stopped {
		s.space.Wait()
	}
	s.mu.Unlock()
}

// Held reports the bytes currently waiting.
func (s *scheduler) Held() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bytes
}

// stop makes run return after its current batch; with flush, run first
// delivers what is held, each at its due time (a proxy passing on
// in-flight data after the sender closed).
func (s *scheduler) stop() {
	s.mu.Lock()
	s.stopped = true
	s.space.Broadcast()
	s.armLocked(0)
	s.mu.Unlock()
}

// run delivers packets on time until stop. It returns the packets still
// held when stopped (undelivered) for recycling. It closes the timer.
func (s *scheduler) run(flush bool) []*Packet {
	defer func() {
		s.mu.Lock()
		s.closed = true
		s.timer.Close()
		s.mu.Unlock()
	}()
	batch := make([]*Packet, 0, maxBatch)
	var ticks [8]byte
	for {
		s.mu.Lock()
		if len(s.h) == 0 {
			if s.stopped {
				s.mu.Unlock()
				return nil
			}
			// Not armed: the next Push (or stop) arms the timer.
			s.mu.Unlock()
			s.wait(ticks[:])
			continue
		}
		now := s.clk.now()
		if s.stopped && !flush {
			rest := append([]*Packet(nil), s.h...)
			s.h = s.h[:0]
			s.bytes = 0
			s.mu.Unlock()
			return rest
		}
		wait := time.Duration(s.h[0].Due - now)
		if wait > slack { // (stopped here means flushing: still on time)
			s.armLocked(int64(max(wait-slack, minNap)))
			s.mu.Unlock()
			s.wait(ticks[:])
			continue
		}
		limit := now + int64(slack)
		n := 0
		for len(s.h) > 0 && s.h[0].Due <= limit && len(batch) < maxBatch {
			p := s.h.pop()
			n += len(p.Data)
			batch = append(batch, p)
		}
		s.bytes -= n
		s.space.Broadcast()
		s.mu.Unlock()
		s.deliver(batch)
		clear(batch)
		batch = batch[:0]
	}
}

// wait parks until the timer expires (or was re-armed to expire at once).
// An error (the timer closed under us) cannot happen while run runs; a
// short sleep keeps a broken timer from spinning.
func (s *scheduler) wait(buf []byte) {
	if _, err := s.timer.Read(buf); err != nil {
		time.Sleep(time.Millisecond)
	}
}
