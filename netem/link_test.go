package netem

import (
	"context"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tristore/tristore/internal/testutil"
)

// startLink starts a link for a test and checks on cleanup that its
// namespaces are gone.
func startLink(t *testing.T, cfg Config) *Link {
	t.Helper()
	testutil.NeedRoot(t, "network namespaces and /dev/net/tun")
	testutil.NeedTUN(t)
	l, err := Start(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := l.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
		assertGone(t, l.cfg.Name)
	})
	return l
}

// assertGone checks that no namespace named prefix* is left.
func assertGone(t *testing.T, prefix string) {
	t.Helper()
	out, err := exec.Command("ip", "netns", "list").CombinedOutput()
	if err != nil {
		t.Fatalf("ip netns list: %v %s", err, out)
	}
	if strings.Contains(string(out), prefix) {
		t.Errorf("namespace %s* left behind:\n%s", prefix, out)
	}
	if _, err := os.Stat(NetnsDir + "/" + prefix + "-c"); err == nil {
		t.Errorf("%s/%s-c left behind", NetnsDir, prefix)
	}
}

var rttLine = regexp.MustCompile(`time=([0-9.]+) ms`)

// pingRTTs pings the server side from the client namespace.
func pingRTTs(t *testing.T, l *Link, count int, interval string) []float64 {
	t.Helper()
	testutil.NeedCmd(t, "ping")
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := l.Command(ctx, ClientSide, "ping", "-n", "-c", strconv.Itoa(count), "-i", interval, "-W", "5", l.ServerAddr().String()).CombinedOutput()
	if err != nil {
		t.Fatalf("ping: %v\n%s", err, out)
	}
	var rtts []float64
	for _, m := range rttLine.FindAllStringSubmatch(string(out), -1) {
		v, _ := strconv.ParseFloat(m[1], 64)
		rtts = append(rtts, v)
	}
	if len(rtts) < count*9/10 {
		t.Fatalf("only %d of %d ping replies:\n%s", len(rtts), count, out)
	}
	return rtts
}

func meanSD(x []float64) (float64, float64) {
	var s, s2 float64
	for _, v := range x {
		s += v
	}
	m := s / float64(len(x))
	for _, v := range x {
		s2 += (v - m) * (v - m)
	}
	return m, math.Sqrt(s2 / float64(len(x)-1))
}

func TestLinkRTT(t *testing.T) {
	l := startLink(t, Symmetric(Dir{Delay: 10 * time.Millisecond}))
	rtts := pingRTTs(t, l, 30, "0.02")
	m, _ := meanSD(rtts)
	// Median is robust against a scheduling hiccup on a loaded machine.
	med := median(rtts)
	t.Logf("configured RTT 20 ms: mean %.2f ms, median %.2f ms", m, med)
	if math.Abs(med-20) > 2 {
		t.Errorf("median RTT %.2f ms, want 20 ms ± 10 %%", med)
	}
}

func median(x []float64) float64 {
	y := append([]float64(nil), x...)
	for i := range y { // insertion sort: tiny inputs
		for j := i; j > 0 && y[j] < y[j-1]; j-- {
			y[j], y[j-1] = y[j-1], y[j]
		}
	}
	return y[len(y)/2]
}

func TestLinkJitter(t *testing.T) {
	// Jitter on one direction only, so the RTT's spread is exactly it.
	cfg := Config{Up: Dir{Delay: 20 * time.Millisecond, Jitter: 5 * time.Millisecond}, Down: Dir{Delay: 20 * time.Millisecond}}
	l := startLink(t, cfg)
	rtts := pingRTTs(t, l, 200, "0.02")
	m, sd := meanSD(rtts)
	t.Logf("configured 40 ms ± σ 5 ms: mean %.2f ms, sd %.2f ms over %d", m, sd, len(rtts))
	if sd < 3.75 || sd > 6.25 {
		t.Errorf("RTT standard deviation %.2f ms, want 5 ms ± 25 %%", sd)
	}
	if math.Abs(m-40) > 4 {
		t.Errorf("mean RTT %.2f ms, want 40 ms ± 10 %%", m)
	}
}

