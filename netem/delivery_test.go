package netem

import (
	"context"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// What the link delivers, packet by packet, against its configuration:
// the issue's link (100 Mbit/s, 25 ms one way, σ 10 ms, 0.1 % loss, no
// reordering). UDP packets carry a sequence number and their send time;
// the chain of the client->server direction is wrapped so the test sees
// every verdict and due time the forwarder scheduled; the server socket
// takes kernel receive time stamps (SO_TIMESTAMPNS), so the goroutine
// scheduling of this test does not blur the delivery times. Checked:
//   - order: packets arrive in the order sent (no reordering beyond the
//     jitter: this link does not reorder at all);
//   - loss: exactly the packets the loss stage dropped are missing (no
//     loss the configuration did not ask for: no queue drop, no failed
//     write, no socket overflow), and their number fits 0.1 %;
//   - timing: each packet entered the link soon after it was sent and
//     left no earlier than scheduled and at most the allowed lateness
//     after (the train window, 1 ms here, plus the machine's scheduling);
//   - distribution: the scheduled one-way delays of a sparse phase (a
//     packet every 30 ms) and a bulk phase (~77 Mbit/s) match those of
//     the configured process replayed on the same arrival times with
//     other random draws (normal jitter, clipped at 0, a packet
//     never before the one ahead of it, as netem with a rate: see
//     docs/netem.md, "Jitter without reordering").

const deliveryMagic = 0x7473_6e65_7465_6d31 // "tsnetem1"

// recStage records, for every packet the wrapped chain sees, its test
// sequence number (-1 for other packets), arrival, due time and verdict.
type recStage struct {
	inner Chain
	mu    sync.Mutex
	recs  []rec
}

type rec struct {
	seq          int64
	arrive, due  int64
	v            Verdict
	sent, length int64
}

func (r *recStage) Name() string { return "record(" + r.inner.Name() + ")" }

func (r *recStage) Process(p *Packet) Verdict {
	v := r.inner.Process(p)
	seq, sent := int64(-1), int64(0)
	if d := p.Data; len(d) >= 24 && binary.BigEndian.Uint64(d[len(d)-24:]) == deliveryMagic {
		seq = int64(binary.BigEndian.Uint64(d[len(d)-16:]))
		sent = int64(binary.BigEndian.Uint64(d[len(d)-8:]))
	}
	r.mu.Lock()
	r.recs = append(r.recs, rec{seq: seq, arrive: p.Arrive, due: p.Due, v: v, sent: sent, length: int64(len(p.Data))})
	r.mu.Unlock()
	return v
}

// issueDir is the issue's link, one direction.
var issueDir = Dir{Rate: 100e6, Delay: 25 * time.Millisecond, Jitter: 10 * time.Millisecond, Loss: 0.001}

func TestLinkDeliversConfiguredDelayLossOrder(t *testing.T) {
	rs := &recStage{}
	testHookChain = func(up, down Chain) (Chain, Chain) { rs.inner = up; return Chain{rs}, down }
	l := func() *Link {
		defer func() { testHookChain = nil }() // also when startLink fails
		return startLink(t, Config{Up: issueDir, Down: issueDir, Seed: uint64(time.Now().UnixNano())})
	}()
	off := time.Now().UnixNano() - l.clk.now() // wall clock - link clock

	srv, err := l.ListenPacket(ServerSide, "udp", net.JoinHostPort(l.ServerAddr().String(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	uc := srv.(*net.UDPConn)
	uc.SetReadBuffer(16 << 20)
	rc, err := uc.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var serr error
	rc.Control(func(fd uintptr) { serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_TIMESTAMPNS, 1) })
	if serr != nil {
		t.Fatal(serr)
	}
	var cl net.Conn
	if err := l.RunClient(context.Background(), func() error {
		var err error
		cl, err = net.Dial("udp", srv.LocalAddr().String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	type got struct{ seq, recv int64 }
	var recvd []got
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf, oob := make([]byte, 2048), make([]byte, 128)
		for len(recvd) < 1e6 {
			uc.SetReadDeadline(time.Now().Add(2 * time.Second))
			n, oobn, _, _, err := uc.ReadMsgUDP(buf, oob)
			if err != nil {
				return
			}
			if n < 24 || binary.BigEndian.Uint64(buf[n-24:]) != deliveryMagic {
				continue
			}
			var ts int64 = -1
			if msgs, err := unix.ParseSocketControlMessage(oob[:oobn]); err == nil {
				for _, m := range msgs {
					if m.Header.Level == unix.SOL_SOCKET && m.Header.Type == unix.SO_TIMESTAMPNS && len(m.Data) >= 16 {
						sec := int64(binary.NativeEndian.Uint64(m.Data))
						nsec := int64(binary.NativeEndian.Uint64(m.Data[8:]))
						ts = sec*1e9 + nsec - off
					}
				}
			}
			recvd = append(recvd, got{int64(binary.BigEndian.Uint64(buf[n-16:])), ts})
		}
	}()

	// Phase 1: sparse, one packet every 30 ms. Phase 2: bulk, 8 packets
	// of 1,200 bytes every 1 ms (~77 Mbit/s of the 100).
	const sparseN, bulkN = 100, 4000
	msg := make([]byte, 1200)
	send := func(seq int) {
		n := 100
		if seq >= sparseN {
			n = len(msg)
		}
		b := msg[:n]
		binary.BigEndian.PutUint64(b[n-24:], deliveryMagic)
		binary.BigEndian.PutUint64(b[n-16:], uint64(seq))
		binary.BigEndian.PutUint64(b[n-8:], uint64(time.Now().UnixNano()-off))
		if _, err := cl.Write(b); err != nil {
			t.Errorf("send %d: %v", seq, err)
		}
	}
	for i := range sparseN {
		send(i)
		time.Sleep(30 * time.Millisecond)
	}
	for i := sparseN; i < sparseN+bulkN; i++ {
		send(i)
		if i%8 == 7 {
			time.Sleep(time.Millisecond)
		}
	}
	<-done

	// The chain's record of every test packet, by sequence number.
	rs.mu.Lock()
	recs := slices.Clone(rs.recs)
	rs.mu.Unlock()
	bySeq := map[int64]rec{}
	other := 0
	for _, r := range recs {
		if r.seq < 0 {
			other++
			continue
		}
		if _, dup := bySeq[r.seq]; dup {
			t.Fatalf("packet %d entered the link twice", r.seq)
		}
		bySeq[r.seq] = r
	}
	total := sparseN + bulkN
	if len(bySeq) != total {
		t.Fatalf("%d of %d test packets entered the link (%d other packets)", len(bySeq), total, other)
	}

	// Order and loss.
	arrived := map[int64]int64{}
	last := int64(-1)
	reordered := 0
	for _, g := range recvd {
		if g.seq <= last {
			reordered++
		}
		last = max(last, g.seq)
		arrived[g.seq] = g.recv
	}
	if reordered > 0 {
		t.Errorf("%d packets arrived after a later one (the link must not reorder)", reordered)
	}
	dropped, unexplained, resurrected := 0, 0, 0
	for seq, r := range bySeq {
		_, ok := arrived[seq]
		switch {
		case r.v != Pass && ok:
			resurrected++
		case r.v != Pass:
			dropped++
			if r.v != DropLoss {
				t.Errorf("packet %d: verdict %d, want only random loss (the queue must not overflow at 77 Mbit/s)", seq, r.v)
			}
		case !ok:
			unexplained++
		}
	}
	// 0.1 % of 4,100: mean 4.1; P(X >= 16) < 1e-5.
	t.Logf("sent %d, received %d; the loss stage dropped %d (%.3f %%, setting 0.1 %%); %d lost otherwise; %d other packets in the link",
		total, len(recvd), dropped, 100*float64(dropped)/float64(total), unexplained, other)
	if unexplained > 0 || resurrected > 0 {
		t.Errorf("%d packets passed the stages but never arrived, %d dropped ones arrived: the link lost what the configuration did not ask for", unexplained, resurrected)
	}
	if dropped >= 16 {
		t.Errorf("%d of %d packets lost, far above 0.1 %%", dropped, total)
	}

	// Timing against the schedule: entry (send -> the forwarder's read)
	// and exit (due -> kernel receive).
	var entry, exit, exitSparse []float64
	noStamp := 0
	for seq, r := range bySeq {
		recv, ok := arrived[seq]
		if !ok {
			continue
		}
		if recv < 0 {
			noStamp++
			continue
		}
		entry = append(entry, float64(r.arrive-r.sent)/1e3)
		exit = append(exit, float64(recv-r.due)/1e3)
		if seq < sparseN {
			exitSparse = append(exitSparse, float64(recv-r.due)/1e3)
		}
	}
	slices.Sort(exitSparse)
	if noStamp > 0 {
		t.Fatalf("%d packets without a receive time stamp", noStamp)
	}
	slices.Sort(entry)
	slices.Sort(exit)
	q := func(x []float64, p float64) float64 { return x[min(len(x)-1, int(p*float64(len(x))))] }
	cs := l.Counters()
	t.Logf("the forwarder's own count of writes by lateness (<=50µs, 250µs, 1ms, 2ms, 5ms, more): %v, max %d µs", cs.Up.Late, cs.Up.LateMaxUs)
	t.Logf("entry (send -> forwarder read), µs: p50 %.0f p99 %.0f max %.0f", q(entry, .5), q(entry, .99), entry[len(entry)-1])
	t.Logf("exit, sparse phase, µs: min %.0f p50 %.0f p90 %.0f max %.0f", exitSparse[0], q(exitSparse, .5), q(exitSparse, .9), exitSparse[len(exitSparse)-1])
	t.Logf("exit (scheduled -> received), µs: min %.0f p50 %.0f p90 %.0f p99 %.0f max %.0f", exit[0], q(exit, .5), q(exit, .9), q(exit, .99), exit[len(exit)-1])
	// Never early: the loop delivers at most slack (10 µs) early; 40 µs
	// more for the two clocks' read-out.
	if exit[0] < -50 {
		t.Errorf("a packet arrived %.0f µs before its due time", -exit[0])
	}
	// Late by at most the train window (1 ms) while busy; more is this
	// machine's wake-up latency (a PREEMPT_NONE kernel in a VM: at load
	// 6-9, 10-20 % of writes 1-2 ms late, a few up to 5 ms, even with the
	// loop SCHED_FIFO; stalls of 10-16 ms seen), so the median is the
	// check and the p90 only bounded loosely.
	if q(exit, .5) > 1000 || q(exit, .9) > 5000 {
		t.Errorf("deliveries late: median %.0f µs, p90 %.0f µs after their due time (allowed: ~1 ms)", q(exit, .5), q(exit, .9))
	}
	if q(entry, .5) > 500 || q(entry, .9) > 5000 {
		t.Errorf("packets entered the link late: median %.0f µs, p90 %.0f µs after they were sent", q(entry, .5), q(entry, .9))
	}

	// Distribution: the scheduled one-way delays (arrival in the link to
	// due time) per phase against the configured process replayed on the
	// same arrival times and sizes with other random draws. Together with
	// the lateness above this is the delivered delay; apart, a stall of
	// this machine (the loop not running for 10-16 ms happened at load 6)
	// does not blur the comparison.
	for _, ph := range []struct {
		name   string
		lo, hi int64
	}{{"sparse (a packet every 30 ms)", 0, sparseN}, {"bulk (~77 Mbit/s)", sparseN, int64(total)}} {
		var arrive, size []int64
		var delays []float64
		for seq := ph.lo; seq < ph.hi; seq++ {
			r := bySeq[seq]
			arrive, size = append(arrive, r.arrive), append(size, r.length)
			if r.v == Pass {
				delays = append(delays, float64(r.due-r.arrive)/1e6)
			}
		}
		stats := func(d []float64) [4]float64 {
			s := slices.Clone(d)
			slices.Sort(s)
			m, _ := meanSD(s)
			return [4]float64{m, q(s, .1), q(s, .5), q(s, .9)}
		}
		got := stats(delays)
		const sims = 1000
		var sim [4][]float64
		rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 7))
		for range sims {
			st := stats(replay(issueDir, arrive, size, rng))
			for k := range st {
				sim[k] = append(sim[k], st[k])
			}
		}
		names := [4]string{"mean", "p10", "p50", "p90"}
		for k := range sim {
			slices.Sort(sim[k])
			// The range of 1,000 replays, widened by a fifth of its
			// width on each side (8 figures per run; without the margin
			// one run in ~8 had one just outside). Jitter 25 % too wide
			// puts the bulk phase's mean and median far outside.
			lo, hi := sim[k][0], sim[k][len(sim[k])-1]
			margin := (hi - lo) / 5
			rank, _ := slices.BinarySearch(sim[k], got[k])
			t.Logf("%s: scheduled %s %.2f ms, configured process %.2f..%.2f ms (%.1f %% of replays below)", ph.name, names[k], got[k], lo, hi, 100*float64(rank)/sims)
			if got[k] < lo-margin || got[k] > hi+margin {
				t.Errorf("%s: scheduled %s one-way delay %.2f ms, outside %.2f..%.2f ms of the configured process", ph.name, names[k], got[k], lo, hi)
			}
		}
	}
}

// replay is the configured process of one direction (without loss) on
// packets arriving at the given times (ns) with the given sizes: serialised
// at d.Rate, then a normal delay (mean d.Delay, σ d.Jitter, at least 0),
// never before the packet ahead. It returns the one-way delays in ms.
func replay(d Dir, sent, size []int64, rng *rand.Rand) []float64 {
	out := make([]float64, len(sent))
	var busy, last float64
	for i, s := range sent {
		t := float64(s)
		busy = math.Max(busy, t) + float64(size[i])*8e9/float64(d.Rate)
		due := busy + math.Max(0, float64(d.Delay)+rng.NormFloat64()*float64(d.Jitter))
		due = math.Max(due, last)
		last = due
		out[i] = (due - t) / 1e6
	}
	return out
}
