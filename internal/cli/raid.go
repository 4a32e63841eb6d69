package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tristore/tristore/blockdev"
	"github.com/tristore/tristore/blockdev/filelun"
	"github.com/tristore/tristore/raid"
)

func init() { addCommand(newRaidCmd) }

// newRaidCmd is `tristore raid create|assemble|status|fail|replace|check|stop`
// over member paths: local files or iscsi:// LUN URLs (see docs/raid.md).
func newRaidCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "raid",
		Short: "Build, inspect, repair and scrub RAID-0/1/5 arrays over files and iSCSI LUNs",
		Long: `raid manages arrays whose members are local files or iSCSI LUNs
(iscsi://[user[:secret]@]host[:port]/IQN/LUN). Every member carries a 4 KiB
superblock, so the order of the members on the command line does not matter,
and members of another array or of an older generation are refused. RAID-1/5
writes go through a journal on every member, replayed when an array that was
not shut down cleanly is assembled. See docs/raid.md.

status only reads the superblocks. Every other command assembles the array
(replaying the journal if needed), does its work and closes it cleanly.`,
	}
	iscsiFlags(cmd.PersistentFlags())
	cmd.PersistentFlags().Bool("json", false, "print the array state as JSON")
	cmd.PersistentFlags().Duration("member-timeout", time.Minute, "a member I/O taking longer fails the member (0 = wait forever)")

	create := &cobra.Command{
		Use:   "create MEMBER...",
		Short: "Write superblocks on the members (their data is lost)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signalContext(cmd.Context())
			defer stop()
			size, err := optSize(cfg.GetString("size"))
			if err != nil {
				return fmt.Errorf("raid create: --size: %w", err)
			}
			chunk, err := optSize(cfg.GetString("chunk"))
			if err != nil {
				return fmt.Errorf("raid create: --chunk: %w", err)
			}
			jsize, err := optSize(cfg.GetString("journal"))
			if err != nil {
				return fmt.Errorf("raid create: --journal: %w", err)
			}
			devs, err := openMembers(ctx, args, size)
			if err != nil {
				return err
			}
			a, err := raid.CreateWith(ctx, raid.Options{Level: cfg.GetInt("level"), Chunk: int(chunk), Journal: jsize,
				NoJournal: jsize == 0, UseSmallest: cfg.GetBool("use-smallest")}, devs)
			if err != nil {
				closeAll(devs)
				return fmt.Errorf("raid create: %w", err)
			}
			return finishRaid(cmd, a)
		},
	}
	create.Flags().Int("level", 5, "RAID level: 0 (striped), 1 (mirrored) or 5 (striped with rotated parity)")
	create.Flags().String("chunk", "64Ki", "stripe unit (a multiple of the member block size)")
	create.Flags().String("journal", "4Mi", "write journal per member (RAID-1/5); 0 = none: faster writes, but the write hole stays open (a crash means a full resync, and a crash with a member lost is refused)")
	create.Flags().String("size", "", "create missing member files with this size (local files only)")
	create.Flags().Bool("use-smallest", false, "let members of different sizes form an array the size of the smallest")

	status := &cobra.Command{
		Use:   "status MEMBER...",
		Short: "Print the array state from the members' superblocks (writes nothing)",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			devs, err := openMembers(cmd.Context(), args, 0)
			if err != nil {
				return err
			}
			defer closeAll(devs)
			in, err := raid.Examine(cmd.Context(), devs)
			if err != nil {
				return fmt.Errorf("raid status: %w", err)
			}
			if cfg.GetBool("json") {
				return printJSON(cmd.OutOrStdout(), in)
			}
			printRaidInfo(cmd.OutOrStdout(), in)
			return nil
		},
	}

	assemble := &cobra.Command{
		Use:   "assemble MEMBER...",
		Short: "Assemble the array (replaying its journal after a crash), optionally finish a rebuild, and close it cleanly",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signalContext(cmd.Context())
			defer stop()
			a, err := assembleArgs(ctx, cmd, args)
			if err != nil {
				return err
			}
			if st := a.Status(); st.JournalReplayed+st.JournalDropped > 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "journal: replayed %d records, dropped %d torn ones\n", st.JournalReplayed, st.JournalDropped)
			}
			if slot, pos := a.Rebuilding(); slot >= 0 && cfg.GetBool("resume") {
				fmt.Fprintf(cmd.ErrOrStderr(), "resuming rebuild of slot %d at byte %d\n", slot, pos)
				if err := a.Resume(ctx, rebuildProgress(cmd, slot)); err != nil {
					a.Close()
					return fmt.Errorf("raid: resume rebuild: %w", err)
				}
			}
			return finishRaid(cmd, a)
		},
	}
	assemble.Flags().Bool("resume", false, "continue an interrupted rebuild from its checkpoint")
	assemble.Flags().String("rate", "", "rebuild rate limit in bytes/s (e.g. 50Mi)")

	check := &cobra.Command{
		Use:   "check MEMBER...",
		Short: "Scrub: read every stripe and report rows whose parity (or mirror copies) mismatch",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signalContext(cmd.Context())
			defer stop()
			a, err := assembleArgs(ctx, cmd, args)
			if err != nil {
				return err
			}
			mm, err := a.Check(ctx, cfg.GetBool("repair"))
			if err != nil {
				a.Close()
				return fmt.Errorf("raid check: %w", err)
			}
			w := cmd.OutOrStdout()
			verb := "mismatch"
			if cfg.GetBool("repair") {
				verb = "repaired"
			}
			for _, m := range mm {
				fmt.Fprintf(w, "%s: stripe %d (array offset %d)\n", verb, m.Row, m.Offset)
			}
			fmt.Fprintf(w, "%d mismatched stripes\n", len(mm))
			if err := a.Close(); err != nil {
				return err
			}
			if len(mm) > 0 && !cfg.GetBool("repair") {
				return &exitError{code: 1, err: fmt.Errorf("raid check: %d mismatches", len(mm))}
			}
			return nil
		},
	}
	check.Flags().Bool("repair", false, "rewrite mismatched parity (or copies) from the data")

	fail := &cobra.Command{
		Use:   "fail SLOT MEMBER...",
		Short: "Mark slot SLOT failed (recorded on the other members; it must then be replaced)",
		Args:  cobra.MinimumNArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			slot, err := parseSlot(args[0])
			if err != nil {
				return err
			}
			a, err := assembleArgs(cmd.Context(), cmd, args[1:])
			if err != nil {
				return err
			}
			if err := a.Fail(cmd.Context(), slot); err != nil {
				a.Close()
				return fmt.Errorf("raid fail: %w", err)
			}
			return finishRaid(cmd, a)
		},
	}

	replace := &cobra.Command{
		Use:   "replace SLOT NEWMEMBER MEMBER...",
		Short: "Rebuild failed slot SLOT onto NEWMEMBER from the other members, then verify it",
		Args:  cobra.MinimumNArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx, stop := signalContext(cmd.Context())
			defer stop()
			slot, err := parseSlot(args[0])
			if err != nil {
				return err
			}
			size, err := optSize(cfg.GetString("size"))
			if err != nil {
				return fmt.Errorf("raid replace: --size: %w", err)
			}
			a, err := assembleArgs(ctx, cmd, args[2:])
			if err != nil {
				return err
			}
			nd, err := openMembers(ctx, args[1:2], size)
			if err != nil {
				a.Close()
				return err
			}
			err = a.Replace(ctx, slot, nd[0], rebuildProgress(cmd, slot))
			if err != nil {
				a.Close()
				return fmt.Errorf("raid replace: %w", err)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "rebuild of slot %d verified\n", slot)
			return finishRaid(cmd, a)
		},
	}
	replace.Flags().String("size", "", "create the new member file with this size if missing")
	replace.Flags().String("rate", "", "rebuild rate limit in bytes/s (e.g. 50Mi)")

	stop := &cobra.Command{
		Use:   "stop MEMBER...",
		Short: "Assemble (replaying the journal if needed), flush, mark the array clean and close it",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			a, err := assembleArgs(cmd.Context(), cmd, args)
			if err != nil {
				return err
			}
			return finishRaid(cmd, a)
		},
	}

	cmd.AddCommand(create, status, assemble, fail, replace, check, stop)
	return cmd
}

