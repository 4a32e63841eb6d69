package cli

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"

	"github.com/tristore/tristore/blockdev"
	"github.com/tristore/tristore/blockdev/filelun"
	"github.com/tristore/tristore/client/iscsi"
	"github.com/tristore/tristore/frontend"
	iscsitgt "github.com/tristore/tristore/frontend/iscsi"
	"github.com/tristore/tristore/raid"
)

// The RAID gateway: `tristore serve --raid NAME=MEMBER,MEMBER,...` assembles
// the array made by `tristore raid create` over those members (local files
// or iscsi:// LUNs of other targets) when serve starts, and serves it as LUN
// 0 of iqn.2026-11.io.tristore:-raid:NAME beside the store's own volumes, so
// `tristore mount iscsi://HOST:PORT/iqn.2026-11.io.tristore:-raid:NAME/0`
// opens it exactly as it opens a single volume. A member that cannot be
// opened (a target that is down, a file that is gone) is left out and the
// array starts degraded, with a warning naming it; too few members fail
// serve with the reason. The array stays open while serve runs (sessions
// come and go; the last one out only flushes it) and is closed cleanly —
// journal checkpointed, superblocks marked clean — when serve stops. An
// interrupted rebuild recorded in the superblocks continues in the
// background while the LUN is served, and a blank member in the list
// (first 4 KiB zero) replaces a failed slot, rebuilt the same way. See
// docs/raid.md.

// raidBucket is the IQN's bucket part for RAID volumes: a bucket name cannot
// start with '-', so it never clashes with a local bucket's volume.
const raidBucket = "-raid"

// RaidIQN is the target name a gateway serves array name as.
func RaidIQN(name string) string { return iscsitgt.TargetName(raidBucket, name) }

func raidServeFlags(fs *pflag.FlagSet) {
	fs.StringArray("raid", nil, "serve a RAID array as LUN 0 of iqn.2026-11.io.tristore:-raid:NAME: NAME=MEMBER,MEMBER,... "+
		"(members: local files or iscsi:// URLs, in any order; a blank member replaces a failed slot, rebuilt online; repeatable; needs the iSCSI front end)")
	fs.Duration("raid-member-timeout", 10*time.Second, "how long I/O waits for a lost iSCSI member to come back before the member is failed")
	sizeFlag(fs, "raid-rebuild-rate", 0, "rate limit (bytes/s) of a rebuild resumed at start (0 = none)")
}

// raidSpec is one --raid value.
type raidSpec struct {
	name    string
	members []string
}

func parseRaidSpecs(vals []string) ([]raidSpec, error) {
	var out []raidSpec
	seen := map[string]bool{}
	for _, v := range vals {
		name, list, ok := strings.Cut(v, "=")
		if !ok || list == "" {
			return nil, fmt.Errorf("--raid %q: want NAME=MEMBER,MEMBER,...", v)
		}
		if !filelun.ValidName(name) {
			return nil, fmt.Errorf("--raid %q: name %q: use a-z, 0-9 and '-' (at most 64)", v, name)
		}
		if seen[name] {
			return nil, fmt.Errorf("--raid: array %s given twice", name)
		}
		seen[name] = true
		s := raidSpec{name: name}
		for _, m := range strings.Split(list, ",") {
			if m = strings.TrimSpace(m); m != "" {
				s.members = append(s.members, m)
			}
		}
		out = append(out, s)
	}
	return out, nil
}

// gwArray is one device the gateway owns: an assembled array (--raid) or
// a volume on the data disks (--disks, serve_disks.go).
type gwArray struct {
	name   string
	iqn    string
	dev    blockdev.Device
	serial string
}

// raidGateway serves the assembled arrays and disk volumes as extra iSCSI
// targets and hands every other target name to next (the remote volumes).
type raidGateway struct {
	log    *slog.Logger
	arrays map[string]*gwArray // by lower-case IQN
	next   iscsitgt.ExtraVolumes

	bg     context.Context // background rebuilds; cancelled by close
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
}

// openGatewayMember opens one member for the gateway: an iscsi:// URL with
// the gateway's timeouts (the `tristore iscsi` flags are not serve's), or
// a local file.
func openGatewayMember(ctx context.Context, m string, timeout time.Duration) (blockdev.Device, error) {
	if !strings.HasPrefix(m, "iscsi://") {
		return openFileMember(m, 0)
	}
	a, err := iscsi.ParseURL(m)
	if err != nil {
		return nil, err
	}
	if a.Target == "" || !a.HasLUN {
		return nil, fmt.Errorf("URL %s needs /IQN/LUN", a)
	}
	c := iscsi.ConfigFromAddress(a)
	c.DialTimeout = timeout
	if c.ReplacementTimeout == 0 {
		c.ReplacementTimeout = timeout
	}
	return iscsi.Open(ctx, c)
}

