package cli

import (
	"fmt"
	"net/url"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// mountSpec is one URL scheme `tristore mount` understands. Register it from
// init() in internal/cli/mount_<scheme>.go.
type mountSpec struct {
	Scheme string // "nfs", "iscsi", ...
	Help   string // one line for `mount --help`
	// Flags adds scheme-specific options (name them <scheme>-...).
	Flags func(fs *pflag.FlagSet)
	// Run mounts u on dir and blocks until unmounted or cmd's context (SIGINT/SIGTERM) ends;
	// it must unmount before returning.
	Run func(cmd *cobra.Command, u *url.URL, dir string) error
}

var mountSpecs = map[string]mountSpec{}

func registerMount(s mountSpec) { mountSpecs[s.Scheme] = s }

func init() { addCommand(newMountCmd) }

func newMountCmd() *cobra.Command {
	var lines []string
	for _, s := range mountSpecs {
		lines = append(lines, fmt.Sprintf("  %-8s %s", s.Scheme+"://", s.Help))
	}
	sort.Strings(lines)
	cmd := &cobra.Command{
		Use:   "mount URL DIR",
		Short: "Mount an NFS export, an iSCSI LUN or an S3 bucket through FUSE (no kernel client needed)",
		Long: "mount exposes a remote store through FUSE so any POSIX program can use it.\n" +
			"It runs in the foreground until unmounted (fusermount3 -u DIR or umount DIR) or interrupted.\n\nSchemes:\n" +
			strings.Join(lines, "\n"),
		Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			u, err := url.Parse(args[0])
			if err != nil {
				return fmt.Errorf("mount: bad URL %q: %w", args[0], err)
			}
			s, ok := mountSpecs[u.Scheme]
			if !ok {
				return fmt.Errorf("mount: unknown scheme %q in %q", u.Scheme, args[0])
			}
			ctx, stop := signalContext(cmd.Context())
			defer stop()
			cmd.SetContext(ctx)
			return s.Run(cmd, u, args[1])
		},
	}
	for _, s := range mountSpecs {
		if s.Flags != nil {
			s.Flags(cmd.Flags())
		}
	}
	return cmd
}
