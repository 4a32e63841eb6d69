package cli

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/tristore/tristore/blockdev/filelun"
	"github.com/tristore/tristore/store"
	"github.com/tristore/tristore/store/posix"
)

func init() { addCommand(newVolumeCmd) }

// newVolumeCmd is `tristore volume create|list|resize|delete`. A volume is a
// sparse file object registered in its bucket (see blockdev/filelun); a
// running `tristore serve` exposes each one as LUN 0 of the iSCSI target
// iqn.2026-11.io.tristore:BUCKET:NAME.
func newVolumeCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "volume",
		Short: "Manage block volumes (sparse file objects served as iSCSI LUNs)",
		Long: `volume manages block volumes. A volume BUCKET/NAME is the object NAME in
BUCKET, a sparse file of the volume's size, so it can also be read over S3 or
NFS. "tristore serve" exposes it as LUN 0 of the iSCSI target
iqn.2026-11.io.tristore:BUCKET:NAME (see "tristore serve --help").

SIZE is a multiple of the 512-byte block: 4096 (bytes), 512Mi, 1Gi, 2Ti
(Ki/Mi/Gi/Ti: powers of 1024) or 1G, 500M (k/M/G/T: powers of 1000, as in
every tristore size flag; 1M = 1,000,000 is not a whole number of blocks and
is refused). Names use a-z, 0-9 and '-'.
Growing a volume is allowed while it is served (initiators get a CAPACITY
DATA HAS CHANGED unit attention); shrinking or deleting a served volume is
refused. "Served" means an initiator is logged in to it; while it is, no view
may replace, truncate, rename or delete its object either (S3 answers 409
OperationAborted, NFS answers ACCES; see docs/iscsi.md).

A volume whose object has gone (removed by hand, or deleted over S3 or NFS
while it was not served) is listed with state "broken" and left out of iSCSI
discovery; "volume delete" removes its registration.`,
	}
	cmd.PersistentFlags().String("data", defaultDataDir(), "data directory (the same as for serve)")

	create := &cobra.Command{
		Use:   "create BUCKET/NAME SIZE",
		Short: "Create a sparse volume (the bucket is created if missing)",
		Args:  cobra.ExactArgs(2),
		RunE: volumeRunE(func(cmd *cobra.Command, st filelun.Store, b, n string, size int64) error {
			ctx := cmd.Context()
			if _, err := st.StatBucket(ctx, b); errors.Is(err, store.ErrNoSuchBucket) {
				if err := st.CreateBucket(ctx, b, ""); err != nil && !errors.Is(err, store.ErrBucketExists) {
					return fmt.Errorf("volume create: bucket %s: %w", b, err)
				}
			} else if err != nil {
				return fmt.Errorf("volume create: bucket %s: %w", b, err)
			}
			in, err := filelun.Create(ctx, st, b, n, size)
			if err != nil {
				return fmt.Errorf("volume create: %w", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "created %s/%s: %d bytes, iSCSI target %s LUN 0\n", in.Bucket, in.Name, in.Size, VolumeIQN(in.Bucket, in.Name))
			return nil
		}),
	}

	list := &cobra.Command{
		Use:   "list [BUCKET]",
		Short: "List volumes: bucket, name, size, allocated bytes, state (ok, served, broken), target name",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, closeStore, err := openVolumeStore()
			if err != nil {
				return err
			}
			defer closeStore()
			bucket := ""
			if len(args) == 1 {
				bucket = args[0]
			}
			// A partial list (one bucket's registry unreadable) is shown,
			// then the error is returned.
			vs, listErr := filelun.List(cmd.Context(), st, bucket)
			if listErr != nil && vs == nil {
				return fmt.Errorf("volume list: %w", listErr)
			}
			if listErr != nil {
				listErr = fmt.Errorf("volume list: %w", listErr)
			}
			for _, v := range vs {
				if v.State != filelun.StateOK {
					fmt.Fprintf(cmd.ErrOrStderr(), "warning: volume %s/%s is %s: %s (`tristore volume delete %s/%s` removes its registration)\n",
						v.Bucket, v.Name, v.State, v.Problem, v.Bucket, v.Name)
				}
			}
			out := cmd.OutOrStdout()
			if j, _ := cmd.Flags().GetBool("json"); j {
				type row struct {
					filelun.Info
					IQN string `json:"iqn"`
				}
				rows := []row{}
				for _, v := range vs {
					rows = append(rows, row{v, VolumeIQN(v.Bucket, v.Name)})
				}
				if err := printJSON(out, rows); err != nil {
					return err
				}
				return listErr
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "BUCKET\tNAME\tSIZE\tALLOCATED\tSTATE\tTARGET")
			for _, v := range vs {
				size, alloc := "-", "-"
				if v.Size >= 0 {
					size = fmt.Sprint(v.Size)
				}
				if v.Allocated >= 0 {
					alloc = fmt.Sprint(v.Allocated)
				}
				state := v.State
				if state == filelun.StateOK && v.Served {
					state = "served"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", v.Bucket, v.Name, size, alloc, state, VolumeIQN(v.Bucket, v.Name))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			return listErr
		},
	}
	list.Flags().Bool("json", false, "print JSON instead of a table")

	resize := &cobra.Command{
		Use:   "resize BUCKET/NAME SIZE",
		Short: "Grow (also while served) or shrink (only when not served) a volume",
		Args:  cobra.ExactArgs(2),
		RunE: volumeRunE(func(cmd *cobra.Command, st filelun.Store, b, n string, size int64) error {
			in, err := filelun.Resize(cmd.Context(), st, b, n, size)
			if err != nil {
				return fmt.Errorf("volume resize: %w", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "resized %s/%s to %d bytes\n", in.Bucket, in.Name, in.Size)
			return nil
		}),
	}

	del := &cobra.Command{
		Use:   "delete BUCKET/NAME",
		Short: "Delete a volume and its data (refused while served); also removes a broken volume's registration",
		Args:  cobra.ExactArgs(1),
		RunE: volumeRunE(func(cmd *cobra.Command, st filelun.Store, b, n string, _ int64) error {
			if err := filelun.Delete(cmd.Context(), st, b, n); err != nil {
				return fmt.Errorf("volume delete: %w", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "deleted %s/%s\n", b, n)
			return nil
		}),
	}
	addCloudBackend(create)
	cmd.AddCommand(create, list, resize, del)
	return cmd
}

// volumeRunE is the common start of create, resize and delete: open the
// store, parse args[0] as BUCKET/NAME and, when the command takes it, args[1]
// as SIZE; then run the command with them.
func volumeRunE(run func(cmd *cobra.Command, st filelun.Store, bucket, name string, size int64) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		st, closeStore, err := openVolumeStore()
		if err != nil {
			return err
		}
		defer closeStore()
		b, n, err := filelun.ParseRef(args[0])
		if err != nil {
			return err
		}
		var size int64
		if len(args) > 1 {
			if size, err = filelun.ParseSize(args[1]); err != nil {
				return err
			}
		}
		return run(cmd, st, b, n, size)
	}
}

// warnOnly passes on warnings and errors only: the store's info lines
// (such as the end of its background walk for stale temp files, logged
// at every open) are noise in a short command's output.
type warnOnly struct{ slog.Handler }

func (h warnOnly) Enabled(ctx context.Context, l slog.Level) bool {
	return l >= slog.LevelWarn && h.Handler.Enabled(ctx, l)
}
func (h warnOnly) WithAttrs(as []slog.Attr) slog.Handler { return warnOnly{h.Handler.WithAttrs(as)} }
func (h warnOnly) WithGroup(g string) slog.Handler       { return warnOnly{h.Handler.WithGroup(g)} }

func openVolumeStore() (filelun.Store, func(), error) {
	b, err := posix.Open(cfg.GetString("data"), posix.Options{Log: slog.New(warnOnly{slog.Default().Handler()})})
	if err != nil {
		return nil, nil, fmt.Errorf("opening store at %s: %w", cfg.GetString("data"), err)
	}
	st, err := filelun.AsStore(b)
	if err != nil {
		b.Close()
		return nil, nil, err
	}
	return st, func() { b.Close() }, nil
}
