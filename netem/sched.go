package netem

import (
	"container/heap"
	"runtime"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// clock is the link's monotonic clock in nanoseconds since start.
type clock struct{ base time.Time }

func newClock() clock                 { return clock{base: time.Now()} }
func (c clock) now() int64            { return int64(time.Since(c.base)) }
func (c clock) at(ns int64) time.Time { return c.base.Add(time.Duration(ns)) }

// Delivery tuning. Go's timers fire up to ~1 ms late here, which would
// smear a 0.2 ms LAN delay, while a nanosleep per packet at 1 Gbit/s (a
// packet every 12 µs) costs a context switch each. So the delivery
// goroutine waits in three ways: a wait longer than coarseWait parks on a
// Go timer (cheap; interruptible by an earlier packet or a stop) until
// about 1 ms before the due time; shorter waits nanosleep on its own
// locked OS thread with a 1 ns timer slack (accurate to ~10-60 µs), but
// never for less than minNap, so that at high packet rates a wakeup
// delivers a batch of the packets that became due meanwhile. A packet
// goes out at most slack early and typically a few tens of µs late.
const (
	slack      = 10 * time.Microsecond
	minNap     = 30 * time.Microsecond
	coarseWait = 2 * time.Millisecond
	maxBatch   = 64
)

// pktHeap orders packets by Due, then by arrival sequence (stable).
type pktHeap []*Packet

func (h pktHeap) Len() int { return len(h) }
func (h pktHeap) Less(i, j int) bool {
	if h[i].Due != h[j].Due {
		return h[i].Due < h[j].Due
	}
	return h[i].Arrive < h[j].Arrive
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
	wake    chan struct{}
	space   *sync.Cond // signalled when bytes drop (proxy backpressure)
	stopped bool
	deliver func([]*Packet) // called without the lock; packets are recycled by the caller of deliver
}

func newScheduler(clk clock, deliver func([]*Packet)) *scheduler {
	s := &scheduler{clk: clk, wake: make(chan struct{}, 1), deliver: deliver}
	s.space = sync.NewCond(&s.mu)
	return s
}

// Push queues p for delivery at p.Due.
func (s *scheduler) Push(p *Packet) {
	s.mu.Lock()
	first := len(s.h) == 0 || p.Due < s.h[0].Due
	heap.Push(&s.h, p)
	s.bytes += len(p.Data)
	s.mu.Unlock()
	if first {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
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
	s.mu.Unlock()
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// run delivers packets on time until stop. It returns the packets still
// held when stopped (undelivered) for recycling.
// With precise it owns a locked OS thread with a 1 ns timer slack (the
// forwarder: two per link); without (the proxy: two per connection) it
// naps on whatever thread it runs, accurate to ~100 µs.
func (s *scheduler) run(flush, precise bool) []*Packet {
	if precise {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		// Timer slack applies to this thread only and is reset before
		// the thread is unlocked.
		_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)
		defer func() { _ = unix.Prctl(unix.PR_SET_TIMERSLACK, 0, 0, 0, 0) }()
	}
	batch := make([]*Packet, 0, maxBatch)
	var timer *time.Timer
	for {
		s.mu.Lock()
		if len(s.h) == 0 {
			if s.stopped {
				s.mu.Unlock()
				return nil
			}
			s.mu.Unlock()
			<-s.wake
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
			s.mu.Unlock()
			if wait > coarseWait {
				if timer == nil {
					timer = time.NewTimer(wait - time.Millisecond)
				} else {
					timer.Reset(wait - time.Millisecond)
				}
				select {
				case <-timer.C:
				case <-s.wake:
					timer.Stop()
				}
				continue
			}
			nap(max(wait-slack, minNap))
			continue
		}
		limit := now + int64(slack)
		n := 0
		for len(s.h) > 0 && s.h[0].Due <= limit && len(batch) < maxBatch {
			p := heap.Pop(&s.h).(*Packet)
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

// nap sleeps d on the current OS thread without the Go timer wheel.
func nap(d time.Duration) {
	ts := unix.NsecToTimespec(int64(d))
	_ = unix.Nanosleep(&ts, nil)
}
