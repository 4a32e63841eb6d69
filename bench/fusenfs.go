package bench

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"syscall"
	"time"

	"github.com/hanwen/go-fuse/v2/fuse"

	"github.com/tristore/tristore/fusefs/nfstree"
)

// FUSENFS is POSIX file access over an NFS export that the workbench
// mounts itself through FUSE (tristore's userspace NFS client behind
// fusefs/nfstree, as `tristore mount nfs://…`): fuse+nfs://host:port/export.
// Programs see a file system, so the access forms are the POSIX ones
// (default write-back, O_SYNC, O_DIRECT) — seed 000's file-level view of
// a network store — while the NFS client's connection is this process's,
// so it can cross the run's link and the bytes each form costs on the wire
// are counted (the amplification suite). Mounting needs /dev/fuse (and
// root, or fusermount3).
type FUSENFS struct {
	*POSIX
	nfs    *NFS
	srv    *fuse.Server
	dir    string
	target string
}

// OpenFUSENFS mounts the export of u (fuse+nfs://…, same query as nfs://)
// on a new temporary directory.
func OpenFUSENFS(ctx context.Context, u *url.URL, o Options) (*FUSENFS, error) {
	target := Redact(u.String())
	nu := *u
	nu.Scheme = "nfs"
	n, err := OpenNFS(ctx, &nu, o)
	if err != nil {
		return nil, fmt.Errorf("bench: target %s: %w", target, err)
	}
	dir, err := os.MkdirTemp("", "tristore-bench-fuse-")
	if err != nil {
		n.Close(ctx)
		return nil, fmt.Errorf("bench: target %s: %w", target, err)
	}
	fsys, err := nfstree.New(n.c, nfstree.Options{FsName: "bench " + target})
	if err == nil {
		var srv *fuse.Server
		if srv, err = fsys.Mount(ctx, dir); err == nil {
			p, _ := OpenPOSIX(dir)
			return &FUSENFS{POSIX: p, nfs: n, srv: srv, dir: dir, target: target}, nil
		}
	}
	os.Remove(dir)
	n.Close(ctx)
	return nil, fmt.Errorf("bench: target %s: FUSE mount: %w", target, err)
}

func (d *FUSENFS) Protocol() string { return "fuse+nfs" }
func (d *FUSENFS) Target() string   { return d.target }

// Close unmounts (retrying a busy mount for a few seconds, then detaching
// it) and closes the NFS client.
func (d *FUSENFS) Close(ctx context.Context) error {
	err := d.srv.Unmount()
	for i := 0; i < 20 && err != nil; i++ {
		time.Sleep(250 * time.Millisecond)
		err = d.srv.Unmount()
	}
	if err != nil {
		if derr := syscall.Unmount(d.dir, syscall.MNT_DETACH); derr != nil {
			return fmt.Errorf("bench: target %s: unmount %s: %w (lazy unmount: %v)", d.target, d.dir, err, derr)
		}
	}
	d.srv.Wait()
	os.Remove(d.dir)
	return d.nfs.Close(ctx)
}

var _ Driver = (*FUSENFS)(nil)
