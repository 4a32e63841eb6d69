package netem

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/vishvananda/netns"
)

// Side names one end of a link.
type Side int

const (
	ClientSide Side = iota
	ServerSide
)

func (s Side) String() string {
	if s == ServerSide {
		return "server"
	}
	return "client"
}

// Link is a running emulated link between two namespaces.
type Link struct {
	cfg            Config
	client, server *side
	clk            clock
	up, down       *dirCounters
	fwd            *forwarder
	wg             sync.WaitGroup
	closeOnce      sync.Once
	closeErr       error
	done           chan struct{}
	fwdErr         chan error
	log            *slog.Logger
	realtime       bool
}

// Start validates cfg, creates the two namespaces and their TUN devices
// and starts the forwarder. Everything is removed again by Close, and by
// Start itself if it fails halfway. ctx only bounds setup; stop the link
// with Close.
func Start(ctx context.Context, cfg Config) (l *Link, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := CheckHost(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	// A SIGKILLed netem process could not close its link; clear what such
	// processes left before adding more. A failure here does not stop this
	// link: the leftovers only cost memory and `netem cleanup` remains.
	if removed, err := removeDeadOwners(); err != nil {
		slog.Warn("netem: removing leftovers of dead netem processes", "removed", removed, "err", err)
	} else if len(removed) > 0 {
		slog.Info("netem: removed leftovers of dead netem processes", "removed", removed)
	}
	if cfg.Name == "" {
		var b [3]byte
		_, _ = rand.Read(b[:])
		cfg.Name = fmt.Sprintf("ts-%d-%s", os.Getpid(), hex.EncodeToString(b[:]))
	}
	if cfg.Seed == 0 {
		cfg.Seed = uint64(time.Now().UnixNano())
	}
	l = &Link{cfg: cfg, clk: newClock(), done: make(chan struct{}), fwdErr: make(chan error, 2), log: slog.Default()}
	defer func() {
		if err != nil {
			l.Close()
			l = nil
		}
	}()
	// The devices live in their own namespaces, so one fixed name each is
	// unique; several links at once differ by namespace.
	// A reordering link stays packet by packet: with σ 10 ms of jitter
	// per segment (realistic) trains split at nearly every segment (1.03
	// segments per part, TestTrainsOnReorderingLink), so offload saves no
	// writes and adds a rebuild per segment (median 7.4 vs 6.6 % of a core
	// in 9 paired runs, docs/bench/profiles/netem-realistic-offload-s7.txt).
	// Its goodput was not lower there (median 7.4 vs 8.0 Mbit/s, paired
	// differences -4.4 to +2.9): the 6.5 vs 8.9 Mbit/s of an earlier run
	// (3 rounds) was within one TCP stream's spread on that link.
	offload := !cfg.NoOffload && !cfg.Reorder
	if l.client, err = newSide(cfg.Name+"-c", "tsc0", cfg.ClientAddr, cfg.PrefixLen, cfg.MTU, offload); err != nil {
		return l, err
	}
	if err := ctx.Err(); err != nil {
		return l, err
	}
	if l.server, err = newSide(cfg.Name+"-s", "tss0", cfg.ServerAddr, cfg.PrefixLen, cfg.MTU, offload); err != nil {
		return l, err
	}
	if !cfg.NoRealtime {
		l.realtime = enterRealtime()
		if !l.realtime {
			l.log.Warn("netem: could not make the forwarder realtime (SCHED_FIFO); timing will suffer on a loaded machine")
		}
	}
	l.up = newDirCounters("up", true)
	l.down = newDirCounters("down", false)
	size := cfg.MTU
	if offload {
		size = vnetHdrLen + 65535 // a TCP super-packet
	}
	pool := newBufPool(size)
	upChain, downChain := NewChain(cfg.Up, cfg.Reorder, cfg.Seed), NewChain(cfg.Down, cfg.Reorder, cfg.Seed+1)
	if testHookChain != nil {
		upChain, downChain = testHookChain(upChain, downChain)
	}
	hdr := 0
	if offload {
		hdr = vnetHdrLen
	}
	dir := func(from, to *side, chain Chain, ctr *dirCounters, d Dir) *fwdDir {
		return &fwdDir{from: int(from.tun.Fd()), to: int(to.tun.Fd()), chain: chain, ctr: ctr, window: trainWindow(d)}
	}
	f, err := newForwarder(l, [2]*fwdDir{dir(l.client, l.server, upChain, l.up, cfg.Up), dir(l.server, l.client, downChain, l.down, cfg.Down)}, hdr, pool)
	if err != nil {
		return l, err
	}
	l.fwd = f
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		defer l.recoverForwarder()
		if err := f.run(); err != nil {
			select {
			case <-l.done:
			default:
				l.fwdErr <- err
			}
		}
	}()
	return l, nil
}

// testHookChain lets a test replace the stage chains (e.g. with a stage
// that panics, to check that a forwarder crash tears the link down).
var testHookChain func(up, down Chain) (Chain, Chain)

