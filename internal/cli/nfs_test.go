package cli

import (
	"net/url"
	"strings"
	"testing"
	"time"
)

// TestParseNFSURL pins what every nfs:// URL option sets, the defaults
// that fill unset options, and the errors for bad values.
func TestParseNFSURL(t *testing.T) {
	u, err := parseNFSURL("nfs://h.example:2050/exp/a/../b?mountport=20048&rsize=65536&wsize=131072&uid=7&gid=0&parallel=3", url.Values{"rsize": {"4096"}, "parallel": {""}})
	if err != nil {
		t.Fatal(err)
	}
	if u.Addr != "h.example:2050" || u.MountAddr != "h.example:20048" || u.Opts.MountAddr != u.MountAddr || u.Path != "/exp/b" {
		t.Errorf("addresses/path: %+v", u)
	}
	o := u.Opts
	if o.Rsize != 65536 || o.Wsize != 131072 || o.UID == nil || *o.UID != 7 || o.GID == nil || *o.GID != 0 || o.Parallel != 3 {
		t.Errorf("options: %+v", o)
	}

	u, err = parseNFSURL("nfs://[::1]/", url.Values{"wsize": {"8192"}, "uid": {""}})
	if err != nil {
		t.Fatal(err)
	}
	if u.Addr != "[::1]:2049" || u.MountAddr != "" || u.Path != "/" || u.Opts.Wsize != 8192 || u.Opts.Rsize != 0 || u.Opts.UID != nil || u.Opts.GID != nil || u.Opts.Parallel != 0 {
		t.Errorf("defaults: %+v %+v", u, u.Opts)
	}

	for raw, want := range map[string]string{
		"http://h/x":                 "scheme must be nfs://",
		"nfs:///x":                   "missing host",
		"nfs://h/x?mountport=70000":  "URL option mountport",
		"nfs://h/x?rsize=abc":        "URL option rsize",
		"nfs://h/x?uid=-1":           "URL option uid",
		"nfs://h/x?gid=4294967296":   "URL option gid",
		"nfs://h/x?parallel=65536":   "URL option parallel",
		"nfs://h/x?rsize=1024":       "want 4096..4194304",
		"nfs://h/x?wsize=8388608":    "want 4096..4194304",
		"nfs://h/x?wsize=4096&uid=x": "URL option uid",
	} {
		if _, err := parseNFSURL(raw, nil); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one containing %q", raw, err, want)
		}
	}
}

// TestParseNFSURLHardSoft pins the nfs(5) retry options: hard/soft (URL
// wins over the flag default), timeo in tenths of a second, retrans (0 =
// none), and their errors.
func TestParseNFSURLHardSoft(t *testing.T) {
	mountDefaults := url.Values{"hard": {"1"}, "timeo": {"600"}, "retrans": {"2"}}
	for _, c := range []struct {
		raw     string
		def     url.Values
		hard    bool
		timeout time.Duration
		retries int
	}{
		{"nfs://h/x", mountDefaults, true, 60 * time.Second, 2},
		{"nfs://h/x?soft&timeo=5&retrans=1", mountDefaults, false, 500 * time.Millisecond, 1},
		{"nfs://h/x?soft=1&retrans=0", mountDefaults, false, 60 * time.Second, -1},
		{"nfs://h/x?hard", url.Values{"soft": {"1"}}, true, 0, 0},
		{"nfs://h/x", url.Values{"soft": {"1"}}, false, 0, 0},
		{"nfs://h/x", nil, false, 0, 0},
	} {
		u, err := parseNFSURL(c.raw, c.def)
		if err != nil {
			t.Errorf("%s: %v", c.raw, err)
			continue
		}
		if u.Opts.Hard != c.hard || u.Opts.Timeout != c.timeout || u.Opts.Retries != c.retries {
			t.Errorf("%s (defaults %v): hard %v timeout %v retries %d, want %v %v %d", c.raw, c.def, u.Opts.Hard, u.Opts.Timeout, u.Opts.Retries, c.hard, c.timeout, c.retries)
		}
	}
	for raw, want := range map[string]string{
		"nfs://h/x?hard&soft":    "hard and soft both given",
		"nfs://h/x?soft=maybe":   "URL option soft",
		"nfs://h/x?timeo=0":      "want 1..6000",
		"nfs://h/x?timeo=x":      "URL option timeo",
		"nfs://h/x?retrans=5000": "want 0..1000",
	} {
		if _, err := parseNFSURL(raw, nil); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one containing %q", raw, err, want)
		}
	}
}
