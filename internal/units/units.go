// Package units is the one parser for byte sizes (and the prefix part of
// bit rates) that every flag, config key and URL option of tristore uses,
// so that "1M" means the same thing everywhere:
//
//	4096            bytes (a bare number is always bytes)
//	64k, 64kB       SI:  64 × 1000      (k, M, G, T, P: powers of 1000)
//	64Ki, 64KiB     IEC: 64 × 1024      (Ki, Mi, Gi, Ti, Pi: powers of 1024)
//	1.5Gi, 1e9      a fraction or exponent is fine if the result is a whole number of bytes
//
// Prefix letters are case-insensitive (k = K, m = M: there is no milli-byte),
// the trailing "B" is optional and must be upper case (a lower-case "b" is a
// bit in network rates, so "64kb" is refused rather than guessed), and a
// space may separate the number from the unit. Anything else is an error
// that names the accepted forms. Earlier tristore versions read "1M" as MiB
// in `volume create` and as 10^6 elsewhere; now it is 10^6 everywhere and
// "1Mi" is MiB.
//
// netem's rates ("100mbit", "12.5MiB/s") use Parse for the number and the
// prefix and interpret the remaining unit themselves.
package units

import (
	"errors"
	"fmt"
	"math"
	"math/big"
	"strconv"
	"strings"
)

// ErrSyntax is wrapped by every parse error.
var ErrSyntax = errors.New("invalid size")

// Accepted describes the accepted size forms, for error and help texts.
const Accepted = "a whole number of bytes: 4096, 64k/64kB (×1000), 64Ki/64KiB (×1024); prefixes k M G T P are powers of 1000, Ki Mi Gi Ti Pi powers of 1024"

// prefixes in the order Format tries them (largest first).
var prefixes = []struct {
	name string
	mult int64
}{
	{"Pi", 1 << 50}, {"P", 1e15},
	{"Ti", 1 << 40}, {"T", 1e12},
	{"Gi", 1 << 30}, {"G", 1e9},
	{"Mi", 1 << 20}, {"M", 1e6},
	{"Ki", 1 << 10}, {"k", 1e3},
}

// Quantity is a parsed "NUMBER[PREFIX]UNIT": Value is the number times the
// prefix's multiplier (exact), Unit what followed the prefix ("" if nothing).
type Quantity struct {
	Value  *big.Rat
	Prefix string // as normalised: "k", "M", ..., "Ki", "Mi", ... or ""
	Unit   string
}

// Parse splits s into a number, an optional SI or IEC prefix and the rest
// (the unit, returned as written). The number is decimal: digits with an
// optional fraction and exponent ("12", "1.5", "1e9"); no sign, no hex.
// A prefix needs a number before it ("k" alone is an error). Parse does not
// judge the unit: ParseSize accepts "" and "B", netem's ParseRate bits and
// bytes per second.
func Parse(s string) (Quantity, error) {
	t := strings.TrimSpace(s)
	i := 0
	digits := func() int {
		j := i
		for i < len(t) && t[i] >= '0' && t[i] <= '9' {
			i++
		}
		return i - j
	}
	n := digits()
	if i < len(t) && t[i] == '.' {
		i++
		n += digits()
	}
	if n == 0 {
		return Quantity{}, fmt.Errorf("%w %q: no number", ErrSyntax, s)
	}
	// An exponent only if digits follow: "1e9" is 10^9, but "1E" stays
	// for the error below (E is not a prefix we accept).
	if i < len(t) && (t[i] == 'e' || t[i] == 'E') {
		j := i + 1
		if j < len(t) && (t[j] == '+' || t[j] == '-') {
			j++
		}
		if j < len(t) && t[j] >= '0' && t[j] <= '9' {
			i = j
			digits()
		}
	}
	num := t[:i]
	if len(num) > 64 {
		return Quantity{}, fmt.Errorf("%w %q: number too long", ErrSyntax, s)
	}
	v, ok := new(big.Rat).SetString(num)
	if !ok {
		return Quantity{}, fmt.Errorf("%w %q: bad number %q", ErrSyntax, s, num)
	}
	if e := strings.IndexAny(num, "eE"); e >= 0 {
		// Keep exponents sane: big.Rat would happily build 1e1000000000.
		x, err := strconv.Atoi(num[e+1:])
		if err != nil || x > 30 || x < -30 {
			return Quantity{}, fmt.Errorf("%w %q: exponent out of range", ErrSyntax, s)
		}
	}
	rest := strings.TrimLeft(t[i:], " ")
	q := Quantity{Value: v}
	if rest != "" {
		p := strings.ToUpper(rest[:1])
		if p == "K" || p == "M" || p == "G" || p == "T" || p == "P" {
			name := p
			if p == "K" {
				name = "k"
			}
			rest = rest[1:]
			if rest != "" && rest[0] == 'i' {
				name, rest = p+"i", rest[1:]
			}
			for _, pr := range prefixes {
				if pr.name == name {
					q.Prefix = name
					v.Mul(v, new(big.Rat).SetInt64(pr.mult))
				}
			}
		}
	}
	q.Unit = rest
	return q, nil
}

// ParseSize parses a byte count (see the package comment). The result is
// never negative; callers that need a positive size check for 0.
func ParseSize(s string) (int64, error) {
	q, err := Parse(s)
	if err != nil {
		return 0, fmt.Errorf("%w (want %s)", err, Accepted)
	}
	switch q.Unit {
	case "", "B":
	case "b", "bit":
		return 0, fmt.Errorf("%w %q: a size is in bytes, write %sB (a lower-case b is a bit)", ErrSyntax, s, strings.TrimSuffix(strings.TrimSpace(s), q.Unit))
	default:
		return 0, fmt.Errorf("%w %q: unknown unit %q (want %s)", ErrSyntax, s, q.Unit, Accepted)
	}
	if !q.Value.IsInt() {
		return 0, fmt.Errorf("%w %q: not a whole number of bytes (%s)", ErrSyntax, s, q.Value.FloatString(3))
	}
	n := q.Value.Num()
	if !n.IsInt64() {
		return 0, fmt.Errorf("%w %q: larger than %d bytes", ErrSyntax, s, int64(math.MaxInt64))
	}
	return n.Int64(), nil
}

// FormatIEC prints n as exactly as ParseSize reads it back: with the
// largest IEC prefix that divides it ("64MiB", "1536KiB"), else in bytes.
func FormatIEC(n int64) string { return format(n, "i") }

// FormatSI is FormatIEC with SI prefixes ("64MB", "1500kB").
func FormatSI(n int64) string { return format(n, "") }

func format(n int64, kind string) string {
	if n != 0 {
		for _, p := range prefixes {
			if strings.HasSuffix(p.name, "i") == (kind == "i") && n%p.mult == 0 {
				return strconv.FormatInt(n/p.mult, 10) + p.name + "B"
			}
		}
	}
	return strconv.FormatInt(n, 10)
}

// Size is a byte count usable as a command-line flag (it implements
// pflag.Value): Set parses with ParseSize, String prints FormatIEC so the
// help shows "(default 1MiB)".
type Size int64

func (s *Size) Set(v string) error {
	n, err := ParseSize(v)
	if err != nil {
		return err
	}
	*s = Size(n)
	return nil
}

func (s *Size) String() string { return FormatIEC(int64(*s)) }

// Type names the flag's value in help output.
func (s *Size) Type() string { return "size" }
