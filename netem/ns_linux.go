package netem

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netns"
	"golang.org/x/sys/unix"
)

// NetnsDir is where named namespaces are bind-mounted (as `ip netns` does).
const NetnsDir = "/run/netns"

// ErrNotRoot and ErrNoTun say why a namespace link cannot be built here;
// the caller may fall back to Proxy.
var (
	ErrNotRoot = errors.New("netem: network namespaces need root (use `tristore netem proxy` for a no-root TCP proxy without packet loss)")
	ErrNoTun   = errors.New("netem: /dev/net/tun is missing or unusable (load the tun module, or use `tristore netem proxy`)")
)

// CheckHost refuses clearly when this machine cannot build a link.
func CheckHost() error {
	if os.Geteuid() != 0 {
		return ErrNotRoot
	}
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return fmt.Errorf("%w: %v", ErrNoTun, err)
	}
	unix.Close(fd)
	return nil
}

// side is one namespace with its TUN device.
type side struct {
	nsName string
	ns     netns.NsHandle
	tun    *os.File
	ifname string
}

// openTun creates a TUN device (raw IPv4 packets, no packet-info header)
// in the calling thread's namespace. The descriptor is opened blocking so
// that os.File leaves it out of Go's poller (which would wake on every
// packet); the forwarder's own epoll loop makes it non-blocking. With offload every
// frame carries a virtio_net_hdr and the device takes and hands out TCPv4
// super-packets with offloaded checksums (gso.go says why).
func openTun(name string, offload bool) (*os.File, error) {
	fd, err := unix.Open("/dev/net/tun", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoTun, err)
	}
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	flags := uint16(unix.IFF_TUN | unix.IFF_NO_PI)
	if offload {
		flags |= unix.IFF_VNET_HDR
	}
	ifr.SetUint16(flags)
	if err := unix.IoctlIfreq(fd, unix.TUNSETIFF, ifr); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("TUNSETIFF %s: %w", name, err)
	}
	if offload {
		// The header is 10 bytes (struct virtio_net_hdr, vnetHdrLen) by
		// default; TUNSETVNETHDRSZ would only make it longer.
		if err := unix.IoctlSetInt(fd, unix.TUNSETOFFLOAD, tunFCsum|tunFTSO4); err != nil {
			unix.Close(fd)
			return nil, fmt.Errorf("TUNSETOFFLOAD %s: %w", name, err)
		}
	}
	return os.NewFile(uintptr(fd), "tun:"+name), nil
}

// newSide creates namespace nsName with a TUN device ifname in it, and
// configures address, MTU, queue length and loopback. On error it removes
// what it created.
func newSide(nsName, ifname string, addr netip.Addr, prefixLen, mtu int, offload bool) (s *side, err error) {
	s = &side{nsName: nsName, ifname: ifname, ns: -1}
	defer func() {
		if err != nil {
			s.close()
		}
	}()
	if err := inNetns(nsName, func() error {
		ns, err := netns.NewNamed(nsName)
		if err != nil {
			return fmt.Errorf("creating namespace %s: %w", nsName, err)
		}
		s.ns = ns
		return nil
	}, func() error {
		// On error s.close (deferred above) closes what was opened.
		var err error
		s.tun, err = openTun(ifname, offload)
		return err
	}); err != nil {
		return s, err
	}
	h, err := netlink.NewHandleAt(s.ns)
	if err != nil {
		return s, fmt.Errorf("netlink in %s: %w", nsName, err)
	}
	defer h.Close()
	lo, err := h.LinkByName("lo")
	if err == nil {
		err = h.LinkSetUp(lo)
	}
	if err != nil {
		return s, fmt.Errorf("%s: loopback up: %w", nsName, err)
	}
	l, err := h.LinkByName(ifname)
	if err != nil {
		return s, fmt.Errorf("%s: %w", nsName, err)
	}
	if err := h.LinkSetMTU(l, mtu); err != nil {
		return s, fmt.Errorf("%s: mtu %d: %w", nsName, mtu, err)
	}
	// A TUN device's default transmit queue (500 packets) overflows at
	// 1 Gbit/s bursts before the forwarder reads; drops must happen in
	// our queue, where they are counted, not in the kernel's.
	if err := h.LinkSetTxQLen(l, 4096); err != nil {
		return s, fmt.Errorf("%s: txqueuelen: %w", nsName, err)
	}
	a := &netlink.Addr{IPNet: prefixNet(addr, prefixLen)}
	if err := h.AddrAdd(l, a); err != nil {
		return s, fmt.Errorf("%s: address %v/%d: %w", nsName, addr, prefixLen, err)
	}
	if err := h.LinkSetUp(l); err != nil {
		return s, fmt.Errorf("%s: %s up: %w", nsName, ifname, err)
	}
	return s, nil
}

// inNetns runs fn on a locked OS thread that enter has moved into a
// network namespace (netns.NewNamed or netns.Set), then moves the thread
// back. Namespaces belong to threads, so sockets and devices fn opens land
// in that namespace. If going back fails, the thread stays locked and dies
// with this goroutine instead of running other goroutines in the wrong
// namespace.
func inNetns(what string, enter, fn func() error) error {
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		return err
	}
	defer orig.Close()
	if err := enter(); err != nil {
		if back := netns.Set(orig); back == nil {
			runtime.UnlockOSThread()
		}
		return err
	}
	ferr := fn()
	if err := netns.Set(orig); err != nil {
		return errors.Join(ferr, fmt.Errorf("leaving namespace %s: %w", what, err))
	}
	runtime.UnlockOSThread()
	return ferr
}

