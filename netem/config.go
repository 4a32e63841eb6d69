// Package netem emulates a network link that real kernel TCP feels.
//
// With root it builds two network namespaces ("client" and "server"), a TUN
// device in each, and forwards IP packets between the two devices in this
// process, applying a chain of stages per direction:
//
//	client ns            forwarder (this process)                 server ns
//	 tunC  --read-->  [loss] -> [rate+queue] -> [delay+jitter] -> heap --write-->  tunS
//	 tunC  <--write-- heap <- [delay+jitter] <- [rate+queue] <- [loss]  <--read--  tunS
//
// Without root, Proxy is a TCP proxy on 127.0.0.1 that applies the same rate,
// delay and jitter stages to byte chunks (it cannot lose packets: TCP
// between the proxy and its peers is loss-free).
//
// Why a userspace forwarder: the kernel here has no sch_netem, but it has
// network namespaces and /dev/net/tun; a forwarder is also exact about the
// queue and the jitter distribution, and it sees every packet for counting.
package netem

import (
	"errors"
	"fmt"
	"math"
	"net/netip"
	"strconv"
	"strings"
	"time"

	"github.com/tristore/tristore/internal/units"
)

// Limits used by Validate: anything outside is refused before any
// namespace or device is created.
const (
	MaxRate    = 100_000_000_000 // 100 Gbit/s
	MaxDelay   = 10 * time.Second
	MinMTU     = 576
	MaxMTU     = 65535
	MaxQueue   = 1 << 30
	DefaultMTU = 1500
)

// ErrInvalid marks a configuration that cannot be emulated.
var ErrInvalid = errors.New("netem: invalid setting")

// Dir is one direction of a link. Delay and Jitter are one-way: a link with
// Delay 25ms in both directions has a 50 ms round-trip time.
type Dir struct {
	Rate   int64         // bit/s; 0 means unlimited
	Delay  time.Duration // one-way propagation delay
	Jitter time.Duration // standard deviation of a normal distribution added to Delay
	Loss   float64       // Bernoulli loss probability, 0..1
	Queue  int           // drop-tail queue in bytes in front of the rate limiter; 0 = default
}

// Config describes an emulated link.
type Config struct {
	// Name is the unique prefix of the namespaces (Name+"-c", Name+"-s");
	// empty means "ts-<pid>-<random>". It must start with "ts-" so that
	// Cleanup can find leftovers. A number after "ts-" is read as the pid
	// of the owning process: once that process is gone, the next Start
	// removes the namespaces.
	Name       string
	ClientAddr netip.Addr // default 192.0.2.1
	ServerAddr netip.Addr // default 192.0.2.2
	PrefixLen  int        // default 24
	MTU        int        // default 1500
	Up         Dir        // client -> server
	Down       Dir        // server -> client
	// Reorder lets jitter reorder packets (a later packet may overtake an
	// earlier one). Off by default: like a real single path, packets keep
	// their order and a jittered packet delays those behind it.
	Reorder bool
	Seed    uint64 // random seed for loss and jitter; 0 = time-based
	// NoRealtime keeps the process at normal priority. By default Start
	// makes the process SCHED_FIFO (lowest priority) while a link runs:
	// see realtime_linux.go for why.
	NoRealtime bool
	// NoOffload forwards packet by packet: no virtio_net_hdr, no TCP
	// super-packets (see gso.go). The default offloads, which costs a
	// segment up to the train window (at most 1 ms, 1/20 of the one-way
	// delay) of lateness; this switch keeps the old path for comparison.
	// (While a link is busy, either way, a delivery may also wait up to
	// the window for another wake-up: forwarder.wakeAt. The two never
	// add up to more than the window.)
	// A link with Reorder never offloads (see Start).
	NoOffload bool
	// HoldP lets the link's event loop keep the process's only P
	// (GOMAXPROCS=1) between its yields, for a process that does nothing
	// else of consequence: `tristore netem run`, whose endpoints are other
	// programs. Without it a loop waits without releasing its P only when
	// that leaves the process another P, and at GOMAXPROCS >= 2 each of
	// the loop's yields (every 8 ms, so that sysmon never preempts it)
	// hands the goroutine to another thread: runtime.Gosched wakes an idle
	// P's thread, one of the two threads sleeps again in a futex (perf,
	// 100 Mbit/s, 25 ms: 10 % of the forwarder's CPU, 230 futex calls a
	// second). With one P a yield runs the few other goroutines, if any,
	// on the same thread and returns. Other goroutines then wait up to
	// 8 ms for the loop to yield, so leave it off where the process itself
	// talks over the link (tests, the proxy). Only the first link of a
	// process holds the P this way.
	HoldP bool
}

