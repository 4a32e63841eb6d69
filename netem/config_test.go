package netem

import (
	"errors"
	"math"
	"net/netip"
	"testing"
	"time"
)

func TestValidateRefusesImpossibleSettings(t *testing.T) {
	ok := Symmetric(Dir{Rate: 1e8, Delay: 25 * time.Millisecond})
	if err := ok.Validate(); err != nil {
		t.Fatalf("valid config refused: %v", err)
	}
	bad := map[string]Config{
		"negative rate":    Symmetric(Dir{Rate: -1}),
		"absurd rate":      Symmetric(Dir{Rate: 1e12}),
		"tiny rate":        Symmetric(Dir{Rate: 10}),
		"negative delay":   Symmetric(Dir{Delay: -time.Millisecond}),
		"absurd delay":     Symmetric(Dir{Delay: time.Hour}),
		"negative jitter":  Symmetric(Dir{Jitter: -time.Millisecond}),
		"loss above 1":     Symmetric(Dir{Loss: 1.5}),
		"negative loss":    Symmetric(Dir{Loss: -0.1}),
		"NaN loss":         Symmetric(Dir{Loss: math.NaN()}),
		"queue below MTU":  Symmetric(Dir{Rate: 1e6, Queue: 1000}),
		"negative queue":   Symmetric(Dir{Queue: -5}),
		"small MTU":        {MTU: 100},
		"huge MTU":         {MTU: 70000},
		"same addresses":   {ClientAddr: netip.MustParseAddr("192.0.2.1"), ServerAddr: netip.MustParseAddr("192.0.2.1")},
		"ipv6 address":     {ClientAddr: netip.MustParseAddr("2001:db8::1")},
		"different subnet": {ClientAddr: netip.MustParseAddr("192.0.2.1"), ServerAddr: netip.MustParseAddr("198.51.100.2")},
		"bad name":         {Name: "mylink"},
		"name with slash":  {Name: "ts-a/b"},
	}
	for name, c := range bad {
		err := c.Validate()
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: got %v, want ErrInvalid", name, err)
		}
	}
	up := Config{Up: Dir{Queue: 1400}, MTU: 1500}
	if err := up.Validate(); err == nil || !contains(err.Error(), "smaller than one MTU") {
		t.Errorf("queue < MTU message: %v", err)
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

func TestParseRate(t *testing.T) {
	cases := map[string]int64{
		"100mbit": 100e6, "1gbit": 1e9, "12.5MiB/s": Rate12MiB, "800kbit": 800e3,
		"1e9": 1e9, "0": 0, "unlimited": 0, "50Mbps": 50e6, "1MB/s": 8e6,
		"100Mbit": 100e6, "1mibit": 1 << 20, "1Mibit": 1 << 20, "64kbit/s": 64e3, "1000000": 1e6, "1GiB/s": 8 << 30,
		"2MBps": 16e6, "1.5gbit": 1.5e9, "1KiB": 8192,
	}
	for in, want := range cases {
		got, err := ParseRate(in)
		if err != nil || got != want {
			t.Errorf("ParseRate(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"fast", "-1mbit", "1000gbit", "NaN", "mbit", "100mb", "1Xbit", "1 2", "Inf", "1e40"} {
		if _, err := ParseRate(in); !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseRate(%q) accepted", in)
		}
	}
}

func TestParseLoss(t *testing.T) {
	for in, want := range map[string]float64{"0.001": 0.001, "0.1%": 0.001, "0": 0, "100%": 1} {
		got, err := ParseLoss(in)
		if err != nil || math.Abs(got-want) > 1e-12 {
			t.Errorf("ParseLoss(%q) = %v, %v", in, got, err)
		}
	}
	for _, in := range []string{"2", "-1%", "x", "150%"} {
		if _, err := ParseLoss(in); err == nil {
			t.Errorf("ParseLoss(%q) accepted", in)
		}
	}
}

func TestPresets(t *testing.T) {
	for _, n := range PresetNames() {
		c, err := PresetConfig(n)
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Validate(); err != nil {
			t.Errorf("preset %s invalid: %v", n, err)
		}
	}
	r, _ := PresetConfig("realistic")
	if r.RTT() != 50*time.Millisecond || r.Up.Loss != 0.001 || r.Up.Rate != Rate12MiB {
		t.Errorf("realistic = %+v", r)
	}
	// netem's jitter σ 10 ms, applied to each direction as WANem does.
	if r.Up.Jitter != 10*time.Millisecond || r.Down.Jitter != 10*time.Millisecond || !r.Reorder {
		t.Errorf("realistic jitter %v/%v reorder %v, want 10ms each way, reordering", r.Up.Jitter, r.Down.Jitter, r.Reorder)
	}
	if _, err := PresetConfig("moon"); !errors.Is(err, ErrInvalid) {
		t.Errorf("unknown preset accepted")
	}
	// Default queue: 1.5 x BDP (RTT + 2 ms host slack), at least 64 packets.
	c := r.withDefaults()
	bdp := float64(Rate12MiB) / 8 * 0.052
	if c.Up.Queue != int(1.5*bdp) {
		t.Errorf("default queue %d, want %d", c.Up.Queue, int(1.5*bdp))
	}
	if q := Symmetric(Dir{Rate: 1e6}).withDefaults().Up.Queue; q != 64*DefaultMTU {
		t.Errorf("default queue floor %d", q)
	}
}
