package cli

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/spf13/cobra"
)

// TestConfigPrecedence checks the promise in root.go: flag > env > config
// file > default, with the same key names everywhere.
func TestConfigPrecedence(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(conf, []byte("s3-addr: 127.0.0.1:1111\nshutdown-timeout: 7s\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(env map[string]string, args ...string) (string, string) {
		t.Helper()
		for k, v := range env {
			t.Setenv(k, v)
		}
		var addr, timeout string
		root := NewRoot()
		probe := &cobra.Command{Use: "probe", RunE: func(cmd *cobra.Command, _ []string) error {
			addr = cfg.GetString("s3-addr")
			timeout = cfg.GetDuration("shutdown-timeout").String()
			return nil
		}}
		probe.Flags().String("s3-addr", "127.0.0.1:9000", "")
		probe.Flags().Duration("shutdown-timeout", 0, "")
		root.AddCommand(probe)
		root.SetArgs(append([]string{"probe"}, args...))
		if err := root.Execute(); err != nil {
			t.Fatal(err)
		}
		return addr, timeout
	}
	if a, _ := run(nil); a != "127.0.0.1:9000" {
		t.Errorf("default: got %q", a)
	}
	if a, d := run(nil, "--config", conf); a != "127.0.0.1:1111" || d != "7s" {
		t.Errorf("file: got %q %q", a, d)
	}
	if a, _ := run(map[string]string{"TRISTORE_S3_ADDR": "127.0.0.1:2222"}, "--config", conf); a != "127.0.0.1:2222" {
		t.Errorf("env over file: got %q", a)
	}
	if a, _ := run(map[string]string{"TRISTORE_S3_ADDR": "127.0.0.1:2222"}, "--config", conf, "--s3-addr", "127.0.0.1:3333"); a != "127.0.0.1:3333" {
		t.Errorf("flag over env: got %q", a)
	}
}

func TestMissingExplicitConfigFails(t *testing.T) {
	root := NewRoot()
	root.AddCommand(&cobra.Command{Use: "probe", RunE: func(*cobra.Command, []string) error { return nil }})
	root.SetArgs([]string{"probe", "--config", filepath.Join(t.TempDir(), "nope.yaml")})
	if err := root.Execute(); err == nil {
		t.Fatal("want an error for a missing --config file")
	}
}

func TestBadLogLevelFails(t *testing.T) {
	root := NewRoot()
	root.AddCommand(&cobra.Command{Use: "probe", RunE: func(*cobra.Command, []string) error { return nil }})
	root.SetArgs([]string{"probe", "--log-level", "loud"})
	if err := root.Execute(); err == nil {
		t.Fatal("want an error for --log-level loud")
	}
}
