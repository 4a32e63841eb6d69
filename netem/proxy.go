package netem

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// ProxyNote is printed by every user of Proxy: it emulates rate, delay and
// jitter, but TCP between the proxy and its peers never loses a packet, so
// loss (and the congestion-control reaction to it) is not emulated.
const ProxyNote = "netem proxy: rate, delay and jitter only — NO real packet loss (TCP on 127.0.0.1 never drops); use `tristore netem run` as root for loss"

// Proxy is the no-root fallback: a TCP proxy that applies a link's rate,
// delay and jitter per direction to the byte stream of every connection.
// The rate limiter (and its queue) of each direction is shared by all
// connections, as a bottleneck link is; delay and jitter are per
// connection and never reorder bytes. Loss settings are ignored (see
// ProxyNote).
//
//	client --> [listen] --chunks--> rate(shared) -> delay -> heap --> target
//	client <--  ...     <--chunks-- delay <- rate(shared)  <-- ...  <-- target
type Proxy struct {
	ln        net.Listener
	target    string
	cfg       Config
	clk       clock
	upRate    *sharedRate
	downRate  *sharedRate
	up, down  *dirCounters
	log       *slog.Logger
	mu        sync.Mutex
	conns     map[net.Conn]struct{}
	wg        sync.WaitGroup
	closeOnce sync.Once
	seed      uint64
}

// proxyChunk is the largest piece of a stream that moves as one unit.
const proxyChunk = 8 << 10

// sharedRate lets the connections of one direction share one rate limiter.
type sharedRate struct {
	mu sync.Mutex
	r  *Rate
}

func (s *sharedRate) process(p *Packet) {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.r.Process(p) // QueueBytes is 0: never drops; the reader waits instead
	s.mu.Unlock()
}

// NewProxy validates cfg and listens on listen (e.g. "127.0.0.1:0");
// connections are forwarded to target. Call Serve.
func NewProxy(listen, target string, cfg Config) (*Proxy, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if _, _, err := net.SplitHostPort(target); err != nil {
		return nil, fmt.Errorf("%w: target %q: %v", ErrInvalid, target, err)
	}
	cfg = cfg.withDefaults()
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, err
	}
	p := &Proxy{ln: ln, target: target, cfg: cfg, clk: newClock(), log: slog.Default(),
		up: newDirCounters("up", true), down: newDirCounters("down", false),
		conns: map[net.Conn]struct{}{}, seed: cfg.Seed}
	if p.seed == 0 {
		p.seed = uint64(time.Now().UnixNano())
	}
	if cfg.Up.Rate > 0 {
		p.upRate = &sharedRate{r: &Rate{BitsPerSec: cfg.Up.Rate}}
	}
	if cfg.Down.Rate > 0 {
		p.downRate = &sharedRate{r: &Rate{BitsPerSec: cfg.Down.Rate}}
	}
	return p, nil
}

// Addr is the proxy's listening address.
func (p *Proxy) Addr() net.Addr { return p.ln.Addr() }

// Counters returns byte counts per direction (chunks count as packets;
// all bytes are payload).
func (p *Proxy) Counters() Counters { return snapshot(p.up, p.down) }

// Serve accepts connections until ctx ends or Close is called.
func (p *Proxy) Serve(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() { p.Close() })
	defer stop()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				p.wg.Wait()
				return nil
			}
			return err
		}
		p.wg.Add(1)
		go func() {
			defer p.wg.Done()
			p.handle(ctx, c)
		}()
	}
}

// Close stops accepting and cuts open connections.
func (p *Proxy) Close() error {
	var err error
	p.closeOnce.Do(func() {
		err = p.ln.Close()
		p.mu.Lock()
		for c := range p.conns {
			c.Close()
		}
		p.mu.Unlock()
	})
	return err
}

func (p *Proxy) track(c net.Conn, add bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if add {
		p.conns[c] = struct{}{}
	} else {
		delete(p.conns, c)
	}
}

func (p *Proxy) handle(ctx context.Context, c net.Conn) {
	defer c.Close()
	d := net.Dialer{Timeout: 10 * time.Second}
	t, err := d.DialContext(ctx, "tcp", p.target)
	if err != nil {
		p.log.Warn("netem proxy: dial target", "target", p.target, "err", err)
		return
	}
	defer t.Close()
	p.track(c, true)
	p.track(t, true)
	defer p.track(c, false)
	defer p.track(t, false)
	var wg sync.WaitGroup
	wg.Add(2)
	// Connections are handled concurrently: take this one's pair of
	// seeds under the lock.
	p.mu.Lock()
	seed := p.seed
	p.seed += 2
	p.mu.Unlock()
	go func() { defer wg.Done(); p.pipe(c, t, p.cfg.Up, p.upRate, p.up, seed) }()
	go func() { defer wg.Done(); p.pipe(t, c, p.cfg.Down, p.downRate, p.down, seed+1) }()
	wg.Wait()
}

// pipe moves src to dst through one direction's stages. The reader stops
// reading while more than a window (bandwidth-delay product plus queue)
// is held, which pushes back on the sender through TCP as a full
// bottleneck queue would.
func (p *Proxy) pipe(src, dst net.Conn, d Dir, rate *sharedRate, ctr *dirCounters, seed uint64) {
	var delay *Delay
	if d.Delay > 0 || d.Jitter > 0 {
		delay = NewChain(Dir{Delay: d.Delay, Jitter: d.Jitter}, false, seed)[0].(*Delay)
	}
	window := d.Queue + 64<<10
	if d.Rate > 0 {
		window += int(float64(d.Rate) / 8 * (d.Delay + 3*d.Jitter).Seconds())
	} else {
		window = 4 << 20
	}
	var werr atomic.Pointer[error]
	pool := newBufPool(proxyChunk - 64)
	sched, err := newScheduler(p.clk, func(batch []*Packet) {
		for _, pk := range batch {
			if werr.Load() == nil {
				if _, err := dst.Write(pk.Data); err != nil {
					werr.Store(&err)
					src.Close() // stop the reader too
				} else {
					ctr.delivered1(1, len(pk.Data), p.clk.now()-pk.Due)
				}
			}
			pool.put(pk)
		}
	})
	if err != nil {
		p.log.Warn("netem proxy: dropping connection", "err", err)
		src.Close()
		dst.Close()
		return
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		sched.run(true)
	}()
	for werr.Load() == nil {
		sched.WaitBelow(window)
		pk := pool.get()
		n, err := src.Read(pk.buf)
		if n == 0 {
			pool.put(pk)
		} else {
			pk.Data = pk.buf[:n]
			ctr.packets.Add(1)
			ctr.bytes.Add(uint64(n))
			ctr.payload.Add(uint64(n))
			now := p.clk.now()
			pk.Arrive, pk.Due = now, now
			rate.process(pk)
			if delay != nil {
				delay.Process(pk)
			}
			sched.Push(pk)
		}
		if err != nil {
			break
		}
	}
	sched.stop() // delivers what is in flight, then returns
	<-done
	we := werr.Load()
	if tc, ok := dst.(*net.TCPConn); ok && we == nil {
		_ = tc.CloseWrite()
	} else {
		dst.Close()
	}
	if we != nil && !errors.Is(*we, net.ErrClosed) && !errors.Is(*we, io.EOF) {
		p.log.Debug("netem proxy: write", "err", *we)
	}
}
