package cli

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/tristore/tristore/client/iscsi"
	"github.com/tristore/tristore/fusefs/blockfile"
)

func init() {
	registerMount(mountSpec{
		Scheme: "iscsi",
		Help:   "one LUN as the file DIR/lun (losetup + mkfs.ext4 + mount it; see docs/iscsi.md)",
		Flags: func(fs *pflag.FlagSet) {
			fs.String("iscsi-file", "lun", "iscsi: name of the file inside DIR")
			fs.Bool("iscsi-read-only", false, "iscsi: expose the LUN read-only")
			fs.Int("iscsi-queue-depth", 32, "iscsi: commands in flight on the session")
			fs.String("iscsi-chap-secret", "", "iscsi: CHAP secret (instead of user:secret@ in the URL)")
			fs.Bool("iscsi-header-digest", false, "iscsi: require CRC32C header digests")
			fs.Bool("iscsi-data-digest", false, "iscsi: require CRC32C data digests")
			fs.Duration("iscsi-replacement-timeout", 30*time.Second,
				"iscsi: how long I/O waits for a lost session to log in again before failing with EIO; "+
					"logins continue in the background and I/O works again once the target is back "+
					"(open-iscsi's replacement_timeout; the URL option ?replacement_timeout=SECONDS is used when this flag is not set)")
		},
		Run: runMountISCSI,
	})
}

func runMountISCSI(cmd *cobra.Command, u *url.URL, dir string) error {
	a, err := iscsi.FromURL(u)
	if err != nil {
		return err
	}
	if a.Target == "" || !a.HasLUN {
		return fmt.Errorf("mount: %s needs /IQN/LUN", a)
	}
	if s := cfg.GetString("iscsi-chap-secret"); s != "" {
		a.Secret = s
	}
	if a.User != "" && a.Secret == "" {
		return fmt.Errorf("mount: CHAP user %q given without a secret", a.User)
	}
	a.HeaderDigest = a.HeaderDigest || cfg.GetBool("iscsi-header-digest")
	a.DataDigest = a.DataDigest || cfg.GetBool("iscsi-data-digest")
	c := iscsi.ConfigFromAddress(a)
	c.QueueDepth = cfg.GetInt("iscsi-queue-depth")
	if cfg.IsSet("iscsi-replacement-timeout") || c.ReplacementTimeout == 0 {
		c.ReplacementTimeout = cfg.GetDuration("iscsi-replacement-timeout")
	}
	if c.ReplacementTimeout <= 0 {
		return fmt.Errorf("mount: --iscsi-replacement-timeout %v: must be positive", c.ReplacementTimeout)
	}
	ctx := cmd.Context()
	dev, err := iscsi.Open(ctx, c)
	if err != nil {
		return err
	}
	defer dev.Close()
	srv, err := blockfile.Mount(dir, dev, blockfile.Options{
		Name: cfg.GetString("iscsi-file"), ReadOnly: cfg.GetBool("iscsi-read-only"), FsName: "tristore-iscsi",
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "mounted %s (%d bytes) as %s/%s; unmount with umount %s or Ctrl-C\n",
		a, dev.Size(), dir, cfg.GetString("iscsi-file"), dir)
	done := make(chan struct{})
	go func() { srv.Wait(); close(done) }()
	select {
	case <-done:
		return nil // unmounted from outside
	case <-ctx.Done():
	}
	return unmountISCSI(dir, srv, dev, done)
}

// unmountISCSI unmounts after SIGINT/SIGTERM, promptly even while the
// target is down. FUSE requests waiting for a lost session would keep the
// file busy (and go-fuse's unmount waiting) for up to the replacement
// timeout, so the session is closed first when it has no connection, and
// after a short grace if the unmount is still stuck: waiting requests then
// fail at once (ENXIO). A loop device on the file keeps it busy for a
// while; retry, then detach lazily so the kernel lets go when it can.
func unmountISCSI(dir string, srv *blockfile.Server, dev *iscsi.Session, done <-chan struct{}) error {
	if !dev.Connected() {
		slog.Warn("mount: target unreachable; failing pending I/O and unmounting", "dir", dir)
		_ = dev.Close()
	}
	res := make(chan error, 1)
	go func() { res <- unmountRetry(dir, srv, done) }()
	select {
	case err := <-res:
		return err
	case <-time.After(3 * time.Second):
		slog.Warn("mount: unmount waits for I/O on the target; closing the session", "dir", dir)
		_ = dev.Close()
	}
	return <-res // bounded: unmountRetry gives up after unmountLimit
}

// unmounter is what unmountRetry needs of the FUSE server
// (*blockfile.Server).
type unmounter interface{ Unmount() error }

// unmountLimit bounds unmountRetry as a whole.
var unmountLimit = 2 * time.Minute

// unmountRetry unmounts dir, retrying while it is busy (a loop device on
// the file keeps it busy for a while), else detaches it lazily, and waits
// for the FUSE server to stop (done). All of it is bounded by
// unmountLimit: Unmount waits for the server's request loops, and a
// request stuck on the device would hold them, and the exit, for ever.
// Past the bound the error says so and the mount exits without the
// server.
func unmountRetry(dir string, srv unmounter, done <-chan struct{}) error {
	res := make(chan error, 1)
	go func() { res <- unmountTries(dir, srv, done) }()
	select {
	case err := <-res:
		return err
	case <-time.After(unmountLimit):
		return fmt.Errorf("mount: unmounting %s: the FUSE server did not stop within %v (a request still waiting on the device?); exiting without it", dir, unmountLimit)
	}
}

func unmountTries(dir string, srv unmounter, done <-chan struct{}) error {
	var err error
	for i := 0; i < 20; i++ {
		if err = srv.Unmount(); err == nil {
			<-done // bounded by unmountRetry
			return nil
		}
		time.Sleep(250 * time.Millisecond)
	}
	slog.Warn("mount: still busy, detaching lazily", "dir", dir, "err", err)
	if derr := syscall.Unmount(dir, syscall.MNT_DETACH); derr != nil {
		return errors.Join(err, fmt.Errorf("lazy unmount %s: %w", dir, derr))
	}
	return fmt.Errorf("mount: %s was busy (a loop device or open file?) and was detached lazily: %w", dir, err)
}