func prefixNet(a netip.Addr, bits int) *net.IPNet {
	b := a.As4()
	return &net.IPNet{IP: net.IP(b[:]), Mask: net.CIDRMask(bits, 32)}
}

// close removes the TUN device (by closing its only fd) and the namespace.
func (s *side) close() error {
	var errs []error
	if s.tun != nil {
		errs = append(errs, s.tun.Close())
		s.tun = nil
	}
	if s.ns >= 0 {
		s.ns.Close()
		s.ns = -1
	}
	if s.nsName != "" {
		if err := deleteNamed(s.nsName); err != nil {
			errs = append(errs, err)
		}
		s.nsName = ""
	}
	return errors.Join(errs...)
}

// deleteNamed unmounts and removes /run/netns/name; a missing name is fine.
func deleteNamed(name string) error {
	p := filepath.Join(NetnsDir, name)
	if err := unix.Unmount(p, unix.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, syscall.ENOENT) {
		return fmt.Errorf("unmount %s: %w", p, err)
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", p, err)
	}
	return nil
}

// Leftovers lists namespaces named ts-* (ours) in NetnsDir. If onlyDead,
// it lists only those whose creating process (the pid in
// "ts-<pid>-<rand>-c") is gone, so that a cleanup does not break a link in
// use.
func Leftovers(onlyDead bool) ([]string, error) {
	return leftoverNamespaces(func(n string) bool { return !onlyDead || !ownerAlive(n) })
}

// leftoverNamespaces lists the ts-* namespaces in NetnsDir that remove
// says to remove.
func leftoverNamespaces(remove func(name string) bool) ([]string, error) {
	ents, err := os.ReadDir(NetnsDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range ents {
		if n := e.Name(); strings.HasPrefix(n, "ts-") && remove(n) {
			out = append(out, n)
		}
	}
	return out, nil
}

// namePID is the pid in "ts-<pid>-...", or 0 if the name carries none.
func namePID(n string) int {
	f := strings.Split(n, "-")
	if len(f) < 3 {
		return 0
	}
	pid, err := strconv.Atoi(f[1])
	if err != nil || pid <= 0 {
		return 0
	}
	return pid
}

// ownerAlive reports whether the pid in name is a running process; a
// name without a pid has no owner that could be alive.
func ownerAlive(name string) bool {
	pid := namePID(name)
	return pid > 0 && pidRunning(pid)
}

// ownerDead reports whether name carries a pid and that process is gone.
// This is the rule Start applies on its own: a name without a pid (a
// user's --name) may belong to anyone, so only `netem cleanup` removes it.
func ownerDead(name string) bool {
	pid := namePID(name)
	return pid > 0 && !pidRunning(pid)
}

// pidRunning reports whether pid is a process that has not exited. A
// zombie (killed but not yet reaped by its parent) has closed its files,
// so it holds no TUN device or link any more and counts as gone; EPERM
// means the process exists.
func pidRunning(pid int) bool {
	if err := unix.Kill(pid, 0); err != nil && !errors.Is(err, unix.EPERM) {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return !errors.Is(err, os.ErrNotExist)
	}
	// The state follows the command name, which is in parentheses and
	// may itself contain ") ".
	if i := strings.LastIndexByte(string(b), ')'); i >= 0 && i+2 < len(b) {
		return b[i+2] != 'Z'
	}
	return true
}

// Cleanup removes leftover ts-* namespaces (with their devices) and any
// ts* TUN/other device left in the root namespace. With onlyDead it keeps
// those whose creating process still runs (and root-namespace devices
// whose name carries no pid). It returns the names removed.
func Cleanup(onlyDead bool) ([]string, error) {
	if os.Geteuid() != 0 {
		return nil, ErrNotRoot
	}
	if !onlyDead {
		all := func(string) bool { return true }
		return removeLeftovers(all, all)
	}
	return removeLeftovers(func(n string) bool { return !ownerAlive(n) }, ownerDead)
}

// removeDeadOwners removes the namespaces and devices of netem processes
// that were killed without closing their link (SIGKILL, OOM kill): those
// whose name carries a pid that no longer runs. Start calls it first, so
// that leftovers do not pile up until someone runs `netem cleanup`; links
// of live processes are never touched.
func removeDeadOwners() ([]string, error) {
	return removeLeftovers(ownerDead, ownerDead)
}

// removeLeftovers removes the ts-* namespaces for which removeNS says so,
// and the ts* devices in the root namespace for which removeDev says so.
// It returns the names removed.
func removeLeftovers(removeNS, removeDev func(name string) bool) ([]string, error) {
	names, err := leftoverNamespaces(removeNS)
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	for _, n := range names {
		if err := deleteNamed(n); err != nil {
			errs = append(errs, err)
			continue
		}
		removed = append(removed, n)
	}
	links, err := netlink.LinkList()
	if err == nil {
		for _, l := range links {
			n := l.Attrs().Name
			if !strings.HasPrefix(n, "ts-") && !(strings.HasPrefix(n, "ts") && l.Type() == "tuntap") {
				continue
			}
			if !removeDev(n) {
				continue
			}
			if err := netlink.LinkDel(l); err != nil {
				errs = append(errs, fmt.Errorf("deleting device %s: %w", n, err))
				continue
			}
			removed = append(removed, "dev "+n)
		}
	}
	return removed, errors.Join(errs...)
}
