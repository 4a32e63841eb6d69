package netem

import (
	"errors"
	"fmt"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The forwarder is one event loop per link on one locked OS thread: it
// sleeps in epoll_wait on both TUN devices, a timerfd armed to the earliest
// due packet of either direction and an eventfd that Close writes, and per
// wake-up reads what arrived (bounded per device), runs it through the
// stages, and writes what is due. Why not a goroutine per reader and per
// delivery queue, as before: every packet then woke the Go netpoller
// thread, handed the goroutine to another thread (futex) and woke Go's
// sysmon on the next syscall (perf: 40 % of the forwarder's CPU was
// context switches and 10 % waking sysmon at 100 Mbit/s). One blocked
// epoll_wait holding its P costs one wake-up per event and no other thread.
// The TUN descriptors are not in Go's poller (which would also wake on
// every packet); the loop uses them non-blocking itself.

// keepAliveMs bounds one ordinary epoll_wait (a raw one ends by the next
// yield: rawWaitMs). Go's sysmon takes the P away from a thread that has
// sat in one syscall for 10 ms, and then wakes every
// 20 µs for a while and again when the loop wants its P back (perf: a
// fifth of the forwarder's CPU at 100 Mbit/s with 10 ms jitter, whose
// deliveries come in bursts with pauses); a fresh syscall every 5 ms keeps
// the P and lets sysmon sleep 10 ms at a time. 200 empty wake-ups a
// second cost far less.
//
// A raw wait ends yieldGrace after the yield is due, not at it: while the
// link is busy some arrival comes within that and yields (the yield runs
// at any wake-up once yieldEvery has passed), where a wait ending at the
// yield's due time was a wake-up with nothing to do (at 100 Mbit/s, 25 ms,
// σ 10 ms: 270-425 of ~12,000 wake-ups in 10 s). The longest stretch
// without a yield, yieldEvery + yieldGrace rounded up to whole ms, stays
// within sysmon's 10 ms.
const (
	keepAliveMs = 5
	yieldEvery  = 8 * time.Millisecond
	yieldGrace  = time.Millisecond
)

// maxReadsPerWake bounds the packets taken from one device per wake-up so
// that one busy direction cannot keep the other's deliveries waiting
// (epoll is level-triggered: what is left wakes the next epoll_wait at once).
const maxReadsPerWake = 64

// sparseGap: packets further apart than this are read one per wake-up.
const sparseGap = 200 * time.Microsecond

// fwdDir is one direction's state, owned by the loop.
type fwdDir struct {
	from, to int // TUN descriptors
	chain    Chain
	ctr      *dirCounters
	window   int64 // train window (gso.go)
	h        pktHeap
	seq      uint64
	parts    []part
	// sparse: read takes one packet per wake-up; prevRead is when the
	// last wake-up before the latest found a packet on this device.
	sparse   bool
	prevRead int64
}

// forwarder is a link's event loop.
type forwarder struct {
	l       *Link
	dirs    [2]*fwdDir
	hdr     int // virtio_net_hdr length in front of frames (0: no offload)
	pool    *bufPool
	epfd    int
	timerfd int
	stopfd  int   // eventfd; Close writes it
	armed   int64 // absolute time the timer is set for; 0 disarmed, -1 unknown
	raw     bool  // waits with epollWaitRaw (set by run)
	// lastRead and prevRead are when the loop took the last two packets
	// from either device (wakeAt).
	lastRead, prevRead int64
	scratch            Packet
	iov                [][]byte  // a joined write (deliver)
	joined             []*Packet // the packets joined into it
	free               []*Packet // recycled buffers (get, put)
}

// maxFree bounds the buffers the loop keeps for itself; more go back to
// the pool.
const maxFree = 1024

// get returns a packet buffer: the loop's own free list first, then the
// shared pool (sync.Pool's Get and Put were ~1 % of the forwarder's
// samples at 100 Mbit/s, and a GC empties it).
func (f *forwarder) get() *Packet {
	if n := len(f.free); n > 0 {
		p := f.free[n-1]
		f.free[n-1] = nil
		f.free = f.free[:n-1]
		return p
	}
	return f.pool.get()
}

func (f *forwarder) put(p *Packet) {
	if len(f.free) < maxFree {
		p.Data = nil
		f.free = append(f.free, p)
		return
	}
	f.pool.put(p)
}

const (
	evStop = iota + 2 // epoll data: 0 and 1 are the directions
	evTimer
)

// newForwarder sets up epoll, the timer and the stop eventfd.
func newForwarder(l *Link, dirs [2]*fwdDir, hdr int, pool *bufPool) (f *forwarder, err error) {
	f = &forwarder{l: l, dirs: dirs, hdr: hdr, pool: pool, epfd: -1, timerfd: -1, stopfd: -1}
	defer func() {
		if err != nil {
			f.close()
		}
	}()
	if f.epfd, err = unix.EpollCreate1(unix.EPOLL_CLOEXEC); err != nil {
		return f, fmt.Errorf("netem: epoll_create: %w", err)
	}
	if f.timerfd, err = unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC); err != nil {
		return f, fmt.Errorf("netem: timerfd_create: %w", err)
	}
	if f.stopfd, err = unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC); err != nil {
		return f, fmt.Errorf("netem: eventfd: %w", err)
	}
	for i, d := range dirs {
		if err := unix.SetNonblock(d.from, true); err != nil {
			return f, err
		}
		if err := f.watch(d.from, int32(i)); err != nil {
			return f, err
		}
	}
	if err := f.watch(f.stopfd, evStop); err != nil {
		return f, err
	}
	return f, f.watch(f.timerfd, evTimer)
}

