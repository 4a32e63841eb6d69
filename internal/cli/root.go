// Package cli wires tristore's subcommands. One file per subcommand; each
// registers itself from init() with addCommand, so subcommands owned by
// different parts of the tree never edit a shared file.
//
// Configuration: every flag of every subcommand is also a config-file key
// (same name, in YAML or TOML) and an environment variable TRISTORE_<NAME>
// with dashes as underscores (e.g. --s3-addr, s3-addr: in the file,
// TRISTORE_S3_ADDR). Precedence: flag > env > config file > default.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"github.com/spf13/viper"
)

var commandFactories []func() *cobra.Command

// addCommand registers a subcommand constructor; call it from init().
func addCommand(f func() *cobra.Command) { commandFactories = append(commandFactories, f) }

// cfg holds the merged configuration (flags, env, config file) of the
// running command. Read options with cfg.GetString("flag-name") etc.
var cfg = viper.New()

// Execute runs the CLI and returns the process exit code.
func Execute() int {
	root := NewRoot()
	if err := root.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "tristore:", err)
		var ee *exitError
		if errors.As(err, &ee) {
			return ee.code
		}
		return 1
	}
	return 0
}

// exitError carries a specific exit code (e.g. a child's in `netem run`).
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// NewRoot builds the command tree (exported for tests and doc generation).
func NewRoot() *cobra.Command {
	root := &cobra.Command{
		Use:   "tristore",
		Short: "One store, three views: S3 objects, NFS files and iSCSI LUNs over the same data",
		Long: `tristore stores data once, in a plain directory tree, and serves it as
S3 objects (HTTP), NFS v3 files and iSCSI LUNs at the same time. It also has
userspace clients for all three (s3 cp, nfs, iscsi), FUSE mounts for NFS and
iSCSI, RAID-0/5 arrays over block devices (raid), a workbench that runs the
seed papers' experiments and draws them (bench, report), and an emulated WAN
(rate, delay, jitter, loss) that real kernel TCP feels.

Every flag can also be set in the config file (--config, YAML or TOML, same
key names) or as an environment variable TRISTORE_<FLAG_NAME> (dashes become
underscores). Flags win over the environment, which wins over the file.

Sizes: a bare number is bytes; k, M, G, T (or kB, MB...) are powers of 1000;
Ki, Mi, Gi, Ti (or KiB, MiB...) powers of 1024.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			return loadConfig(cmd)
		},
	}
	pf := root.PersistentFlags()
	pf.String("config", "", "config file (YAML or TOML); default "+defaultConfigPath()+" if it exists")
	pf.String("log-level", "info", "log level: debug, info, warn, error")
	pf.String("log-format", "text", "log format: text or json")
	for _, f := range commandFactories {
		root.AddCommand(f())
	}
	return root
}

func defaultConfigPath() string {
	if d, err := os.UserConfigDir(); err == nil {
		return filepath.Join(d, "tristore", "config.yaml")
	}
	return "tristore.yaml"
}

// loadConfig binds the running command's flags (and its parents') to cfg,
// then layers the environment and the config file under them.
func loadConfig(cmd *cobra.Command) error {
	cfg = viper.New()
	cfg.SetEnvPrefix("TRISTORE")
	cfg.SetEnvKeyReplacer(strings.NewReplacer("-", "_"))
	cfg.AutomaticEnv()
	var bindErr error
	bind := func(f *pflag.Flag) {
		if err := cfg.BindPFlag(f.Name, f); err != nil && bindErr == nil {
			bindErr = err
		}
	}
	cmd.Flags().VisitAll(bind)
	cmd.InheritedFlags().VisitAll(bind)
	if bindErr != nil {
		return bindErr
	}
	path := cfg.GetString("config")
	explicit := path != ""
	if !explicit {
		path = defaultConfigPath()
	}
	if _, err := os.Stat(path); err == nil {
		cfg.SetConfigFile(path)
		if err := cfg.ReadInConfig(); err != nil {
			return fmt.Errorf("reading config %s: %w", path, err)
		}
	} else if explicit {
		return fmt.Errorf("config file %s: %w", path, err)
	}
	logger, err := newLogger(cmd.ErrOrStderr(), cfg.GetString("log-level"), cfg.GetString("log-format"))
	if err != nil {
		return err
	}
	slog.SetDefault(logger)
	return nil
}

func newLogger(w io.Writer, level, format string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("--log-format %q: want text or json", format)
}

// signalContext is cancelled on SIGINT or SIGTERM.
func signalContext(parent context.Context) (context.Context, context.CancelFunc) {
	return signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
}
