package units

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestParseSize(t *testing.T) {
	for _, c := range []struct {
		in   string
		want int64
	}{
		{"0", 0}, {"4096", 4096}, {" 4096 ", 4096}, {"512B", 512},
		// SI: powers of 1000, with or without B, either case of the prefix
		{"1k", 1000}, {"1K", 1000}, {"64kB", 64000}, {"64KB", 64000}, {"1M", 1e6}, {"1m", 1e6},
		{"1MB", 1e6}, {"1G", 1e9}, {"1GB", 1e9}, {"2T", 2e12}, {"1P", 1e15},
		// IEC: powers of 1024
		{"1Ki", 1024}, {"1ki", 1024}, {"64KiB", 65536}, {"1Mi", 1 << 20}, {"1MiB", 1 << 20},
		{"1Gi", 1 << 30}, {"1GiB", 1 << 30}, {"1Ti", 1 << 40}, {"1Pi", 1 << 50}, {"8191Pi", 8191 << 50},
		// fractions and exponents when the result is whole bytes; a space before the unit
		{"1.5Ki", 1536}, {"0.5k", 500}, {"1e9", 1e9}, {"1.5e3", 1500}, {"2.5 MiB", 5 << 19}, {"1 k", 1000},
		{"9223372036854775807", math.MaxInt64},
	} {
		got, err := ParseSize(c.in)
		if err != nil || got != c.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d", c.in, got, err, c.want)
		}
	}
}

func TestParseSizeErrors(t *testing.T) {
	for _, c := range []struct{ in, msg string }{
		{"", "no number"}, {"k", "no number"}, {"MiB", "no number"}, {"-1", "no number"}, {"+1", "no number"},
		{"1X", `unknown unit "X"`}, {"1MIB", `unknown unit "IB"`}, {"1Mib", "lower-case b is a bit"},
		{"64kb", "write 64kB"}, {"1mbit", "a size is in bytes"}, {"1E", `unknown unit "E"`},
		{"0.5", "not a whole number"}, {"1.1Ki", "not a whole number"}, {"1e-1", "not a whole number"},
		{"8192Pi", "larger than"}, {"9223372036854775808", "larger than"}, {"1e31", "exponent"},
		{"0x10", `unknown unit "x10"`}, {"1,5M", `unknown unit ",5M"`}, {"1 2", `unknown unit "2"`},
		{strings.Repeat("9", 80), "too long"},
	} {
		_, err := ParseSize(c.in)
		if !errors.Is(err, ErrSyntax) || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("ParseSize(%q) error %v; want ErrSyntax containing %q", c.in, err, c.msg)
		}
	}
	// The error names the accepted forms.
	if _, err := ParseSize("3 furlongs"); err == nil || !strings.Contains(err.Error(), "64Ki/64KiB (×1024)") {
		t.Errorf("error does not name the accepted forms: %v", err)
	}
}

func TestFormat(t *testing.T) {
	for n, want := range map[int64][2]string{
		0: {"0", "0"}, 1: {"1", "1"}, 1000: {"1000", "1kB"}, 1024: {"1KiB", "1024"}, 1536: {"1536", "1536"},
		64 << 20: {"64MiB", "67108864"}, 64e6: {"62500KiB", "64MB"}, 1 << 50: {"1PiB", "1125899906842624"}, 3e15: {"2929687500000KiB", "3PB"}, 1e3 + 1: {"1001", "1001"},
	} {
		if got := FormatIEC(n); got != want[0] {
			t.Errorf("FormatIEC(%d) = %q; want %q", n, got, want[0])
		}
		if got := FormatSI(n); got != want[1] {
			t.Errorf("FormatSI(%d) = %q; want %q", n, got, want[1])
		}
	}
}

func TestSizeFlag(t *testing.T) {
	var s Size = 1 << 20
	if s.String() != "1MiB" || s.Type() != "size" {
		t.Fatalf("String %q Type %q", s.String(), s.Type())
	}
	if err := s.Set("256Ki"); err != nil || s != 256<<10 {
		t.Fatalf("Set(256Ki) = %v, %d", err, s)
	}
	if err := s.Set("256x"); err == nil || s != 256<<10 {
		t.Fatalf("Set(256x) = %v and changed the value to %d", err, s)
	}
}

// FuzzParseSize checks properties, not only "no panic": every accepted size
// is non-negative and prints back (IEC and SI) to itself; every rejected
// one wraps ErrSyntax; a bare decimal number is exactly strconv's value.
func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"0", "4096", "64k", "64KiB", "1.5Gi", "1e9", "2.5 MiB", "64kb", "1X", "8192Pi", "-1", ".5k"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseSize(s)
		if err != nil {
			if !errors.Is(err, ErrSyntax) {
				t.Fatalf("ParseSize(%q): error %v does not wrap ErrSyntax", s, err)
			}
			return
		}
		if n < 0 {
			t.Fatalf("ParseSize(%q) = %d < 0", s, n)
		}
		for _, f := range []func(int64) string{FormatIEC, FormatSI} {
			out := f(n)
			back, err := ParseSize(out)
			if err != nil || back != n {
				t.Fatalf("ParseSize(%q) = %d, formatted %q, parsed back %d, %v", s, n, out, back, err)
			}
		}
		// Any accepted size with an explicit "B" or a prefix still parses
		// the same when the B is added or removed.
		t2 := strings.TrimSpace(s)
		if strings.HasSuffix(t2, "B") {
			if back, err := ParseSize(strings.TrimSuffix(t2, "B")); strings.TrimSuffix(t2, "B") != "" && err == nil && back != n {
				t.Fatalf("%q = %d but without B %d", s, n, back)
			}
		}
	})
}

// FuzzFormat: FormatIEC/FormatSI of any non-negative int64 parses back to it.
func FuzzFormat(f *testing.F) {
	for _, n := range []int64{0, 1, 1000, 1024, 1 << 40, math.MaxInt64, 3e15} {
		f.Add(n)
	}
	f.Fuzz(func(t *testing.T, n int64) {
		if n < 0 {
			n = -(n + 1)
		}
		for _, out := range []string{FormatIEC(n), FormatSI(n)} {
			if back, err := ParseSize(out); err != nil || back != n {
				t.Fatalf("%d formatted %q parsed back %d, %v", n, out, back, err)
			}
		}
	})
}
