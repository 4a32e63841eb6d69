package tuner

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"time"
)

// Profile is a saved report for one endpoint over one network, in one
// direction (seed 001 §5.1: "a profile can be created for the client and
// even shared among clients working in a similar environment").
type Profile struct {
	Version     int       `json:"version"`
	Endpoint    string    `json:"endpoint"`
	Network     string    `json:"network"` // what the fingerprint was made of
	Fingerprint string    `json:"fingerprint"`
	Direction   Direction `json:"direction"`
	Created     time.Time `json:"created"`
	Verified    time.Time `json:"verified"`
	Report      *Report   `json:"report"`
}

const profileVersion = 1

// DefaultDir is where profiles live: the user's cache directory.
func DefaultDir() string {
	d, err := os.UserCacheDir()
	if err != nil {
		d = os.TempDir()
	}
	return filepath.Join(d, "tristore", "s3-tune")
}

// Fingerprint names the network an endpoint is reached over: the local
// address and interface a connection to it leaves from (so the same laptop
// on another Wi-Fi, or inside another network namespace, gets another
// profile), the round trip's order of magnitude (the same addresses over
// another path — an emulated link with another preset, a VPN — differ
// there), plus the endpoint itself and the direction. dial makes the
// probing connection (nil: a plain dialer); it is closed at once.
func Fingerprint(ctx context.Context, endpoint string, dir Direction, dial func(ctx context.Context, network, addr string) (net.Conn, error)) (fp, desc string, err error) {
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		return "", "", fmt.Errorf("tuner: endpoint %q is not a URL", endpoint)
	}
	host := u.Host
	if u.Port() == "" {
		if u.Scheme == "https" {
			host = net.JoinHostPort(u.Hostname(), "443")
		} else {
			host = net.JoinHostPort(u.Hostname(), "80")
		}
	}
	if dial == nil {
		dial = (&net.Dialer{Timeout: 10 * time.Second}).DialContext
	}
	var (
		local  net.IP
		remote string
		rtt    = time.Duration(math.MaxInt64)
	)
	// Three connects at once (one round trip of the command's start, not
	// three: --auto runs this before every transfer); the fastest is the
	// round trip (jitter only adds), as the kernel measured it where it can
	// (tcpRTT: no scheduling delay), else the connect's wall time.
	type probe struct {
		c   net.Conn
		d   time.Duration
		err error
	}
	probes := make(chan probe, 3)
	for range 3 {
		go func() {
			t0 := time.Now()
			c, err := dial(ctx, "tcp", host)
			d := time.Since(t0)
			if err == nil {
				if k, ok := tcpRTT(c); ok {
					d = k
				}
			}
			probes <- probe{c, d, err}
		}()
	}
	var firstErr error
	for range 3 {
		p := <-probes
		if p.err != nil {
			firstErr = cmp.Or(firstErr, p.err)
			continue
		}
		rtt = min(rtt, p.d)
		if a, ok := p.c.LocalAddr().(*net.TCPAddr); ok {
			local = a.IP
		}
		remote = p.c.RemoteAddr().String()
		p.c.Close()
	}
	if firstErr != nil {
		return "", "", fmt.Errorf("tuner: reaching %s: %w", endpoint, firstErr)
	}
	desc = fmt.Sprintf("local %s -> %s, %s", local, remote, rttClass(rtt))
	if ifs, err := net.Interfaces(); err == nil {
	outer:
		for _, ifc := range ifs {
			addrs, _ := ifc.Addrs()
			for _, a := range addrs {
				if n, ok := a.(*net.IPNet); ok && n.IP.Equal(local) {
					desc += fmt.Sprintf(" via %s (%s, mtu %d)", ifc.Name, ifc.HardwareAddr, ifc.MTU)
					break outer
				}
			}
		}
	}
	sum := sha256.Sum256([]byte(endpoint + "\n" + string(dir) + "\n" + desc))
	return hex.EncodeToString(sum[:8]), desc, nil
}

// rttClass buckets a round trip coarsely enough that jitter rarely moves
// it across a boundary.
func rttClass(d time.Duration) string {
	switch {
	case d < 2*time.Millisecond:
		return "rtt <2ms"
	case d < 20*time.Millisecond:
		return "rtt 2-20ms"
	case d < 200*time.Millisecond:
		return "rtt 20-200ms"
	}
	return "rtt >200ms"
}

func profilePath(dir, fp string) string { return filepath.Join(dir, fp+".json") }