// Symmetric returns a Config with d in both directions.
func Symmetric(d Dir) Config { return Config{Up: d, Down: d} }

// RTT is the configured round-trip time (without jitter).
func (c Config) RTT() time.Duration { return c.Up.Delay + c.Down.Delay }

// withDefaults fills in addresses, MTU and default queues.
func (c Config) withDefaults() Config {
	if !c.ClientAddr.IsValid() {
		c.ClientAddr = netip.MustParseAddr("192.0.2.1")
	}
	if !c.ServerAddr.IsValid() {
		c.ServerAddr = netip.MustParseAddr("192.0.2.2")
	}
	if c.PrefixLen == 0 {
		c.PrefixLen = 24
	}
	if c.MTU == 0 {
		c.MTU = DefaultMTU
	}
	rtt := c.RTT()
	c.Up.Queue = defaultQueue(c.Up, rtt, c.MTU)
	c.Down.Queue = defaultQueue(c.Down, rtt, c.MTU)
	return c
}

// defaultQueue is 1.5 x the bandwidth-delay product, where the delay is
// the configured RTT plus hostSlack (the real round trip through two
// stacks and this forwarder, and the bursts a sender on an unlimited local
// link produces), and at least 64 full-size packets. Measured: with the
// lan preset (1 Gbit/s, 0.2 ms) a plain 1.5 x BDP queue (32 packets)
// tail-dropped 18 % of iperf3's packets; this default drops well under 1 %.
func defaultQueue(d Dir, rtt time.Duration, mtu int) int {
	if d.Queue != 0 || d.Rate == 0 {
		return d.Queue
	}
	bdp := float64(d.Rate) / 8 * (rtt + hostSlack).Seconds()
	q := int(1.5 * bdp)
	if q < 64*mtu {
		q = 64 * mtu
	}
	if q > MaxQueue {
		q = MaxQueue
	}
	return q
}

// hostSlack is added to the configured RTT when sizing the default queue.
const hostSlack = 2 * time.Millisecond

// Validate refuses impossible or absurd settings with a message that names
// the setting. It is called by Start and NewProxy before anything is created.
func (c Config) Validate() error {
	c = c.withDefaults()
	if c.MTU < MinMTU || c.MTU > MaxMTU {
		return fmt.Errorf("%w: mtu %d outside %d..%d", ErrInvalid, c.MTU, MinMTU, MaxMTU)
	}
	if c.Name != "" {
		if !strings.HasPrefix(c.Name, "ts-") || len(c.Name) > 40 || strings.ContainsAny(c.Name, "/ \t\n") {
			return fmt.Errorf("%w: name %q must start with \"ts-\", be at most 40 characters and contain no '/' or spaces", ErrInvalid, c.Name)
		}
	}
	if !c.ClientAddr.Is4() || !c.ServerAddr.Is4() {
		return fmt.Errorf("%w: client and server addresses must be IPv4 (got %v, %v)", ErrInvalid, c.ClientAddr, c.ServerAddr)
	}
	if c.ClientAddr == c.ServerAddr {
		return fmt.Errorf("%w: client and server address are both %v", ErrInvalid, c.ClientAddr)
	}
	if c.PrefixLen < 8 || c.PrefixLen > 30 {
		return fmt.Errorf("%w: prefix length /%d outside /8../30", ErrInvalid, c.PrefixLen)
	}
	pc, _ := c.ClientAddr.Prefix(c.PrefixLen)
	if !pc.Contains(c.ServerAddr) {
		return fmt.Errorf("%w: %v and %v are not in one /%d subnet", ErrInvalid, c.ClientAddr, c.ServerAddr, c.PrefixLen)
	}
	for _, d := range []struct {
		name string
		d    Dir
	}{{"up", c.Up}, {"down", c.Down}} {
		if err := d.d.validate(d.name, c.MTU); err != nil {
			return err
		}
	}
	return nil
}

