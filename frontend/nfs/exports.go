package nfs

import (
	"fmt"
	"net/netip"
	"path"
	"strconv"
	"strings"

	"github.com/tristore/tristore/vfs"
)

// Export is one exported subtree: the data root ("/") or a bucket ("/name").
type Export struct {
	Path     string // "/" or "/bucket" (a path inside the data tree)
	ReadOnly bool   // ro: every modifying call gets NFS3ERR_ROFS
	// Async answers namespace and attribute changes before they are on
	// disk (knfsd's "async"); default sync, as RFC 1813 requires.
	Async   bool
	Clients []netip.Prefix // allowed client networks; empty = 127.0.0.0/8 and ::1
	// RootSquash maps uid 0 to AnonUID/AnonGID; AllSquash maps everyone.
	RootSquash, AllSquash bool
	AnonUID, AnonGID      uint32

	fs *vfs.FS
}

// DefaultExport is what `tristore serve` exports when none is configured:
// the whole data tree, read-write, to loopback clients, without root squash
// (the server is a single-user development store by default; configure
// root_squash for anything shared).
const DefaultExport = "/=rw,clients=127.0.0.0/8,no_root_squash"

// ParseExport parses "PATH=opt,opt,..." with options
//
//	rw | ro                    (default rw)
//	sync | async               (default sync: CREATE, MKDIR, RENAME, SETATTR... are on disk before the reply)
//	clients=CIDR[+CIDR...]     (default 127.0.0.0/8+::1/128; a bare address means /32 or /128)
//	root_squash | no_root_squash | all_squash   (default no_root_squash)
//	anonuid=N, anongid=N       (default 65534)
func ParseExport(s string) (Export, error) {
	p, opts, _ := strings.Cut(s, "=")
	p = strings.TrimSpace(p)
	if p == "" || !strings.HasPrefix(p, "/") {
		return Export{}, fmt.Errorf("export %q: path must start with /", s)
	}
	p = path.Clean(p)
	if strings.Count(p, "/") > 1 {
		return Export{}, fmt.Errorf("export %q: only the root (/) or a bucket (/name) can be exported", s)
	}
	if strings.HasPrefix(path.Base(p), vfs.ReservedPrefix) {
		return Export{}, fmt.Errorf("export %q: reserved name", s)
	}
	e := Export{Path: p, AnonUID: 65534, AnonGID: 65534}
	if opts != "" {
		for _, o := range strings.Split(opts, ",") {
			k, v, hasV := strings.Cut(strings.TrimSpace(o), "=")
			switch k {
			case "rw":
				e.ReadOnly = false
			case "ro":
				e.ReadOnly = true
			case "sync":
				e.Async = false
			case "async":
				e.Async = true
			case "root_squash":
				e.RootSquash = true
			case "no_root_squash":
				e.RootSquash = false
			case "all_squash":
				e.AllSquash = true
			case "anonuid", "anongid":
				n, err := strconv.ParseUint(v, 10, 32)
				if !hasV || err != nil {
					return Export{}, fmt.Errorf("export %q: %s needs a number", s, k)
				}
				if k == "anonuid" {
					e.AnonUID = uint32(n)
				} else {
					e.AnonGID = uint32(n)
				}
			case "clients":
				if !hasV || v == "" {
					return Export{}, fmt.Errorf("export %q: clients needs CIDR[+CIDR...]", s)
				}
				for _, c := range strings.Split(v, "+") {
					pr, err := parsePrefix(c)
					if err != nil {
						return Export{}, fmt.Errorf("export %q: %w", s, err)
					}
					e.Clients = append(e.Clients, pr)
				}
			case "":
			default:
				return Export{}, fmt.Errorf("export %q: unknown option %q", s, k)
			}
		}
	}
	if len(e.Clients) == 0 {
		e.Clients = []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}
	}
	return e, nil
}

func parsePrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		return p.Masked(), err
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// allows reports whether a client at addr may use the export.
func (e *Export) allows(addr netip.Addr) bool {
	addr = addr.Unmap()
	for _, p := range e.Clients {
		if p.Contains(addr) {
			return true
		}
	}
	return false
}

// cred applies the squash rules to the caller's identity.
func (e *Export) cred(a *authInfo) vfs.Cred {
	if a.none || e.AllSquash || (e.RootSquash && a.uid == 0) {
		return vfs.Cred{UID: e.AnonUID, GID: e.AnonGID}
	}
	return vfs.Cred{UID: a.uid, GID: a.gid, Groups: a.gids}
}

func (e *Export) groups() []string {
	var g []string
	for _, p := range e.Clients {
		g = append(g, p.String())
	}
	return g
}
