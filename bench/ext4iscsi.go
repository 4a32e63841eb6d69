package bench

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/tristore/tristore/fusefs/blockfile"
)

// Ext4ISCSI is POSIX file access to a file system on an iSCSI LUN, as
// seed 000 measured iSCSI: ext4+iscsi://host:port/IQN/LUN logs in with
// tristore's initiator, exposes the LUN as a file through FUSE
// (fusefs/blockfile, as `tristore mount iscsi://…`), attaches a loop
// device to it, makes a new ext4 on it and mounts that. Every block the
// kernel's ext4 reads or writes — data, metadata, journal — goes through
// this process's iSCSI session, so it crosses the run's link and is
// counted: the file-system amplification of seed 000 §IV-F (Equations
// 1-3). THE LUN'S DATA IS OVERWRITTEN (mkfs). Needs root, /dev/fuse,
// losetup, mkfs.ext4, mount and umount.
type Ext4ISCSI struct {
	*POSIX
	iscsi  *ISCSI
	srv    *blockfile.Server
	base   string // temporary directory holding the FUSE and ext4 mount points
	loop   string
	target string
}

// OpenExt4ISCSI builds the stack for u (ext4+iscsi://…, as iscsi://).
func OpenExt4ISCSI(ctx context.Context, u *url.URL, o Options) (d *Ext4ISCSI, err error) {
	target := Redact(u.String())
	iu := *u
	iu.Scheme = "iscsi"
	is, err := OpenISCSI(ctx, &iu, o)
	if err != nil {
		return nil, fmt.Errorf("bench: target %s: %w", target, err)
	}
	d = &Ext4ISCSI{iscsi: is, target: target}
	defer func() {
		if err != nil {
			d.Close(context.WithoutCancel(ctx))
			err = fmt.Errorf("bench: target %s: %w", target, err)
		}
	}()
	if d.base, err = os.MkdirTemp("", "tristore-bench-ext4-"); err != nil {
		return d, err
	}
	fuseDir, mnt := filepath.Join(d.base, "fuse"), filepath.Join(d.base, "ext4")
	for _, p := range []string{fuseDir, mnt} {
		if err := os.Mkdir(p, 0o700); err != nil {
			return d, err
		}
	}
	if d.srv, err = blockfile.Mount(fuseDir, is.s, blockfile.Options{FsName: "bench " + target}); err != nil {
		return d, err
	}
	// Direct I/O on the loop device: no second page cache (of the LUN
	// file) between ext4 and the wire, so a cold read of ext4 is a read
	// of the LUN.
	out, err := command(ctx, time.Minute, "losetup", "-f", "--show", "--direct-io=on", filepath.Join(fuseDir, "lun"))
	if err != nil {
		return d, err
	}
	d.loop = strings.TrimSpace(out)
	if _, err := command(ctx, 10*time.Minute, "mkfs.ext4", "-q", "-F", "-E", "nodiscard", d.loop); err != nil {
		return d, err
	}
	if _, err := command(ctx, time.Minute, "mount", "-t", "ext4", d.loop, mnt); err != nil {
		return d, err
	}
	d.POSIX, _ = OpenPOSIX(mnt)
	return d, nil
}

// command runs a tool, bounded by d, and returns its output; the error
// carries the output.
func command(ctx context.Context, d time.Duration, name string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}

func (d *Ext4ISCSI) Protocol() string { return "ext4+iscsi" }
func (d *Ext4ISCSI) Target() string   { return d.target }

// Close takes the stack down in reverse: the ext4 mount (detached if
// still busy after a few tries), the loop device, the FUSE mount, the
// session.
func (d *Ext4ISCSI) Close(ctx context.Context) error {
	var errs []error
	if d.POSIX != nil {
		var err error
		for i := 0; i < 20; i++ {
			if _, err = command(ctx, time.Minute, "umount", d.POSIX.root); err == nil {
				break
			}
			time.Sleep(250 * time.Millisecond)
		}
		if err != nil {
			errs = append(errs, err)
			syscall.Unmount(d.POSIX.root, syscall.MNT_DETACH)
		}
	}
	if d.loop != "" {
		if _, err := command(ctx, time.Minute, "losetup", "-d", d.loop); err != nil {
			errs = append(errs, err)
		}
	}
	if d.srv != nil {
		err := d.srv.Unmount()
		for i := 0; i < 20 && err != nil; i++ { // the loop device lets go asynchronously
			time.Sleep(250 * time.Millisecond)
			err = d.srv.Unmount()
		}
		if err != nil {
			errs = append(errs, err)
			syscall.Unmount(filepath.Join(d.base, "fuse"), syscall.MNT_DETACH)
		}
		waited := make(chan struct{})
		go func() { d.srv.Wait(); close(waited) }()
		select {
		case <-waited:
		case <-time.After(10 * time.Second):
			errs = append(errs, errors.New("the FUSE server of the LUN file did not stop within 10s"))
		}
	}
	if d.base != "" {
		os.Remove(filepath.Join(d.base, "ext4"))
		os.Remove(filepath.Join(d.base, "fuse"))
		os.Remove(d.base)
	}
	if err := d.iscsi.Close(ctx); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

var _ Driver = (*Ext4ISCSI)(nil)
