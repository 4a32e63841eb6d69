package cli

import (
	"fmt"

	"github.com/spf13/pflag"

	"github.com/tristore/tristore/internal/units"
)

// Byte sizes in flags, TRISTORE_<NAME> variables and config files all use
// internal/units: 4096 (bytes), 64k (64×1000), 64Ki or 64KiB (64×1024).

// sizeFlag adds a byte-size flag with a default in bytes; read it with
// cfgSize, never cfg.GetInt (which cannot read "1MiB" from the environment).
func sizeFlag(fs *pflag.FlagSet, name string, def int64, usage string) {
	v := units.Size(def)
	fs.Var(&v, name, usage)
}

// cfgSize reads a size flag (flag > env > config file > default) and checks
// it is within [lo, hi].
func cfgSize(name string, lo, hi int64) (int64, error) {
	s := cfg.GetString(name)
	n, err := units.ParseSize(s)
	if err != nil {
		return 0, fmt.Errorf("--%s: %w", name, err)
	}
	if n < lo || n > hi {
		return 0, fmt.Errorf("--%s %s: want %s..%s", name, s, units.FormatIEC(lo), units.FormatIEC(hi))
	}
	return n, nil
}

// optSize parses an optional size string ("" is 0).
func optSize(s string) (int64, error) {
	if s == "" {
		return 0, nil
	}
	return units.ParseSize(s)
}
