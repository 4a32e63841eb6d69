package cli

import (
	"net/url"
	"strings"
	"testing"
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
