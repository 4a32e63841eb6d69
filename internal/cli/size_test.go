package cli

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestSizeFlags: a size flag reads the internal/units syntax from the
// command line, TRISTORE_<NAME> and the config file (flag > env > file),
// and rejects what units rejects or what is out of range.
func TestSizeFlags(t *testing.T) {
	conf := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(conf, []byte("test-buf: 3Ki\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		args []string
		env  string
		want int64
		err  string
	}{
		{name: "default", want: 1 << 20},
		{name: "IEC flag", args: []string{"--test-buf", "64Ki"}, want: 64 << 10},
		{name: "SI flag", args: []string{"--test-buf", "64k"}, want: 64000},
		{name: "bytes flag", args: []string{"--test-buf=4096"}, want: 4096},
		{name: "env", env: "2MiB", want: 2 << 20},
		{name: "flag beats env", args: []string{"--test-buf", "1Gi"}, env: "2MiB", want: 1 << 30},
		{name: "config file", args: []string{"--config", conf}, want: 3 << 10},
		{name: "env beats config", args: []string{"--config", conf}, env: "5Ki", want: 5 << 10},
		{name: "bad flag", args: []string{"--test-buf", "64kb"}, err: "write 64kB"},
		{name: "bad env", env: "lots", err: "--test-buf: invalid size"},
		{name: "too small", args: []string{"--test-buf", "100"}, err: "want 512..1GiB"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.env != "" {
				t.Setenv("TRISTORE_TEST_BUF", c.env)
			}
			var got int64
			root := NewRoot()
			cmd := &cobra.Command{Use: "sizetest", RunE: func(*cobra.Command, []string) error {
				var err error
				got, err = cfgSize("test-buf", 512, 1<<30)
				return err
			}}
			sizeFlag(cmd.Flags(), "test-buf", 1<<20, "a buffer")
			root.AddCommand(cmd)
			root.SetArgs(append([]string{"sizetest"}, c.args...))
			root.SetOut(new(strings.Builder))
			root.SetErr(new(strings.Builder))
			err := root.Execute()
			if c.err != "" {
				if err == nil || !strings.Contains(err.Error(), c.err) {
					t.Fatalf("error %v; want one containing %q", err, c.err)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("got %d, %v; want %d", got, err, c.want)
			}
		})
	}
	// The help shows the default in IEC form.
	var help strings.Builder
	root := NewRoot()
	root.SetOut(&help)
	root.SetArgs([]string{"serve", "--help"})
	if err := root.Execute(); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(help.String(), "--iscsi-max-burst size") || !strings.Contains(help.String(), "(default 1MiB)") {
		t.Errorf("serve --help does not show the size flag:\n%s", help.String())
	}
}

// TestNetemQueueSize: --queue uses the same parser: 64k is 64,000 bytes
// and 64Ki 65,536 (before, 64k was 65,536 and 64kb 64,000).
func TestNetemQueueSize(t *testing.T) {
	for in, want := range map[string]int{"64k": 64000, "64kB": 64000, "64Ki": 65536, "64KiB": 65536, "65536": 65536, "64kb": -1, "64x": -1} {
		var got int
		root := NewRoot()
		cmd := &cobra.Command{Use: "queuetest", RunE: func(*cobra.Command, []string) error {
			c, err := linkConfig()
			got = c.Up.Queue
			return err
		}}
		addLinkFlags(cmd.Flags())
		root.AddCommand(cmd)
		root.SetArgs([]string{"queuetest", "--rate", "100mbit", "--queue", in})
		err := root.Execute()
		if want < 0 {
			if err == nil || !strings.Contains(err.Error(), "64Ki (65536)") {
				t.Errorf("--queue %s: %v; want an error naming the forms", in, err)
			}
			continue
		}
		if err != nil || got != want {
			t.Errorf("--queue %s = %d, %v; want %d", in, got, err, want)
		}
	}
}