func (f *forwarder) watch(fd int, data int32) error {
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: data}
	if err := unix.EpollCtl(f.epfd, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		return fmt.Errorf("netem: epoll_ctl: %w", err)
	}
	return nil
}

// stop makes run return; safe before run started and after it returned
// (the eventfd is closed only by close, after run).
func (f *forwarder) stop() {
	var one [8]byte
	one[0] = 1 // little-endian 1 on every Linux target Go has
	_, _ = unix.Write(f.stopfd, one[:])
}

// close releases the loop's descriptors (not the TUN devices).
func (f *forwarder) close() {
	for _, fd := range []*int{&f.epfd, &f.timerfd, &f.stopfd} {
		if *fd >= 0 {
			unix.Close(*fd)
			*fd = -1
		}
	}
}

// run is the loop. It returns nil when stopped, or the error that broke a
// device; the packets still queued are dropped with it.
func (f *forwarder) run() error {
	loops := rawLoops.Add(1)
	f.raw = loops < int32(runtime.GOMAXPROCS(0)) || (f.l.cfg.HoldP && loops == 1)
	defer rawLoops.Add(-1)
	events := make([]unix.EpollEvent, 8)
	var yielded int64
	for {
		// Yield now and then so that sysmon never has to preempt the
		// loop with a signal (it does after 10 ms on one P; and a
		// stop-the-world gets the P at once).
		now := f.l.clk.now()
		if now-yielded > int64(yieldEvery) {
			runtime.Gosched()
			yielded = now
		}
		var n int
		var err error
		if f.raw {
			// Go sees no syscall here, so the only bound the wait
			// needs is the next yield (plus its grace).
			n, err = epollWaitRaw(f.epfd, events, rawWaitMs(yielded+int64(yieldEvery+yieldGrace)-now))
		} else {
			n, err = unix.EpollWait(f.epfd, events, keepAliveMs)
		}
		if err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			return fmt.Errorf("netem: epoll_wait: %w", err)
		}
		for _, ev := range events[:n] {
			switch ev.Fd {
			case evStop:
				return nil
			case evTimer:
				f.armed = -1 // expired: readable until re-armed
			default:
				if err := f.read(f.dirs[ev.Fd]); err != nil {
					return err
				}
			}
		}
		now = f.l.clk.now()
		for _, d := range f.dirs {
			f.deliver(d, now)
		}
		f.arm(f.wakeAt(now), now)
	}
}

// read takes up to maxReadsPerWake packets from d's device. While the
// device is sparse (the last wake-up found one packet, more than
// sparseGap after the one before) it takes one and returns: at 100 Mbit/s
// nearly every wake-up finds one (a paced super-packet or an ACK), and
// reading on until EAGAIN was a second read syscall per packet (11,000 of
// 23,000 reads in 10 s). What is left makes the next epoll_wait return at
// once (level-triggered); packets closer together than sparseGap end the
// sparse mode, so at Gbit/s one wake-up reads a batch again.
func (f *forwarder) read(d *fwdDir) error {
	limit := maxReadsPerWake
	if d.sparse {
		limit = 1
	}
	got := 0
	defer func() {
		d.sparse = got == 1 && f.lastRead-d.prevRead > int64(sparseGap)
		if got > 0 {
			d.prevRead = f.lastRead
		}
	}()
	for range limit {
		p := f.get()
		n, err := unix.Read(d.from, p.buf)
		if err != nil {
			f.put(p)
			if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR) {
				return nil
			}
			return fmt.Errorf("netem: forwarder %s: %w", d.ctr.name, err)
		}
		got++
		if n < f.hdr {
			f.put(p)
			continue
		}
		p.Data = p.buf[:n]
		now := f.l.clk.now()
		f.prevRead, f.lastRead = f.lastRead, now
		if f.hdr > 0 {
			if sp, ok := parseSuper(p.Data); ok {
				d.ctr.ingressSuper(p.Data[f.hdr:], sp)
				p.Arrive = now
				d.parts = trains(d.chain, sp, &f.scratch, p.buf, now, d.window, d.parts, d.ctr.drop)
				f.pushParts(d, p, sp)
				continue
			}
		}
		ip := p.Data[f.hdr:]
		d.ctr.ingress(ip)
		p.Arrive, p.Due = now, now
		p.segs, p.wire = 1, len(ip)
		if v := d.chain.Process(p); v != Pass {
			d.ctr.drop(v)
			f.put(p)
			continue
		}
		p.first = p.Due
		d.h.push(p, &d.seq)
	}
	return nil
}