// bufPool recycles packet buffers so the forwarder allocates nothing per
// packet in steady state.
type bufPool struct{ p sync.Pool }

func newBufPool(mtu int) *bufPool {
	bp := &bufPool{}
	bp.p.New = func() any { b := make([]byte, mtu+64); return &Packet{buf: b} }
	return bp
}
func (bp *bufPool) get() *Packet  { return bp.p.Get().(*Packet) }
func (bp *bufPool) put(p *Packet) { p.Data = nil; bp.p.Put(p) }

// recoverForwarder turns a forwarder panic into teardown plus an error
// instead of a crash that would leave namespaces behind.
func (l *Link) recoverForwarder() {
	if r := recover(); r != nil {
		buf := make([]byte, 8<<10)
		buf = buf[:runtime.Stack(buf, false)]
		l.log.Error("netem: forwarder panic; tearing the link down", "panic", r, "stack", string(buf))
		select {
		case l.fwdErr <- fmt.Errorf("netem: forwarder panic: %v", r):
		default:
		}
		go l.Close()
	}
}

// Err returns a channel that yields an error if the forwarder fails.
func (l *Link) Err() <-chan error { return l.fwdErr }

// Config returns the effective configuration (defaults filled in).
func (l *Link) Config() Config { return l.cfg }

// ClientAddr and ServerAddr are the addresses of the two ends.
func (l *Link) ClientAddr() netip.Addr { return l.cfg.ClientAddr }
func (l *Link) ServerAddr() netip.Addr { return l.cfg.ServerAddr }

// Namespace returns the name of a side's namespace (for `ip netns exec`).
func (l *Link) Namespace(s Side) string {
	if s == ServerSide {
		return l.cfg.Name + "-s"
	}
	return l.cfg.Name + "-c"
}

// Counters returns a snapshot of the counters.
func (l *Link) Counters() Counters { return snapshot(l.up, l.down) }

// Close stops the forwarder and removes devices and namespaces. Processes
// started with Command are the caller's to stop (they lose their network).
func (l *Link) Close() error {
	l.closeOnce.Do(func() {
		close(l.done)
		var errs []error
		if l.fwd != nil {
			l.fwd.stop()
		}
		l.wg.Wait()
		if l.fwd != nil {
			l.fwd.drain()
			l.fwd.close()
		}
		// The devices vanish with their last fd.
		for _, s := range []*side{l.client, l.server} {
			if s != nil {
				errs = append(errs, s.close())
			}
		}
		if l.realtime {
			leaveRealtime()
		}
		l.closeErr = errors.Join(errs...)
	})
	return l.closeErr
}

func (l *Link) sideOf(s Side) *side {
	if s == ServerSide {
		return l.server
	}
	return l.client
}

// Do runs fn on a locked OS thread inside a side's namespace. Sockets fn
// creates on this goroutine belong to that namespace; goroutines fn starts
// do not (use DialContext/Listen for those, e.g. in an http.Transport).
func (l *Link) Do(s Side, fn func() error) error {
	return inNetns(s.String(), func() error {
		if err := netns.Set(l.sideOf(s).ns); err != nil {
			return fmt.Errorf("entering %s namespace: %w", s, err)
		}
		return nil
	}, fn)
}

// RunClient runs fn in the client namespace (see Do).
func (l *Link) RunClient(ctx context.Context, fn func() error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return l.Do(ClientSide, fn)
}

// DialContext dials from the client namespace; use it as an
// http.Transport's DialContext so every connection crosses the link.
func (l *Link) DialContext(ctx context.Context, network, addr string) (net.Conn, error) {
	var c net.Conn
	err := l.Do(ClientSide, func() error {
		var d net.Dialer
		var err error
		c, err = d.DialContext(ctx, network, addr)
		return err
	})
	return c, err
}

// Listen opens a listener in a side's namespace (e.g. an in-process server
// on ServerAddr).
func (l *Link) Listen(s Side, network, addr string) (net.Listener, error) {
	var ln net.Listener
	err := l.Do(s, func() error {
		var err error
		ln, err = net.Listen(network, addr)
		return err
	})
	return ln, err
}

// ListenPacket opens a packet socket in a side's namespace.
func (l *Link) ListenPacket(s Side, network, addr string) (net.PacketConn, error) {
	var pc net.PacketConn
	err := l.Do(s, func() error {
		var err error
		pc, err = net.ListenPacket(network, addr)
		return err
	})
	return pc, err
}

// Command returns a command that runs in a side's namespace. It enters the
// namespace with nsenter(1) (util-linux), which execs the program, so the
// process is the program itself and signals reach it directly; chrt -o 0
// first drops the realtime policy the child would inherit.
func (l *Link) Command(ctx context.Context, s Side, name string, args ...string) *exec.Cmd {
	path := filepath.Join(NetnsDir, l.Namespace(s))
	return exec.CommandContext(ctx, "chrt", append([]string{"-o", "0", "nsenter", "--net=" + path, "--", name}, args...)...)
}

var (
	_ io.Closer = (*Link)(nil)
	_ io.Closer = (*Proxy)(nil)
)
