package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"sync"

	"github.com/tristore/tristore/netem"
)

// Link puts an emulated network between this client and a network target.
// Two kinds:
//
//   - netns (root, /dev/net/tun): a real netem link between two network
//     namespaces, so the client's TCP meets the preset's rate, delay,
//     jitter AND loss. Connections go
//
//     client -> 127.0.0.1:entry -> [client ns] ==link==> [server ns]
//     relay -> target (host namespace)
//
//     and the wire bytes are the link's own packet counters (IP packets,
//     headers included).
//
//   - proxy (no root): a netem.Proxy on 127.0.0.1 in front of the target:
//     rate, delay and jitter, no loss (netem.ProxyNote); wire bytes are
//     the TCP stream bytes it forwarded.
//
// Either way the target sees ordinary connections from 127.0.0.1 and the
// driver dials (or, for the iSCSI initiator, which takes no dialer, is
// pointed at) the entry address.
type Link struct {
	Preset string
	Kind   string // "netns" or "proxy"
	Note   string

	entry  string
	wire   func() (up, down int64)
	mu     sync.Mutex
	closed bool
	close  []func() error
}

// LinkKinds are the values of Config.Link.
var LinkKinds = []string{"auto", "netns", "proxy"}

// StartLink starts a link of kind (auto: netns when this host can, else
// proxy) with preset ("" for a link that only counts bytes) in front of
// target's host:port, and returns it with that host:port.
func StartLink(ctx context.Context, target, preset, kind string) (*Link, string, error) {
	hostport, err := targetAddr(target)
	if err != nil {
		return nil, "", err
	}
	c := netem.Symmetric(netem.Dir{}) // "": a link that only counts
	if preset != "" {
		if c, err = netem.PresetConfig(preset); err != nil {
			return nil, "", err
		}
	}
	switch kind {
	case "", "auto":
		kind = "proxy"
		if netem.CheckHost() == nil {
			kind = "netns"
		}
	case "netns", "proxy":
	default:
		return nil, "", fmt.Errorf("bench: link %q: want auto, netns or proxy", kind)
	}
	l := &Link{Preset: preset, Kind: kind}
	if kind == "netns" {
		err = l.startNetns(ctx, c, hostport)
	} else {
		err = l.startProxy(ctx, c, hostport)
	}
	if err != nil {
		l.Close()
		return nil, "", fmt.Errorf("bench: --network %s (%s link): %w", preset, kind, err)
	}
	if preset == "" {
		l.Note = kind + " link, counting only: no rate, delay, jitter or loss"
	}
	return l, hostport, nil
}

func (l *Link) onClose(f func() error) {
	l.mu.Lock()
	l.close = append(l.close, f)
	l.mu.Unlock()
}

func (l *Link) startProxy(ctx context.Context, c netem.Config, hostport string) error {
	p, err := netem.NewProxy("127.0.0.1:0", hostport, c)
	if err != nil {
		return err
	}
	pctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	done := make(chan error, 1)
	go func() { done <- p.Serve(pctx) }()
	l.onClose(func() error { cancel(); p.Close(); return <-done })
	l.entry = p.Addr().String()
	l.Note = netem.ProxyNote
	l.wire = func() (int64, int64) {
		ct := p.Counters()
		return int64(ct.Up.Bytes), int64(ct.Down.Bytes)
	}
	return nil
}

func (l *Link) startNetns(ctx context.Context, c netem.Config, hostport string) error {
	nl, err := netem.Start(ctx, c)
	if err != nil {
		return err
	}
	l.onClose(nl.Close)
	// The server end: a relay in the server namespace on to the target.
	rln, err := nl.Listen(netem.ServerSide, "tcp", netip.AddrPortFrom(nl.ServerAddr(), 0).String())
	if err != nil {
		return err
	}
	relay := rln.Addr().String()
	var d net.Dialer
	l.serve(rln, func(ctx context.Context) (net.Conn, error) { return d.DialContext(ctx, "tcp", hostport) })
	// The client end: an entry on 127.0.0.1 that dials across the link from
	// the client namespace.
	eln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	l.entry = eln.Addr().String()
	l.serve(eln, func(ctx context.Context) (net.Conn, error) { return nl.DialContext(ctx, "tcp", relay) })
	l.Note = "netns link (real packet loss), counters are IP packet bytes"
	l.wire = func() (int64, int64) {
		ct := nl.Counters()
		return int64(ct.Up.Bytes), int64(ct.Down.Bytes)
	}
	return nil
}

// serve accepts on ln and joins each connection to one dial opens, until
// Close; Close also cuts the joined connections.
func (l *Link) serve(ln net.Listener, dial func(context.Context) (net.Conn, error)) {
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	var mu sync.Mutex
	conns := map[net.Conn]bool{}
	track := func(c net.Conn, add bool) {
		mu.Lock()
		if add {
			conns[c] = true
		} else {
			delete(conns, c)
		}
		mu.Unlock()
	}
	l.onClose(func() error {
		cancel()
		ln.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
		return nil
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			a, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer a.Close()
				track(a, true)
				defer track(a, false)
				b, err := dial(ctx)
				if err != nil {
					return
				}
				defer b.Close()
				track(b, true)
				defer track(b, false)
				join(a, b)
			}()
		}
	}()
}

// join copies both ways until both directions ended, passing half-closes on.
func join(a, b net.Conn) {
	var wg sync.WaitGroup
	half := func(dst, src net.Conn) {
		defer wg.Done()
		_, err := io.Copy(dst, src)
		if cw, ok := dst.(interface{ CloseWrite() error }); ok && err == nil {
			cw.CloseWrite()
		} else {
			dst.Close()
			src.Close()
		}
	}
	wg.Add(2)
	go half(a, b)
	go half(b, a)
	wg.Wait()
}

// Dialer sends connections to hostport through the link and others
// directly.
func (l *Link) Dialer(hostport string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if addr == hostport {
			addr = l.entry
		}
		return d.DialContext(ctx, network, addr)
	}
}

// Rewrite points target's host:port at the link (for clients that take no
// dialer: the iSCSI initiator). The target sees the same bytes either way.
func (l *Link) Rewrite(target string) string {
	u, err := url.Parse(target)
	if err != nil {
		return target
	}
	u.Host = l.entry
	return u.String()
}

// Wire returns the bytes the link carried each way so far.
func (l *Link) Wire() (up, down int64) { return l.wire() }

// Close stops the link (in reverse order of setup).
func (l *Link) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closed = true
	fs := l.close
	l.mu.Unlock()
	var errs []error
	for i := len(fs) - 1; i >= 0; i-- {
		if err := fs[i](); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// targetAddr is the host:port a network target's connections go to.
func targetAddr(target string) (string, error) {
	scheme, _, ok := strings.Cut(target, "://")
	if !ok || scheme == "file" {
		return "", fmt.Errorf("bench: --network needs a network target (s3://, nfs://, iscsi://), not a directory: for a mount, run the server behind `tristore netem`")
	}
	u, err := url.Parse(target)
	if err != nil {
		return "", fmt.Errorf("bench: bad target: %w", err)
	}
	if _, _, err := net.SplitHostPort(u.Host); err == nil {
		return u.Host, nil
	}
	port := map[string]string{"s3": "80", "s3+http": "80", "s3+https": "443", "nfs": "2049", "fuse+nfs": "2049", "iscsi": "3260", "ext4+iscsi": "3260"}[scheme]
	if port == "" {
		return "", fmt.Errorf("bench: target %s: unknown scheme", Redact(target))
	}
	return net.JoinHostPort(strings.Trim(u.Host, "[]"), port), nil
}
