package bench

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"strings"

	"github.com/tristore/tristore/netem"
)

// Link puts an emulated network between this client and a network target:
// a netem.Proxy on 127.0.0.1 in front of the target's host:port with a
// preset's rate, delay and jitter (no root needed; the proxy cannot drop
// packets, so a preset's loss is not emulated — see netem.ProxyNote; for
// loss run the whole command under `tristore netem run` as root instead).
type Link struct {
	Preset string
	Note   string
	proxy  *netem.Proxy
	cancel context.CancelFunc
	done   chan error
}

// StartLink starts a proxy for target with preset ("" for a link that only
// counts bytes) and returns the link; set
// o.Dial = l.Dialer(target) and cfg.Wire = l.Wire.
func StartLink(ctx context.Context, target, preset string) (*Link, string, error) {
	hostport, err := targetAddr(target)
	if err != nil {
		return nil, "", err
	}
	c := netem.Symmetric(netem.Dir{}) // "": a link that only counts
	note := "counting only: no rate, delay, jitter or loss"
	if preset != "" {
		if c, err = netem.PresetConfig(preset); err != nil {
			return nil, "", err
		}
		note = netem.ProxyNote
	}
	p, err := netem.NewProxy("127.0.0.1:0", hostport, c)
	if err != nil {
		return nil, "", fmt.Errorf("bench: --network %s: %w", preset, err)
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	l := &Link{Preset: preset, Note: note, proxy: p, cancel: cancel, done: make(chan error, 1)}
	go func() { l.done <- p.Serve(ctx) }()
	return l, hostport, nil
}

// Dialer sends connections to hostport through the link and others
// directly.
func (l *Link) Dialer(hostport string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	var d net.Dialer
	via := l.proxy.Addr().String()
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if addr == hostport {
			addr = via
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
	u.Host = l.proxy.Addr().String()
	return u.String()
}

// Wire returns the stream bytes the link carried each way so far (TCP
// payload: the proxy sees no headers).
func (l *Link) Wire() (up, down int64) {
	c := l.proxy.Counters()
	return int64(c.Up.Bytes), int64(c.Down.Bytes)
}

// Close stops the proxy.
func (l *Link) Close() error {
	l.cancel()
	l.proxy.Close()
	return <-l.done
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
	port := map[string]string{"s3": "80", "s3+http": "80", "s3+https": "443", "nfs": "2049", "iscsi": "3260"}[scheme]
	if port == "" {
		return "", fmt.Errorf("bench: target %s: unknown scheme", Redact(target))
	}
	return net.JoinHostPort(strings.Trim(u.Host, "[]"), port), nil
}