func parseSlot(s string) (int, error) {
	slot, err := strconv.Atoi(s)
	if err != nil || slot < 0 {
		return 0, fmt.Errorf("raid: slot %q: want a member slot number (0, 1, ...)", s)
	}
	return slot, nil
}

// rebuildProgress prints one line per percent on stderr.
func rebuildProgress(cmd *cobra.Command, slot int) raid.Progress {
	w := cmd.ErrOrStderr()
	last := -1
	return func(done, total int64) {
		if pct := int(done * 100 / total); pct != last {
			last = pct
			fmt.Fprintf(w, "rebuild: slot %d %d%% (%d of %d bytes)\n", slot, pct, done, total)
		}
	}
}

// openMembers opens each member: an iscsi:// URL or a local file (created
// with size bytes if size > 0 and it does not exist).
func openMembers(ctx context.Context, args []string, size int64) ([]blockdev.Device, error) {
	var devs []blockdev.Device
	for _, p := range args {
		var d blockdev.Device
		var err error
		if strings.HasPrefix(p, "iscsi://") {
			d, err = openISCSI(ctx, p)
		} else {
			d, err = openFileMember(p, size)
		}
		if err != nil {
			closeAll(devs)
			return nil, fmt.Errorf("raid: member %s: %w", p, err)
		}
		devs = append(devs, raid.WithTimeout(d, cfg.GetDuration("member-timeout")))
	}
	return devs, nil
}