// pushParts queues the parts of super-packet p: a single part holding
// every segment goes as it came; otherwise each part is rebuilt into a
// buffer of its own and p is recycled.
func (f *forwarder) pushParts(d *fwdDir, p *Packet, sp superPacket) {
	if len(d.parts) == 1 && d.parts[0].a == 0 && d.parts[0].b == sp.segs {
		p.Due, p.first = d.parts[0].due, d.parts[0].first
		p.segs, p.wire = sp.segs, sp.wire(0, sp.segs)
		d.h.push(p, &d.seq)
		return
	}
	for _, pt := range d.parts {
		q := f.get()
		q.Data = q.buf[:buildPart(q.buf, p.Data, sp, pt.a, pt.b)]
		q.Arrive, q.Due, q.first = p.Arrive, pt.due, pt.first
		q.segs, q.wire = pt.b-pt.a, sp.wire(pt.a, pt.b)
		d.h.push(q, &d.seq)
	}
	f.put(p)
}

// deliver writes d's packets due by now (+ slack), in due order. With
// offload, a TCP frame and the frames right behind it that are due by now
// too and continue its stream go out as one super-packet, in one writev
// (join.go).
func (f *forwarder) deliver(d *fwdDir, now int64) {
	limit := now + int64(slack)
	for len(d.h) > 0 && d.h[0].Due <= limit {
		p := d.h.pop()
		late := now - p.first // before join: the earliest segment
		var err error
		if f.hdr > 0 && f.join(d, p, limit) {
			_, err = unix.Writev(d.to, f.iov)
			for _, q := range f.joined {
				f.put(q)
			}
			clear(f.iov)
			clear(f.joined)
			f.iov, f.joined = f.iov[:0], f.joined[:0]
		} else {
			_, err = unix.Write(d.to, p.Data)
		}
		if err == nil {
			d.ctr.delivered1(p.segs, p.wire, late)
		}
		f.put(p)
	}
}

// join takes from the head of d's queue the frames due by limit that
// continue p's TCP stream (joinable) and reports whether there were any;
// if so, p's headers now describe them all and f.iov holds p's frame and
// their payloads (f.joined the packets, to recycle after the write).
func (f *forwarder) join(d *fwdDir, p *Packet, limit int64) bool {
	a, ok := parseTCPFrame(p.Data)
	if !ok {
		return false
	}
	for len(d.h) > 0 && d.h[0].Due <= limit && len(f.iov) < maxJoin {
		q := d.h[0]
		b, ok := parseTCPFrame(q.Data)
		if !ok {
			break
		}
		mss, ok := joinable(a, b)
		if !ok {
			break
		}
		d.h.pop()
		if len(f.iov) == 0 {
			f.iov = append(f.iov, p.Data)
		}
		f.iov = append(f.iov, b.tcp[b.tcpHdr:])
		f.joined = append(f.joined, q)
		joinStep(&a, b, mss)
		p.segs += q.segs
		p.wire += q.wire
	}
	if len(f.iov) == 0 {
		return false
	}
	finishJoin(a)
	return true
}

// busyGaps: reads at most this many train windows apart count as bulk
// traffic (wakeAt).
const busyGaps = 2

// maxJoin bounds the pieces of one writev (IOV_MAX is 1024; 64 KiB of IP
// packet holds at most 44 segments of 1,460 bytes anyway).
const maxJoin = 64

