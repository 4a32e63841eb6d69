package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/tristore/tristore/iam"
)

func init() { addCommand(newUserCmd) }

// newUserCmd is `tristore user add|list|remove`. It edits the same
// DATA/.tristore/iam database `serve` reads; a running server notices the
// change on its next request (it stats users.json), so no restart is needed.
func newUserCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "user",
		Short: "Manage S3 users and their access keys",
		Long: `user manages the S3 users of a data directory. Secrets are stored encrypted
(AES-256-GCM) under DATA/.tristore/iam with a per-installation key file
(master.key, mode 0600); a secret is shown once, when the user is added.

The admin user "root" is created by the first "tristore serve"; its generated
keys are printed once and kept in DATA/.tristore/iam/root-credentials (0600).`,
	}
	cmd.PersistentFlags().String("data", defaultDataDir(), "data directory (the same as for serve)")

	add := &cobra.Command{
		Use:   "add NAME",
		Short: "Add a user and print its new access key and secret (shown only once)",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := iam.Open(cfg.GetString("data"))
			if err != nil {
				return err
			}
			admin, _ := cmd.Flags().GetBool("admin")
			u, secret, err := st.Add(args[0], admin)
			if err != nil {
				return fmt.Errorf("user add: %w", err)
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "user:       %s\n", u.Name)
			fmt.Fprintf(out, "admin:      %v\n", u.Admin)
			fmt.Fprintf(out, "access key: %s\n", u.AccessKey)
			fmt.Fprintf(out, "secret key: %s\n", secret)
			fmt.Fprintln(out, "(the secret key is not shown again)")
			return nil
		},
	}
	add.Flags().Bool("admin", false, "make the user an admin (full access to every bucket)")

	list := &cobra.Command{
		Use:   "list",
		Short: "List users (name, access key, admin, created; never secrets)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := openExistingIAM(cfg.GetString("data"))
			if err != nil {
				return err
			}
			users, err := st.List()
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if asJSON, _ := cmd.Flags().GetBool("json"); asJSON {
				if users == nil {
					users = []iam.User{}
				}
				enc := json.NewEncoder(out)
				enc.SetIndent("", "  ")
				return enc.Encode(users)
			}
			tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tACCESS KEY\tADMIN\tCREATED")
			for _, u := range users {
				fmt.Fprintf(tw, "%s\t%s\t%v\t%s\n", u.Name, u.AccessKey, u.Admin, u.Created.UTC().Format("2006-01-02T15:04:05Z"))
			}
			return tw.Flush()
		},
	}
	list.Flags().Bool("json", false, "print JSON instead of a table")

	remove := &cobra.Command{
		Use:   "remove NAME",
		Short: "Remove a user; its keys stop working immediately, also in a running serve",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := openExistingIAM(cfg.GetString("data"))
			if err != nil {
				return err
			}
			if err := st.Remove(args[0]); err != nil {
				return fmt.Errorf("user remove: %w", err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "removed user %s\n", args[0])
			return nil
		},
	}
	cmd.AddCommand(add, list, remove)
	return cmd
}

// openExistingIAM opens the user database of a data directory that must
// already exist, so a mistyped --data for list/remove fails instead of
// creating a new empty tree.
func openExistingIAM(dataDir string) (*iam.Store, error) {
	fi, err := os.Stat(dataDir)
	if err != nil {
		return nil, fmt.Errorf("data directory %s: %w", dataDir, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("data directory %s is not a directory", dataDir)
	}
	return iam.Open(dataDir)
}
