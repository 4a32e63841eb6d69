package netem

import (
	"fmt"
	"sort"
	"time"
)

// Rate12MiB is the 12.5 MiB/s bottleneck of seed 000's WANem testbed
// (104.8576 Mbit/s).
const Rate12MiB = 12.5 * 8 * (1 << 20)

// Preset is a named link setting.
type Preset struct {
	Name    string
	Help    string
	Dir     Dir  // applied to both directions
	Reorder bool // jitter may reorder packets
}

// Presets are named after seed 000's three network conditions, plus a few
// everyday ones. Delay and jitter are per direction: "50 ms RTT" is 25 ms
// each way. Seed 000's "±10 ms jitter, normal distribution" is netem's
// jitter parameter (σ), which WANem applies to a direction: so realistic
// has σ 10 ms in each direction (RTT σ ≈ 14 ms). Loss applies to each
// direction.
var Presets = map[string]Preset{
	"ideal":     {"ideal", "seed 000 'ideal': 12.5 MiB/s, no delay, jitter or loss", Dir{Rate: Rate12MiB}, false},
	"delay":     {"delay", "seed 000 'delay': 12.5 MiB/s, 50 ms RTT", Dir{Rate: Rate12MiB, Delay: 25 * time.Millisecond}, false},
	"realistic": {"realistic", "seed 000 'realistic': 12.5 MiB/s, 50 ms RTT, 0.1 % loss, jitter σ 10 ms each way (normal, reordering as WANem/netem)", Dir{Rate: Rate12MiB, Delay: 25 * time.Millisecond, Jitter: 10 * time.Millisecond, Loss: 0.001}, true},
	"lan":       {"lan", "1 Gbit/s, 0.2 ms RTT", Dir{Rate: 1e9, Delay: 100 * time.Microsecond}, false},
	"wifi":      {"wifi", "50 Mbit/s, 6 ms RTT, RTT jitter σ 2.8 ms, 0.5 % loss", Dir{Rate: 50e6, Delay: 3 * time.Millisecond, Jitter: 2 * time.Millisecond, Loss: 0.005}, false},
	"wan":       {"wan", "100 Mbit/s, 40 ms RTT, RTT jitter σ 1.4 ms, 0.01 % loss", Dir{Rate: 100e6, Delay: 20 * time.Millisecond, Jitter: time.Millisecond, Loss: 0.0001}, false},
}

// PresetNames lists the presets in a stable order.
func PresetNames() []string {
	var n []string
	for k := range Presets {
		n = append(n, k)
	}
	sort.Strings(n)
	return n
}

// PresetConfig returns a symmetric Config for a preset name.
func PresetConfig(name string) (Config, error) {
	p, ok := Presets[name]
	if !ok {
		return Config{}, fmt.Errorf("%w: unknown preset %q (have %v)", ErrInvalid, name, PresetNames())
	}
	c := Symmetric(p.Dir)
	c.Reorder = p.Reorder
	return c, nil
}
