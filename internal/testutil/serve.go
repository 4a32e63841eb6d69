package testutil

import (
	"context"
	"testing"
	"time"

	"github.com/tristore/tristore/internal/serveproc"
)

// ServeOptions says how StartServe runs `tristore serve` (see
// serveproc.Options; Dir is the test's own temporary directory).
type ServeOptions struct {
	// Bin is the tristore binary (TristoreBin, or a prebuilt one).
	Bin string
	// Data is the --data directory.
	Data string
	// On names the front ends to listen on 127.0.0.1:0 ("s3", "nfs",
	// "iscsi", "admin"); every other --X-addr flag is "off".
	On []string
	// Args are extra arguments after the generated ones.
	Args []string
	// Env is added to the environment (the test's own TRISTORE_* and
	// XDG_CONFIG_HOME are not passed on).
	Env []string
	// Ready bounds the wait for the ready file (default 60 s).
	Ready time.Duration
}

// Served is a running `tristore serve` (serveproc.Proc).
type Served = serveproc.Proc

// StartServe runs `tristore serve` as o says and waits for its ready file.
// It fails t if serve exits first or is not ready in time, with its log.
// t.Cleanup stops it: SIGTERM, then SIGKILL after 30 s.
func StartServe(t testing.TB, o ServeOptions) *Served {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := serveproc.Start(ctx, serveproc.Options{Bin: o.Bin, Data: o.Data, On: o.On, Args: o.Args, Env: o.Env,
		Dir: t.TempDir(), Ready: o.Ready})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !s.Stop() {
			t.Errorf("tristore serve did not stop within 30 s of SIGTERM; killed")
		}
	})
	return s
}