// startRaidGateway assembles every --raid array into g. On error the
// caller closes g.
func startRaidGateway(ctx context.Context, g *raidGateway, specs []raidSpec) error {
	log := g.log
	timeout := cfg.GetDuration("raid-member-timeout")
	if timeout <= 0 {
		return fmt.Errorf("--raid-member-timeout %v: must be positive", timeout)
	}
	rate, err := cfgSize("raid-rebuild-rate", 0, 1<<40)
	if err != nil {
		return err
	}
	for _, s := range specs {
		var devs, blanks []blockdev.Device
		var missing, blankNames []string
		for _, m := range s.members {
			d, err := openGatewayMember(ctx, m, timeout)
			if err != nil {
				log.Warn("raid: member cannot be opened; assembling without it", "array", s.name, "member", m, "err", err)
				missing = append(missing, m)
				continue
			}
			if blank, err := isBlank(ctx, d); err == nil && blank {
				log.Info("raid: member is blank (no superblock, first 4 KiB zero): kept as a replacement for a failed slot", "array", s.name, "member", m)
				blanks = append(blanks, d)
				blankNames = append(blankNames, m)
				continue
			}
			devs = append(devs, d)
		}
		if len(devs) == 0 {
			closeAll(blanks)
			return fmt.Errorf("raid %s: none of its %d members could be opened", s.name, len(s.members))
		}
		a, err := raid.Assemble(ctx, devs)
		if err != nil {
			closeAll(devs)
			closeAll(blanks)
			if len(missing) > 0 {
				return fmt.Errorf("raid %s: %w (members not opened: %s)", s.name, err, strings.Join(missing, ", "))
			}
			return fmt.Errorf("raid %s: %w", s.name, err)
		}
		a.SetRebuildRate(rate)
		g.add(s.name, RaidIQN(s.name), a)
		st := a.Status()
		log.Info("raid: array assembled", "array", s.name, "level", st.Level, "members", st.Members, "size", st.Size,
			"events", st.Events, "journal_replayed", st.JournalReplayed, "journal_dropped", st.JournalDropped, "target", RaidIQN(s.name))
		if len(st.Failed) > 0 {
			log.Warn("raid: array is DEGRADED: reads of the failed slots are reconstructed from parity and one more member loss stops it; "+
				"give a blank member in --raid (or run `tristore raid replace`) to rebuild", "array", s.name, "failed_slots", st.Failed, "members_not_opened", missing)
		}
		if slot, _ := a.Rebuilding(); slot >= 0 || len(st.Failed) == 0 || len(blanks) == 0 {
			closeAll(blanks)
			if len(blanks) > 0 {
				log.Warn("raid: blank members not used (no failed slot to rebuild, or a rebuild is already recorded)", "array", s.name, "members", blankNames)
			}
			g.resume(s.name, a)
			continue
		}
		// A blank member and a failed slot: rebuild onto it online, one
		// slot (RAID-5 has one failure to repair; RAID-1 more, one at a time
		// at the next start).
		closeAll(blanks[1:])
		g.replace(s.name, a, st.Failed[0], blanks[0], blankNames[0])
	}
	return nil
}

// isBlank reports whether d has no superblock at all: its first
// SuperblockSize bytes are zero (a new volume or a wiped disk). Only such
// a member is ever taken as a replacement: a corrupt superblock is not.
func isBlank(ctx context.Context, d blockdev.Device) (bool, error) {
	if d.Size() < raid.SuperblockSize {
		return false, nil
	}
	b := make([]byte, raid.SuperblockSize)
	if _, err := d.ReadAt(ctx, b, 0); err != nil {
		return false, err
	}
	for _, c := range b {
		if c != 0 {
			return false, nil
		}
	}
	return true, nil
}

// replace rebuilds failed slot of a onto dev in the background while the
// array is served. Shutdown pauses it at its checkpoint; the next start
// (with dev among the members) resumes it.
func (g *raidGateway) replace(name string, a *raid.Array, slot int, dev blockdev.Device, member string) {
	log := g.log
	log.Info("raid: rebuilding a failed slot onto a blank member in the background", "array", name, "slot", slot, "member", member)
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		last := -1
		err := a.Replace(g.bg, slot, dev, func(done, total int64) {
			if pct := int(done * 10 / total); pct != last {
				last = pct
				log.Info("raid: rebuild", "array", name, "slot", slot, "done", done, "total", total)
			}
		})
		switch {
		case err == nil:
			log.Info("raid: rebuild verified; array in sync", "array", name, "slot", slot)
		case g.bg.Err() != nil:
			log.Info("raid: rebuild paused at shutdown; it resumes at the next start", "array", name, "slot", slot)
		default:
			if errors.Is(err, raid.ErrMismatch) { // refused before it was installed
				dev.Close()
			}
			log.Error("raid: rebuild failed", "array", name, "slot", slot, "err", err)
		}
	}()
}

func newGateway(log *slog.Logger, next iscsitgt.ExtraVolumes) *raidGateway {
	bg, cancel := context.WithCancel(context.Background())
	return &raidGateway{log: log, arrays: map[string]*gwArray{}, next: next, bg: bg, cancel: cancel}
}

