package iscsi

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// DefaultPort is the IANA iSCSI port.
const DefaultPort = 3260

// Address is a parsed iscsi:// URL:
//
//	iscsi://[user[:secret]@]host[:port][/IQN[/LUN]][?options]
//
// The user info is one-way CHAP (the target checks the initiator). Query
// options: target_user and target_secret for mutual CHAP (the initiator
// checks the target too), header_digest / data_digest = crc32c|none, and
// initiator = the initiator IQN. The form matches libiscsi's URLs, so the
// same URL works with iscsi-ls, qemu-img and tristore.
type Address struct {
	Portal string // host:port
	Target string // IQN; empty for discovery-only URLs
	LUN    uint64
	HasLUN bool

	User, Secret             string
	TargetUser, TargetSecret string
	HeaderDigest, DataDigest bool
	Initiator                string
	// ReplacementTimeout is the replacement_timeout option (0: not given).
	ReplacementTimeout time.Duration
}

// ParseURL parses an iscsi:// URL. It does not contact anything.
func ParseURL(raw string) (*Address, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, fmt.Errorf("iscsi: bad URL %q: %w", raw, err)
	}
	return FromURL(u)
}

// FromURL is ParseURL for an already parsed URL.
func FromURL(u *url.URL) (*Address, error) {
	if u.Scheme != "iscsi" {
		return nil, fmt.Errorf("iscsi: URL %q: scheme must be iscsi://", u.Redacted())
	}
	if u.Host == "" {
		return nil, fmt.Errorf("iscsi: URL %q has no host", u.Redacted())
	}
	a := &Address{Portal: u.Host}
	if _, _, err := net.SplitHostPort(u.Host); err != nil {
		a.Portal = net.JoinHostPort(strings.Trim(u.Host, "[]"), strconv.Itoa(DefaultPort))
	}
	if err := checkPortal(a.Portal); err != nil {
		return nil, fmt.Errorf("iscsi: URL %q: %w", u.Redacted(), err)
	}
	if u.User != nil {
		a.User = u.User.Username()
		a.Secret, _ = u.User.Password()
	}
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	if len(parts) > 2 {
		return nil, fmt.Errorf("iscsi: URL %q: path must be /IQN[/LUN]", u.Redacted())
	}
	if parts[0] != "" {
		a.Target = parts[0]
	}
	if len(parts) == 2 && parts[1] != "" {
		n, err := strconv.ParseUint(parts[1], 10, 64)
		if err != nil {
			return nil, fmt.Errorf("iscsi: URL %q: LUN %q is not a number", u.Redacted(), parts[1])
		}
		a.LUN, a.HasLUN = n, true
	}
	q := u.Query()
	for k := range q {
		switch k {
		case "target_user", "target_secret", "header_digest", "data_digest", "initiator", "replacement_timeout":
		default:
			return nil, fmt.Errorf("iscsi: URL %q: unknown option %q", u.Redacted(), k)
		}
	}
	a.TargetUser, a.TargetSecret = q.Get("target_user"), q.Get("target_secret")
	if (a.TargetUser != "") != (a.TargetSecret != "") {
		return nil, fmt.Errorf("iscsi: URL %q: target_user and target_secret go together", u.Redacted())
	}
	if a.TargetUser != "" && a.User == "" {
		return nil, fmt.Errorf("iscsi: URL %q: mutual CHAP needs user:secret@ too", u.Redacted())
	}
	for k, dst := range map[string]*bool{"header_digest": &a.HeaderDigest, "data_digest": &a.DataDigest} {
		switch strings.ToLower(q.Get(k)) {
		case "", "none":
		case "crc32c":
			*dst = true
		default:
			return nil, fmt.Errorf("iscsi: URL %q: %s must be crc32c or none", u.Redacted(), k)
		}
	}
	a.Initiator = q.Get("initiator")
	if v := q.Get("replacement_timeout"); v != "" {
		d, err := ParseTimeout(v)
		if err != nil {
			return nil, fmt.Errorf("iscsi: URL %q: replacement_timeout: %w", u.Redacted(), err)
		}
		a.ReplacementTimeout = d
	}
	return a, nil
}

// String renders the address as a URL with the secrets removed.
func (a *Address) String() string {
	u := url.URL{Scheme: "iscsi", Host: a.Portal}
	if a.User != "" {
		u.User = url.User(a.User)
	}
	if a.Target != "" {
		u.Path = "/" + a.Target
		if a.HasLUN {
			u.Path += "/" + strconv.FormatUint(a.LUN, 10)
		}
	}
	return u.String()
}

// ParseTimeout reads a timeout given as whole seconds (as open-iscsi's
// settings are) or as a Go duration ("1500ms", "2m"); it must be positive.
func ParseTimeout(v string) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if n, nerr := strconv.ParseUint(v, 10, 32); nerr == nil {
		d, err = time.Duration(n)*time.Second, nil
	}
	if err != nil {
		return 0, fmt.Errorf("%q is neither seconds nor a duration", v)
	}
	if d <= 0 {
		return 0, fmt.Errorf("%q: must be positive", v)
	}
	return d, nil
}

// checkPortal accepts host:port with a non-empty host (a name, an IPv4
// address or a bracketed IPv6 address) and a port in 1..65535.
func checkPortal(p string) error {
	host, port, err := net.SplitHostPort(p)
	if err != nil {
		return fmt.Errorf("bad host:port %q: %v", p, err)
	}
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
		return fmt.Errorf("bad port %q", port)
	}
	if host == "" || strings.ContainsAny(host, "[]/ ") || strings.Contains(host, ":") && net.ParseIP(host) == nil {
		return fmt.Errorf("bad host %q", host)
	}
	return nil
}