func openFileMember(path string, size int64) (blockdev.Device, error) {
	flag := os.O_RDWR
	if size > 0 {
		flag |= os.O_CREATE
	}
	f, err := os.OpenFile(path, flag, 0o644)
	if err != nil {
		return nil, err
	}
	if st, err := f.Stat(); err == nil && size > 0 && st.Size() == 0 {
		err = f.Truncate(size)
		if err != nil {
			f.Close()
			return nil, err
		}
	}
	l, err := filelun.New(raidFile{f}, filelun.DefaultBlockSize)
	if err != nil {
		f.Close()
		return nil, err
	}
	return l, nil
}

// raidFile adapts *os.File to store.File.
type raidFile struct{ *os.File }

func (f raidFile) Size() (int64, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

func closeAll(devs []blockdev.Device) {
	for _, d := range devs {
		d.Close()
	}
}

func assembleArgs(ctx context.Context, cmd *cobra.Command, args []string) (*raid.Array, error) {
	devs, err := openMembers(ctx, args, 0)
	if err != nil {
		return nil, err
	}
	a, err := raid.Assemble(ctx, devs)
	if err != nil {
		closeAll(devs)
		return nil, fmt.Errorf("raid assemble: %w", err)
	}
	if f := cmd.Flags().Lookup("rate"); f != nil && f.Value.String() != "" {
		rate, err := optSize(f.Value.String())
		if err != nil {
			a.Close()
			return nil, fmt.Errorf("raid: --rate: %w", err)
		}
		a.SetRebuildRate(rate)
	}
	return a, nil
}

// finishRaid closes the array cleanly and prints its state.
func finishRaid(cmd *cobra.Command, a *raid.Array) error {
	st := a.Status()
	err := a.Close()
	if err != nil {
		return fmt.Errorf("raid: closing the array: %w", err)
	}
	if cfg.GetBool("json") {
		return printJSON(cmd.OutOrStdout(), st)
	}
	printRaidStatus(cmd.OutOrStdout(), st)
	return nil
}

func printRaidStatus(w io.Writer, st raid.Status) {
	state := "clean"
	switch {
	case st.Stopped:
		state = "failed"
	case st.Rebuilding >= 0:
		state = fmt.Sprintf("rebuilding slot %d (%d bytes done)", st.Rebuilding, st.RebuildPos)
	case len(st.Failed) > 0:
		state = fmt.Sprintf("degraded (failed slots %v)", st.Failed)
	}
	fmt.Fprintf(w, "level: %d\nmembers: %d\nchunk: %d\nsize: %d\nevents: %d\nstate: %s\n",
		st.Level, st.Members, st.Chunk, st.Size, st.Events, state)
}

func printRaidInfo(w io.Writer, in raid.Info) {
	state := "clean"
	if in.Dirty {
		state = "dirty (not shut down cleanly: assemble replays the journal)"
	}
	fmt.Fprintf(w, "level: %d\nmembers: %d\nchunk: %d\nsize: %d\nevents: %d\nstate: %s\n",
		in.Level, in.Members, in.Chunk, in.Size, in.Events, state)
	if len(in.Failed) > 0 {
		fmt.Fprintf(w, "failed slots: %v\n", in.Failed)
	}
	if len(in.Missing) > 0 {
		fmt.Fprintf(w, "missing slots: %v\n", in.Missing)
	}
	if in.Rebuilding >= 0 {
		fmt.Fprintf(w, "rebuilding slot %d: checkpoint at %d bytes\n", in.Rebuilding, in.RebuildPos)
	}
	for _, m := range in.MemberList {
		fmt.Fprintf(w, "member %d: slot %d events %d dirty %v\n", m.Position, m.Slot, m.Events, m.Dirty)
	}
}