func (d Dir) validate(name string, mtu int) error {
	switch {
	case d.Rate < 0 || d.Rate > MaxRate:
		return fmt.Errorf("%w: %s rate %d bit/s outside 0..%d (0 = unlimited)", ErrInvalid, name, d.Rate, int64(MaxRate))
	case d.Rate > 0 && d.Rate < 8000:
		return fmt.Errorf("%w: %s rate %d bit/s is below 8 kbit/s", ErrInvalid, name, d.Rate)
	case d.Delay < 0 || d.Delay > MaxDelay:
		return fmt.Errorf("%w: %s delay %v outside 0..%v", ErrInvalid, name, d.Delay, MaxDelay)
	case d.Jitter < 0 || d.Jitter > MaxDelay:
		return fmt.Errorf("%w: %s jitter %v outside 0..%v", ErrInvalid, name, d.Jitter, MaxDelay)
	case math.IsNaN(d.Loss) || d.Loss < 0 || d.Loss > 1:
		return fmt.Errorf("%w: %s loss %v outside 0..1 (it is a probability: 0.001 = 0.1 %%)", ErrInvalid, name, d.Loss)
	case d.Queue < 0 || d.Queue > MaxQueue:
		return fmt.Errorf("%w: %s queue %d bytes outside %d..%d", ErrInvalid, name, d.Queue, mtu, MaxQueue)
	case d.Queue > 0 && d.Queue < mtu:
		return fmt.Errorf("%w: %s queue %d bytes is smaller than one MTU (%d bytes): no full-size packet could ever pass", ErrInvalid, name, d.Queue, mtu)
	}
	return nil
}

// ParseRate parses a rate in bits per second: "100mbit", "1gbit",
// "800kbit", "1e9" or "1000000" (a bare number is bit/s, as in tc),
// "50Mbps" (megabits), "12.5MiB/s" or "1MB/s" (bytes per second: an upper-case
// B), or "0"/"unlimited". The number and its prefix are read by
// internal/units, the one parser of every size in tristore: k/M/G/T are
// powers of 1000 and Ki/Mi/Gi/Ti powers of 1024, with the prefix letter in
// either case as tc writes it ("mbit" = "Mbit" = 10^6 bit/s, "mibit" =
// 2^20 bit/s). Unlike tc, where "bps" means bytes per second, "Mbps" is
// megabits (the usual network meaning); write "MB/s" or "MBps" for bytes.
// A lower-case "b" alone ("100mb") is refused as ambiguous.
func ParseRate(s string) (int64, error) {
	t := strings.TrimSpace(s)
	switch strings.ToLower(t) {
	case "", "0", "unlimited", "none":
		return 0, nil
	}
	bad := fmt.Errorf("%w: rate %q: want bits per second like 100mbit, 1gbit, 50Mbps or 1e9, bytes per second like 12.5MiB/s or 1MB/s, or 0 for unlimited", ErrInvalid, s)
	q, err := units.Parse(t)
	if err != nil {
		return 0, bad
	}
	bitsPer := 0.0
	switch u := q.Unit; {
	case u == "B" || u == "B/s" || u == "Bps":
		bitsPer = 8
	default:
		switch strings.ToLower(u) {
		case "", "bit", "bit/s", "bps":
			bitsPer = 1
		}
	}
	if bitsPer == 0 {
		return 0, bad
	}
	v, _ := q.Value.Float64()
	r := v * bitsPer
	if math.IsInf(r, 0) || r > MaxRate {
		return 0, fmt.Errorf("%w: rate %q outside 0..100gbit", ErrInvalid, s)
	}
	return int64(math.Round(r)), nil
}

// FormatRate prints a rate in Mbit/s (or "unlimited").
func FormatRate(r int64) string {
	if r == 0 {
		return "unlimited"
	}
	if r >= 1e9 && r%1e6 == 0 {
		return fmt.Sprintf("%ggbit", float64(r)/1e9)
	}
	return fmt.Sprintf("%.4gmbit", float64(r)/1e6)
}

// ParseLoss parses "0.001", "0.1%".
func ParseLoss(s string) (float64, error) {
	t := strings.TrimSpace(s)
	pct := strings.HasSuffix(t, "%")
	t = strings.TrimSuffix(t, "%")
	v, err := strconv.ParseFloat(t, 64)
	if err != nil {
		return 0, fmt.Errorf("%w: loss %q: want a probability (0.001) or a percentage (0.1%%)", ErrInvalid, s)
	}
	if pct {
		v /= 100
	}
	if math.IsNaN(v) || v < 0 || v > 1 {
		return 0, fmt.Errorf("%w: loss %q outside 0..1 (0..100%%)", ErrInvalid, s)
	}
	return v, nil
}