func TestLinkTCPGoodput(t *testing.T) {
	const rate = 50e6
	l := startLink(t, Symmetric(Dir{Rate: rate, Delay: 5 * time.Millisecond}))
	ln, err := l.Listen(ServerSide, "tcp", net.JoinHostPort(l.ServerAddr().String(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var got atomic.Int64
	var mark0, mark1 int64
	recvDone := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			recvDone <- err
			return
		}
		defer c.Close()
		buf := make([]byte, 256<<10)
		for {
			n, err := c.Read(buf)
			got.Add(int64(n))
			if err != nil {
				if err == io.EOF {
					err = nil
				}
				recvDone <- err
				return
			}
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := l.DialContext(ctx, "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	sendDone := make(chan struct{})
	go func() {
		defer close(sendDone)
		buf := make([]byte, 64<<10)
		for i := 0; i < 1_000_000; i++ {
			select {
			case <-stop:
				return
			default:
			}
			c.SetWriteDeadline(time.Now().Add(10 * time.Second))
			if _, err := c.Write(buf); err != nil {
				return
			}
		}
	}()
	// Skip slow start, then measure 3 s of steady state at the receiver.
	time.Sleep(time.Second)
	mark0 = got.Load()
	t0 := time.Now()
	time.Sleep(3 * time.Second)
	mark1 = got.Load()
	el := time.Since(t0)
	close(stop)
	c.Close()
	<-sendDone
	<-recvDone
	goodput := float64(mark1-mark0) * 8 / el.Seconds()
	frac := goodput / rate
	t.Logf("goodput %.2f Mbit/s = %.1f %% of %.0f Mbit/s; counters %+v", goodput/1e6, 100*frac, rate/1e6, l.Counters().Up)
	if frac < 0.85 || frac > 1.0 {
		t.Errorf("TCP goodput %.1f %% of the rate, want 85-100 %%", 100*frac)
	}
}

func TestLinkLoss(t *testing.T) {
	const p = 0.01
	l := startLink(t, Config{Up: Dir{Loss: p}})
	srv, err := l.ListenPacket(ServerSide, "udp", net.JoinHostPort(l.ServerAddr().String(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	srv.(*net.UDPConn).SetReadBuffer(8 << 20)
	var cl net.Conn
	if err := l.RunClient(context.Background(), func() error {
		var err error
		cl, err = net.Dial("udp", srv.LocalAddr().String())
		return err
	}); err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	const n = 60000
	recvd := make(chan int, 1)
	go func() {
		buf := make([]byte, 2048)
		k := 0
		for {
			srv.SetReadDeadline(time.Now().Add(2 * time.Second))
			if _, _, err := srv.ReadFrom(buf); err != nil {
				recvd <- k
				return
			}
			k++
		}
	}()
	// ~20,000 packets/s in bursts of 100: modest enough that neither
	// socket buffers nor the TUN queue drop anything themselves.
	msg := make([]byte, 64)
	for i := 0; i < n; i++ {
		if _, err := cl.Write(msg); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		if i%100 == 99 {
			time.Sleep(5 * time.Millisecond)
		}
	}
	k := <-recvd
	measured := 1 - float64(k)/n
	cs := l.Counters()
	t.Logf("sent %d, received %d: loss %.3f %% (setting %.1f %%); link counted %d offered, %d lost", n, k, 100*measured, 100*p, cs.Up.Packets, cs.Up.DroppedLoss)
	if measured < p/2 || measured > 2*p {
		t.Errorf("measured loss %.4f, want within a factor 2 of %.4f", measured, p)
	}
}

func TestLinksSideBySide(t *testing.T) {
	// Two links at once with the same addresses: separate namespaces.
	a := startLink(t, Symmetric(Dir{Delay: time.Millisecond}))
	b := startLink(t, Symmetric(Dir{Delay: 5 * time.Millisecond}))
	if a.Namespace(ClientSide) == b.Namespace(ClientSide) {
		t.Fatal("two links share a namespace name")
	}
	ra, rb := median(pingRTTs(t, a, 5, "0.05")), median(pingRTTs(t, b, 5, "0.05"))
	if !(ra < rb) || rb < 10 {
		t.Errorf("rtt a %.2f ms, b %.2f ms: want a ~2 ms, b ~10 ms", ra, rb)
	}
}

func TestForwarderPanicTearsDown(t *testing.T) {
	testHookChain = func(up, down Chain) (Chain, Chain) {
		return append(up, panicStage{}), down
	}
	defer func() { testHookChain = nil }()
	l := startLink(t, Config{})
	// The first packet up makes the forwarder panic.
	_ = l.RunClient(context.Background(), func() error {
		c, err := net.Dial("udp", net.JoinHostPort(l.ServerAddr().String(), "9"))
		if err == nil {
			c.Write([]byte("x"))
			c.Close()
		}
		return err
	})
	select {
	case err := <-l.Err():
		if !strings.Contains(err.Error(), "panic") {
			t.Errorf("Err: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no error after a forwarder panic")
	}
	for i := 0; i < 100; i++ { // Close runs in the background and removes -c, then -s
		_, errC := os.Stat(NetnsDir + "/" + l.cfg.Name + "-c")
		_, errS := os.Stat(NetnsDir + "/" + l.cfg.Name + "-s")
		if os.IsNotExist(errC) && os.IsNotExist(errS) {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	assertGone(t, l.cfg.Name)
}

type panicStage struct{}

func (panicStage) Name() string            { return "panic" }
func (panicStage) Process(*Packet) Verdict { panic(fmt.Sprint("test: forwarder crash")) }

func TestStartRefusesBeforeCreating(t *testing.T) {
	name := fmt.Sprintf("ts-%d-bad", os.Getpid())
	_, err := Start(context.Background(), Config{Name: name, Up: Dir{Loss: 3}})
	if err == nil {
		t.Fatal("loss 3 accepted")
	}
	if _, err := os.Stat(NetnsDir + "/" + name + "-c"); err == nil {
		t.Error("namespace created for an invalid config")
	}
	if os.Geteuid() != 0 {
		if _, err := Start(context.Background(), Config{}); err != ErrNotRoot {
			t.Errorf("not root: %v", err)
		}
	}
}

// TestLinkOffloadIntegrity sends a known byte stream through a lossy,
// rate-limited link with offload on: the super-packets are split around
// lost segments and rebuilt (sequence numbers, lengths, flags), so any
// mistake there corrupts or stalls the stream. Loss and packets are
// counted per segment.
func TestLinkOffloadIntegrity(t *testing.T) {
	const loss = 0.01
	l := startLink(t, Symmetric(Dir{Rate: 200e6, Delay: 2 * time.Millisecond, Loss: loss}))
	ln, err := l.Listen(ServerSide, "tcp", net.JoinHostPort(l.ServerAddr().String(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	const size = 8 << 20
	data := make([]byte, size)
	x := uint64(88172645463325252)
	for i := range data { // xorshift: incompressible, reproducible
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		data[i] = byte(x)
	}
	got := make(chan []byte, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- nil
			return
		}
		defer c.Close()
		c.SetReadDeadline(time.Now().Add(60 * time.Second))
		b, _ := io.ReadAll(c)
		got <- b
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := l.DialContext(ctx, "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c.SetWriteDeadline(time.Now().Add(60 * time.Second))
	if _, err := c.Write(data); err != nil {
		t.Fatal(err)
	}
	c.Close()
	b := <-got
	if len(b) != size || !bytesEqual(b, data) {
		t.Fatalf("received %d bytes, want %d, equal %v", len(b), size, bytesEqual(b, data))
	}
	up := l.Counters().Up
	supers := l.up.supers.Load()
	lost := float64(up.DroppedLoss) / float64(up.Packets)
	t.Logf("up: %d segments (%d super-packets), %d lost (%.2f %%), %d delivered", up.Packets, supers, up.DroppedLoss, 100*lost, up.Delivered)
	if supers == 0 {
		t.Error("no TCP super-packet was read: offload not at work")
	}
	if up.Packets < size/1500 {
		t.Errorf("%d packets counted for %d bytes: not per segment", up.Packets, size)
	}
	if lost < loss/2 || lost > 2*loss {
		t.Errorf("per-segment loss %.4f, want within a factor 2 of %.2f", lost, loss)
	}
}

func bytesEqual(a, b []byte) bool { return string(a) == string(b) }

// echoMedian sends one byte n times through an in-process echo server on
// l's server side, one at a time, and returns the median round trip (ms).
func echoMedian(t *testing.T, l *Link, n int) float64 {
	t.Helper()
	ln, err := l.Listen(ServerSide, "tcp", net.JoinHostPort(l.ServerAddr().String(), "0"))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		io.Copy(c, c)
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := l.DialContext(ctx, "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	var rtts []float64
	b := []byte{1}
	for range n {
		t0 := time.Now()
		if _, err := c.Write(b); err != nil {
			t.Fatal(err)
		}
		if _, err := io.ReadFull(c, b); err != nil {
			t.Fatal(err)
		}
		rtts = append(rtts, float64(time.Since(t0).Microseconds())/1000)
	}
	return median(rtts)
}

// TestLinkLeavesAPToOthers: at GOMAXPROCS=1 the forwarder must not keep
// the only P while it waits (a raw epoll_wait would): an in-process echo
// across a 1 ms link would then wait for the loop's yields (8 ms) on
// every hop.
func TestLinkLeavesAPToOthers(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	l := startLink(t, Symmetric(Dir{Delay: time.Millisecond}))
	med := echoMedian(t, l, 40)
	t.Logf("GOMAXPROCS=1, 2 ms RTT link: in-process echo median %.2f ms", med)
	if med > 5 {
		t.Errorf("echo median %.2f ms on a 2 ms RTT link: the forwarder starves the process's other goroutines", med)
	}
}

// TestLinkReorderForwardsPacketByPacket: a reordering link does not use
// offload (it changed TCP's goodput there; see Start), so no super-packet
// is read even for a bulk TCP transfer.
func TestLinkReorderForwardsPacketByPacket(t *testing.T) {
	l := startLink(t, Symmetric(Dir{Delay: time.Millisecond, Jitter: 200 * time.Microsecond}))
	r := startLink(t, Config{Up: Dir{Delay: time.Millisecond, Jitter: 200 * time.Microsecond}, Down: Dir{Delay: time.Millisecond}, Reorder: true})
	for _, c := range []struct {
		l          *Link
		wantSupers bool
	}{{l, true}, {r, false}} {
		ln, err := c.l.Listen(ServerSide, "tcp", net.JoinHostPort(c.l.ServerAddr().String(), "0"))
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan int64, 1)
		go func() {
			s, err := ln.Accept()
			if err != nil {
				done <- 0
				return
			}
			s.SetReadDeadline(time.Now().Add(30 * time.Second))
			n, _ := io.Copy(io.Discard, s)
			s.Close()
			done <- n
		}()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		cl, err := c.l.DialContext(ctx, "tcp", ln.Addr().String())
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		cl.SetWriteDeadline(time.Now().Add(30 * time.Second))
		if _, err := cl.Write(make([]byte, 4<<20)); err != nil {
			t.Fatal(err)
		}
		cl.Close()
		if n := <-done; n != 4<<20 {
			t.Fatalf("received %d bytes, want %d", n, 4<<20)
		}
		ln.Close()
		if supers := c.l.up.supers.Load(); (supers > 0) != c.wantSupers {
			t.Errorf("reorder %v: %d super-packets read, want some: %v", c.l.cfg.Reorder, supers, c.wantSupers)
		}
	}
}

// TestLinkHoldP: with HoldP the first link's loop waits without releasing
// the process's only P (no thread hand-off per yield, see Config.HoldP),
// and the process's other goroutines still run at the loop's yields: an
// in-process echo over a 2 ms RTT link at GOMAXPROCS=1 waits for them
// (up to 8 ms a hop) but completes.
func TestLinkHoldP(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	cfg := Symmetric(Dir{Delay: time.Millisecond})
	cfg.HoldP = true
	l := startLink(t, cfg)
	med := echoMedian(t, l, 20)
	t.Logf("GOMAXPROCS=1, HoldP, 2 ms RTT link: in-process echo median %.2f ms", med)
	if !l.fwd.raw {
		t.Error("the loop waits the ordinary way: HoldP did not let it keep the only P")
	}
	if med > 40 {
		t.Errorf("echo median %.2f ms: the loop does not yield the P every 8 ms", med)
	}
}