// Load reads the profile for fingerprint fp from dir; (nil, nil) when there
// is none (or it is from another version of this format).
func Load(dir, fp string) (*Profile, error) {
	b, err := os.ReadFile(profilePath(dir, fp))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var p Profile
	if err := json.Unmarshal(b, &p); err != nil {
		return nil, fmt.Errorf("tuner: profile %s: %w", profilePath(dir, fp), err)
	}
	if p.Version != profileVersion || p.Report == nil || p.Fingerprint != fp {
		return nil, nil
	}
	return &p, nil
}

// Save writes p to dir atomically (temp file, rename).
func Save(dir string, p *Profile) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	p.Version = profileVersion
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(dir, ".profile-*")
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		os.Remove(f.Name())
		return err
	}
	if err := f.Close(); err != nil {
		os.Remove(f.Name())
		return err
	}
	if err := os.Rename(f.Name(), profilePath(dir, p.Fingerprint)); err != nil {
		os.Remove(f.Name())
		return err
	}
	return nil
}

// DefaultDrift is the relative change in bandwidth at the chosen point that
// makes a profile stale.
const DefaultDrift = 0.25

// Drifted says whether a fresh measurement of bandwidth at the profile's
// choice differs from what the profile recorded there (measured if it was
// sampled, else predicted) by more than threshold, either way: slower means
// the network got worse, faster that the profile is holding us back.
func (p *Profile) Drifted(measuredBps, threshold float64) bool {
	ref := p.Report.Choice.MeasuredBps
	if ref <= 0 {
		ref = p.Report.Choice.PredictedBps
	}
	if ref <= 0 || measuredBps <= 0 {
		return true
	}
	d := measuredBps/ref - 1
	return d > threshold || d < -threshold
}

// Tune is the whole cycle --auto and `tristore s3 tune` run: find the
// profile for this endpoint and network; if it exists (and !force), measure
// its chosen point once and reuse it unless the bandwidth there drifted by
// more than Drift; otherwise sample anew and save. MaxAge > 0 skips the
// verification for a profile verified within MaxAge.
type Tune struct {
	Dir       string // default DefaultDir()
	Endpoint  string
	Direction Direction
	Dial      func(ctx context.Context, network, addr string) (net.Conn, error)
	Measurer  Measurer
	Options   Options
	Drift     float64       // default DefaultDrift
	MaxAge    time.Duration // trust a profile verified this recently without measuring
	Force     bool          // sample anew whatever is saved
}

// Outcome says what Tune did.
type Outcome struct {
	Profile *Profile `json:"profile"`
	// Reused: the saved profile was kept (Check holds its verification
	// sample, unless it was recent enough not to need one).
	Reused bool    `json:"reused"`
	Check  *Sample `json:"check,omitempty"`
	// Resampled because of drift (false for a first run or --force).
	Drifted bool `json:"drifted"`
}

// Run performs the cycle.
func (t Tune) Run(ctx context.Context) (*Outcome, error) {
	if t.Dir == "" {
		t.Dir = DefaultDir()
	}
	if t.Drift <= 0 {
		t.Drift = DefaultDrift
	}
	fp, desc, err := Fingerprint(ctx, t.Endpoint, t.Direction, t.Dial)
	if err != nil {
		return nil, err
	}
	out := &Outcome{}
	if !t.Force {
		p, err := Load(t.Dir, fp)
		if err != nil {
			return nil, err
		}
		if p != nil {
			if t.MaxAge > 0 && time.Since(p.Verified) < t.MaxAge {
				out.Profile, out.Reused = p, true
				return out, nil
			}
			s, err := t.Measurer.Measure(ctx, p.Report.Choice.Point)
			if err != nil {
				return nil, err
			}
			out.Check = &s
			if !p.Drifted(s.BandwidthBps, t.Drift) {
				p.Verified = time.Now()
				if err := Save(t.Dir, p); err != nil {
					return nil, err
				}
				out.Profile, out.Reused = p, true
				return out, nil
			}
			out.Drifted = true
		}
	}
	r, err := Run(ctx, t.Measurer, t.Options)
	if err != nil {
		return nil, err
	}
	r.Direction = t.Direction
	now := time.Now()
	p := &Profile{Endpoint: t.Endpoint, Network: desc, Fingerprint: fp, Direction: t.Direction,
		Created: now, Verified: now, Report: r}
	if err := Save(t.Dir, p); err != nil {
		return nil, err
	}
	out.Profile = p
	return out, nil
}