// wakeAt is when the loop must wake next to deliver (-1: nothing held).
//
// Deliveries ride on other wake-ups while the link is busy. Every wake-up
// delivers what is due, whatever woke the loop; at 100 Mbit/s, 25 ms,
// σ 10 ms most wake-ups are arrivals (the sender's paced super-packets,
// one every ~1.2 ms) and a fifth were the timer's alone, each costing a
// sleep and a wake-up (~30 µs of the forwarder's CPU on this machine,
// perf: finish_task_switch). So while packets come close together (the
// last two reads, and the last read and now, within the train window:
// bulk traffic, where a delivery's write is followed at once by the
// receiver's ACK), the timer is set for the head's first segment's due
// time plus the window: an arrival before then delivers it, otherwise
// the timer does. A segment is then at most one train window late in all
// (1/20 of the one-way delay, at most 1 ms: the lateness offload already
// allows, gso.go), never early. A single packet after a pause (a ping, a
// request and its answer) is delivered on time, as before (with only the
// last read as the test, a ping waited for the timer on every hop:
// TestLinkRTT's median 20.4-20.5 ms against 20.2-20.3 now, 3 runs each).
// "Close together" for the last two reads is busyGaps windows: the paced
// super-packets come every ~1.1-1.2 ms, just over the 1 ms window of a
// 25 ms link, so with one window most of them looked like a packet after
// a pause and their deliveries waited for the timer (timer-only wake-ups
// 657-873 vs 446-657 in 10 s with two windows, 2 runs each, load ~5).
func (f *forwarder) wakeAt(now int64) int64 {
	at := int64(-1)
	for _, d := range f.dirs {
		if len(d.h) == 0 {
			continue
		}
		p := d.h[0]
		w := p.Due - int64(slack)
		if now-f.lastRead < d.window && f.lastRead-f.prevRead < busyGaps*d.window {
			w = max(w, p.first+d.window)
		}
		if at < 0 || w < at {
			at = w
		}
	}
	return at
}

// arm sets the timer for next (< 0: disarm): no sooner than minNap from
// now, so that at high packet rates one wake-up delivers a batch. It skips
// the syscall when the timer is already set for that.
func (f *forwarder) arm(next, now int64) {
	at := int64(0) // 0: disarmed
	if next >= 0 {
		at = max(next, now+int64(minNap))
	}
	if at == f.armed {
		return
	}
	spec := unix.ItimerSpec{}
	if at != 0 {
		spec.Value = unix.NsecToTimespec(at - now)
	}
	if err := unix.TimerfdSettime(f.timerfd, 0, &spec, nil); err == nil {
		f.armed = at
	} else {
		f.armed = -1
	}
}

// drain returns the packets still queued to the pool.
func (f *forwarder) drain() {
	for _, d := range f.dirs {
		for _, p := range d.h {
			f.put(p)
		}
		d.h = d.h[:0]
	}
}

// rawLoops counts the running loops. A loop waits with epollWaitRaw only
// if, when it starts, the loops leave at least one P (GOMAXPROCS) to the
// rest of the process, which would otherwise run only when a loop yields:
// a second link in a 2-P process, or any link at GOMAXPROCS=1, waits the
// ordinary way (the P is handed back while it sleeps; that costs sysmon's
// wake-ups, not correctness).
var rawLoops atomic.Int32

// rawWaitMs is the bound of a raw wait that should end at the next yield,
// due in ns: whole milliseconds, rounded up (rounded down, the loop woke
// just before the yield was due and waited once more), at least 1. (With
// the 5 ms bound of the ordinary wait, 463-624 of ~14,000 wake-ups in 10 s
// at 100 Mbit/s, 25 ms, σ 10 ms were timeouts with nothing to do.)
func rawWaitMs(ns int64) int {
	ms := int64(time.Millisecond)
	return int(max(1, (min(ns, int64(yieldEvery+yieldGrace))+ms-1)/ms))
}

// epollWaitRaw is epoll_wait without telling the Go scheduler that this
// thread is in a syscall (RawSyscall6): for Go the loop keeps running on
// its P. With unix.EpollWait every wait was a syscall exit that found
// sysmon asleep (all other Ps idle) and woke it, after which sysmon polled
// every 20 µs for a millisecond; perf showed that as a third of the
// forwarder's CPU. The wait is bounded (rawWaitMs), and a preemption
// request (SIGURG from sysmon or a stop-the-world) interrupts it with
// EINTR, so the P is never held for long against the runtime's will.
func epollWaitRaw(epfd int, events []unix.EpollEvent, msec int) (int, error) {
	r, _, e := unix.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(epfd), uintptr(unsafe.Pointer(&events[0])), uintptr(len(events)), uintptr(msec), 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}