// add registers dev as the target iqn; the gateway closes it at shutdown.
func (g *raidGateway) add(name, iqn string, dev blockdev.Device) {
	sum := sha256.Sum256([]byte("tristore-gateway:" + strings.ToLower(iqn)))
	g.arrays[strings.ToLower(iqn)] = &gwArray{name: name, iqn: iqn, dev: dev, serial: hex.EncodeToString(sum[:8])}
}

// resume continues a rebuild recorded in a's superblocks in the
// background while the array is served.
func (g *raidGateway) resume(name string, a *raid.Array) {
	slot, pos := a.Rebuilding()
	if slot < 0 {
		return
	}
	log := g.log
	log.Info("raid: resuming the recorded rebuild in the background", "array", name, "slot", slot, "from_byte", pos)
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		last := -1
		err := a.Resume(g.bg, func(done, total int64) {
			if pct := int(done * 10 / total); pct != last {
				last = pct
				log.Info("raid: rebuild", "array", name, "slot", slot, "done", done, "total", total)
			}
		})
		switch {
		case err == nil:
			log.Info("raid: rebuild verified; array in sync", "array", name, "slot", slot)
		case g.bg.Err() != nil:
			log.Info("raid: rebuild paused at shutdown; it resumes at the next start", "array", name, "slot", slot)
		default:
			log.Error("raid: rebuild failed", "array", name, "slot", slot, "err", err)
		}
	}()
}

// close stops background rebuilds and closes every array cleanly (once).
func (g *raidGateway) close() error {
	var err error
	g.once.Do(func() {
		g.cancel()
		g.wg.Wait()
		for _, ga := range g.arrays {
			if cerr := ga.dev.Close(); cerr != nil {
				g.log.Error("raid: closing array", "array", ga.name, "err", cerr)
				err = errors.Join(err, fmt.Errorf("raid %s: %w", ga.name, cerr))
				continue
			}
			g.log.Info("raid: array closed cleanly", "array", ga.name)
		}
	})
	return err
}

// Targets lists the arrays' IQNs, then next's.
func (g *raidGateway) Targets(ctx context.Context) ([]string, error) {
	var out []string
	for _, ga := range g.arrays {
		out = append(out, ga.iqn)
	}
	sort.Strings(out)
	if g.next == nil {
		return out, nil
	}
	more, err := g.next.Targets(ctx)
	return append(out, more...), err
}

// Open hands a login the array behind iqn. The device it returns does not
// close the array when the last session ends (the gateway owns it).
func (g *raidGateway) Open(ctx context.Context, iqn string) (blockdev.Device, string, bool, error) {
	if ga := g.arrays[strings.ToLower(iqn)]; ga != nil {
		return servedDev{ga.dev}, ga.serial, true, nil
	}
	if b, name, ok := iscsitgt.ParseTargetName(iqn); ok && (b == raidBucket || b == diskBucket) {
		return nil, "", false, fmt.Errorf("%w: no volume %s (%s) on this gateway", filelun.ErrNotVolume, name, b)
	}
	if g.next == nil {
		return nil, "", false, nil
	}
	return g.next.Open(ctx, iqn)
}

// servedDev is a gateway device as one target sees it: Close (the last
// session left) only flushes; the gateway closes the device at shutdown.
// The optional interfaces the SCSI layer looks for (FUA, unmap) are not
// passed through: a plain Device is what the arrays promise.
type servedDev struct{ blockdev.Device }

func (s servedDev) Close() error { return s.Flush(context.Background()) }

// gatewayServer closes the arrays after the iSCSI server has stopped and
// its sessions have drained.
type gatewayServer struct {
	frontend.Server
	g       *raidGateway
	serving sync.WaitGroup
}

func (s *gatewayServer) Serve(ctx context.Context, ln net.Listener) error {
	s.serving.Add(1)
	defer s.serving.Done()
	return s.Server.Serve(ctx, ln)
}

func (s *gatewayServer) Close() error {
	err := s.Server.Close()
	done := make(chan struct{})
	go func() { s.serving.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		s.g.log.Warn("raid: iSCSI sessions still draining after 15s; closing the arrays anyway")
	}
	return errors.Join(err, s.g.close())
}

var (
	_ iscsitgt.ExtraVolumes = (*raidGateway)(nil)
	_ blockdev.Device       = servedDev{}
	_ frontend.Server       = (*gatewayServer)(nil)
)

// checkGatewayFlags refuses --raid and --disks when the iSCSI front end is
// off: they would be silently ignored.
func checkGatewayFlags() error {
	if a := cfg.GetString("iscsi-addr"); a != "" && a != "off" {
		return nil
	}
	if len(cfg.GetStringSlice("raid")) > 0 || len(cfg.GetStringSlice("disks")) > 0 || len(cfg.GetStringSlice("disk-volume")) > 0 {
		return errors.New("--raid, --disks and --disk-volume volumes are served over iSCSI, but --iscsi-addr is off")
	}
	return nil
}
