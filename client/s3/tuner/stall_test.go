package tuner

import (
	"context"
	"net"
	"sync/atomic"
	"testing"
	"time"
)

// stallConn holds every Read until the shared deadline has passed.
type stallConn struct {
	net.Conn
	until *atomic.Int64 // unix nanoseconds; 0: no stall
}

func (c stallConn) Read(p []byte) (int, error) {
	if u := c.until.Load(); u != 0 {
		if d := time.Until(time.Unix(0, u)); d > 0 {
			time.Sleep(d)
		}
	}
	return c.Conn.Read(p)
}

// TestMeasureStalledWindow: when not one byte moves in the first window
// (every response held for longer than warm-up plus window, as on a loaded
// machine), the sample is not "0 B/s": the window is extended until bytes
// move, so a profile check does not mistake a stall for drift.
func TestMeasureStalledWindow(t *testing.T) {
	var until atomic.Int64
	dial := func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return stallConn{c, &until}, nil
	}
	base := setup(t, nil, dial)
	m := &S3Measurer{Base: base, Bucket: "tune", Prefix: ".tune/stall/", Direction: Down, Dial: dial,
		Window: 100 * time.Millisecond, WarmMax: 100 * time.Millisecond}
	pt := Point{64 << 10, 2}
	if err := m.ensureProbe(context.Background(), 4*pt.ChunkSize); err != nil {
		t.Fatal(err)
	}
	until.Store(time.Now().Add(350 * time.Millisecond).UnixNano())
	s, err := m.Measure(context.Background(), pt)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("window %.2fs, %d bytes, %.1f MiB/s", s.WindowS, s.WindowBytes, s.BandwidthBps/(1<<20))
	if s.WindowBytes == 0 || s.BandwidthBps <= 0 {
		t.Errorf("a stalled first window gave an empty sample: %+v", s)
	}
	if s.WindowS > 1.5 {
		t.Errorf("window extended to %.2fs, bound is 5 windows", s.WindowS)
	}
	if err := m.Cleanup(context.Background()); err != nil {
		t.Fatal(err)
	}
}
