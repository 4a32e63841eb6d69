package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tristore/tristore/blockdev"
	"github.com/tristore/tristore/blockdev/filelun"
	"github.com/tristore/tristore/raid"
)

func init() { addCommand(newRaidCmd) }

// newRaidCmd is `tristore raid create|assemble|status|check|replace` over
// member paths: local files or iscsi:// LUN URLs (see docs/raid.md).
func newRaidCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "raid",
		Short: "Build, inspect and scrub RAID-0/RAID-5 arrays over files and iSCSI LUNs",
		Long: `raid manages arrays whose members are local files or iSCSI LUNs
(iscsi://[user[:secret]@]host[:port]/IQN/LUN). Every member carries a 4 KiB
superblock, so "assemble" finds the order itself and refuses members of
another array or of an older generation. See docs/raid.md.

assemble, status, check and replace open the array (which resyncs the parity
of regions left dirty by a crash) and close it cleanly afterwards.`,
	}
	iscsiFlags(cmd.PersistentFlags())
	cmd.PersistentFlags().Bool("json", false, "print the array state as JSON")

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
			devs, err := openMembers(ctx, args, size)
			if err != nil {
				return err
			}
			a, err := raid.Create(ctx, cfg.GetInt("level"), int(chunk), devs)
			if err != nil {
				closeAll(devs)
				return fmt.Errorf("raid create: %w", err)
			}
			return finishRaid(cmd, a)
		},
	}
	create.Flags().Int("level", 5, "RAID level: 0 (striped) or 5 (striped with rotated parity)")
	create.Flags().String("chunk", "64Ki", "stripe unit (a multiple of the member block size)")
	create.Flags().String("size", "", "create missing member files with this size (local files only)")

	status := &cobra.Command{
		Use:     "status MEMBER...",
		Aliases: []string{"assemble"},
		Short:   "Assemble the array from its members (any order) and print its state",
		Args:    cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			a, err := assembleArgs(cmd, args)
			if err != nil {
				return err
			}
			if slot, _ := a.Rebuilding(); slot >= 0 && cfg.GetBool("resume") {
				if err := a.Resume(cmd.Context(), nil); err != nil {
					a.Close()
					return fmt.Errorf("raid: resume rebuild: %w", err)
				}
			}
			return finishRaid(cmd, a)
		},
	}
	status.Flags().Bool("resume", false, "continue an interrupted rebuild")

	check := &cobra.Command{
		Use:   "check MEMBER...",
		Short: "Scrub parity: read every stripe and report rows whose parity mismatches",
		Args:  cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			a, err := assembleArgs(cmd, args)
			if err != nil {
				return err
			}
			mm, err := a.Check(cmd.Context(), cfg.GetBool("repair"))
			if err != nil {
				a.Close()
				return fmt.Errorf("raid check: %w", err)
			}
			w := cmd.OutOrStdout()
			for _, m := range mm {
				fmt.Fprintf(w, "mismatch: stripe %d (array offset %d)\n", m.Row, m.Offset)
			}
			fmt.Fprintf(w, "%d mismatched stripes\n", len(mm))
			if err := a.Close(); err != nil {
				return err
			}
			if len(mm) > 0 && !cfg.GetBool("repair") {
				return &exitError{code: 1, err: fmt.Errorf("raid check: %d parity mismatches", len(mm))}
			}
			return nil
		},
	}
	check.Flags().Bool("repair", false, "rewrite mismatched parity from the data")

	replace := &cobra.Command{
		Use:   "replace SLOT NEWMEMBER MEMBER...",
		Short: "Rebuild failed slot SLOT onto NEWMEMBER from the other members",
		Args:  cobra.MinimumNArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			var slot int
			if _, err := fmt.Sscan(args[0], &slot); err != nil {
				return fmt.Errorf("raid replace: slot %q: %w", args[0], err)
			}
			a, err := assembleArgs(cmd, args[2:])
			if err != nil {
				return err
			}
			size, err := optSize(cfg.GetString("size"))
			if err != nil {
				return err
			}
			nd, err := openMembers(cmd.Context(), args[1:2], size)
			if err != nil {
				a.Close()
				return err
			}
			w := cmd.ErrOrStderr()
			last := -1
			err = a.Replace(cmd.Context(), slot, nd[0], func(done, total int64) {
				if pct := int(done * 100 / total); pct != last {
					last = pct
					fmt.Fprintf(w, "\rrebuild: %3d%%", pct)
				}
			})
			fmt.Fprintln(w)
			if err != nil {
				a.Close()
				return fmt.Errorf("raid replace: %w", err)
			}
			return finishRaid(cmd, a)
		},
	}
	replace.Flags().String("size", "", "create the new member file with this size if missing")

	cmd.AddCommand(create, status, check, replace)
	return cmd
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
		devs = append(devs, d)
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

func assembleArgs(cmd *cobra.Command, args []string) (*raid.Array, error) {
	devs, err := openMembers(cmd.Context(), args, 0)
	if err != nil {
		return nil, err
	}
	a, err := raid.Assemble(cmd.Context(), devs)
	if err != nil {
		closeAll(devs)
		return nil, fmt.Errorf("raid assemble: %w", err)
	}
	return a, nil
}

// finishRaid prints the state and closes the array cleanly.
func finishRaid(cmd *cobra.Command, a *raid.Array) error {
	st := a.Status()
	err := a.Close()
	if cfg.GetBool("json") {
		return errors.Join(err, printJSON(cmd.OutOrStdout(), st))
	}
	printRaidStatus(cmd.OutOrStdout(), st)
	return err
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
